"""How a Python dataset's samples become batches, as torch's default_collate
makes them, but written in place.

A *template* is taken from one probe (dataset[0], or collate_fn over one
sample): the structure (dicts, lists, tuples, namedtuples, nested) with a
leaf kind at each end:

  ("field", f)   a fixed-shape array-like leaf (numpy array or scalar, CPU
                 torch tensor, Python bool / int / float): field f of the C
                 batch, written straight into the batch buffer by whoever
                 reads the sample (a worker process, or a loader thread);
  ("field", f)   with f >= len(fields): a zero-size leaf (np.zeros((0, 3)),
                 torch.empty(0)), t.empty[f - len(fields)]: not a C field
                 (it holds no bytes), its view a zero-size array, built in
                 the consumer as [B, *shape] of its dtype, as torch makes it;
  ("obj", j)     anything else (strings, None, objects, dtypes the C loader
                 has no name for): carried pickled beside the batch and
                 collated in the consumer, as default_collate would (strings
                 become lists).

The structure nodes are ("dict", keys, children), ("list", children),
("tuple", children) and ("namedtuple", cls, children).

Python ints become int64, floats float64 and bools bool, as default_collate
makes them.
"""
import collections.abc
import pickle

import numpy as np

from . import _pinloader as _C

# The C loader's dtypes that numpy arrays hold (those with a buffer format),
# read from the extension's one table (bool is stored as uint8 and viewed
# back as bool).
C_DTYPES = tuple(name for name, (_, fmt) in _C.DTYPES.items() if fmt)


class Leaf:
    """A field leaf: numpy dtype, shape per sample, and the C dtype name.
    `fast` is the value type the probe had (numpy array, torch tensor,
    Python int / float / bool) and `tdtype` its torch dtype: a sample of
    that type, dtype and shape is written without the general checks."""

    __slots__ = ("index", "dtype", "shape", "name", "is_bool", "c_dtype", "fast", "tdtype")

    def __init__(self, index, dtype, shape, name, probe=None):
        self.index, self.dtype, self.shape, self.name = index, np.dtype(dtype), tuple(shape), name
        self.is_bool = self.dtype == np.bool_
        self.c_dtype = "uint8" if self.is_bool else self.dtype.name
        self.fast = None if probe is None else type(probe)
        self.tdtype = getattr(probe, "dtype", None) if self.fast is _torch_tensor_type() else None
        if self.fast in (int, float, bool) and np.dtype(_scalar_dtype(probe)) != self.dtype:
            self.fast = None  # a number that is not the field's own dtype

    def describe(self):
        return "%s %s" % ("bool" if self.is_bool else self.dtype.name, self.shape)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


_TENSOR = []  # torch.Tensor, once torch is imported (looked up per leaf till then)


def _torch_tensor_type():
    if _TENSOR:
        return _TENSOR[0]
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    _TENSOR.append(torch.Tensor)
    return torch.Tensor


def _array_of(value):
    """value as a numpy array (no copy where possible), or None when it is
    not array-like with a dtype the C loader can hold."""
    tt = _torch_tensor_type()
    if tt is not None and isinstance(value, tt):
        if value.device.type != "cpu" or value.is_sparse or value.requires_grad:
            return None
        try:
            a = value.numpy()
        except (TypeError, RuntimeError):  # bfloat16, complex...
            return None
    elif isinstance(value, (np.ndarray, np.generic)):
        a = np.asarray(value)
    else:
        return None
    if a.dtype == np.bool_ or a.dtype.name in C_DTYPES:
        return a
    return None


def _native(dtype):
    """dtype in this machine's byte order. The batch holds native values;
    an array of the other order is converted as it is written (beyond
    torch, whose default_collate refuses it)."""
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def _scalar_dtype(value):
    """The dtype default_collate gives a Python number, or None."""
    if isinstance(value, bool):
        return np.bool_
    if isinstance(value, int):
        return np.int64
    if isinstance(value, float):
        return np.float64
    return None


