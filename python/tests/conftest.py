"""Helpers for the pinloader Python tests: small data files written with numpy."""
import gzip
import signal
import struct

import numpy as np
import pytest

# PyTorch's own test_dataloader.py is run by test_torch_suite.py through
# torch_suite/run.py (pinloader's DataLoader substituted, in child processes):
# collected directly it would test torch's DataLoader.
collect_ignore = ["torch_suite"]

# A background job (`scripts/test.sh &`, nohup, some CI runners) starts with
# SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the
# Ctrl-C tests, which send real SIGINTs, would fail or wait forever for an
# interrupt that never comes. Take SIGINT back, as an interactive run has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def write_idx(path, array):
    """An IDX file (MNIST format) holding `array` (uint8); .gz compresses."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    head = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(">%dI" % array.ndim, *array.shape)
    data = head + array.tobytes()
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(data)
    return str(path)


def write_cifar(path, images, labels):
    """A CIFAR-10 binary batch: per record 1 label byte + 3072 CHW bytes."""
    rec = np.concatenate([labels.reshape(-1, 1).astype(np.uint8), images.reshape(len(images), -1)], axis=1)
    with open(path, "wb") as f:
        f.write(rec.astype(np.uint8).tobytes())
    return str(path)


@pytest.fixture
def mnist_like(tmp_path):
    """(images path, labels path, images, labels): 37 images of 5x4."""
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(37, 5, 4), dtype=np.uint8)
    labels = rng.integers(0, 10, size=37, dtype=np.uint8)
    ip = write_idx(tmp_path / "images-idx3-ubyte.gz", images)
    lp = write_idx(tmp_path / "labels-idx1-ubyte", labels)
    return ip, lp, images, labels


@pytest.fixture
def indexed_records(tmp_path):
    """A Records dataset whose int64 field `idx` is the sample index, plus a
    uint8 [3] payload: lets tests read the order of delivery."""
    import pinloader

    n = 100
    dt = np.dtype([("pad", "u1", 3), ("payload", "u1", 3), ("idx", "<i8")])
    rec = np.zeros(n, dtype=dt)
    rec["idx"] = np.arange(n)
    rec["payload"] = (np.arange(n)[:, None] * 3 + np.arange(3)) % 251
    path = tmp_path / "indexed.bin"
    with open(path, "wb") as f:
        f.write(b"HDR")
        f.write(rec.tobytes())
    fields = [("idx", "int64", (), 6), ("payload", "uint8", (3,), 3)]
    return pinloader.datasets.Records(str(path), 3, dt.itemsize, fields), rec
