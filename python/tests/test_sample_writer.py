"""SampleWriter (python/pinloader/samples.c): a sample's common case written
into the batch in C. Whatever it takes, it writes the bytes
_collate.write_sample writes; whatever it refuses, it refuses before
write_sample would, and the caller's write_sample then writes or names the
fault as before."""
import collections

import numpy as np
import pytest

import pinloader
from pinloader import _collate
from pinloader import _pinloader as _C

try:
    import torch
except ImportError:  # the numpy cases still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

B = 4  # samples a batch holds here
Point = collections.namedtuple("Point", "x y")


def views_of(t, fill=0):
    return [np.full((B,) + leaf.shape, fill, np.bool_ if leaf.is_bool else leaf.dtype) for leaf in t.leaves]


def written(probe, value, k=2):
    """(SampleWriter took it, its views, write_sample's views or the
    exception write_sample raised) for value at k, template from probe.
    The views start filled with 7s, so a byte not written shows."""
    t = _collate.Template(probe)
    kinds = _collate.writer_kinds(t)
    assert kinds is not None
    mine, theirs = views_of(t, 7), views_of(t, 7)
    took = _C.SampleWriter(t.root, kinds, mine).write(value, k)
    try:
        _collate.write_sample(t, t.root, value, k, theirs, [], "dataset[%d]" % k)
    except Exception as e:  # noqa: BLE001 (the fault is the result)
        theirs = e
    return took, mine, theirs


def assert_same(mine, theirs):
    assert not isinstance(theirs, Exception), theirs
    for a, b in zip(mine, theirs):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def image(seed=0):
    return np.random.default_rng(seed).integers(0, 256, (32, 32, 3), dtype=np.uint8)


# Samples SampleWriter writes itself: every layout numpy makes.
TAKEN = {
    "contiguous float32 and an int": lambda: ((image().astype(np.float32) / 255, 3),) * 2,
    # astype keeps a transpose's layout: strides (4, 384, 12), not C order
    "a transposed float32 (astype of a CHW view)": lambda: (
        (image().transpose(2, 0, 1).astype(np.float32), 1), (image(1).transpose(2, 0, 1).astype(np.float32), 9)),
    "a flipped uint8 (negative strides)": lambda: ((image(), 0), (image(2)[:, ::-1], 5)),
    "a strided slice": lambda: ((np.arange(8, dtype=np.int16), 0), (np.arange(16, dtype=np.int16)[::2] * 3, 1)),
    "a dict of array, int, float, bool": lambda: (
        {"img": image(), "label": 1, "w": 0.5, "flag": False},
        {"img": image(3), "label": -(2 ** 63), "w": -2.25, "flag": True}),
    "nested: dict, tuple, list, namedtuple": lambda: (
        {"a": (np.zeros(3, np.float64), [1, 2.0]), "p": Point(np.int32(1), True)},
        {"a": (np.linspace(0, 1, 3), [7, 3.5]), "p": Point(np.int32(-5), False)}),
    "a list where the probe had a tuple": lambda: ((np.zeros(2, np.uint8), 1), [np.ones(2, np.uint8), 4]),
    "numpy scalars": lambda: ((np.int64(1), np.float32(2.5), np.bool_(True), np.uint8(4)),
                              (np.int64(-9), np.float32(-0.125), np.bool_(False), np.uint8(255))),
    "0-d and empty arrays": lambda: ((np.array(1.5), np.zeros((0, 3), np.float32)),
                                     (np.array(-3.0), np.zeros((0, 3), np.float32))),
    "a bool array": lambda: ((np.zeros((2, 2), np.bool_),), (np.array([[True, False], [False, True]]),)),
}


@pytest.mark.parametrize("case", sorted(TAKEN))
def test_taken_as_write_sample_writes_it(case):
    probe, value = TAKEN[case]()
    took, mine, theirs = written(probe, value)
    assert took is True
    assert_same(mine, theirs)
    for v, before in zip(mine, views_of(_collate.Template(probe), 7)):  # the others untouched
        assert np.array_equal(np.delete(v, 2, axis=0), np.delete(before, 2, axis=0))


@needs_torch
@pytest.mark.parametrize("make", [
    lambda: torch.rand(3, 4, 5),
    lambda: torch.rand(5, 4, 3).permute(2, 1, 0),  # not contiguous
    lambda: torch.arange(6, dtype=torch.int64).view(2, 3),
    lambda: torch.tensor([True, False, True]),
], ids=["float32", "permuted", "int64", "bool"])
def test_cpu_tensors_taken(make):
    probe, value = make(), make()
    took, mine, theirs = written((probe, 0), (value, 7))
    assert took is True
    assert_same(mine, theirs)
    np.testing.assert_array_equal(mine[0][2], value.numpy())


