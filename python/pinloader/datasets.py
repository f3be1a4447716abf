"""pinloader datasets.

Native sources are read by the C library's worker threads without the GIL:

    IDX(images, labels)                     MNIST / Fashion-MNIST (plain or .gz)
    CIFAR10(files)                          CIFAR-10 binary batches
    Records(files, header_bytes, record_bytes, fields=[(name, dtype, shape, offset)])
    Tokens(files, context=T, samples=N)     nanoGPT .bin / llm.c token shards: x, y windows
    NPY(files)                              .npy files / .npz archives zipped as fields
    ImageFolder(root, size=224, train=True) JPEG/PNG folders decoded and cropped in C
    Shards(urls, fields={...}, size=224)    WebDataset tar shards, local or over HTTP(S)
    to_float32(ds, field, scale)            a view delivering `field` as float32 * scale

Any Python map-style dataset (``__len__`` and ``__getitem__`` returning
fixed-shape numpy arrays, buffers, numbers, or a tuple / list / dict of them)
can be given to DataLoader directly; it is read through a C callback that
takes the GIL for each sample (see python/README.md for what that costs).
"""
import os

from . import _pinloader as _C

__all__ = ["Dataset", "IDX", "CIFAR10", "Records", "Tokens", "NPY", "ImageFolder", "to_float32",
           "from_python", "Field"]
__all__ += ["Shards"]  # shards


class Field(tuple):
    """(name, dtype, shape) of one field of every sample."""

    __slots__ = ()

    def __new__(cls, name, dtype, shape):
        return super().__new__(cls, (name, dtype, tuple(shape)))

    name = property(lambda self: self[0])
    dtype = property(lambda self: self[1])
    shape = property(lambda self: self[2])

    def __repr__(self):
        return "Field(name=%r, dtype=%r, shape=%r)" % tuple(self)


class Dataset:
    """A dataset the C library reads. Indexable for inspection: ds[i] is a
    tuple of numpy arrays, one per field (read in the calling thread)."""

    # How a DataLoader over this dataset packs a batch's fields: "tuple",
    # "list", "dict", "bare" (a single tensor) or a namedtuple class.
    _structure = "tuple"
    _keys = None
    # {field index: dtype name}: batches deliver the field in that dtype
    # (labels as int64, as default_collate makes Python ints); converted
    # in the consumer, a few bytes a sample.
    _casts = {}

    def __init__(self, native):
        if not isinstance(native, _C.Dataset):
            raise TypeError("expected a pinloader._pinloader.Dataset")
        self._native = native

    def __len__(self):
        return len(self._native)

    @property
    def fields(self):
        return [Field(*f) for f in self._native.fields]

    @property
    def sample_bytes(self):
        return self._native.sample_bytes

    def __getitem__(self, index):
        import numpy as np

        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("index %d out of range for %d samples" % (index, n))
        raw = self._native.read(index)
        return tuple(
            np.frombuffer(b, dtype=f.dtype).reshape(f.shape) for b, f in zip(raw, self.fields)
        )

    def __repr__(self):
        return "%s(%d samples, fields=%r)" % (type(self).__name__, len(self), self.fields)


def _paths(files):
    if isinstance(files, (str, bytes, os.PathLike)):
        return [files]
    return list(files)


def _label_cast(ds, label_dtype):
    if label_dtype not in ("int64", "uint8"):
        raise ValueError("label_dtype must be 'int64' (as torchvision's int labels collate) or "
                         "'uint8' (the file's bytes), not %r" % (label_dtype,))
    if label_dtype == "int64":
        ds._casts = {1: "int64"}


class IDX(Dataset):
    """MNIST-style IDX files (plain or .gz): fields `image`, `label`.
    Batches carry labels as int64 (as torch collates torchvision's int
    labels); label_dtype="uint8" keeps the file's bytes."""

    def __init__(self, images, labels, label_dtype="int64"):
        super().__init__(_C.open_idx(images, labels))
        _label_cast(self, label_dtype)


class CIFAR10(Dataset):
    """CIFAR-10 binary batch files, in the order given: fields `image`
    uint8 [3, 32, 32] and `label` uint8 []."""

    def __init__(self, files, label_dtype="int64"):
        super().__init__(_C.open_cifar10(_paths(files)))
        _label_cast(self, label_dtype)


def _dtype_name(dtype):
    if isinstance(dtype, str) and dtype in _C.dtype_names():
        return dtype
    import numpy as np

    name = np.dtype(dtype).name
    if name not in _C.dtype_names():
        raise ValueError("dtype %r is not supported (one of %s)" % (dtype, ", ".join(_C.dtype_names())))
    return name


