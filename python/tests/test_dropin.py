"""pinloader.DataLoader as a drop-in for torch's: the dataset is read only
where and when torch reads it (in the workers, at the first next()), the
workers are seeded and assigned batches as torch's, and start-up, the
worker count and the open-files limit behave as torch's. torch 1.13 is the
oracle: each test runs the same dataset through both."""
import os
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info  # noqa: E402

import pinloader  # noqa: E402

PARENT = os.getpid()


def as_lists(loader):
    return [b.tolist() if hasattr(b, "tolist") else b for b in loader]


class NotInParent(Dataset):
    """Raises when read in the process that made the loader."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        if os.getpid() == PARENT:
            raise AssertionError("dataset[%d] read in the parent" % i)
        return torch.tensor([i])


@pytest.mark.parametrize("shuffle", [False, True])
def test_dataset_never_read_in_the_parent_with_workers(shuffle):
    def run(cls):
        torch.manual_seed(3)
        return as_lists(cls(NotInParent(), batch_size=2, shuffle=shuffle, num_workers=2))

    assert run(pinloader.DataLoader) == run(DataLoader)


class Counting(Dataset):
    def __init__(self):
        self.reads = 0

    def __len__(self):
        return 4

    def __getitem__(self, i):
        self.reads += 1
        return i


def test_num_workers_0_reads_nothing_at_construction():
    ds = Counting()
    loader = pinloader.DataLoader(ds, batch_size=2)
    assert ds.reads == 0
    assert len(loader) == 2 and ds.reads == 0
    assert as_lists(loader) == as_lists(DataLoader(Counting(), batch_size=2))
    assert ds.reads == 4  # each sample once: the first is not read twice


class InfoInIter(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        assert info is not None, "get_worker_info() is None in __iter__"
        return iter(range(info.id, 6, info.num_workers))


def test_get_worker_info_inside_iter():
    def run(cls):
        return sorted(v for b in cls(InfoInIter(), batch_size=None, num_workers=2) for v in [int(b)])

    assert run(pinloader.DataLoader) == run(DataLoader) == list(range(6))


class SelfIter(IterableDataset):
    """__iter__ returns self: one iterator per worker, drawn from once."""

    def __init__(self):
        self.left = 3

    def __iter__(self):
        return self

    def __next__(self):
        if self.left == 0:
            raise StopIteration
        self.left -= 1
        return self.left


@pytest.mark.parametrize("workers", [0, 1])
def test_iter_returning_self_keeps_its_first_item(workers):
    def run(cls):
        return [int(b) for b in cls(SelfIter(), batch_size=None, num_workers=workers)]

    assert run(pinloader.DataLoader) == run(DataLoader) == [2, 1, 0]


class IterRaises(IterableDataset):
    def __iter__(self):
        raise ValueError("no iterator here")


def test_iter_error_raises_at_next_not_at_construction():
    loader = pinloader.DataLoader(IterRaises(), num_workers=1)  # as torch's: nothing yet
    it = iter(loader)
    with pytest.raises(ValueError, match="no iterator here"):
        next(it)
    loader.close()


class Growing(Dataset):
    def __init__(self):
        self.n = 4

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_growing_between_construction_and_iter(workers):
    def run(cls):
        ds = Growing()
        loader = cls(ds, batch_size=2, num_workers=workers)
        ds.n = 5
        return len(loader), as_lists(loader)

    assert run(pinloader.DataLoader) == run(DataLoader) == (3, [[0, 1], [2, 3], [4]])


class Lists(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, idx):
        assert isinstance(idx, list), "dataset[%r]: expected the sampler's list" % (idx,)
        return torch.tensor(idx) * 10


@pytest.mark.parametrize("workers", [0, 2])
def test_batch_size_none_with_a_sampler_of_index_lists(workers):
    sampler = [[0, 1], [2, 3, 4], [5]]

    def run(cls):
        return as_lists(cls(Lists(), batch_size=None, sampler=sampler, num_workers=workers))

    assert run(pinloader.DataLoader) == run(DataLoader) == [[0, 10], [20, 30, 40], [50]]


class Segfault(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        os.kill(os.getpid(), signal.SIGSEGV)


def test_segfault_in_a_worker_is_a_runtime_error_naming_worker_and_signal():
    # torch: RuntimeError "DataLoader worker (pid(s) N) exited unexpectedly"
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(DataLoader(Segfault(), batch_size=2, num_workers=1))
    loader = pinloader.DataLoader(Segfault(), batch_size=2, num_workers=1)
    with pytest.raises(RuntimeError) as e:
        list(loader)
    pid = loader.worker_pids[0] if loader.worker_pids else None
    msg = str(e.value)
    assert "exited unexpectedly" in msg and "worker 0 (pid %d)" % pid in msg and "SIGSEGV" in msg, msg
    # torch's signal handler's words too (torch's own test_segfault matches them)
    assert "DataLoader worker (pid %d) is killed by signal: Segmentation fault. " % pid in msg, msg
    loader.close()


class Draws(Dataset):
    """Random values from the global generators, in __getitem__."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.stack([torch.tensor(float(i)), torch.rand(()), torch.randint(0, 10 ** 6, ()).double()])


