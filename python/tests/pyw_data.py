"""Datasets for the worker-process tests, in a module of their own so that
spawn and forkserver workers can import them by name."""
import collections
import os
import random
import signal
import time

import numpy as np

Pair = collections.namedtuple("Pair", "a b")


class Mixed:
    """Every leaf kind default_collate knows, nested."""

    def __init__(self, n=23):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch

        return {
            "img": np.full((3, 4, 5), i % 251, dtype=np.uint8),
            "f32": torch.full((2,), float(i) / 3, dtype=torch.float32),
            "label": i,
            "score": i / 7.0,
            "flag": i % 3 == 0,
            "name": "s%d" % i,
            "pair": Pair(np.int16(-i), [np.float64(i), i * 2]),
            "mask": np.arange(4) < (i % 5),
        }


class Indexed:
    """Sample i: (int64 [3] filled with i, i)."""

    def __init__(self, n=100, fail_at=None, exc=ValueError, sleep=0.0):
        self.n, self.fail_at, self.exc, self.sleep = n, fail_at, exc, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        if self.fail_at is not None and i in (self.fail_at if isinstance(self.fail_at, (set, list, tuple))
                                              else (self.fail_at,)):
            raise self.exc("failed at %d" % i)
        return np.full(3, i, dtype=np.int64), i


class Counted:
    """Sample i: (int64 [2] filled with i, i); counts its reads of each
    index in an anonymous shared mapping (forked workers and threads write
    the same counters; nothing in /dev/shm, no file descriptor). The
    increment holds a lock: at an epoch's end two workers may read the
    same index at once (the epoch's last batches and the next epoch's
    first), and `c[i] += 1` is a read, an add and a write (two of them at
    once lost a read: a wait for the exact counts then never ended)."""

    def __init__(self, n=64):
        import mmap
        import multiprocessing

        self.n = n
        self.reads = mmap.mmap(-1, 8 * n, flags=mmap.MAP_SHARED)
        self.lock = multiprocessing.get_context("fork").Lock()  # fork workers only

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        c = np.frombuffer(self.reads, dtype=np.int64)
        with self.lock:
            c[i] += 1
        return np.full(2, i, dtype=np.int64), i

    def counts(self):
        with self.lock:
            return np.frombuffer(self.reads, dtype=np.int64).tolist()


class FailOnce:
    """Sample i: (int64 [2] filled with i, i); sample `bad` raises
    ValueError on its first read only (a flag in an anonymous shared
    mapping: forked workers see it). Which read is the first is the
    caller's to make certain: two batches in flight at once that both hold
    `bad` race for it. widen: seconds the first read of `bad` waits before
    it takes the flag, for another read of it to come first if one can (a
    race made likely, for the tests that show there is none)."""

    def __init__(self, n, bad, widen=0.0):
        import mmap
        import multiprocessing

        self.n, self.bad, self.widen = n, bad, widen
        self.flag = mmap.mmap(-1, 16, flags=mmap.MAP_SHARED)  # failed, arrivals
        self.lock = multiprocessing.get_context("fork").Lock()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            f = np.frombuffer(self.flag, dtype=np.int64)
            with self.lock:
                arrival = int(f[1])
                f[1] += 1
            if arrival == 0 and self.widen:
                time.sleep(self.widen)
            with self.lock:
                first = f[0] == 0
                f[0] = 1
            if first:
                raise ValueError("bad sample %d" % i)
        return np.full(2, i, dtype=np.int64), i


class TorchRandom:
    """Sample i: (int64 [2] filled with i, a draw of torch's global
    generator), as a torchvision random transform draws; 1 ms a sample."""

    def __len__(self):
        return 83

    def __getitem__(self, i):
        import torch

        time.sleep(0.001)
        return np.full(2, i, dtype=np.int64), float(torch.rand(()))


