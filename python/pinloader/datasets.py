"""pinloader datasets.

Native sources are read by the C library's worker threads without the GIL:

    IDX(images, labels)                     MNIST / Fashion-MNIST (plain or .gz)
    CIFAR10(files)                          CIFAR-10 binary batches
    Records(files, header_bytes, record_bytes, fields=[(name, dtype, shape, offset)])
    to_float32(ds, field, scale)            a view delivering `field` as float32 * scale

Any Python map-style dataset (``__len__`` and ``__getitem__`` returning
fixed-shape numpy arrays, buffers, numbers, or a tuple / list / dict of them)
can be given to DataLoader directly; it is read through a C callback that
takes the GIL for each sample (see python/README.md for what that costs).
"""
import os

from . import _pinloader as _C

__all__ = ["Dataset", "IDX", "CIFAR10", "Records", "to_float32", "from_python", "Field"]


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