class Template:
    """The structure of one sample (or one collated batch) and its leaves."""

    # A layout made of nothing (an empty epoch, or one whose every sample
    # raised), which a later epoch's first sample replaces (_engine).
    placeholder = False

    def __init__(self, probe, numbers_are_fields=True, batched_probe=False):
        self.fields = []  # Leaf per C field
        self.empty = []  # Leaf per zero-size leaf (after the C fields in views)
        self.nobjs = 0
        self.batched_probe = batched_probe
        self.root = self._walk(probe, numbers_are_fields, "")
        if self.empty:
            if not self.fields:  # the C loader needs a field: a placeholder
                self.fields.append(Leaf(0, "uint8", (), "_"))
            for j, leaf in enumerate(self.empty):
                leaf.index = len(self.fields) + j
            self.root = self._renumber(self.root)

    def _renumber(self, node):
        """Zero-size leaves, ("empty", j) while walking, become ("field", f)
        with f after every C field."""
        if node[0] == "empty":
            return ("field", self.empty[node[1]].index)
        if node[0] in ("field", "obj"):
            return node
        return node[:-1] + ([self._renumber(c) for c in node[-1]],)

    @property
    def leaves(self):
        """Every field leaf, as views holds them: the C fields, then the
        zero-size ones."""
        return self.fields + self.empty

    def _leaf_name(self, path):
        name = path.strip(".") or "data"
        return name.encode("utf-8")[:31].decode("utf-8", "ignore") or "field%d" % len(self.fields)

    def _walk(self, x, numbers, path):
        if isinstance(x, collections.abc.Mapping):
            keys = list(x.keys())
            return ("dict", keys, [self._walk(x[k], numbers, "%s.%s" % (path, k)) for k in keys])
        if _is_namedtuple(x):
            return ("namedtuple", type(x), [self._walk(v, numbers, "%s.%s" % (path, k))
                                            for k, v in zip(x._fields, x)])
        if isinstance(x, (tuple, list)):
            kind = "list" if isinstance(x, list) else "tuple"
            return (kind, [self._walk(v, numbers, "%s.%d" % (path, i)) for i, v in enumerate(x)])
        a = _array_of(x)
        if a is None and numbers and _scalar_dtype(x) is not None:
            a = np.asarray(x, dtype=_scalar_dtype(x))
        if a is not None:
            shape = a.shape
            if self.batched_probe:  # a collate_fn's output for one sample
                if a.ndim == 0 or shape[0] != 1:
                    return self._obj()
                shape = shape[1:]
            if a.size == 0 and self.batched_probe:
                return self._obj()  # a collate_fn's empty array: carried as is
            leaf = Leaf(len(self.fields), _native(a.dtype), shape, self._leaf_name(path),
                        None if self.batched_probe else x)
            if a.size == 0:  # no bytes in the batch: made in the consumer
                self.empty.append(leaf)
                return ("empty", len(self.empty) - 1)
            self.fields.append(leaf)
            return ("field", leaf.index)
        return self._obj()

    def _obj(self):
        self.nobjs += 1
        return ("obj", self.nobjs - 1)

    def c_fields(self):
        return [("%d_%s" % (f.index, f.name))[:31] for f in self.fields], [
            (("%d_%s" % (f.index, f.name))[:31], f.c_dtype, f.shape) for f in self.fields]


class Mismatch(ValueError):
    pass


class Whole:
    """batch_size=None: a sample not laid out as the first one (torch
    collates nothing there, so shapes may differ from sample to sample, as
    a sampler's index lists of different lengths give), sent pickled whole
    instead of through the batch memory."""

    __slots__ = ("sample",)

    def __init__(self, sample):
        self.sample = sample

    def __reduce__(self):
        return (Whole, (self.sample,))


def _describe(value):
    a = _array_of(value)
    if a is not None:
        return "%s %s" % ("bool" if a.dtype == np.bool_ else a.dtype.name, a.shape)
    return type(value).__name__


