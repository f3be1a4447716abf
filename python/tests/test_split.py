"""The first round of an iteration split over idle workers (split.c,
read_split): a batch of more than 64 samples goes out in 64-sample chunks,
each to the next idle worker, and the global generators restart at every
chunk boundary, split or not (_seeding.seed_chunk). What is checked: the
split happens, it changes no sample (the same draws with 1, 2, 3 and 5
workers, and the exact draws that seed_chunk gives), and a chunk's
exception or death is reported as a whole batch's is, nothing hanging and
the next iteration whole."""
import os
import random
import re
import signal
import time

import numpy as np
import pytest

import pinloader
from pinloader import _seeding, _worker

torch = pytest.importorskip("torch")

N, BATCH = 600, 256  # batches of 256, 256 and 88: 4, 4 and 2 chunks


def draws():
    """What a sample draws from the three global generators, in order."""
    return (np.random.randint(0, 1 << 30, size=3).tolist()
            + [random.getrandbits(30), int(torch.randint(0, 1 << 30, (1,)).item())])


class Draws:
    """Each sample: its draws, its index, the worker that read it and that
    worker's base seed (torch's WorkerInfo seed is base seed + id).

    A worker's reads wait until `need` workers have begun reading (a flag
    each in a shared mapping): the first chunk's worker waits for a second
    worker to take a chunk, so that batch 0 is split over two of them
    however late the second one starts (a loaded machine started it after
    the first had read the whole batch: was a 0.5 ms sleep a sample). The
    split is what is waited for: a loader that did not split would give
    the second worker batch 1, and batch 0 would be one worker's."""

    def __init__(self, need=1):
        import mmap

        self.need = need
        self.begun = mmap.mmap(-1, 64, flags=mmap.MAP_SHARED)  # fork workers write it

    def __len__(self):
        return N

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()  # None: the loader's probe
        wid, base = (info.id, info.seed - info.id) if info is not None else (-1, 0)
        if info is not None and i != 0:
            # Not sample 0: the first next() has one worker read it alone
            # (the samples' layout), before any chunk goes out.
            begun = np.frombuffer(self.begun, dtype=np.uint8)
            begun[info.id] = 1  # each worker its own byte: no lock
            while int(begun.sum()) < self.need:
                time.sleep(0.0005)
        return np.array(draws(), dtype=np.int64), np.int64(i), np.int64(wid), np.int64(base)


def run(workers, epochs=1):
    torch.manual_seed(4)
    loader = pinloader.DataLoader(Draws(min(2, workers)), batch_size=BATCH, num_workers=workers,
                                  output="numpy", multiprocessing_context="fork", in_order=False)
    out = [[tuple(np.asarray(f) for f in b) for b in loader] for _ in range(epochs)]
    loader.close()
    return out


def expected(base_seed, epoch, batch, n):
    """The draws of a batch of n samples as seed_chunk makes them."""
    rows = []
    for k in range(n):
        if k % _worker.CHUNK == 0:
            _seeding.seed_chunk(base_seed, epoch, batch, k // _worker.CHUNK)
        rows.append(draws())
    return np.array(rows, dtype=np.int64)


def test_first_round_is_split_and_changes_no_sample():
    assert _worker.CHUNK == 64
    runs = {w: run(w, epochs=2) for w in (1, 2, 3, 5)}
    ref = runs[1]
    for w, r in runs.items():
        for e in range(2):
            assert len(r[e]) == 3
            for a, b in zip(ref[e], r[e]):
                assert np.array_equal(a[1], b[1])  # the same samples, in order
                assert np.array_equal(a[0], b[0]), (w, e)  # the same draws
    # The split happened: batch 0 of a run with idle workers was read by
    # more than one of them (a batch is 4 chunks).
    for w in (2, 3, 5):
        assert len(set(runs[w][0][0][2].tolist())) >= 2, w
    assert set(runs[1][0][0][2].tolist()) == {0}
    # The exact draws: seed_chunk(base seed, epoch, batch, chunk) at each
    # 64 samples, whichever worker read the chunk.
    base = int(ref[0][0][3][0])
    for k, b in enumerate(ref[0]):
        assert np.array_equal(b[0], expected(base, 0, k, len(b[1]))), k
    assert not np.array_equal(ref[0][0][0], ref[1][0][0])  # a new epoch draws anew


class FailsAt:
    """Sample `at` raises, or kills its worker."""

    def __init__(self, at, how):
        self.at, self.how = at, how

    def __len__(self):
        return N

    def __getitem__(self, i):
        time.sleep(0.0005)
        if i == self.at:
            if self.how == "raise":
                raise ValueError("sample %d is bad" % i)
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
        return np.full(2, i, dtype=np.int32)


def test_exception_in_a_chunk_is_the_batch_error_and_the_next_iteration_is_whole():
    ds = FailsAt(150, "raise")  # chunk 2 of batch 0
    loader = pinloader.DataLoader(ds, batch_size=BATCH, num_workers=3, output="numpy",
                                  in_order=False)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="sample 150 is bad") as e:
        list(loader)
    assert time.monotonic() - t0 < 30
    assert "dataset[150]" in "\n".join(getattr(e.value, "__notes__", []))
    ds.at = None  # the workers' copies still fail at 150: a new loader
    loader.close()
    loader = pinloader.DataLoader(ds, batch_size=BATCH, num_workers=3, output="numpy")
    assert [int(v) for b in loader for v in np.asarray(b)[:, 0]] == list(range(N))
    loader.close()


