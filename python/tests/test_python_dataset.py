"""Python map-style datasets read through the C callback."""
import traceback

import numpy as np
import pytest

import pinloader


class Squares:
    """Sample i: (uint8 [2, 3] filled with i % 256, int label i)."""

    def __init__(self, n=30, fail_at=None, bad_shape_at=None):
        self.n, self.fail_at, self.bad_shape_at = n, fail_at, bad_shape_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError("boom at %d" % i)
        shape = (3, 3) if i == self.bad_shape_at else (2, 3)
        return np.full(shape, i % 256, dtype=np.uint8), i


@pytest.mark.parametrize("workers", [0, 2])
def test_python_dataset_batches(workers):
    loader = pinloader.DataLoader(Squares(), batch_size=8, num_workers=workers, output="numpy")
    assert len(loader) == 4
    xs, ys = zip(*[(np.array(x), np.array(y)) for x, y in loader])
    x, y = np.concatenate(xs), np.concatenate(ys)
    assert x.shape == (30, 2, 3) and x.dtype == np.uint8
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, np.arange(30))
    np.testing.assert_array_equal(x, np.broadcast_to(np.arange(30, dtype=np.uint8)[:, None, None], (30, 2, 3)))


@pytest.mark.parametrize("workers", [0, 2])
def test_getitem_exception_propagates_with_index(workers):
    loader = pinloader.DataLoader(Squares(fail_at=13), batch_size=4, num_workers=workers, output="numpy")
    with pytest.raises(ValueError, match="boom at 13") as e:
        list(loader)
    notes = "\n".join(getattr(e.value, "__notes__", [])) or str(e.value.__cause__ or "")
    assert "dataset[13]" in notes
    frames = [f.name for f in traceback.extract_tb(e.value.__traceback__)]
    if workers == 0:
        assert "__getitem__" in frames  # the dataset's own frame is kept
    else:  # a worker process: its traceback, as text in the note (as torch's)
        assert "in worker" in notes and "in __getitem__" in notes and 'raise ValueError("boom at %d" % i)' in notes
    # The failed batch ended that epoch; the next iteration loads the next
    # epoch, which fails at the same sample again.
    with pytest.raises(ValueError, match="boom at 13"):
        list(loader)


def test_shape_mismatch_names_sample():
    loader = pinloader.DataLoader(Squares(bad_shape_at=5), batch_size=4, output="numpy")
    with pytest.raises(ValueError) as e:
        list(loader)
    assert "dataset[5]" in str(e.value) and "(3, 3)" in str(e.value) and "(2, 3)" in str(e.value)


class Dicts:
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return {"x": np.arange(4, dtype=np.float32) + i, "y": np.int16(-i)}


def test_dict_and_bare_samples():
    (b,) = list(pinloader.DataLoader(Dicts(), batch_size=6, output="numpy"))
    assert set(b) == {"x", "y"}
    np.testing.assert_array_equal(b["x"], np.arange(4, dtype=np.float32)[None] + np.arange(6)[:, None])
    assert b["y"].dtype == np.int16 and b["y"].tolist() == [0, -1, -2, -3, -4, -5]
    bare = [np.arange(3, dtype=np.float64) * i for i in range(5)]
    (t,) = list(pinloader.DataLoader(bare, batch_size=5, output="numpy"))
    np.testing.assert_array_equal(t, np.stack(bare))


def test_non_contiguous_and_bytes_samples():
    base = np.arange(40, dtype=np.int32).reshape(4, 10)
    views = [base[:, i::5] for i in range(5)]  # strided [4, 2]
    (t,) = list(pinloader.DataLoader(views, batch_size=5, num_workers=2, output="numpy"))
    np.testing.assert_array_equal(t, np.stack(views))
    # bytes are strings to default_collate: a batch is a list of them.
    raw = [bytes([i]) * 7 for i in range(9)]
    got = [x for b in pinloader.DataLoader(raw, batch_size=4, output="numpy") for x in b]
    assert got == raw


