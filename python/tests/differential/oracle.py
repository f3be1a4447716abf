"""docs/transforms.md's exact definitions, in numpy, independent of
pinloader: the random draws ("Random draws"), the zero-padded crop and the
flip, (x / 255 - mean[c]) / std[c] in float32 rounded once to the output
dtype, the delivered layout, and ToInt64."""
import math

import numpy as np

M64 = (1 << 64) - 1


def mix(z):
    """docs/transforms.md: mix(z) = splitmix64's finaliser of z + 0x9e3779b97f4a7c15."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def below(r, n):
    return ((r >> 32) * n) >> 32


def draws(seed, epoch, index, field, span_y, span_x, p):
    """(oy, ox, flip) of docs/transforms.md, "Random draws"."""
    key = mix((seed & M64) ^ mix(epoch ^ mix(index ^ mix(field))))
    oy = below(mix((key + 1) & M64), span_y)
    ox = below(mix((key + 2) & M64), span_x)
    flip = (mix((key + 3) & M64) >> 40) < math.floor(p * 2 ** 24)
    return oy, ox, flip


def bf16(x):
    """float32 -> bfloat16 bits, rounded to nearest even (no NaNs here)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


class Spec:
    """The transform list as data: what the oracle needs of each."""

    def __init__(self, crop=None, flip=None, convert=None, normalize=None, channels_last=False,
                 to_int64=False):
        self.crop = crop  # (size_h, size_w, padding, fill)
        self.flip = flip  # p
        self.convert = convert  # "float32" | "bfloat16" | "float16"
        self.normalize = normalize  # (mean tuple, std tuple)
        self.channels_last = channels_last
        self.to_int64 = to_int64

    @property
    def touches_image(self):
        return any(x is not None for x in (self.crop, self.flip, self.convert, self.normalize)) \
            or self.channels_last

    def out_dtype(self):
        if self.convert is not None:
            return self.convert
        return "float32" if self.normalize is not None else "uint8"


def image(sample, layout, spec, seed, epoch, index, field):
    """One image field's delivered value: (dtype name, numpy array of the
    delivered memory order: CHW, or HWC with ChannelsLast; float16/bfloat16
    as their uint16 bits). `layout` is the source's: "chw", "hwc", "hw"."""
    chw = sample.transpose(2, 0, 1) if layout == "hwc" else (sample[None] if layout == "hw" else sample)
    c, h, w = chw.shape
    if spec.crop is not None or spec.flip is not None:
        sh, sw, pad, fill = spec.crop if spec.crop is not None else (h, w, 0, 0)
        sh, sw = sh or h + 2 * pad, sw or w + 2 * pad
        padded = np.full((c, h + 2 * pad, w + 2 * pad), fill, np.uint8)
        padded[:, pad:pad + h, pad:pad + w] = chw
        p = spec.flip if spec.flip is not None else 0.0
        oy, ox, flip = draws(seed, epoch, index, field, h + 2 * pad - sh + 1, w + 2 * pad - sw + 1, p)
        if spec.crop is None:
            oy = ox = 0
        chw = padded[:, oy:oy + sh, ox:ox + sw]
        if spec.flip is not None and flip:
            chw = chw[:, :, ::-1]
    dtype = spec.out_dtype()
    if dtype != "uint8":
        x = chw.astype(np.float32) / np.float32(255)
        if spec.normalize is not None:
            mean, std = spec.normalize
            if len(mean) == 1:
                mean, std = mean * c, std * c
            x = (x - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None, None]
        x = x.astype(np.float32)
        if dtype == "float16":
            out = x.astype(np.float16).view(np.uint16)
        elif dtype == "bfloat16":
            out = bf16(x)
        else:
            out = x
    else:
        out = chw
    if spec.channels_last:
        out = out.transpose(1, 2, 0)
    elif layout == "hw":
        out = out[0]  # a 2-d field stays [OH, OW] unless a LAYOUT is given
    return dtype, np.ascontiguousarray(out)
