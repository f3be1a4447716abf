"""Explicit orders as torch's samplers draw them: the order arrays the C
loader takes (_order_arrays), the next epoch's order drawn early from a copy
of the generator (_draw_ahead, _Guess), and the sampler draws that torch's
DataLoader makes request by request (_Trailing, _Shadow,
_own_generators). _Engine (_engine.py) and DataLoader use them;
_SeededSampler is loader.sampler for shuffle=True with seed=.
"""
import itertools

from ._common import _torch


def _order_arrays(batches):
    """Batches of sample indices -> (indices, starts) as the C loader's
    explicit orders take them: batch k = indices[starts[k]:starts[k+1]]."""
    import numpy as np

    starts = np.zeros(len(batches) + 1, dtype=np.uint64)
    if batches:
        starts[1:] = np.cumsum([len(b) for b in batches])
    # As int64, then the same bits as uint64: a negative index stays itself
    # (the C loader prints it as given) instead of a numpy overflow.
    indices = np.fromiter(itertools.chain.from_iterable(batches), dtype=np.int64,
                          count=int(starts[-1])).view(np.uint64)
    return indices, starts


def _draw_ahead(dl, kept_seed=None, trailing=None):
    """(base seed, indices, starts) that the next iter() of a loader with
    its own RandomSampler draws, if nobody draws from the generator before
    it: the same draws made on a copy of the generator's state (no base
    seed drawn when iter() keeps one: kept_seed). As torch's
    RandomSampler, without a generator of its own one draw seeds a fresh
    generator for the permutation; without replacement over the whole
    dataset the order is one randperm, batched here with numpy (ImageNet's
    1.28 M samples: 31 ms, where the sampler's lists take 200-300 ms).
    trailing: the length of the current epoch's trailing randperm when it
    is still to be drawn (_Trailing): drawn first, as it will be."""
    import numpy as np

    torch = _torch()
    from torch.utils.data import BatchSampler, RandomSampler

    gen = dl.generator if dl.generator is not None else torch.default_generator
    copy = torch.Generator()
    copy.set_state(gen.get_state())
    if trailing is not None:
        torch.randperm(trailing, generator=copy)

    def draw():
        return int(torch.empty((), dtype=torch.int64).random_(generator=copy).item())

    seed = draw() if kept_seed is None else kept_seed
    s, bs = dl.sampler, dl.batch_sampler
    perm = copy
    if s.generator is None:
        perm = torch.Generator()
        perm.manual_seed(draw())
    n = len(s.data_source)
    if not s.replacement and s._num_samples is None and type(bs) is BatchSampler and n > 0:
        idx = torch.randperm(n, generator=perm).numpy().astype(np.uint64)
        nb = n // bs.batch_size if bs.drop_last else -(-n // bs.batch_size)
        starts = np.minimum(np.arange(nb + 1, dtype=np.uint64) * bs.batch_size, n)
        return seed, idx[:int(starts[-1])], starts
    twin = RandomSampler(s.data_source, replacement=s.replacement, num_samples=s._num_samples,
                         generator=perm)
    if bs is None:
        return (seed,) + _order_arrays([[i] for i in twin])
    return (seed,) + _order_arrays([list(b) for b in BatchSampler(twin, bs.batch_size, bs.drop_last)])


class _Trailing:
    """torch's RandomSampler (with a generator of its own: the loader's
    generator=) draws one more randperm after its last index, when its
    iterator is run to the end: in torch's DataLoader, when the batch
    after the last is asked of the batch sampler. That is the J-th request
    (J = batches + 1, or the number of batches when the last one is partial
    and kept), made by next() call J with no workers, or by call J - P
    with P = prefetch_factor * num_workers requests made at iter() (call 0).
    A break before that call leaves it undrawn, and so does pinloader."""

    __slots__ = ("gen", "n", "at")

    def __init__(self, gen, n, at):
        self.gen, self.n, self.at = gen, n, at

    def draw(self):
        import torch

        torch.randperm(self.n, generator=self.gen)


class _Shadow:
    """torch's own samplers (RandomSampler, SubsetRandomSampler,
    WeightedRandomSampler, and a BatchSampler over one of them) given with
    a generator: pinloader draws the whole epoch's order at once, but
    torch's DataLoader asks its sampler for one batch per request, so after
    a break the generator stands where the last request left it (and the
    sampler's trailing randperm is drawn only by the request after the last
    batch). So the generators are put back after the epoch is drawn, and a
    second iterator of the same sampler (the same draws from the same
    states) is advanced request by request as torch's would be: after a
    break, an error or the epoch's end, the generators are where torch's
    are. Requests made by next() call c: c + P, P = prefetch_factor *
    num_workers made at iter() (call 0)."""

    __slots__ = ("it", "ahead", "done", "over")

    def __init__(self, sampler, ahead):
        self.it, self.ahead, self.done, self.over = iter(sampler), ahead, 0, False

    def advance(self, calls):
        while not self.over and self.done < calls + self.ahead:
            self.done += 1
            try:
                next(self.it)
            except StopIteration:
                self.over = True


def _own_generators(sampler, batch_sampler):
    """The generators of torch's own samplers in this order (see _Shadow),
    or None where any part is another sampler (a user's sampler may keep
    state of its own: iterating it twice an epoch would change it) or draws
    from torch's global generator."""
    try:
        from torch.utils.data import (BatchSampler, RandomSampler, SubsetRandomSampler,
                                      WeightedRandomSampler)
    except ImportError:
        return None
    s = sampler
    if batch_sampler is not None:
        if type(batch_sampler) is not BatchSampler:
            return None
        s = batch_sampler.sampler
    if type(s) not in (RandomSampler, SubsetRandomSampler, WeightedRandomSampler):
        return None
    g = getattr(s, "generator", None)
    return [g] if g is not None else None


class _Guess:
    """The next epoch's order, drawn early from a copy of the generator and
    queued (_Engine._look_ahead): its epoch, base seed and order arrays."""

    __slots__ = ("epoch", "seed", "indices", "starts")

    def __init__(self, epoch, seed, indices, starts):
        self.epoch, self.seed, self.indices, self.starts = epoch, seed, indices, starts

    def matches(self, epoch, seed, indices, starts):
        import numpy as np

        return (epoch, seed) == (self.epoch, self.seed) and np.array_equal(indices, self.indices) \
            and np.array_equal(starts, self.starts)


class _SeededSampler:
    """loader.sampler for shuffle=True with seed=: the loader's own
    permutation of (seed, epoch), made in C; iterate the DataLoader."""

    def __init__(self, dl):
        self.seed = dl.seed
        self._n = len(dl.dataset)

    def __len__(self):
        return self._n

    def __iter__(self):
        raise TypeError("this order is made by the C loader from (seed, epoch): iterate the "
                        "DataLoader (or pass sampler= for an order of your own)")
