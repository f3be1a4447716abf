"""The StatefulDataLoader protocol: users' samplers, batch samplers and
IterableDatasets with state_dict()/load_state_dict() resume at the batch
taken last, whatever was prefetched; torch's own samplers resume by drawing
the epoch again from the saved generator state; a sampler without state
resumes the rest of the epoch drawn (its order kept in the state); an
IterableDataset without state is named at state_dict(). The oracle is the uninterrupted run (itself checked
against torch's DataLoader)."""
import random
import warnings

import numpy as np
import pytest

import pinloader

torch = pytest.importorskip("torch")

from resume_data import NoState, OwnState, Plain, Shards, StatefulBatches, StatefulPerm  # noqa: E402

N = 23


def _flat(b):
    return [int(v) for v in (b.reshape(-1) if hasattr(b, "reshape") else b)]


def _epochs(loader, epochs):
    return [[_flat(b) for b in loader] for _ in range(epochs)]


def _resumed(make, k, epochs=2, make_b=None):
    """(taken, state, rest): k batches of epoch 0 taken, the state, then
    what a new loader given the state loads: the rest of epoch 0 and the
    epochs after it."""
    a = make()
    it = iter(a)
    taken = [_flat(next(it)) for _ in range(k)]
    state = a.state_dict()
    a.close()
    b = (make_b or make)()
    b.load_state_dict(state)
    rest = [[_flat(x) for x in b] for _ in range(epochs)]
    b.close()
    return taken, state, rest


def _check(make, k, torch_make=None, epochs=2, make_b=None):
    full = make()
    want = _epochs(full, epochs)
    full.close()
    if torch_make is not None:
        assert _epochs(torch_make(), epochs) == want
    taken, _, rest = _resumed(make, k, epochs, make_b)
    assert taken + rest[0] == want[0]
    assert rest[1:] == want[1:]


# ------------------------------------------------------------ samplers

@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("k", [0, 1, 4, 7])
def test_stateful_sampler(workers, k):
    def make():
        return pinloader.DataLoader(np.arange(N), batch_size=3, sampler=StatefulPerm(N, 1),
                                    num_workers=workers)

    def torch_make():
        return torch.utils.data.DataLoader(np.arange(N), batch_size=3, sampler=StatefulPerm(N, 1))

    _check(make, k, torch_make)


def test_stateful_sampler_state_is_torchdatas():
    """The sampler's state sits where torchdata's StatefulDataLoader puts
    it (its BatchSampler iterator's layout): at batch k it is the
    sampler's own state after k batches, not after what was prefetched."""
    a = pinloader.DataLoader(np.arange(N), batch_size=3, sampler=StatefulPerm(N, 1), num_workers=2)
    it = iter(a)
    next(it), next(it)
    st = a.state_dict()
    assert st["_num_yielded"] == 2 and st["_iterator_finished"] is False
    assert st["_index_sampler_state"] is None
    assert st["_sampler_iter_state"] == {"samples_yielded": 6, "sampler_state": {"epoch": 0, "yielded": 6}}
    a.close()


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("k", [0, 2, 5])
def test_stateful_batch_sampler(workers, k):
    def make():
        return pinloader.DataLoader(np.arange(N), batch_sampler=StatefulBatches(N, 2), num_workers=workers)

    def torch_make():
        return torch.utils.data.DataLoader(np.arange(N), batch_sampler=StatefulBatches(N, 2))

    _check(make, k, torch_make)


def test_unbatched_stateful_sampler():
    def make():
        return pinloader.DataLoader(np.arange(N), batch_size=None, sampler=StatefulPerm(N, 3))

    _check(make, 5, lambda: torch.utils.data.DataLoader(np.arange(N), batch_size=None,
                                                       sampler=StatefulPerm(N, 3)))


