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
