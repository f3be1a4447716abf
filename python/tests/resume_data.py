"""Samplers and datasets with state (the StatefulDataLoader protocol) and
without, for the resume tests (module level: spawn workers import them)."""
import os

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info


class StatefulPerm:
    """A sampler with state of its own, as torchdata's: a permutation of
    (seed, epoch), counting what it yielded; load_state_dict() makes the
    next iteration skip what was yielded."""

    def __init__(self, n, seed=0):
        self.n, self.seed, self.epoch, self.yielded, self.skip = n, seed, 0, 0, None

    def __len__(self):
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        perm = torch.randperm(self.n, generator=g).tolist()
        start, self.skip = self.skip or 0, None
        self.yielded = start
        for i in perm[start:]:
            self.yielded += 1
            yield i
        self.epoch += 1
        self.yielded = 0

    def state_dict(self):
        return {"epoch": self.epoch, "yielded": self.yielded}

    def load_state_dict(self, s):
        self.epoch, self.skip = s["epoch"], s["yielded"]


class StatefulBatches:
    """A batch sampler with state: uneven batches (sizes 1, 2, 3, 1...) of
    a permutation; its state is the permutation's and the batch count."""

    def __init__(self, n, seed=0):
        self.perm, self.batches, self.skip = StatefulPerm(n, seed), 0, None

    def __len__(self):
        return -(-self.perm.n // 2)

    def __iter__(self):
        self.batches, self.skip = self.skip or 0, None
        batch = []
        for i in self.perm:
            batch.append(i)
            if len(batch) == self.batches % 3 + 1:
                self.batches += 1
                yield batch
                batch = []
        if batch:
            self.batches += 1
            yield batch
        self.batches = 0

    def state_dict(self):
        return {"perm": self.perm.state_dict(), "batches": self.batches}

    def load_state_dict(self, s):
        self.perm.load_state_dict(s["perm"])
        self.skip = s["batches"]


class Plain:
    """A sampler without state (a user's own type)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(range(self.n - 1, -1, -1))


class _ShardIter:
    """An iterator with state: worker w's items w, w + W, ..."""

    def __init__(self, items):
        self.items, self.i = items, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= len(self.items):
            raise StopIteration
        self.i += 1
        return self.items[self.i - 1]

    def state_dict(self):
        return {"i": self.i}

    def load_state_dict(self, s):
        self.i = s["i"]


def _share():
    info = get_worker_info()
    return (info.id, info.num_workers) if info is not None else (0, 1)


class Shards(IterableDataset):
    """An IterableDataset whose iterator has state; the workers' shares
    differ in length (they run out at different batches). `pipe`: a
    descriptor each item read writes a byte to (prefetch made visible)."""

    def __init__(self, n, pipe=None):
        self.n, self.pipe = n, pipe

    def __iter__(self):
        w, nw = _share()
        return _ShardIter(_Items(range(w, self.n, nw), self.pipe))


class _Items(list):
    def __init__(self, r, pipe):
        super().__init__(np.int64(i) for i in r)
        self.pipe = pipe

    def __getitem__(self, i):
        if self.pipe is not None:
            os.write(self.pipe, b"x")
        return list.__getitem__(self, i)


class OwnState(IterableDataset):
    """An IterableDataset that is its own state (state_dict on the
    dataset, a generator for __iter__)."""

    def __init__(self, n):
        self.n, self.start, self.cur = n, None, None

    def __iter__(self):
        w, nw = _share()
        first = self.start if self.start is not None else w
        self.start = None
        self.cur = first
        for i in range(first, self.n, nw):
            self.cur = i + nw
            yield np.int64(i)

    def state_dict(self):
        return {"cur": self.cur}

    def load_state_dict(self, s):
        self.start = s["cur"]


class NoState(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        w, nw = _share()
        return iter([np.int64(i) for i in range(w, self.n, nw)])


class Piped:
    """A map-style dataset writing a byte to `pipe` per sample read."""

    def __init__(self, n, pipe):
        self.n, self.pipe = n, pipe

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        os.write(self.pipe, b"x")
        return np.int64(i)
