"""Python datasets of the differential suite: each sample is a function of
its index alone (so torch's and pinloader's workers read the same values
whatever worker reads them). Module-level classes: spawn and forkserver
workers import them by name."""
import collections

import numpy as np

Pair = collections.namedtuple("Pair", "a b")

# How a label is made from an index: default_collate turns each into a
# tensor of a dtype of its own (int -> int64, float -> float64, bool ->
# bool, numpy scalars and 0-d arrays -> their dtype).
LABELS = ("int", "float", "bool", "np_int32", "np_uint8", "np_float16", "np_int64_0d", "torch_int16")


def label(kind, i):
    if kind == "int":
        return i * 3 - 7
    if kind == "float":
        return i / 7.0
    if kind == "bool":
        return i % 3 == 0
    if kind == "np_int32":
        return np.int32(-i)
    if kind == "np_uint8":
        return np.uint8(i % 256)
    if kind == "np_float16":
        return np.float16(i / 4)
    if kind == "np_int64_0d":
        return np.array(i * 11, dtype=np.int64)
    if kind == "torch_int16":
        import torch
        return torch.tensor(i - 5, dtype=torch.int16)
    raise ValueError(kind)


def image(i, shape=(3, 2, 4), dtype=np.uint8):
    n = int(np.prod(shape))
    return ((np.arange(n) * 7 + i * 13) % 251).astype(dtype).reshape(shape)


class MapDS:
    """A map-style dataset of `n` samples shaped by `kind`:
    tuple | list | dict | namedtuple | nested | reordered (dict keys in
    another order for odd indices) | zerodim (a [0, 3] field) | bare."""

    def __init__(self, n, kind, label_kind, fail_at=None):
        self.n, self.kind, self.label_kind = n, kind, label_kind
        # dataset[fail_at] always raises: deterministic whatever reads
        # first (pinloader's workers read the next epoch early: a sample
        # that failed only once would fail in whichever epoch read it first)
        self.fail_at = fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        if i == self.fail_at:
            raise ValueError("differential: dataset[%d] fails" % i)
        y = label(self.label_kind, i)
        k = self.kind
        if k == "tuple":
            return image(i), y
        if k == "list":
            return [image(i, (5,), np.float32), y]
        if k == "dict":
            return {"x": image(i, (2, 3), np.int16), "y": y}
        if k == "namedtuple":
            return Pair(image(i, (4,), np.float64), y)
        if k == "nested":
            return {"a": (image(i, (2, 2)), {"b": image(i, (3,), np.int32)}),
                    "c": [y, np.float32(i) / 2], "name": "s%d" % i}  # a string: an object leaf
        if k == "reordered":
            d = {"x": image(i, (2,), np.int16), "y": y, "z": np.int64(i)}
            return d if i % 2 == 0 else {"z": d["z"], "y": d["y"], "x": d["x"]}
        if k == "zerodim":
            return np.zeros((0, 3), dtype=np.float32), y
        if k == "bare":
            return image(i, (3,), np.int64)
        raise ValueError(k)


def _iterable_base():
    import torch.utils.data
    return torch.utils.data.IterableDataset


class IterDS(_iterable_base()):
    """An IterableDataset of samples (image(i), label(i)) for i in
    range(n), split between workers by torch's get_worker_info (worker w of
    W yields i = w, w + W, ...)."""

    def __init__(self, n, label_kind):
        self.n, self.label_kind = n, label_kind

    def __iter__(self):
        import torch.utils.data
        info = torch.utils.data.get_worker_info()
        w, nw = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(w, self.n, nw):
            yield image(i), label(self.label_kind, i)


class Index:
    """dataset[i] = i: torch's DataLoader over it gives the order a sampler
    and generator make (the oracle's order for native datasets). bad: an
    index whose read raises, as a native dataset's corrupt file does, so that
    torch's iteration stops where pinloader's does (and its sampler's
    generator stands where it then stands)."""

    def __init__(self, n, bad=None):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError("sample %d is corrupt" % i)
        return i
