"""The next epoch's order drawn before iter() (beyond torch; python/README,
"The next epoch begins early"): with shuffle=True and no seed= the workers
go on into the next epoch, whose order is drawn ahead from a copy of
torch's generator and kept only if the order iter() draws is the one
guessed. torch is the oracle:
whatever the loop does to the generator between or inside epochs, the
batches and the generator's state afterwards are torch's."""
import time

import pytest

import pinloader
import pyw_data as D

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

MODES = [dict(num_workers=0), dict(num_workers=2), dict(num_workers=2, worker_mode="thread")]
MODE_IDS = ["inline", "processes", "threads"]


def run(make, epochs, touch):
    """Epochs of make()'s loader after torch.manual_seed(3): each epoch's
    batches of sample indices, then three draws of the global generator.
    touch(epoch, k) runs after batch k of each epoch (k = -1: before the
    epoch's iter()); it returns True to break out of the epoch there."""
    torch.manual_seed(3)
    loader = make()
    seen = []
    for e in range(epochs):
        touch(e, -1)
        batches = []
        for k, b in enumerate(loader):
            batches.append(b[1].tolist())
            if touch(e, k):
                break
        seen.append(batches)
    if hasattr(loader, "close"):
        loader.close()
    return seen, torch.rand(3).tolist()


def nothing(e, k):
    return False


def draw_between(e, k):
    if k == -1 and e == 2:
        torch.rand(1)  # the guess for epoch 2 is wrong: its draws differ
    return False


def draw_late(e, k):
    if e == 1 and k == 10:  # the epoch's last batch: after the guess
        torch.randint(0, 5, (2,))
    return False


def reseed(e, k):
    if k == -1 and e == 1:
        torch.manual_seed(8)
    return False


def break_early(e, k):
    return e == 1 and k == 4  # a partial epoch: torch starts the next anew


TOUCHES = [nothing, draw_between, draw_late, reseed, break_early]


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("touch", TOUCHES, ids=[t.__name__ for t in TOUCHES])
def test_epochs_and_generator_are_torchs(mode, touch):
    ds = D.Indexed(83)  # 11 batches of 8 (the last of 3)
    ref = run(lambda: DataLoader(ds, batch_size=8, shuffle=True), 4, touch)
    got = run(lambda: pinloader.DataLoader(ds, batch_size=8, shuffle=True, **mode), 4, touch)
    assert got == ref


def test_own_generator_is_followed():
    ds = D.Indexed(50)

    def make(cls, **kw):
        return lambda: cls(ds, batch_size=6, shuffle=True, generator=torch.Generator().manual_seed(5), **kw)

    def touch(e, k):
        if k == -1 and e == 2:
            loader_gen[0].manual_seed(9)  # the loader's own generator, between epochs
        return False

    for cls, kw in ((DataLoader, {}), (pinloader.DataLoader, dict(num_workers=2))):
        loader_gen = [None]
        make_one = make(cls, **kw)

        def made():
            ld = make_one()
            loader_gen[0] = ld.generator
            return ld

        out = run(made, 4, touch)
        if cls is DataLoader:
            ref = out
    assert out == ref


def test_non_persistent_workers_reseed_as_torchs():
    # batch k on worker k % 2 (in_order=True) and each epoch's workers
    # seeded afresh from that epoch's base seed, as torch's new workers are
    def epochs(cls, **kw):
        torch.manual_seed(6)
        loader = cls(D.GlobalRandom(), batch_size=4, shuffle=True, num_workers=2,
                     persistent_workers=False, **kw)
        out = [[[float(v) for v in x] for b in loader for x in b[1:]] for _ in range(3)]
        if hasattr(loader, "close"):
            loader.close()
        return out

    assert epochs(pinloader.DataLoader, in_order=True) == epochs(DataLoader)


@pytest.mark.parametrize("mode", MODES[1:], ids=MODE_IDS[1:])
def test_persistent_workers_draw_one_base_seed_as_torch(mode):
    # torch's DataLoader keeps one iterator (and its base seed) for a
    # persistent loader's life: every later iter() draws only the order
    ref = run(lambda: DataLoader(D.Indexed(40), batch_size=4, shuffle=True, num_workers=2,
                                 persistent_workers=True), 4, nothing)
    got = run(lambda: pinloader.DataLoader(D.Indexed(40), batch_size=4, shuffle=True,
                                           persistent_workers=True, **mode), 4, nothing)
    assert got == ref


