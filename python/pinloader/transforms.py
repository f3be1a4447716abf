"""Per-sample transforms run by the loader: on the GPU right after a batch's
copy for device="cuda" (uint8 crosses PCIe, the batch arrives normalized),
in the C workers otherwise, with the same results bit for bit.

    from pinloader import transforms as T
    loader = pinloader.DataLoader(pinloader.datasets.CIFAR10(files), batch_size=512,
                                  shuffle=True, num_workers=6, device="cuda",
                                  transforms=[T.RandomCrop(32, padding=4),
                                              T.RandomHorizontalFlip(),
                                              T.ConvertImageDtype(torch.bfloat16),
                                              T.Normalize(MEAN, STD),
                                              T.ChannelsLast(), T.ToInt64()])

Names and arguments follow torchvision; each takes field= (default "image",
"label" for ToInt64). Whatever the list's order, a field's transforms apply
as RandomCrop, RandomHorizontalFlip, ConvertImageDtype + Normalize, layout:
the padding fill is a uint8 value, as in torchvision's CIFAR recipe
(RandomCrop on the image, then ToTensor, then Normalize). Values are
computed in float32 as torch does for ToTensor + Normalize
((x / 255 - mean) / std, each operation rounded) and rounded once to the
output dtype. Random draws are a function of (seed, epoch, sample index):
the same for any num_workers, on the CPU and the GPU (not torch's RNG
stream). docs/transforms.md has the exact definitions.

Beyond torchvision: ChannelsLast (the image is delivered in [N,H,W,C]
memory order; torch tensors come out as the [N,C,H,W] channels_last view),
ToInt64 (labels widened on the device, as torch's collate makes them).
"""

__all__ = ["Normalize", "RandomCrop", "RandomHorizontalFlip", "ConvertImageDtype",
           "ChannelsLast", "ToInt64", "CHW", "HWC"]

AUTO, CHW, HWC = 0, 1, 2
_DTYPES = {"float32": "float32", "float": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "half": "float16", "fp16": "float16"}


def _dtype_name(dtype):
    name = str(dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise ValueError("ConvertImageDtype: dtype must be float32, bfloat16 or float16, not %r"
                         % (dtype,))
    return _DTYPES[name]


class _Transform:
    kind = None

    def __init__(self, field=None, input_layout=AUTO):
        self.field = field
        self.input_layout = input_layout

    def _spec(self):
        """The tuple _pinloader.Loader takes: (kind, field, input_layout,
        height, width, padding, fill, p, dtype, mean, std, layout)."""
        return (self.kind, self.field, self.input_layout, 0, 0, 0, 0, 0.5, "float32", (), (), CHW)

    def __repr__(self):
        args = ", ".join("%s=%r" % kv for kv in sorted(vars(self).items()) if kv[1] is not None)
        return "%s(%s)" % (type(self).__name__, args)


class RandomCrop(_Transform):
    """torchvision.transforms.RandomCrop(size, padding, fill): pad every
    side with `padding` pixels of value `fill` (0-255), crop `size` at a
    random offset. padding is one int (all sides)."""

    kind = "RANDOM_CROP"

    def __init__(self, size, padding=None, fill=0, field=None, input_layout=AUTO):
        super().__init__(field, input_layout)
        if isinstance(size, int):
            size = (size, size)
        self.size = (int(size[0]), int(size[1]))
        if padding is not None and not isinstance(padding, int):
            raise ValueError("RandomCrop: padding must be one int (the same on every side)")
        self.padding = int(padding or 0)
        if not isinstance(fill, int) or not 0 <= fill <= 255:
            raise ValueError("RandomCrop: fill must be an int in [0, 255] (a uint8 pixel value)")
        self.fill = fill

    def _spec(self):
        return (self.kind, self.field, self.input_layout, self.size[0], self.size[1],
                self.padding, self.fill, 0.5, "float32", (), (), CHW)


class RandomHorizontalFlip(_Transform):
    """torchvision.transforms.RandomHorizontalFlip(p)."""

    kind = "RANDOM_HFLIP"

    def __init__(self, p=0.5, field=None, input_layout=AUTO):
        super().__init__(field, input_layout)
        self.p = float(p)

    def _spec(self):
        return (self.kind, self.field, self.input_layout, 0, 0, 0, 0, self.p, "float32", (), (), CHW)


class ConvertImageDtype(_Transform):
    """torchvision.transforms.ConvertImageDtype(dtype): uint8 x -> x / 255 as
    float32, bfloat16 or float16 (torch dtypes or their names)."""

    kind = "CONVERT"

    def __init__(self, dtype, field=None, input_layout=AUTO):
        super().__init__(field, input_layout)
        self.dtype = _dtype_name(dtype)

    def _spec(self):
        return (self.kind, self.field, self.input_layout, 0, 0, 0, 0, 0.5, self.dtype, (), (), CHW)


class Normalize(_Transform):
    """torchvision.transforms.Normalize(mean, std) on the image as ToTensor
    makes it: (x / 255 - mean[c]) / std[c]; float32 unless a
    ConvertImageDtype names another dtype. One value applies to every
    channel."""

    kind = "NORMALIZE"

    def __init__(self, mean, std, field=None, input_layout=AUTO):
        super().__init__(field, input_layout)
        mean = [float(m) for m in (mean if hasattr(mean, "__len__") else [mean])]
        std = [float(s) for s in (std if hasattr(std, "__len__") else [std])]
        if len(mean) != len(std):
            raise ValueError("Normalize: mean and std differ in length")
        self.mean, self.std = tuple(mean), tuple(std)

    def _spec(self):
        return (self.kind, self.field, self.input_layout, 0, 0, 0, 0, 0.5, "float32",
                self.mean, self.std, CHW)


class ChannelsLast(_Transform):
    """Deliver the image in [H,W,C] memory order per sample (torch tensors:
    the [N,C,H,W] view whose memory format is torch.channels_last)."""

    kind = "LAYOUT"

    def _spec(self):
        return (self.kind, self.field, self.input_layout, 0, 0, 0, 0, 0.5, "float32", (), (), HWC)


class ToInt64(_Transform):
    """Widen an integer field (labels, default field "label") to int64."""

    kind = "TO_INT64"

    def __init__(self, field=None):
        super().__init__(field, AUTO)


def specs(transforms):
    """[(tuple for _pinloader)...] and the names of channels_last fields."""
    if transforms is None:
        return None, ()
    out, channels_last = [], []
    for t in transforms:
        if not isinstance(t, _Transform):
            raise TypeError("transforms must be pinloader.transforms objects, not %r (torchvision "
                            "transforms run per sample in Python: use a Python dataset for those)"
                            % (t,))
        out.append(t._spec())
        if isinstance(t, ChannelsLast):
            channels_last.append(t.field or "image")
    return out, tuple(channels_last)
