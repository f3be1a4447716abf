"""pinloader among torch's classes: isinstance(loader, torch's DataLoader),
the attributes frameworks read (with torch's meaning), and DataPipes
(shuffle settings, shared seeds, sharding per worker) against torch's
DataLoader. The frameworks themselves: python/tests/frameworks/."""
import multiprocessing
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import pinloader

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402

datapipes = pytest.importorskip("torch.utils.data.datapipes.iter")
IterableWrapper = datapipes.IterableWrapper


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return np.array([i, i * i], dtype=np.int64)


class Stream(torch.utils.data.IterableDataset):
    def __len__(self):
        return 7

    def __iter__(self):
        return iter(range(7))


def _seed(i):
    pass


def _both(ds, **kw):
    return pinloader.DataLoader(ds, **kw), TorchDataLoader(ds, **kw)


def test_loader_is_a_torch_dataloader():
    dl = pinloader.DataLoader(Squares(), batch_size=4)
    assert isinstance(dl, TorchDataLoader)
    assert issubclass(pinloader.DataLoader, TorchDataLoader)
    assert [b.tolist() for b in dl] == [b.tolist() for b in TorchDataLoader(Squares(), batch_size=4)]
    dl.close()


def test_without_torch_the_loader_is_a_plain_class():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import pinloader\n"
            "print([c.__name__ for c in pinloader.DataLoader.__mro__])\n"
            "print([b.tolist() for b in pinloader.DataLoader(list(range(5)), batch_size=2)])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["['DataLoader', 'object']", "[[0, 1], [2, 3], [4]]"]


ATTRS = ("batch_size", "num_workers", "drop_last", "pin_memory", "timeout", "prefetch_factor",
         "persistent_workers", "pin_memory_device", "_dataset_kind", "_IterableDataset_len_called",
         "_auto_collation")


@pytest.mark.parametrize("kw", [
    dict(batch_size=3),
    dict(batch_size=3, shuffle=True, drop_last=True),
    dict(batch_size=None),
    dict(batch_size=2, num_workers=2, multiprocessing_context="fork", timeout=5, prefetch_factor=3,
         persistent_workers=True, worker_init_fn=_seed),
])
def test_torch_attributes_have_torch_meaning(kw):
    g = torch.Generator()
    ours, theirs = _both(Squares(), generator=g, **kw)
    try:
        for a in ATTRS:
            assert getattr(ours, a) == getattr(theirs, a), a
        for a in ("generator", "worker_init_fn"):
            assert getattr(ours, a) is getattr(theirs, a), a
        assert ours.multiprocessing_context is theirs.multiprocessing_context
        assert type(ours.sampler) is type(theirs.sampler)
        assert type(ours.batch_sampler) is type(theirs.batch_sampler)
        assert type(ours._index_sampler) is type(theirs._index_sampler)
        if theirs.batch_sampler is not None:
            assert (ours.batch_sampler.batch_size, ours.batch_sampler.drop_last) == \
                   (theirs.batch_sampler.batch_size, theirs.batch_sampler.drop_last)
        assert len(ours) == len(theirs)
        # collate_fn None: pinloader's collation (default_collate's batches);
        # a loader remade from the attributes gets torch's default.
        assert ours.collate_fn is None
        remade = TorchDataLoader(Squares(), batch_size=ours.batch_size, collate_fn=ours.collate_fn)
        assert remade.collate_fn is theirs.collate_fn
    finally:
        ours.close()


@pytest.mark.parametrize("batch_size", [2, None])
def test_iterable_dataset_attributes_have_torch_meaning(batch_size):
    ours, theirs = _both(Stream(), batch_size=batch_size)
    assert ours._dataset_kind == theirs._dataset_kind == 1
    assert type(ours.sampler) is type(theirs.sampler)
    assert type(ours.batch_sampler) is type(theirs.batch_sampler)
    assert len(ours) == len(theirs)
    assert [np.asarray(b).tolist() for b in ours] == [np.asarray(b).tolist() for b in theirs]
    ours.close()


def test_torch_machinery_does_not_take_over():
    dl = pinloader.DataLoader(Squares(), batch_size=4, num_workers=1)
    it = dl._get_iterator()  # torch's name for iter(): pinloader's iterator
    assert [b.tolist() for b in it] == [b.tolist() for b in TorchDataLoader(Squares(), batch_size=4)]
    assert not hasattr(dl, "_DataLoader__multiprocessing_context")  # torch's setter never ran
    with pytest.raises(ValueError, match="^batch_size attribute should not be set after DataLoader is "
                                         "initialized$"):
        dl.batch_size = 3
    dl.close()