@pytest.mark.parametrize("widen", [0.0, 0.3])
def test_an_error_ends_the_iterator_before_the_queued_epoch(widen):
    """A batch fails in the last batches of an epoch, after the next epoch
    was queued: the iterator ends there (StopIteration next), and the next
    iter() is the next epoch, torch's order, whole.

    The failing read is made certain, not timed: the C loader claims at
    most `depth` batches from the one the consumer waits for on, so while
    it waits for epoch 0's last batch only epoch 1's first depth - 1
    batches may be read alongside it. The sample that fails on its first
    read is one of epoch 0's last batch found in none of epoch 1's first
    depth + 1 batches: its first read is epoch 0's whatever the timing.
    (Sample 73, in both, raced: epoch 1's read of it could come first, and
    epoch 0 then ended whole: "DID NOT RAISE".) widen=0.3 delays the first
    read of the sample, for any other read of it to come first: none can
    (with 73 one always did)."""
    depth = 2 * 2  # prefetch_factor * num_workers
    torch.manual_seed(3)
    ref = [[b[1].tolist() for b in DataLoader(D.Indexed(83), batch_size=8, shuffle=True)]
           for _ in range(2)]
    near = {i for b in ref[1][:depth + 1] for i in b}
    bad = [i for i in ref[0][-1] if i not in near][0]  # 29 of [73, 76, 29]
    assert bad != 0  # sample 0 is the loader's probe, read in this process
    torch.manual_seed(3)
    loader = pinloader.DataLoader(D.FailOnce(83, bad, widen), batch_size=8, shuffle=True,
                                  num_workers=2, prefetch_factor=2, multiprocessing_context="fork")
    it = iter(loader)
    got = [next(it)[1].tolist() for _ in range(len(ref[0]) - 1)]
    assert got == ref[0][:-1]
    with pytest.raises(ValueError, match="bad sample %d" % bad):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert [b[1].tolist() for b in loader] == ref[1]
    loader.close()


def test_thread_workers_read_nothing_early():
    """worker_mode="thread" reads a Python dataset in this process, where
    __getitem__ draws from torch's generator: nothing of the next epoch is
    read before iter() (it would move the generator by a timing-dependent
    amount), so the orders do not depend on a pause before each iter()."""
    def orders(pause):
        torch.manual_seed(3)
        loader = pinloader.DataLoader(D.TorchRandom(), batch_size=8, shuffle=True, num_workers=2,
                                      worker_mode="thread")
        out = []
        for _ in range(3):
            time.sleep(pause)
            out.append([b[0][:, 0].tolist() for b in loader])
        loader.close()
        return out

    assert orders(0.0) == orders(0.3)


def test_in_order_workers_random_streams_stay_torchs():
    """in_order=True: each worker's random stream runs on as torch's. No
    early epoch is read (a dropped one would have moved the streams): with
    the generator drawn from between epochs, the draws are still torch's."""
    def epochs(cls, **kw):
        torch.manual_seed(6)
        loader = cls(D.GlobalRandom(), batch_size=4, shuffle=True, num_workers=2,
                     persistent_workers=True, **kw)
        out = []
        for e in range(3):
            if e == 2:
                torch.rand(1)
                time.sleep(0.3)  # time the workers would have had to read ahead
            out.append([[float(v) for v in x] for b in loader for x in b[1:]])
        if hasattr(loader, "close"):
            loader.close()
        return out

    assert epochs(pinloader.DataLoader, in_order=True) == epochs(DataLoader)


def wait_for(cond, what, limit_s=120.0):
    """Polls cond() until it holds: the wait is for that event; the limit
    only turns a hang into a failure."""
    end = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < end, "timed out waiting for " + what
        time.sleep(0.005)


@pytest.mark.parametrize("n, drop_last", [(64, False), (67, True), (67, False)])
def test_workers_read_the_next_epoch_before_iter(n, drop_last):
    """Balanced workers (in_order=False; torch's assignment reads nothing
    ahead): after an epoch, before iter(), the workers have read the next
    epoch's first batches (torch's order for them); when the guess holds,
    no sample is read more often than torch's epochs hold it, and what was
    read ahead is a whole prefix of the next epoch's batches, the prefetch
    depth's. The wait is for the reads' count to reach that prefix's
    (counted under a lock: an unlocked count lost a read when two workers
    read one index at once, and the wait never ended); then which samples
    were read is checked: a wrong guess, a batch too many or one of the
    wrong epoch shows there, at once, never as a timeout."""
    bs = 8
    torch.manual_seed(2)
    ref = [[b[1].tolist() for b in DataLoader(D.Indexed(n), batch_size=bs, shuffle=True,
                                               drop_last=drop_last)]
           for _ in range(3)]
    ds = D.Counted(n)
    torch.manual_seed(2)
    loader = pinloader.DataLoader(ds, batch_size=bs, shuffle=True, drop_last=drop_last,
                                  num_workers=2, prefetch_factor=2, multiprocessing_context="fork",
                                  in_order=False)
    depth = 4  # batches in flight (2 per worker): those read ahead
    probed = ds.counts()  # (nothing: the dataset is read in the workers only)

    def counts():
        return [c - p for c, p in zip(ds.counts(), probed)]

    def reads_of(batches):
        got = [0] * n
        for b in batches:
            for i in b:
                got[i] += 1
        return got

    for e in range(2):
        assert [b[1].tolist() for b in loader] == ref[e]
        done = reads_of(b for epoch in ref[:e + 1] for b in epoch)
        ahead = reads_of(ref[e + 1][:depth])  # the next epoch's first batches

        def extra():
            return [c - d for c, d in zip(counts(), done)]

        wait_for(lambda: sum(extra()) >= sum(ahead), "epoch %d's first %d batches" % (e + 1, depth))
        assert extra() == ahead  # those, and no more: the prefetch depth's
    loader.close()