class Records(Dataset):
    """Fixed-size records: each file has `header_bytes` to skip, then records
    of `record_bytes`; fields = [(name, dtype, shape, offset), ...] with the
    field's byte offset inside a record. Several files form one dataset."""

    def __init__(self, files, header_bytes, record_bytes, fields):
        spec = []
        for f in fields:
            if len(f) != 4:
                raise ValueError("a field is (name, dtype, shape, offset), got %r" % (f,))
            name, dtype, shape, offset = f
            spec.append((str(name), _dtype_name(dtype), tuple(int(d) for d in shape), int(offset)))
        super().__init__(_C.open_records(_paths(files), int(header_bytes), int(record_bytes), spec))


def _options(**kw):
    """key=value&... for pinloader's C sources; None values are left out."""
    parts = []
    for k, v in kw.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = int(v)
        elif isinstance(v, (tuple, list)):
            if len(v) != 2:
                raise ValueError("%s must be a pair (min, max), got %r" % (k, v))
            v = "%r:%r" % (float(v[0]), float(v[1]))
        parts.append("%s=%s" % (k, v))
    return "&".join(parts)


class Tokens(Dataset):
    """Token shards for language models: nanoGPT's raw uint16 .bin files
    (``format="raw32"`` for uint32) and llm.c shards (their 1024-byte
    header is recognised). Each sample is a window of context + 1 tokens of
    one shard: fields ``x`` (context tokens) and ``y`` (the same, shifted by
    one), as int64 by default (``dtype`` "int32", "uint32", "uint16" keep
    them smaller).

    samples=N: N windows per epoch at random offsets drawn from (seed,
    epoch, index), as nanoGPT's get_batch; samples=None: windows stride
    through each shard (``stride`` tokens apart, default context)."""

    def __init__(self, files, context, samples=None, stride=None, dtype="int64", format="auto"):
        dtype = _dtype_name(dtype)
        opts = _options(context=int(context), samples=samples, stride=stride, dtype=dtype,
                        format=format)
        super().__init__(_C.open("tokens", _paths(files), opts))
        self.context = int(context)


class NPY(Dataset):
    """NumPy arrays zipped as fields over their first axis: .npy files
    (memory-mapped) and .npz archives written by np.savez (each member a
    field). Field names are the file or member names without .npy. bool
    arrays arrive as uint8, uint64 as int64 (same bytes), complex as float
    [..., 2]. Fortran order, object dtypes, compressed members
    (np.savez_compressed) and first axes of different lengths are refused."""

    def __init__(self, *files):
        paths = []
        for f in files:
            paths.extend(_paths(f))
        super().__init__(_C.open("npy", paths, ""))


def _square_size(size):
    """size as an (h, w) pair: an int n is (n, n); the C source makes square
    images only."""
    if isinstance(size, (tuple, list)):
        if len(size) != 2 or int(size[0]) != int(size[1]):
            raise ValueError("size must be an int or a pair (h, w) with h == w (the images are "
                             "square), not %r" % (size,))
        size = size[0]
    return (int(size), int(size))