def test_worker_killed_in_a_chunk_names_it_and_the_chunk():
    loader = pinloader.DataLoader(FailsAt(150, "kill"), batch_size=BATCH, num_workers=3,
                                  output="numpy", in_order=False)
    t0 = time.monotonic()
    pids = None
    with pytest.raises(pinloader.Error) as e:
        it = iter(loader)
        pids = loader.worker_pids
        list(it)
    assert time.monotonic() - t0 < 30  # no hang
    msg = str(e.value)
    assert "SIGKILL" in msg and "batch 0 of epoch 0" in msg, msg
    assert "samples 128, 129, 130" in msg and "(64 samples)" in msg, msg  # the chunk it held
    w, pid = map(int, re.search(r"worker (\d+) \(pid (\d+)\)", msg).groups())
    assert pid == pids[w]
    # The next iteration starts new workers and loads the next epoch whole
    # (the dataset object in the parent still kills at 150: a new one).
    loader.close()
    loader = pinloader.DataLoader(FailsAt(None, "kill"), batch_size=BATCH, num_workers=3,
                                  output="numpy")
    assert [int(v) for b in loader for v in np.asarray(b)[:, 0]] == list(range(N))
    loader.close()


def test_no_split_where_a_chunk_could_not_say_everything():
    """A collate_fn sees the whole batch; strings travel pickled per batch;
    in_order=True is torch's one-worker-per-batch. Each is read by one
    worker a batch."""

    class Named(Draws):
        def __getitem__(self, i):
            x = super().__getitem__(i)
            return x[1], x[2], "s%d" % i

    torch.manual_seed(4)
    for ds, kw in ((Draws(), dict(in_order=True)), (Named(), dict(in_order=False)),
                   (Draws(), dict(collate_fn=torch.utils.data.default_collate, in_order=False))):
        loader = pinloader.DataLoader(ds, batch_size=BATCH, num_workers=3, **kw)
        for b in loader:
            who = b[1] if isinstance(ds, Named) else b[2]
            assert len(set(np.asarray(who).tolist())) == 1, kw
        loader.close()


class Logged:
    """Each read appends the sample's index to a file (one line, O_APPEND)."""

    def __init__(self, path, n=512):
        self.path, self.n = path, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if torch.utils.data.get_worker_info() is not None:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, b"%d\n" % i)
            os.close(fd)
        time.sleep(0.001)
        return np.full(2, i, dtype=np.int32)


def reads_of(path):
    return [int(l) for l in open(path)] if os.path.exists(path) else []


def test_an_explicit_order_reads_nothing_before_iter(tmp_path):
    """shuffle=True without seed= is torch's RandomSampler, an order given
    at iter(): no batch of the C loader's own order is read before it."""
    path = str(tmp_path / "reads")
    torch.manual_seed(0)
    loader = pinloader.DataLoader(Logged(path), batch_size=BATCH, num_workers=2, shuffle=True,
                                  output="numpy")
    time.sleep(0.3)  # the loader's own first batches would be read by now
    assert reads_of(path) == []
    it = iter(loader)
    first = np.asarray(next(it))[:, 0].tolist()
    loader.close()
    assert set(first) <= set(reads_of(path)) and len(first) == BATCH


def test_an_abandoned_epoch_is_not_read_further(tmp_path):
    """A break after an epoch's first batch, then iter(): the next epoch's
    order restarts the stream (pl_loader_set_order). The batches begun for
    the abandoned epoch are not read beyond the chunks already out (one per
    worker, 64 samples), where they used to take a whole batch from every
    worker. A sampler of the user's: no early order for the next epoch. Balanced
    workers (in_order=False): torch's take whole batches."""
    path = str(tmp_path / "reads")
    ds = Logged(path, n=8 * BATCH)
    sampler = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(1))
    loader = pinloader.DataLoader(ds, batch_size=BATCH, num_workers=2, sampler=sampler,
                                  output="numpy", in_order=False)
    for b in loader:
        first = sorted(int(v) for v in np.asarray(b)[:, 0])
        break
    got = sorted(int(v) for b in loader for v in np.asarray(b)[:, 0])
    loader.close()
    assert got == list(range(8 * BATCH))
    extra = len(reads_of(path)) - 8 * BATCH - BATCH  # beyond the next epoch and batch 0
    assert 0 <= extra <= 2 * _worker.CHUNK, extra  # was 4 * BATCH: the prefetch depth
    assert len(first) == BATCH