def _write_fast(leaf, value, k, views):
    """The common case, in a few checks: a value of the probe's own type,
    dtype and shape (a CPU tensor without grad, an array, a number). False
    sends it through the general path, which also names what is wrong."""
    tv = type(value)
    if tv is not leaf.fast:
        return False
    if tv is np.ndarray:
        if value.dtype != leaf.dtype or value.shape != leaf.shape:
            return False
        views[leaf.index][k] = value
        return True
    if leaf.tdtype is not None:
        if value.dtype is not leaf.tdtype or value.shape != leaf.shape:
            return False
        try:  # raises for a tensor on a device, with grad, or sparse
            views[leaf.index][k] = value.numpy()
        except (TypeError, RuntimeError):
            return False
        return True
    if tv is int or tv is float or tv is bool:
        views[leaf.index][k] = value
        return True
    return False


# How SampleWriter (samples.c) may take a field's value: its kinds.
_FAST_NONE, _FAST_BUFFER, _FAST_TENSOR, _FAST_INT, _FAST_FLOAT, _FAST_BOOL = range(6)


def writer_kinds(t):
    """Per field of template t, (kind, type) for SampleWriter: the values
    _write_fast takes (the probe's own type: a numpy array, a CPU tensor,
    a Python number), and also numpy scalars of the probe's type, which
    _write_fast leaves to write_sample's general path. None when the
    template has object leaves (no SampleWriter)."""
    if t.nobjs:
        return None
    kinds = []
    for leaf in t.leaves:
        fast = leaf.fast
        if fast is None:
            kinds.append((_FAST_NONE, None))
        elif leaf.tdtype is not None:
            kinds.append((_FAST_TENSOR, fast))
        elif fast is np.ndarray or issubclass(fast, np.generic):
            kinds.append((_FAST_BUFFER, fast))
        elif fast in (int, float, bool):
            kinds.append(({int: _FAST_INT, float: _FAST_FLOAT, bool: _FAST_BOOL}[fast], None))
        else:
            kinds.append((_FAST_NONE, None))
    return kinds


def write_sample(t, node, value, k, views, objs, where):
    """Writes one sample's leaves: fields into views[f][k], objects appended
    to objs[j]. `where` names the sample for errors."""
    kind = node[0]
    if kind == "field":
        leaf = t.leaves[node[1]]
        if _write_fast(leaf, value, k, views):
            return
        a = _array_of(value)
        if a is None:
            sd = _scalar_dtype(value)
            if sd is not None and np.dtype(sd) == leaf.dtype:
                views[leaf.index][k] = value
                return
        if a is None or a.shape != leaf.shape or _native(a.dtype) != leaf.dtype:
            raise Mismatch("%s field %r is %s but the first sample's was %s" % (
                where, leaf.name, _describe(value), leaf.describe()))
        views[leaf.index][k] = a
    elif kind == "obj":
        objs[node[1]].append(value)
    elif kind == "dict":
        # The first sample's keys, in any order (torch's default_collate
        # takes each key of the first sample from every sample, and so
        # ignores keys that only later samples have).
        if not isinstance(value, collections.abc.Mapping) or len(value) < len(node[1]) \
                or any(key not in value for key in node[1]):
            raise Mismatch("%s is %s but the first sample was a mapping with keys %r" % (
                where, _short(value) if not isinstance(value, collections.abc.Mapping)
                else "a mapping with keys %r" % (list(value.keys()),), node[1]))
        for key, child in zip(node[1], node[2]):
            write_sample(t, child, value[key], k, views, objs, where)
    else:
        children = node[-1]
        if not isinstance(value, (tuple, list)) or len(value) != len(children):
            raise Mismatch("%s is %s but the first sample was a %s of %d" % (
                where, _short(value), node[0], len(children)))
        for child, v in zip(children, value):
            write_sample(t, child, v, k, views, objs, where)


def _short(value):
    if isinstance(value, (tuple, list)):
        return "a %s of %d" % (type(value).__name__, len(value))
    return "a %s" % type(value).__name__