class ImageFolder(Dataset):
    """torchvision's ImageFolder (ROOT/CLASS/*.jpg|jpeg|png, classes sorted,
    labels their index) or a list file of "PATH LABEL" lines, decoded and
    transformed in C: fields ``image`` uint8 [3, h, w] and ``label``
    int64 (and ``crop`` int32 [top, left, height, width, flipped] with
    crop_field=True).

    train=True: RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip
    (flip_p), with torchvision's sampling rule, drawn from (seed, epoch,
    index). train=False: Resize(resize) + CenterCrop(size); resize defaults
    to size / 0.875. size: an int or an (h, w) pair with h == w. on_error=
    "skip" replaces an unreadable image by another sample chosen from its
    index alone; ``replaced`` counts them.

    decode: where a DataLoader over it decodes the JPEGs: "cpu" (the
    workers, the default), "gpu" (nvJPEG on the loader's CUDA device; the
    images nvJPEG cannot take, PNG, progressive or CMYK JPEGs, still on the
    workers; an error when there is no GPU or no nvJPEG) or "auto" (both
    at once, each batch split by their measured rates; the CPU alone, with
    a notice, when the GPU path cannot open). nvJPEG comes from the
    nvidia-nvjpeg wheel when it is installed, else from the CUDA toolkit
    (or the file PL_NVJPEG_LIB names). ds[i] always decodes on the CPU.

    As torchvision's: ``root``, ``classes`` (the sorted class folder
    names), ``class_to_idx``, ``samples`` (= ``imgs``: [(path,
    class_index)] in the order read), ``targets``; ``size`` is (h, w). A
    list file has no class folders: its ``classes`` and ``class_to_idx``
    are None."""

    def __init__(self, root, size=224, train=True, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 flip_p=0.5, resize=None, on_error="fail", crop_field=False, dct_scaling=True,
                 decode="cpu"):
        if on_error not in ("fail", "skip"):
            raise ValueError("on_error must be 'fail' or 'skip', not %r" % (on_error,))
        if decode not in ("cpu", "gpu", "auto"):
            raise ValueError("decode must be 'cpu', 'gpu' or 'auto', not %r" % (decode,))
        self.decode = decode
        if decode != "cpu":
            _nvjpeg_from_wheel()
        self.size = _square_size(size)
        path = os.fspath(root)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        # os.path.join(root, cls) as torchvision has it: no "ROOT//CLASS"
        path = path.rstrip("/") or path
        opts = _options(size=self.size[0], train=bool(train), scale=tuple(scale),
                        ratio=tuple(ratio), flip_p=float(flip_p), resize=resize,
                        on_error=on_error, crop_field=bool(crop_field),
                        dct_scaling=bool(dct_scaling))
        super().__init__(_C.open("images", [path], opts))
        self.root = path
        self._structure = "tuple"
        self._samples = None
        self._is_folder = os.path.isdir(path)

    @property
    def replaced(self):
        """Samples replaced so far because their file could not be read."""
        return _C.replaced(self._native)

    @property
    def samples(self):
        """[(path, class_index)], in the order the samples are read."""
        if self._samples is None:
            self._samples = [tuple(s) for s in _C.samples(self._native)]
        return self._samples

    imgs = samples

    @property
    def targets(self):
        return [label for _, label in self.samples]

    @property
    def classes(self):
        """Class folder names, sorted (label i is classes[i]); None for a
        list file."""
        if not self._is_folder:
            return None
        names = {}
        cut = len(self.root) + 1
        for path, label in self.samples:
            names.setdefault(label, path[cut:].split("/", 1)[0])
        return [names[i] for i in range(len(names))]

    @property
    def class_to_idx(self):
        classes = self.classes
        return None if classes is None else {c: i for i, c in enumerate(classes)}


def _nvjpeg_wheel_lib():
    """libnvjpeg.so.13 of the nvidia-nvjpeg wheel (nvidia/cu13/lib), or None."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "nvjpeg"):
            path = os.path.join(base, sub, "lib", "libnvjpeg.so.13")
            if os.path.isfile(path):
                return path
    return None


def _nvjpeg_from_wheel():
    """The C library looks for nvJPEG in PL_NVJPEG_LIB first: point it at
    the wheel's copy unless the user named one."""
    if not os.environ.get("PL_NVJPEG_LIB"):
        path = _nvjpeg_wheel_lib()
        if path:
            os.environ["PL_NVJPEG_LIB"] = path
# ---- shards (tar shards, src/data/sources/source_shards.c): one block
def _shards_fields(fields):
    """{"image": "jpg", "label": "cls"} as the C source's "image:jpg,label:cls";
    a value may be "jpg;png", a list of extensions, or (extensions, kind)
    with kind "image", "int" or "bytes"."""
    parts = []
    for name, spec in dict(fields).items():
        kind = None
        if isinstance(spec, tuple):
            spec, kind = spec
        if isinstance(spec, (list, tuple)):
            spec = ";".join(spec)
        for bad in ",:&=":
            if bad in str(name) or bad in str(spec):
                raise ValueError("shards: field %r: names and extensions may not hold %r"
                                 % (name, bad))
        parts.append("%s:%s%s" % (name, spec, ":" + kind if kind else ""))
    return ",".join(parts)


