"""Reliability regressions through Python (issue 17): a data file truncated
while a DataLoader runs raises pinloader.Error naming the file (no bus
error), with 0, 1 and 2 workers; a FIFO is refused at once; Dataset[i]
reads more than 64 fields; to_float32 refuses a scale that is not finite."""
import math
import os

import numpy as np
import pytest

import pinloader
from conftest import write_cifar


def _cifar(path, n):
    rng = np.random.default_rng(5)
    return write_cifar(path, rng.integers(0, 256, (n, 3, 32, 32)), rng.integers(0, 10, n))


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_truncated_during_iteration(tmp_path, workers):
    path = _cifar(tmp_path / "d.bin", 2000)
    size = os.path.getsize(path)
    loader = pinloader.DataLoader(pinloader.datasets.CIFAR10([path]), batch_size=50,
                                  num_workers=workers, output="numpy")
    it = iter(loader)
    next(it)
    os.truncate(path, 4096)
    with pytest.raises(pinloader.Error) as e:
        for _ in it:
            pass
    want = "%s: the file changed while it was being read (it is 4096 bytes now, was %d)" % (path, size)
    assert want in str(e.value)
    loader.close()


def test_fifo_is_refused(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    with pytest.raises(pinloader.Error, match="not a regular file \\(a FIFO\\)"):
        pinloader.datasets.CIFAR10([fifo])


def test_dataset_getitem_many_fields(tmp_path):
    n, nf = 6, 70
    data = np.arange(n * nf, dtype=np.uint8).reshape(n, nf)
    path = tmp_path / "r.bin"
    path.write_bytes(data.tobytes())
    ds = pinloader.datasets.Records([str(path)], 0, nf, [("f%d" % i, "uint8", (), i) for i in range(nf)])
    sample = ds[4]
    assert len(sample) == nf
    assert [int(x) for x in sample] == list(data[4])


@pytest.mark.parametrize("scale", [math.inf, -math.inf, math.nan])
def test_to_float32_rejects_non_finite(tmp_path, scale):
    ds = pinloader.datasets.CIFAR10([_cifar(tmp_path / "c.bin", 3)])
    with pytest.raises(pinloader.Error, match="is not a finite number"):
        pinloader.datasets.to_float32(ds, "image", scale)


STUCK = r"""
import threading
import numpy as np
import pinloader
class DS:
    def __len__(self): return 8
    def __getitem__(self, i):
        if i == 3:
            threading.Event().wait()  # never returns
        return np.full(4, i, np.uint8)
loader = pinloader.DataLoader(DS(), batch_size=2, num_workers=1, timeout=0.3, output="numpy")
it = iter(loader)
print("first", next(it).tolist())
for k in range(2):
    try:
        next(it if k == 0 else iter(loader))
        print("no error")
    except pinloader.Error as e:
        print("error", e)
loader.close()
print("closed")
"""


def test_stuck_getitem_close_and_exit():
    """A __getitem__ that never returns: PL_TIMEOUT; a Python dataset runs in
    worker processes, and the stuck one is killed and replaced
    (python/README.md), so the next epoch loads; close() returns and the
    interpreter exits. (Native C callbacks stuck in threads: test_reliability.c,
    'all N workers are stuck'.)"""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", STUCK], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "first [[0, 0, 0, 0], [1, 1, 1, 1]]"
    # torch's words first ("DataLoader timed out after 0.3 seconds"), then which sample
    assert lines[1].startswith("error DataLoader timed out after 0.3 seconds: sample 3: still "
                               "loading after ") and "(timeout 0.3 s)" in lines[1]
    assert lines[2] == "no error"
    assert lines[3] == "closed"