def write_collated(t, node, value, n, views, extras, path=()):
    """Writes a collate_fn's output for a batch of n: a field leaf whose
    array is [n, *shape] of the probe's dtype goes into the batch buffer;
    anything else (another shape: padding to the longest sequence, say)
    goes into extras[path] to be pickled."""
    kind = node[0]
    if kind == "field":
        leaf = t.fields[node[1]]
        a = _array_of(value)
        if a is not None and a.shape == (n,) + leaf.shape and _native(a.dtype) == leaf.dtype:
            views[leaf.index][:n] = a
        else:
            extras[path] = value
    elif kind == "obj":
        extras[path] = value
    elif kind == "dict":
        if not isinstance(value, collections.abc.Mapping) or list(value.keys()) != node[1]:
            extras[path] = value
            return
        for key, child in zip(node[1], node[2]):
            write_collated(t, child, value[key], n, views, extras, path + (key,))
    else:
        children = node[-1]
        if not isinstance(value, (tuple, list)) or len(value) != len(children):
            extras[path] = value
            return
        for i, (child, v) in enumerate(zip(children, value)):
            write_collated(t, child, v, n, views, extras, path + (i,))


def build(t, node, arrays, objs, collate_obj, unbatched=False):
    """The consumer's batch: the template's structure with arrays[f] at
    field leaves and collate_obj(objs[j]) at object leaves."""
    kind = node[0]
    if kind == "field":
        if node[1] >= len(arrays):  # a zero-size leaf
            return _empty_batch(t.leaves[node[1]], arrays[0], unbatched)
        a = arrays[node[1]]
        return a[0] if unbatched else a
    if kind == "obj":
        vals = objs[node[1]]
        return vals[0] if unbatched else collate_obj(vals)
    if kind == "dict":
        return {k: build(t, c, arrays, objs, collate_obj, unbatched) for k, c in zip(node[1], node[2])}
    vals = [build(t, c, arrays, objs, collate_obj, unbatched) for c in node[-1]]
    if kind in ("list", "tuple"):
        return vals  # default_collate (and default_convert) make tuples lists
    return node[1](*vals)


def _empty_batch(leaf, like, unbatched):
    """A zero-size leaf's batch, [B, *shape] of its dtype (B that of the
    batch's first field, `like`): a tensor on like's device when like is a
    tensor (as default_collate stacks them), else a numpy array."""
    shape = leaf.shape if unbatched else (like.shape[0],) + leaf.shape
    a = np.empty(shape, dtype=leaf.dtype)
    tt = _torch_tensor_type()
    if tt is None or not isinstance(like, tt):
        return a
    import torch

    return torch.from_numpy(a).to(like.device)


def build_collated(t, node, arrays, extras, path=()):
    """A collate_fn's batch: extras[path] where the worker sent one."""
    if path in extras:
        return extras[path]
    kind = node[0]
    if kind == "field":
        return arrays[node[1]]
    if kind == "obj":  # every obj leaf is in extras; kept for safety
        return None
    if kind == "dict":
        return {k: build_collated(t, c, arrays, extras, path + (k,)) for k, c in zip(node[1], node[2])}
    vals = [build_collated(t, c, arrays, extras, path + (i,)) for i, c in enumerate(node[-1])]
    if kind == "list":
        return vals
    if kind == "tuple":
        return tuple(vals)
    return node[1](*vals)


def torch_converter(torch):
    """A batch field (FieldArray) -> torch tensor, through DLPack. A field
    of a dtype this torch has no tensor for (uint16, uint32, uint64 before
    torch 2.3) is named, with what to do, instead of torch's bare
    "Unsupported kUInt bits 16"."""
    from_dlpack = torch.utils.dlpack.from_dlpack

    def convert(fa):
        try:
            return from_dlpack(fa)
        except (RuntimeError, TypeError, BufferError) as e:
            dt = getattr(fa, "dtype", None)
            if dt not in ("uint16", "uint32", "uint64") or hasattr(torch, dt):
                raise
            raise TypeError(
                "field %r is %s, which this torch (%s) cannot hold as a tensor: load it as int32 or "
                "int64 (Tokens(..., dtype='int32'); a Python dataset: .astype('int32') in "
                "__getitem__), or pass output='numpy' to get numpy arrays"
                % (getattr(fa, "name", "?"), dt, getattr(torch, "__version__", "?"))) from e

    return convert


def dumps(obj):
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