class _Shuffled:
    """A sampler without state whose every iteration is a new random order
    (a user's own type): only the order drawn tells where an epoch was."""

    def __init__(self, n, seed):
        self.n, self.rng = n, random.Random(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        p = list(range(self.n))
        self.rng.shuffle(p)
        return iter(p)


@pytest.mark.parametrize("workers,resume_workers", [(0, 2), (2, 0)])
def test_sampler_without_state_resumes_the_drawn_rest(workers, resume_workers):
    """No state_dict() on the sampler: the state holds the rest of the
    epoch's order (warning once that later epochs come from the sampler as
    it then is), so a framework that checkpoints every loader (Lightning)
    goes on, and the resumed loader, whose own sampler would draw another
    order, gives exactly the batches the first would have given."""
    a = pinloader.DataLoader(np.arange(N), batch_size=4, sampler=_Shuffled(N, 1), num_workers=workers)
    it = iter(a)
    next(it)
    with pytest.warns(UserWarning, match=r"the sampler _Shuffled has no state_dict\(\)/"
                      r"load_state_dict\(\).*rest of this epoch"):
        st = a.state_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per loader
        again = a.state_dict()
    assert again == st
    rest = [_flat(b) for b in it]
    assert len(rest) == (N + 3) // 4 - 1
    b = pinloader.DataLoader(np.arange(N), batch_size=4, sampler=_Shuffled(N, 2),
                             num_workers=resume_workers)
    b.load_state_dict(st)
    it_b = iter(b)
    assert _flat(next(it_b)) == rest[0]
    with pytest.warns(UserWarning):
        st2 = b.state_dict()  # a resumed epoch's state: the rest again
    c = pinloader.DataLoader(np.arange(N), batch_size=4, sampler=_Shuffled(N, 3))
    c.load_state_dict(st2)
    assert [_flat(x) for x in c] == rest[1:]
    assert [_flat(x) for x in it_b] == rest[1:]
    nxt = [_flat(x) for x in b]  # the next epoch: b's own sampler's draw
    assert sorted(sum(nxt, [])) == list(range(N))
    for ld in (a, b, c):
        ld.close()


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", ["random_gen", "subset_gen", "weighted_gen", "random_global",
                                  "sequential", "distributed"])
def test_torch_samplers_replayed(workers, kind):
    def sampler():
        g = torch.Generator().manual_seed(7)
        return {"random_gen": lambda: torch.utils.data.RandomSampler(range(N), generator=g),
                "subset_gen": lambda: torch.utils.data.SubsetRandomSampler(list(range(0, N, 2)),
                                                                           generator=g),
                "weighted_gen": lambda: torch.utils.data.WeightedRandomSampler(
                    [1.0] * N, N, replacement=True, generator=g),
                "random_global": lambda: torch.utils.data.RandomSampler(range(N)),
                "sequential": lambda: torch.utils.data.SequentialSampler(range(N)),
                "distributed": lambda: torch.utils.data.DistributedSampler(
                    range(N), num_replicas=2, rank=1, seed=3)}[kind]()

    def make():
        return pinloader.DataLoader(np.arange(N), batch_size=3, sampler=sampler(), num_workers=workers)

    torch.manual_seed(5)
    full = make()
    want = _epochs(full, 2)
    full.close()
    torch.manual_seed(5)
    a = make()
    it = iter(a)
    taken = [_flat(next(it)) for _ in range(2)]
    state = a.state_dict()
    a.close()
    torch.manual_seed(5)
    b = make()
    b.load_state_dict(state)
    rest = [_flat(x) for x in b]
    assert taken + rest == want[0]
    b.close()


# ------------------------------------------------------------ iterable datasets

@pytest.mark.parametrize("workers", [0, 1, 2, 3])
@pytest.mark.parametrize("k", [0, 1, 3, 5])
@pytest.mark.parametrize("ds", [Shards, OwnState])
def test_stateful_iterable(workers, k, ds):
    def make():
        return pinloader.DataLoader(ds(N), batch_size=2, num_workers=workers)

    def torch_make():
        return torch.utils.data.DataLoader(ds(N), batch_size=2, num_workers=workers)

    _check(make, k, torch_make)