def _seed7(w):
    torch.manual_seed(7)


@pytest.mark.parametrize("init", [None, _seed7])
def test_random_draws_in_getitem_are_torchs(init):
    """2 workers, 2 epochs, the same generator seed: identical batches, with
    and without a worker_init_fn that seeds (torch: worker_init_fn's seed
    is what the dataset draws from)."""
    def run(cls):
        g = torch.Generator()
        g.manual_seed(11)
        loader = cls(Draws(), batch_size=2, num_workers=2, worker_init_fn=init, generator=g)
        return [as_lists(loader) for _ in range(2)]

    assert run(pinloader.DataLoader) == run(DataLoader)


def test_more_workers_than_cores_warns_as_torch():
    n = len(os.sched_getaffinity(0)) + 1

    def caught(cls):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loader = cls(Counting(), num_workers=n)
        msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)
                and "worker processes in total" in str(x.message)]
        if hasattr(loader, "close"):
            loader.close()
        return msgs

    assert caught(pinloader.DataLoader) == caught(DataLoader)[:1]
    assert caught(pinloader.DataLoader)


def test_timeout_does_not_limit_worker_start_and_says_torchs_words(tmp_path):
    """worker_init_fn slower than timeout= is fine (torch's timeout is for a
    batch); a batch slower than it raises with torch's words."""
    import threading  # noqa: F401

    script = textwrap.dedent("""
        import multiprocessing, torch, pinloader
        from torch.utils.data import Dataset
        ev = multiprocessing.get_context("fork").Event()
        def init(w):
            ev.wait(60)  # the parent sets it after the timeout has passed
        class D(Dataset):
            def __len__(self): return 4
            def __getitem__(self, i):
                if i == 2:
                    multiprocessing.get_context("fork").Event().wait(60)
                return i
        loader = pinloader.DataLoader(D(), batch_size=2, num_workers=1, timeout=0.5,
                                      worker_init_fn=init)
        it = iter(loader)
        import time
        t = time.monotonic()
        while time.monotonic() - t < 1.0:  # past the timeout, then start
            time.sleep(0.05)
        ev.set()
        print(next(it).tolist())
        try:
            next(it)
        except RuntimeError as e:
            print(str(e).split(":")[0])
        loader.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines() == ["[0, 1]", "DataLoader timed out after 0.5 seconds"], out.stderr


def test_open_files_limit_is_torchs_runtime_error():
    script = textwrap.dedent("""
        import resource, torch, pinloader
        from torch.utils.data import Dataset
        class D(Dataset):
            def __len__(self): return 4
            def __getitem__(self, i): return i
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        keep = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        try:
            while True:
                keep.append(open("/dev/null"))
        except OSError:
            pass
        keep.pop().close()  # one free: not enough for the workers' sockets
        try:
            loader = pinloader.DataLoader(D(), batch_size=2, num_workers=2)
            list(loader)
            print("no error")
        except RuntimeError as e:
            print(type(e).__name__, "ulimit -n" in str(e), str(e).split(".")[0])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "RuntimeError True Too many open files", out.stdout + out.stderr


class Synced(Dataset):
    """Each worker's first read waits until every worker is reading (as
    torch's SynchronizedSeedDataset): the seed each worker was given. The
    barrier: a byte per worker in anonymous shared memory (a
    multiprocessing Barrier would leave its heap mapped in this process)."""

    def __init__(self, n, workers):
        import mmap

        self.n, self.workers = n, workers
        self.slots = mmap.mmap(-1, workers, flags=mmap.MAP_SHARED)
        self.waited = False

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not self.waited:
            import time

            self.slots[get_worker_info().id] = 1
            end = time.monotonic() + 60  # a limit, so that a failure is not a hang
            while sum(self.slots[:]) < self.workers:  # every worker in __getitem__
                assert time.monotonic() < end, "the other workers never read"
                time.sleep(0.001)
            self.waited = True
        return torch.initial_seed()


@pytest.mark.parametrize("persistent", [False, True])
def test_datasets_that_wait_for_all_workers_do_not_hang(persistent):
    """Every worker reads at once from iter() on, as torch's: none waits for
    the parent. The seeds are torch's, epoch after epoch."""
    def run(cls):
        g = torch.Generator()
        g.manual_seed(5)
        loader = cls(Synced(8, 4), batch_size=2, num_workers=4, generator=g,
                     multiprocessing_context="fork", persistent_workers=persistent)
        out = [as_lists(loader) for _ in range(2)]
        if hasattr(loader, "close"):
            loader.close()
        return out

    assert run(pinloader.DataLoader) == run(DataLoader)


def test_worker_init_fn_seed_is_what_getitem_draws():
    """worker_init_fn=lambda w: torch.manual_seed(7): every worker draws
    from seed 7, as in torch (not reseeded per batch)."""
    def run(cls):
        loader = cls(Draws(), batch_size=2, num_workers=2, worker_init_fn=_seed7)
        return as_lists(loader)

    got = run(pinloader.DataLoader)
    assert got == run(DataLoader)
    assert [r[1:] for r in got[0]] == [r[1:] for r in got[1]]  # workers 0 and 1: the same seed


class Overlong(IterableDataset):
    """Says 5 items, yields 8 (each worker yields all of them: the
    misconfigured replica torch's warning names)."""

    def __len__(self):
        return 5

    def __iter__(self):
        return iter(range(8))


@pytest.mark.parametrize("workers,batch_size,warns", [(0, None, True), (0, 1, True), (0, 2, False),
                                                      (2, 2, True)])
def test_iterable_yielding_past_its_length_warns_as_torch(workers, batch_size, warns):
    """torch's NOTE [IterableDataset and __len__]: an iterator made after
    len(loader) warns, in torch's words, at every batch past that length;
    one made before it does not. As torch, len(dataset) (samples) is what
    the batches yielded are compared with: 4 batches of 2 from 8 items do
    not pass 5. Same batches, same warnings."""
    def run(cls):
        loader = cls(Overlong(), batch_size=batch_size, num_workers=workers)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            before = as_lists(loader)
            n = len(loader)
            after = as_lists(loader)
        msgs = [str(x.message).replace(repr(loader.dataset), "DS") for x in w
                if "was reported to be" in str(x.message)]
        if hasattr(loader, "close"):
            loader.close()
        return before, n, after, msgs

    got, want = run(pinloader.DataLoader), run(DataLoader)
    assert got == want
    assert bool(got[3]) == warns


def test_iterable_refuses_a_sampler_in_torchs_words():
    ds = Overlong()
    for kw, word in ((dict(sampler=[0, 1]), "sampler"), (dict(batch_sampler=[[0]]), "batch_sampler")):
        with pytest.raises(ValueError) as ours:
            pinloader.DataLoader(ds, **kw)
        with pytest.raises(ValueError) as theirs:
            DataLoader(ds, **kw)
        assert str(ours.value) == str(theirs.value)
        assert "expected unspecified %s option" % word in str(ours.value)