def test_prefetch_factor_is_none_without_workers_where_torch_says_so(monkeypatch):
    # torch >= 2: prefetch_factor None without workers (frameworks pass it
    # back to torch's DataLoader, which refuses 2 there); 1.13 says 2.
    monkeypatch.setattr(pinloader._compat, "_prefetch_default_none", lambda data: True)
    dl = pinloader.DataLoader(Squares(), batch_size=4)
    assert dl.prefetch_factor is None
    assert [b.tolist() for b in dl] == [b.tolist() for b in TorchDataLoader(Squares(), batch_size=4)]
    dl.close()
    dl = pinloader.DataLoader(Squares(), batch_size=4, num_workers=1)
    assert dl.prefetch_factor == 2
    dl.close()


# ---------------------------------------------------------------- DataPipes


def _lists(loader):
    out = [np.asarray(b).tolist() for b in loader]
    if isinstance(loader, pinloader.DataLoader):
        loader.close()
    return out


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size", [2, None])
def test_datapipe_sharding_filter_per_worker(num_workers, batch_size):
    def loader(cls):
        dp = IterableWrapper(range(8)).sharding_filter()
        return cls(dp, batch_size=batch_size, num_workers=num_workers)

    want = _lists(loader(TorchDataLoader))
    assert _lists(loader(pinloader.DataLoader)) == want
    if num_workers == 2 and batch_size is None:
        assert want == [0, 1, 2, 3, 4, 5, 6, 7]  # each item once


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("persistent", [False, True])
def test_datapipe_shuffle_follows_the_generator(num_workers, persistent):
    if persistent and num_workers == 0:
        pytest.skip("persistent_workers needs workers")

    def epochs(cls):
        dp = IterableWrapper(range(8)).shuffle().sharding_filter()
        dl = cls(dp, batch_size=2, num_workers=num_workers, shuffle=True, persistent_workers=persistent,
                 generator=torch.Generator().manual_seed(3))
        got = [[b.tolist() for b in dl] for _ in range(2)]
        if cls is pinloader.DataLoader:
            dl.close()
        return got

    want = epochs(TorchDataLoader)
    got = epochs(pinloader.DataLoader)
    assert got == want
    flat = [sorted(sum(e, [])) for e in got]
    assert flat == [list(range(8))] * 2 and got[0] != got[1]


def test_datapipe_shuffle_false_turns_the_shuffler_off():
    def loader(cls):
        return cls(IterableWrapper(range(8)).shuffle(), batch_size=3, shuffle=False)

    assert _lists(loader(pinloader.DataLoader)) == _lists(loader(TorchDataLoader)) == \
        [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_datapipe_shuffle_without_a_shuffler_warns_as_torch():
    def run(cls):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = _lists(cls(IterableWrapper(range(5)), batch_size=2, shuffle=True))
        return got, [str(x.message) for x in w if "Shuffler" in str(x.message)]

    got, want = run(pinloader.DataLoader), run(TorchDataLoader)
    assert got == want and len(want[1]) == 1


def test_datapipe_loader_dataset_is_torch_wrapper():
    from torch.utils.data.datapipes.datapipe import _IterDataPipeSerializationWrapper

    dp = IterableWrapper(range(4))
    ours, theirs = _both(dp)
    assert isinstance(ours.dataset, _IterDataPipeSerializationWrapper)
    assert isinstance(theirs.dataset, _IterDataPipeSerializationWrapper)
    assert ours.dataset._datapipe is dp
    ours.close()


def test_datapipe_spawned_workers_get_the_shared_seed():
    def epochs(cls):
        dp = IterableWrapper(range(6)).shuffle().sharding_filter()
        dl = cls(dp, batch_size=None, num_workers=2, shuffle=True, multiprocessing_context="spawn",
                 generator=torch.Generator().manual_seed(11))
        got = [[int(b) for b in dl] for _ in range(2)]
        if cls is pinloader.DataLoader:
            dl.close()
        return got

    assert epochs(pinloader.DataLoader) == epochs(TorchDataLoader)