class Shards(Dataset):
    """WebDataset tar shards: local paths (memory-mapped), http(s) URLs
    (range requests through libcurl, loaded at run time) or brace patterns
    ("train-{000000..000099}.tar"). Members sharing a key form a sample;
    ``fields`` maps field names to member extensions: jpg/jpeg/png are
    decoded and transformed as ImageFolder's images (``size``, ``train``,
    ``scale``, ``ratio``, ``flip_p``, ``resize``, ``dct_scaling``), cls to
    int64, npy as whole arrays (the first sample's dtype and shape), anything else delivered as uint8 [max_bytes] with NAME_len
    (use ``bytes(b[:n])``). ``ds[i]`` is a tuple, one array per field.

    Remote shards: ``cache_dir`` (default ~/.cache/pinloader/shards) holds
    their indexes and, with readahead="whole", whole shards (at most
    ``cache_bytes``, least recently read evicted first); readahead="ranges"
    reads each member with one range request; with "whole", an epoch's next
    ``prefetch`` shards (default 2) are fetched ahead of the reads (in the
    loader's own order, shuffled or not, with shuffle_buffer > 0). ``retries``, ``backoff_ms``
    and ``timeout_ms`` govern failed requests.

    Order: a DataLoader with shuffle=True and seed= reads an epoch shard by
    shard (the shards in an order of (seed, epoch), each in tar order), its
    positions shuffled within windows of ``shuffle_buffer`` samples;
    shuffle_buffer=0 permutes all samples as for other datasets.

    ``fetcher``: a callable ``fetcher(url, offset, length) -> bytes`` (length
    None: to the end) that reads every path holding "://" instead of libcurl
    (s3torchconnector, fsspec, obstore...); called from the loader's worker
    threads with the GIL. Without ETags, each open fetches and indexes its
    shards again. See docs/sources.md."""

    def __init__(self, urls, fields=None, size=224, train=True, scale=(0.08, 1.0),
                 ratio=(3.0 / 4.0, 4.0 / 3.0), flip_p=0.5, resize=None, dct_scaling=True,
                 cache_dir=None, cache_bytes=None, max_bytes=None, readahead="whole",
                 retries=None, backoff_ms=None, timeout_ms=None, shuffle_buffer=1000,
                 prefetch=None, fetcher=None):
        if readahead not in ("whole", "ranges"):
            raise ValueError("readahead must be 'whole' or 'ranges', not %r" % (readahead,))
        if fields is None:
            fields = {"image": "jpg;jpeg;png", "label": "cls"}
        self.size = _square_size(size)
        self.urls = [os.fsdecode(p) if isinstance(p, bytes) else os.fspath(p)
                     for p in _paths(urls)]
        opts = _options(size=self.size[0], train=bool(train), scale=tuple(scale),
                        ratio=tuple(ratio), flip_p=float(flip_p), resize=resize,
                        dct_scaling=bool(dct_scaling), fields=_shards_fields(fields),
                        cache=None if cache_dir is None else os.fspath(cache_dir),
                        cache_bytes=cache_bytes, max_bytes=max_bytes, readahead=readahead,
                        retries=retries, backoff_ms=backoff_ms, timeout_ms=timeout_ms,
                        shuffle_buffer=shuffle_buffer, prefetch=prefetch)
        if fetcher is not None and not callable(fetcher):
            raise TypeError("fetcher must be callable(url, offset, length) -> bytes")
        super().__init__(_C.open_shards(self.urls, opts, fetcher))
# ---- end of shards


def to_float32(ds, field, scale=1.0 / 255):
    """A view of native dataset `ds` delivering integer field `field` as
    float32 value * scale (1/255 is torchvision's ToTensor), converted by the
    workers straight into the batch."""
    if not isinstance(ds, Dataset):
        ds = from_python(ds)
    out = Dataset(_C.to_float32(ds._native, field, float(scale)))
    out._structure, out._keys, out._casts = ds._structure, ds._keys, ds._casts
    return out


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _field_name(key, i):
    name = str(key)
    # The C field name has a fixed size; the dict key itself is kept intact.
    return name.encode("utf-8")[:31].decode("utf-8", "ignore") or "field%d" % i


def _convert():
    try:
        import numpy as np
    except ImportError:  # buffers and numbers still work
        return None
    return np.asarray  # non-contiguous arrays are copied in C order by C


def from_python(dataset):
    """Wrap a Python map-style dataset for the C loader. Field shapes and
    dtypes come from dataset[0]; every other sample must match them (an error
    names the sample otherwise). Each DataLoader makes its own wrapper, so
    exceptions raised by __getitem__ reach that loader's consumer."""
    if isinstance(dataset, Dataset):
        return dataset
    n = len(dataset)
    if n == 0:
        raise ValueError("the dataset is empty: cannot take field shapes from dataset[0]")
    s0 = dataset[0]
    keys = None
    if isinstance(s0, dict):
        mode, keys = 2, list(s0.keys())
        items, names = [s0[k] for k in keys], [_field_name(k, i) for i, k in enumerate(keys)]
        structure = "dict"
    elif isinstance(s0, (tuple, list)):
        mode, items = 1, list(s0)
        if _is_namedtuple(s0):
            structure, names = type(s0), [_field_name(k, i) for i, k in enumerate(s0._fields)]
        else:
            structure, names = ("list" if isinstance(s0, list) else "tuple"), ["%d" % i for i in range(len(items))]
    else:
        mode, items, names, structure = 0, [s0], ["data"], "bare"
    if not items:
        raise ValueError("dataset[0] has no fields")
    convert = _convert()
    fields = []
    for name, item in zip(names, items):
        try:
            dtype, shape = _C.describe(item, convert)
        except Exception as e:
            raise TypeError("dataset[0] field %r: %s" % (name, e)) from e
        fields.append((name, dtype, shape))
    out = Dataset(_C.from_callback(dataset, n, fields, mode, keys, convert))
    out._structure, out._keys = structure, keys
    return out
