"""Resume (state_dict / load_state_dict) of Python datasets whose samples
carry object leaves (strings; numbers with batch_size=None): the pickled
parts of a resumed batch are found by the batch's index in its epoch
(pl_batch_info.batch_index was counted from the resumed stream's start, so
a resumed loader raised IndexError in default_collate)."""
import numpy as np
import pytest

import pinloader

torch = pytest.importorskip("torch")


def _ds():
    return [(np.full(2, i, np.int64), "s%d" % i) for i in range(10)]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("taken", [1, 3])
def test_resumed_batches_keep_their_object_leaves(workers, taken):
    a = pinloader.DataLoader(_ds(), batch_size=2, num_workers=workers, seed=5, shuffle=True)
    it = iter(a)
    first = [next(it) for _ in range(taken)]
    state = a.state_dict()
    rest = list(it)
    a.close()
    b = pinloader.DataLoader(_ds(), batch_size=2, num_workers=workers, seed=5, shuffle=True)
    b.load_state_dict(state)
    resumed = list(b)
    b.close()
    assert len(resumed) == len(rest) == 5 - taken
    for (x, s), (y, t) in zip(resumed, rest):
        assert torch.equal(x, y)
        assert list(s) == list(t) == ["s%d" % int(v) for v in x[:, 0]]
    seen = [int(v) for x, _ in first + resumed for v in x[:, 0]]
    assert sorted(seen) == list(range(10))


def test_resumed_unbatched_numbers():
    ds = [float(i) for i in range(6)]
    a = pinloader.DataLoader(ds, batch_size=None, seed=1, shuffle=True)
    it = iter(a)
    head = [next(it), next(it)]
    state = a.state_dict()
    rest = list(it)
    b = pinloader.DataLoader(ds, batch_size=None, seed=1, shuffle=True)
    b.load_state_dict(state)
    got = list(b)
    assert [float(v) for v in got] == [float(v) for v in rest]
    assert sorted(float(v) for v in head + got) == ds


@pytest.mark.parametrize("workers", [0, 2])
def test_batch_sampler_with_a_generator_is_not_drawn_early(workers):
    """torch's BatchSampler over a RandomSampler with a generator: the first
    epoch is the generator's first permutation, as torch's (pinloader passed
    over the batch sampler at construction to size its buffers, which drew
    one permutation: every epoch was one ahead)."""
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler

    def make():
        g = torch.Generator().manual_seed(1)
        return BatchSampler(RandomSampler(range(10), generator=g), 4, False)

    ds = [np.int64(i) for i in range(10)]
    want_loader, got_loader = DataLoader(ds, batch_sampler=make()), \
        pinloader.DataLoader(ds, batch_sampler=make(), num_workers=workers)
    for _ in range(2):
        want = [b.tolist() for b in want_loader]
        got = [b.tolist() for b in got_loader]
        assert got == want
    got_loader.close()


def _order_loader(workers, generator):
    return pinloader.DataLoader(list(range(23)), batch_size=4, shuffle=True, generator=generator,
                                num_workers=workers)


def _seeded(seed=5):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _torch_epoch(generator):
    return [b.tolist() for b in torch.utils.data.DataLoader(list(range(23)), batch_size=4,
                                                            shuffle=True, generator=generator)]


@pytest.mark.parametrize("saved_workers,resumed_workers", [(0, 0), (0, 2), (2, 0)])
def test_state_after_iter_before_first_batch_resumes_the_whole_epoch(saved_workers, resumed_workers):
    """state_dict() between iter() and the first next() (the order not yet
    drawn by a single-process iterator), with the loader's generator: the
    restore gives that epoch, torch's order. Failed on the H200 (differential
    cases 127, 351): load_state_dict() drew a base seed for the engine it
    made and iter() drew another, so the restored order was drawn from a
    generator one draw further on."""
    want = _torch_epoch(_seeded())
    a = _order_loader(saved_workers, _seeded())
    it = iter(a)
    state = a.state_dict()
    assert [b.tolist() for b in it] == want
    a.close()
    b = _order_loader(resumed_workers, _seeded())
    b.load_state_dict(state)
    assert [x.tolist() for x in b] == want
    b.close()


def test_state_after_iter_before_first_batch_keeps_the_global_generators_draw():
    """As above with torch's global generator (shuffle=True, no generator):
    the order is drawn at the first next() from the global generator as it
    stands then, so the state holds that generator's state; the restore,
    made after the global generator moved on, gives the saved epoch.
    Failed on the H200 (differential case 60): the state said 'fresh' and
    the restore drew another order."""
    torch.manual_seed(11)
    a = _order_loader(0, None)
    it = iter(a)
    state = a.state_dict()
    got = [b.tolist() for b in it]
    a.close()
    torch.manual_seed(11)
    t_it = iter(torch.utils.data.DataLoader(list(range(23)), batch_size=4, shuffle=True))
    assert got == [b.tolist() for b in t_it]
    torch.rand(7)  # the global generator moves on before the restore
    b = _order_loader(0, None)
    b.load_state_dict(state)
    assert [x.tolist() for x in b] == got
    b.close()


def test_engine_made_before_iter_draws_no_extra_seed():
    """load_state_dict() of a state taken before any iter() makes the
    engine (its workers start with a base seed drawn then): the next iter()
    takes that draw as its own, so the orders after it stay torch's."""
    a = _order_loader(2, _seeded())
    state = a.state_dict()
    a.close()
    g = _seeded()
    want = [_torch_epoch(g) for _ in range(2)]
    b = _order_loader(2, _seeded())
    b.load_state_dict(state)
    assert [[x.tolist() for x in b] for _ in range(2)] == want
    b.close()