class GlobalRandom:
    """Augmentation from the global generators (as most user code does)."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        import torch

        return i, random.random(), float(np.random.rand()), float(torch.rand(()))


class TorchInWorker:
    """Sample i: (i, whether torch was imported in this process before the
    sample was read, the worker's torch thread count, a draw of torch's
    global generator, get_worker_info()'s id). torch is imported here only:
    a spawned worker meets it first inside __getitem__."""

    def __len__(self):
        return 16

    def __getitem__(self, i):
        import sys

        had = "torch" in sys.modules
        import torch

        wi = torch.utils.data.get_worker_info()
        return (i, int(had), torch.get_num_threads(), float(torch.rand(())),
                -1 if wi is None else wi.id)


class FirstRaisesTorchLate:
    """Sample 0 raises; sample i > 0 is (i, a draw of torch's global
    generator), torch imported here only."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == 0:
            raise ValueError("sample 0 is bad")
        import torch

        return np.int64(i), float(torch.rand(()))


class NoTorch:
    """Sample i: (i, whether torch is imported in the process reading it)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        import sys

        return np.int64(i), np.int64("torch" in sys.modules)


class WorkerInfo:
    def __len__(self):
        return 12

    def __getitem__(self, i):
        import torch

        wi = torch.utils.data.get_worker_info()
        return i, -1 if wi is None else wi.id, -1 if wi is None else wi.num_workers, \
            -1 if wi is None else wi.seed % (2 ** 62)


class PerSample:
    """Uses pinloader.sample_rng(): the same per (seed, epoch, index)."""

    def __len__(self):
        return 30

    def __getitem__(self, i):
        import pinloader

        return i, float(pinloader.sample_rng().random())


class Killer:
    """Sample `kill_at` ends its worker: by a signal or os._exit."""

    def __init__(self, n=64, kill_at=20, how="kill"):
        self.n, self.kill_at, self.how = n, kill_at, how

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.kill_at:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif self.how == "segv":
                import ctypes

                ctypes.string_at(0)
            else:
                os._exit(7)
        return np.full(2, i, dtype=np.int32)


class Blocks:
    """A read in a worker writes one byte to `fd` (a pipe's end: the test
    reads it, the event that a worker is inside __getitem__), then never
    ends (the worker must be stopped by a kill). The loader's probe, in the
    process that made the dataset, reads normally."""

    def __init__(self, n, fd):
        self.n, self.fd, self.owner = n, fd, os.getpid()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if os.getpid() != self.owner:
            os.write(self.fd, b"x")
            while True:
                time.sleep(3600)
        return np.int64(i)


class Stuck:
    def __init__(self, stuck_at=5):
        self.stuck_at = stuck_at

    def __len__(self):
        return 40

    def __getitem__(self, i):
        if i == self.stuck_at:
            time.sleep(3600)
        return np.int64(i)


def pad_collate(batch):
    """Pads variable-length sequences to the longest of the batch."""
    import torch

    n = max(len(s) for s, _ in batch)
    out = torch.zeros(len(batch), n, dtype=torch.int64)
    for k, (s, _) in enumerate(batch):
        out[k, : len(s)] = torch.as_tensor(s)
    return out, torch.tensor([y for _, y in batch])


class Sequences:
    def __len__(self):
        return 17

    def __getitem__(self, i):
        return np.arange(1 + i % 6, dtype=np.int64) + i, i


def init_record(worker_id):
    import torch

    wi = torch.utils.data.get_worker_info()
    assert wi is not None and wi.id == worker_id
    wi.dataset.init_seen = worker_id


class InitSeen:
    init_seen = -1

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return i, self.init_seen



class ParentHasTorch:
    """Sample i: int64 [1], 1 if the worker's parent process has torch's
    library mapped (/proc/PPID/maps): for a forkserver worker, whether the
    server imported torch before forking it."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        with open("/proc/%d/maps" % os.getppid()) as f:
            return np.array([int("libtorch" in f.read())], dtype=np.int64)


def seed_nothing(worker_id):
    """A worker_init_fn whose module names no torch."""
    return worker_id
