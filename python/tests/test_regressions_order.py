"""Orders drawn from torch's samplers as torch's DataLoader draws them,
found by the differential suite: an iter() dropped before its first batch
(torch's single-process iterator draws the sampler's order at the first
next()), and a break in an epoch over torch's own samplers with a
generator (torch asks the sampler for one batch per request: after a
break, the generator stands where the last request left it)."""
import numpy as np
import pytest

import pinloader

torch = pytest.importorskip("torch")
from torch.utils.data import (BatchSampler, DataLoader as TorchLoader, RandomSampler,  # noqa: E402
                              SubsetRandomSampler, WeightedRandomSampler)

DS = [np.int64(i) for i in range(14)]


def _epochs(loader, plan):
    """plan: per iteration, None (to the end), 0 (iter() dropped before its
    first batch) or k (break after k batches)."""
    out = []
    for stop in plan:
        it = iter(loader)
        got = []
        if stop != 0:
            for b in it:
                got.append(b.tolist())
                if stop is not None and len(got) >= stop:
                    break
        del it
        out.append(got)
    return out


@pytest.mark.parametrize("order", ["shuffle", "sampler"])
def test_iter_dropped_before_its_first_batch_draws_nothing(order):
    def run(make):
        torch.manual_seed(3)
        kw = {"shuffle": True} if order == "shuffle" else {"sampler": RandomSampler(range(14))}
        loader = make(DS, batch_size=5, **kw)
        got = _epochs(loader, [0, None, None])
        return got, torch.rand(2).tolist()

    assert run(pinloader.DataLoader) == run(TorchLoader)


def _samplers():
    g = lambda: torch.Generator().manual_seed(7)  # noqa: E731
    return {
        "random": lambda: {"sampler": RandomSampler(range(14), generator=g()), "batch_size": 5},
        "random_drop": lambda: {"sampler": RandomSampler(range(14), generator=g()), "batch_size": 5,
                                "drop_last": True},
        "subset": lambda: {"sampler": SubsetRandomSampler(list(range(0, 14, 2)), generator=g()),
                           "batch_size": 3},
        "weighted": lambda: {"sampler": WeightedRandomSampler([1.0] * 14, 9, generator=g()),
                             "batch_size": 4},
        "batch_sampler": lambda: {"batch_sampler": BatchSampler(RandomSampler(range(14), generator=g()),
                                                                4, False)},
        "unbatched": lambda: {"sampler": RandomSampler(range(14), generator=g()), "batch_size": None},
    }


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", sorted(_samplers()))
def test_break_leaves_the_samplers_generator_where_torchs_is(name, workers):
    def run(make):
        kw = _samplers()[name]()
        gen = (kw.get("sampler") or kw["batch_sampler"].sampler).generator
        loader = make(DS, num_workers=workers, **kw)
        got = _epochs(loader, [1, None, 2, None])
        return got, gen.get_state().tolist()

    mine, theirs = run(pinloader.DataLoader), run(TorchLoader)
    assert mine[0] == theirs[0]
    assert mine[1] == theirs[1]  # the generator after the last epoch


def test_an_iter_dropped_before_its_first_batch_is_an_epoch(tmp_path):
    """Each iter() of a loader with a sampler is an epoch (the epoch of its
    transforms' draws), also one dropped before its first batch, whose
    order is never drawn (no workers: torch draws it at the first next()).
    The iteration after it is the one set_epoch(1) would give."""
    from conftest import write_cifar
    from pinloader import transforms as T

    rng = np.random.default_rng(4)
    path = write_cifar(tmp_path / "c.bin", rng.integers(0, 256, (8, 3, 32, 32), dtype=np.uint8),
                       rng.integers(0, 10, 8).astype(np.uint8))

    def loader():
        return pinloader.DataLoader(pinloader.datasets.CIFAR10([str(path)]), batch_size=8,
                                    sampler=list(range(8)), num_workers=0,
                                    transforms=[T.RandomHorizontalFlip(), T.RandomCrop(32, padding=4)])

    a, b = loader(), loader()
    it = iter(a)
    del it
    got = [x.clone() for x, _ in a]
    b.set_epoch(1)
    want = [x.clone() for x, _ in b]
    b.set_epoch(0)
    epoch0 = [x.clone() for x, _ in b]
    assert torch.equal(got[0], want[0])
    assert not torch.equal(got[0], epoch0[0])  # the draws do depend on the epoch
    a.close()
    b.close()