def test_iterable_state_is_torchdatas():
    a = pinloader.DataLoader(Shards(N), batch_size=2, num_workers=2)
    it = iter(a)
    next(it), next(it), next(it)  # worker 0, 1, 0
    st = a.state_dict()
    snaps = st["_snapshot"]["_worker_snapshots"]
    assert snaps["worker_0"] == {"worker_id": 0, "dataset_state": None,
                                 "fetcher_state": {"dataset_iter_state": {"i": 4}, "fetcher_ended": False}}
    assert snaps["worker_1"]["fetcher_state"]["dataset_iter_state"] == {"i": 2}
    assert st["_num_workers"] == 2
    a.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_without_state_is_named(workers):
    a = pinloader.DataLoader(NoState(10), batch_size=2, num_workers=workers)
    it = iter(a)
    next(it)
    with pytest.raises(pinloader.Error, match=r"^state_dict\(\): the IterableDataset NoState has no "
                       r"state_dict\(\)"):
        a.state_dict()
    a.close()


def test_iterable_other_worker_count_refused():
    a = pinloader.DataLoader(Shards(N), batch_size=2, num_workers=2)
    it = iter(a)
    next(it)
    st = a.state_dict()
    a.close()
    b = pinloader.DataLoader(Shards(N), batch_size=2, num_workers=3)
    with pytest.raises(pinloader.Error, match=r"holds 2 workers' iterators; this loader has 3"):
        b.load_state_dict(st)
    assert len([_flat(x) for x in b]) == 12  # untouched: a whole epoch
    b.close()


def test_torchdata_state_loads():
    """A torchdata StatefulDataLoader state (its multi-process layout,
    written out by hand here: torchdata is not a dependency) resumes the
    sampler from its part."""
    want = [_flat(b) for b in pinloader.DataLoader(np.arange(N), batch_size=3,
                                                   sampler=StatefulPerm(N, 1))]
    st = {"_snapshot": {"_snapshot_step": 3, "_last_yielded_worker_id": 0,
                        "_main_snapshot": {"_num_workers": 2, "_index_sampler_state": None,
                                           "_sampler_iter_state": {
                                               "samples_yielded": 9,
                                               "sampler_state": {"epoch": 0, "yielded": 9}},
                                           "_sampler_iter_yielded": 3, "_base_seed": 1},
                        "_worker_snapshots": {"worker_0": None, "worker_1": None}},
          "_steps_since_snapshot": 0, "_iterator_finished": False}
    b = pinloader.DataLoader(np.arange(N), batch_size=3, sampler=StatefulPerm(N, 1), num_workers=2)
    b.load_state_dict(st)
    assert [_flat(x) for x in b] == want[3:]
    b.close()


@pytest.mark.parametrize("saved_workers,resumed_workers", [(0, 3), (2, 0), (3, 1)])
@pytest.mark.parametrize("kind", ["sampler", "batch_sampler", "generator"])
def test_map_style_resumes_into_other_worker_counts(saved_workers, resumed_workers, kind):
    """Beyond torchdata (which asserts the same num_workers): a map-style
    loader's sampler state resumes with any num_workers."""
    def maker(workers):
        def make():
            if kind == "sampler":
                return pinloader.DataLoader(np.arange(N), batch_size=3, sampler=StatefulPerm(N, 1),
                                            num_workers=workers)
            if kind == "batch_sampler":
                return pinloader.DataLoader(np.arange(N), batch_sampler=StatefulBatches(N, 2),
                                            num_workers=workers)
            return pinloader.DataLoader(np.arange(N), batch_size=3, shuffle=True, num_workers=workers,
                                        generator=torch.Generator().manual_seed(4))
        return make

    _check(maker(saved_workers), 3, make_b=maker(resumed_workers))


@pytest.mark.parametrize("ds", [Shards, OwnState])
def test_stateful_iterable_spawn(ds):
    """Spawned workers: the restored states travel with the pickled Spec."""
    def make():
        return pinloader.DataLoader(ds(N), batch_size=2, num_workers=2, multiprocessing_context="spawn")

    _check(make, 3, epochs=1)