# Values SampleWriter leaves to write_sample, and what write_sample then does.
REFUSED = {
    "another dtype": (lambda: ((np.zeros(3, np.float32), 1), (np.zeros(3, np.float64), 1)),
                      "dataset[2] field '0' is float64 (3,) but the first sample's was float32 (3,)"),
    "another shape": (lambda: ((np.zeros(3, np.float32), 1), (np.zeros(4, np.float32), 1)),
                      "is float32 (4,) but the first sample's was float32 (3,)"),
    "a list for an array": (lambda: ((np.zeros(2, np.int64), 1), ([1, 2], 1)),
                            "dataset[2] field '0' is list but the first sample's was int64 (2,)"),
    "a tuple of another length": (lambda: ((np.zeros(2), 1), (np.zeros(2), 1, 2)),
                                  "dataset[2] is a tuple of 3 but the first sample was a tuple of 2"),
    "an item where the probe's list was empty": (lambda: (([],), ([1],)),
                                                 "dataset[2] is a list of 1 but the first sample was a list of 0"),
    # (keys in another order are taken, as torch's default_collate takes them)
    "a dict with another key": (lambda: ({"a": 1, "b": 2}, {"a": 1, "c": 2}),
                                "dataset[2] is a mapping with keys ['a', 'c'] but the first sample "
                                "was a mapping with keys ['a', 'b']"),
    "an int beyond int64": (lambda: ((1,), (2 ** 70,)), OverflowError),
    "a float for an int": (lambda: ((1,), (1.5,)), "field '0' is float but the first sample's was int64 ()"),
    "a bool for an int": (lambda: ((1,), (True,)), "field '0' is bool but the first sample's was int64 ()"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_and_write_sample_names_the_fault(case):
    make, fault = REFUSED[case]
    probe, value = make()
    took, _, theirs = written(probe, value)
    assert took is False
    assert isinstance(theirs, Exception)
    if isinstance(fault, str):
        assert isinstance(theirs, _collate.Mismatch) and fault in str(theirs), str(theirs)
    else:
        assert isinstance(theirs, fault)


class MyArray(np.ndarray):
    pass


@pytest.mark.parametrize("value", [
    collections.OrderedDict([("a", np.arange(3.0)), ("b", 4)]),  # a dict subclass: a Mapping
    {"a": np.arange(3.0).view(MyArray), "b": 4},  # an ndarray subclass
    {"a": np.arange(3), "b": 4},  # int64 for float64: write_sample refuses it
], ids=["OrderedDict", "ndarray subclass", "another dtype in a dict"])
def test_refused_the_general_path_decides(value):
    took, mine, theirs = written({"a": np.zeros(3), "b": 1}, value)
    assert took is False
    if not isinstance(theirs, Exception):
        np.testing.assert_array_equal(theirs[0][2], value["a"])


@pytest.mark.parametrize("order", [">", "<"])
def test_another_byte_order_is_converted_by_the_general_path(order):
    # Beyond torch: its default_collate raises for a non-native array.
    other = ">" if np.little_endian else "<"
    value = np.arange(3, dtype=order + "f4")
    for probe in (np.zeros(3, np.float32), value):  # the probe itself may be the other order
        took, mine, theirs = written((probe,), (value,))
        assert took is (order != other)
        assert theirs[0].dtype == np.float32 and theirs[0].dtype.isnative
        assert theirs[0][2].tolist() == [0.0, 1.0, 2.0]


class Reversed(list):
    def __iter__(self):
        return iter(list(reversed(list(list.__iter__(self)))))


class Short(tuple):
    def __len__(self):
        return 1


def test_a_sequence_that_overrides_len_or_iter_goes_the_python_way():
    took, _, theirs = written((1, 2), Reversed([10, 20]))
    assert took is False and theirs[0][2] == 20 and theirs[1][2] == 10
    took, _, theirs = written((1, 2), Short((10, 20)))
    assert took is False
    assert isinstance(theirs, _collate.Mismatch) and "is a Short of 1 but the first sample was a tuple of 2" in str(theirs)
    took, mine, theirs = written(Point(1, 2.0), Point(3, 4.5))  # a namedtuple is its storage
    assert took is True
    assert_same(mine, theirs)


@needs_torch
def test_a_list_emptied_while_a_tensor_is_written_is_refused():
    # A tensor's .numpy() may run Python code (here an instance attribute),
    # and that code may change the sample's list: no crash, no stale read.
    t = _collate.Template([torch.zeros(3), np.zeros(2)])
    w = _C.SampleWriter(t.root, _collate.writer_kinds(t), views_of(t))
    x = torch.zeros(3)
    sample = [x, np.ones(2)]

    def numpy_():
        sample.clear()
        return torch.Tensor.numpy(x)

    x.numpy = numpy_
    assert w.write(sample, 0) is False


def test_a_view_the_writer_cannot_use_leaves_its_field_to_python():
    deep = memoryview(bytearray(2)).cast("B", [2] + [1] * 33)  # more dimensions than numpy 1.x has
    w = _C.SampleWriter(("field", 0), [(1, memoryview)], [deep])  # raised before
    assert w.write(memoryview(bytearray(1)).cast("B", [1] * 33), 0) is False
    strided = np.zeros((4, 3, 2), np.float32)[:, :, ::2]  # samples not in C order
    w = _C.SampleWriter(("field", 0), [(1, np.ndarray)], [strided])
    assert w.write(np.ones((3, 1), np.float32), 0) is False


def test_a_sample_out_of_the_batch_is_refused():
    took, _, theirs = written((np.zeros(2, np.uint8),), (np.ones(2, np.uint8),), k=B)
    assert took is False and isinstance(theirs, IndexError)
    took, _, _ = written((np.zeros(2, np.uint8),), (np.ones(2, np.uint8),), k=-1)
    assert took is False


@needs_torch
def test_a_tensor_with_grad_is_refused():
    probe = torch.zeros(3)
    took, _, theirs = written((probe,), (torch.zeros(3, requires_grad=True),))
    assert took is False and isinstance(theirs, _collate.Mismatch)


def test_no_writer_for_object_leaves():
    t = _collate.Template((np.zeros(2), "a string"))
    assert _collate.writer_kinds(t) is None
    with pytest.raises(ValueError, match="object leaves"):
        _C.SampleWriter(t.root, [(0, None)], views_of(t))


def test_the_views_stay_alive_with_the_writer():
    t = _collate.Template((np.zeros(1000, np.float32),))
    views = views_of(t)
    w = _C.SampleWriter(t.root, _collate.writer_kinds(t), views)
    keep = views[0]
    del views
    assert w.write((np.ones(1000, np.float32),), 3) is True
    assert keep[3].sum() == 1000 and keep[2].sum() == 0


class Layouts:
    """Samples in the layouts a __getitem__ makes without thinking of it: a
    transposed float32, a flipped uint8, a numpy scalar label, a big-endian
    array (as read from a file), in a dict. torch's default_collate refuses
    negative strides and the other byte order (copy=True gives it the same
    values, copied and native)."""

    def __init__(self, copy=False):
        self.copy = copy

    def __len__(self):
        return 37

    def __getitem__(self, i):
        img = np.random.default_rng(i).integers(0, 256, (6, 5, 3), dtype=np.uint8)
        if i % 2:
            img = img[:, ::-1]
        be = np.arange(i, i + 4, dtype=">i4")
        return {"x": img.transpose(2, 0, 1).astype(np.float32) / 255, "raw": img.copy() if self.copy else img,
                "y": np.int64(i * 3), "w": float(i) / 4, "be": be.astype(np.int32) if self.copy else be}


@needs_torch
@pytest.mark.parametrize("mode", ["process", "thread"])
def test_a_loader_of_those_layouts_equals_torch(mode):
    mine = list(pinloader.DataLoader(Layouts(), batch_size=8, num_workers=2, worker_mode=mode,
                                     device="cpu"))
    theirs = list(torch.utils.data.DataLoader(Layouts(copy=True), batch_size=8, num_workers=0))
    assert len(mine) == len(theirs) == 5
    for a, b in zip(mine, theirs):
        assert list(a) == list(b)
        for key in b:
            assert a[key].dtype == b[key].dtype, key
            assert torch.equal(a[key], b[key]), key


# ---------------------------------------------------------------- random samples

DTYPES = ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32", "float64", "bool"]


class RandomSamples:
    """Random nested samples (dicts, tuples, lists, namedtuples of arrays in
    any layout, numpy scalars, Python numbers, tensors) and random changes
    of them: another dtype, shape, byte order, type, key order, length."""

    def __init__(self, seed):
        self.r = np.random.default_rng(seed)

    def pick(self, xs):
        return xs[int(self.r.integers(len(xs)))]

    def array(self, dtype, shape):
        a = self.r.integers(0, 200, shape).astype(dtype)
        how = int(self.r.integers(5))
        if a.ndim and how == 1:
            return np.flip(np.flip(a, -1).copy(), -1)  # negative strides
        if a.ndim and how == 2:
            return np.repeat(a[..., None], 2, -1)[..., 0]  # strided
        if a.ndim and how == 3:
            return np.ascontiguousarray(a.T).T  # transposed memory
        return a

    def leaf(self):
        shape = tuple(int(self.r.integers(4)) for _ in range(int(self.r.integers(4))))
        dtype, how = self.pick(DTYPES), int(self.r.integers(6))
        if how == 3:
            return self.array(dtype, ())[()]  # a numpy scalar
        if how == 4:
            return self.pick([int(self.r.integers(-9, 9)), float(self.r.random()), bool(self.r.integers(2))])
        if how == 5 and torch is not None and dtype not in ("uint16", "uint32"):
            return torch.from_numpy(np.array(self.array(dtype, shape), order="C"))  # a copy: no negative strides
        return self.array(dtype, shape)

    def sample(self, depth=0):
        how = int(self.r.integers(5)) if depth < 3 else 4
        if how == 0:
            return {k: self.sample(depth + 1) for k in self.r.permutation(list("abcd"))[:int(self.r.integers(4))]}
        if how == 1:
            return tuple(self.sample(depth + 1) for _ in range(int(self.r.integers(3))))
        if how == 2:
            return [self.sample(depth + 1) for _ in range(int(self.r.integers(3)))]
        if how == 3:
            return Point(self.sample(depth + 1), self.sample(depth + 1))
        return self.leaf()

    def changed_leaf(self, x):
        how = int(self.r.integers(8))
        if isinstance(x, np.ndarray):
            return [x.astype(x.dtype.newbyteorder()), x.astype(np.float32), x[None], x.tolist(),
                    self.array(x.dtype, x.shape)][how % 5]
        if isinstance(x, np.generic):
            return [np.asarray(x), x.item(), self.array(x.dtype, ())[()]][how % 3]
        if torch is not None and isinstance(x, torch.Tensor):
            return [x.float(), x.numpy().copy(), x.clone().unsqueeze(0), x.clone()][how % 4]
        if isinstance(x, bool):
            return self.pick([True, False, 1, np.bool_(True)])
        if isinstance(x, int):
            return self.pick([2 ** 63 - 1, -2 ** 63, 2 ** 64, True, 3.0, np.int64(4)])
        if isinstance(x, float):
            return self.pick([float("nan"), -0.0, 1, np.float64(2.5), float("inf")])
        return x

    def changed(self, x):
        how = int(self.r.integers(6))
        if isinstance(x, dict):
            items = [(k, self.changed(v)) for k, v in x.items()]
            if how == 0:
                items.reverse()
            if how == 1 and items:
                items.pop()
            return collections.OrderedDict(items) if how == 2 else dict(items)
        if isinstance(x, Point):
            return [(self.changed(x.x), self.changed(x.y)), Point(self.changed(x.x), self.changed(x.y))][how % 2]
        if isinstance(x, (tuple, list)):
            items = [self.changed(v) for v in x]
            if how == 0:
                items.append(1)
            return (list if how == 1 else tuple if how == 2 else type(x))(items)
        return self.changed_leaf(x) if self.r.random() < 0.5 else x


@pytest.mark.parametrize("seed", range(4))
def test_random_samples_as_write_sample_writes_them(seed):
    """Whatever SampleWriter takes, write_sample takes too, byte for byte;
    it takes a good share of them (the common case is its job)."""
    gen, cases, took = RandomSamples(seed), 0, 0
    while cases < 600:
        probe = gen.sample()
        try:
            t = _collate.Template(probe)
        except Exception:  # noqa: BLE001 (not a sample the loader takes)
            continue
        if _collate.writer_kinds(t) is None:
            continue
        for value in (probe, gen.changed(probe), gen.changed(probe)):
            cases += 1
            k = int(gen.r.integers(B))
            got, mine, theirs = written(probe, value, k)
            if got:
                took += 1
                assert_same(mine, theirs)
    assert took > cases // 4