def test_unsupported_sample_is_type_error():
    # As torch: default_collate refuses it when the batch is made.
    with pytest.raises(TypeError, match="default_collate"):
        list(pinloader.DataLoader([object()], batch_size=1))
    # An empty dataset is an empty epoch, as torch's (test_regressions_engine).
    empty = pinloader.DataLoader([], batch_size=1)
    assert (len(empty), list(empty)) == (0, [])


GC_IN_WORKER = r"""
import gc, threading, time, weakref
import numpy as np
import pinloader

gc.disable()
go = threading.Event()
class DS:
    def __len__(self):
        return 1000
    def __getitem__(self, i):
        if i == 30:  # a worker prefetching: the GC runs here, on that worker
            go.wait(10)
            gc.collect()
        return np.full(4, i, np.int64)
class Owner:
    pass
ds = DS()
alive = weakref.ref(ds)
o = Owner()
o.loader = pinloader.DataLoader(ds, batch_size=10, num_workers=2, output="numpy", worker_mode="thread")
o.loader.owner = o  # a cycle: only the GC frees the loader
it = iter(o.loader)
next(it)
del it, o, ds
go.set()
for _ in range(100):  # the loader is destroyed, and the dataset freed, soon
    if alive() is None:
        break
    time.sleep(0.05)
print("freed" if alive() is None else "alive")
"""


def test_loader_collected_inside_its_own_getitem():
    # The GC, run by a worker inside __getitem__, frees the loader: it used
    # to join that very worker and free the dataset under it (use after free).
    import os
    import subprocess
    import sys

    # Under an ASan build LeakSanitizer would fail the child for the
    # interpreter's own allocations at exit; use-after-free still aborts it.
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    r = subprocess.run([sys.executable, "-c", GC_IN_WORKER], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "freed"


class Interrupting(Squares):
    def __getitem__(self, i):
        if i == self.fail_at:
            raise KeyboardInterrupt("ctrl-c in getitem")
        return super().__getitem__(i)


def test_keyboard_interrupt_from_getitem_loses_nothing():
    # num_workers=0: __getitem__ runs in the consumer's thread, where Ctrl-C
    # lands. The batch is given back unfilled and read again at the next
    # next() (issue 17, item 6), on this iterator or a new one.
    ds = Interrupting(n=16, fail_at=6)
    loader = pinloader.DataLoader(ds, batch_size=4, output="numpy")
    it = iter(loader)
    assert next(it)[1].tolist() == [0, 1, 2, 3]
    with pytest.raises(KeyboardInterrupt):
        next(it)
    assert loader.epoch == 0
    ds.fail_at = None
    assert next(it)[1].tolist() == [4, 5, 6, 7]
    ds.fail_at = 9
    with pytest.raises(KeyboardInterrupt):
        next(it)
    ds.fail_at = None
    rest = list(loader)  # a new iterator resumes the interrupted epoch
    assert [y.tolist() for _, y in rest] == [[8, 9, 10, 11], [12, 13, 14, 15]]
    assert loader.epoch == 1


class InterruptingAtMost(Squares):
    """Raises KeyboardInterrupt at fail_at, at most `times` times: a loader
    that retries the read instead of raising ends in RuntimeError, not in a
    hang."""

    def __init__(self, times, **kw):
        super().__init__(**kw)
        self.times, self.raised = times, 0

    def __getitem__(self, i):
        if i == self.fail_at:
            if self.raised >= self.times:
                raise RuntimeError("the read was retried %d times" % self.raised)
            self.raised += 1
            raise KeyboardInterrupt("ctrl-c in getitem %d" % self.raised)
        return super().__getitem__(i)


@pytest.mark.parametrize("disposition", ["ignored", "own handler"])
def test_keyboard_interrupt_from_getitem_whatever_sigint_does(disposition):
    # A background job (nohup, `cmd &`) starts with SIGINT ignored; a trainer
    # may install a handler that only sets a flag. A KeyboardInterrupt raised
    # in __getitem__ (num_workers=0) still reaches next() as itself, once,
    # and the batch is read again at the next next(). It was re-signalled
    # (PyErr_SetInterrupt), which is lost there: the read was retried forever.
    import signal

    calls = []
    old = signal.signal(signal.SIGINT, signal.SIG_IGN if disposition == "ignored"
                        else lambda sig, frame: calls.append(sig))
    try:
        ds = InterruptingAtMost(1000, n=16, fail_at=6)
        loader = pinloader.DataLoader(ds, batch_size=4, output="numpy")
        it = iter(loader)
        assert next(it)[1].tolist() == [0, 1, 2, 3]
        with pytest.raises(KeyboardInterrupt, match="^ctrl-c in getitem 1$") as e:
            next(it)
        assert "__getitem__" in "".join(traceback.format_tb(e.value.__traceback__))
        assert ds.raised == 1 and calls == []
        ds.fail_at = None
        assert [y.tolist() for _, y in it] == [[4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
        assert loader.epoch == 1
    finally:
        signal.signal(signal.SIGINT, old)


def test_getitem_raising_pinloader_error():
    class Raises(Squares):
        def __getitem__(self, i):
            if i == 5:
                raise pinloader.Error("no status here")
            return super().__getitem__(i)

    loader = pinloader.DataLoader(Raises(n=8), batch_size=4, output="numpy")
    with pytest.raises(pinloader.Error, match="no status here"):
        list(loader)  # itself, not an AttributeError on .status
    # As torch's iterator, it would go on past the failed batch: the last
    # of epoch 0, whose end comes next.
    assert loader.epoch == 0
    next(iter(loader))
    assert loader.epoch == 1  # the next iteration loads epoch 1, not 2


def test_dataset_read_reraises_getitem_exception():
    # ds[i] of a view over a Python dataset reads through its __getitem__.
    view = pinloader.datasets.to_float32(Squares(n=4, fail_at=2), "0", 0.5)
    np.testing.assert_array_equal(view[1][0], np.full((2, 3), 0.5, np.float32))
    with pytest.raises(ValueError, match="boom at 2") as e:
        view[2]
    assert "dataset[2]" in "\n".join(getattr(e.value, "__notes__", []))


class Tensors:
    """Sample i: (float32 [2, 3] tensor of i, int label i), with the odd
    ones the short path must hand to the general one: a transposed
    (non-contiguous) tensor at 3, a numpy int64 label at 4, a float64
    tensor at bad_dtype_at, one that requires grad at grad_at."""

    def __init__(self, bad_dtype_at=None, grad_at=None):
        self.bad_dtype_at, self.grad_at = bad_dtype_at, grad_at

    def __len__(self):
        return 8

    def __getitem__(self, i):
        import torch

        x = torch.full((2, 3), float(i))
        if i == 3:
            x = torch.full((3, 2), float(i)).t()
        if i == self.bad_dtype_at:
            x = x.double()
        if i == self.grad_at:
            x = x.clone().requires_grad_(True)
        return x, (np.int64(i) if i == 4 else i)


@pytest.mark.parametrize("workers", [0, 2])
def test_tensor_samples_short_path_and_its_fallbacks(workers):
    pytest.importorskip("torch")
    loader = pinloader.DataLoader(Tensors(), batch_size=4, num_workers=workers, output="numpy")
    xs, ys = zip(*[(np.array(x), np.array(y)) for x, y in loader])
    x, y = np.concatenate(xs), np.concatenate(ys)
    assert x.dtype == np.float32 and y.dtype == np.int64
    np.testing.assert_array_equal(x, np.broadcast_to(np.arange(8, dtype=np.float32)[:, None, None], (8, 2, 3)))
    np.testing.assert_array_equal(y, np.arange(8))
    loader.close()
    for bad, what in ((Tensors(bad_dtype_at=5), "float64 (2, 3)"), (Tensors(grad_at=6), "Tensor")):
        loader = pinloader.DataLoader(bad, batch_size=4, num_workers=workers, output="numpy")
        with pytest.raises(ValueError) as e:
            list(loader)
        text = str(e.value) + "\n".join(getattr(e.value, "__notes__", []))
        sample = 5 if bad.bad_dtype_at else 6
        assert "dataset[%d]" % sample in text and what in text and "float32 (2, 3)" in text, text
        loader.close()
