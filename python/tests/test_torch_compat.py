"""pinloader.DataLoader against torch.utils.data.DataLoader on the same
datasets: the same batches (values, dtypes, structure), the same order with
the same sampler / generator / global seed, the same worker seeds and
worker info. torch is the oracle."""
import collections

import numpy as np
import pytest

import pinloader
import pyw_data as D

torch = pytest.importorskip("torch")
from torch.utils.data import (BatchSampler, DataLoader, IterableDataset,  # noqa: E402
                              SequentialSampler, SubsetRandomSampler)

MODES = [dict(num_workers=0), dict(num_workers=2), dict(num_workers=2, worker_mode="thread")]
MODE_IDS = ["inline", "processes", "threads"]


def same(a, b, where="batch"):
    """a (pinloader) equals b (torch): structure, types, dtypes, values."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, torch.Tensor), "%s: %r is not a tensor" % (where, type(a))
        assert a.dtype == b.dtype, "%s: dtype %s != %s" % (where, a.dtype, b.dtype)
        assert a.shape == b.shape, "%s: shape %s != %s" % (where, a.shape, b.shape)
        assert torch.equal(a, b), "%s: values differ" % where
    elif isinstance(b, dict):
        assert type(a) is type(b) and list(a) == list(b), "%s: keys %r != %r" % (where, list(a), list(b))
        for k in b:
            same(a[k], b[k], "%s[%r]" % (where, k))
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b), "%s: %s != %s" % (where, type(a), type(b))
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (where, i))
    else:
        assert type(a) is type(b) and a == b, "%s: %r != %r" % (where, a, b)


def both(ds, seed=0, make=None, **kw):
    """(pinloader batches, torch batches) over ds with the same arguments,
    each after torch.manual_seed(seed); make() gives fresh arguments (a
    sampler with a generator of its own) for each."""
    # in_order=True is torch's default (and older torch has no such argument)
    pkw = {k: v for k, v in kw.items() if k != "worker_mode" and not (k == "in_order" and v is True)}
    torch.manual_seed(seed)
    ref = list(DataLoader(ds, **pkw, **(make() if make else {})))
    torch.manual_seed(seed)
    loader = pinloader.DataLoader(ds, **kw, **(make() if make else {}))
    got = list(loader)
    loader.close()
    return got, ref


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_default_collate_structure_and_dtypes(mode):
    got, ref = both(D.Mixed(), batch_size=5, **mode)
    assert len(got) == len(ref) == 5
    for g, r in zip(got, ref):
        same(g, r)
    # the parts default_collate defines
    b = got[0]
    assert b["label"].dtype == torch.int64 and b["score"].dtype == torch.float64
    assert b["flag"].dtype == torch.bool and b["name"] == ["s0", "s1", "s2", "s3", "s4"]
    assert isinstance(b["pair"], D.Pair) and isinstance(b["pair"].b, list)
    assert b["img"].shape == (5, 3, 4, 5)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_shuffle_follows_torch_manual_seed(mode):
    for seed in (0, 1):
        got, ref = both(D.Indexed(50), seed=seed, batch_size=8, shuffle=True, **mode)
        assert [g[1].tolist() for g in got] == [r[1].tolist() for r in ref]
    got, ref = both(D.Indexed(50), seed=3, batch_size=8, shuffle=True, drop_last=True, **mode)
    assert [g[1].tolist() for g in got] == [r[1].tolist() for r in ref] and len(got) == 6


def test_generator_argument_and_epochs():
    ds = D.Indexed(40)
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    ref = DataLoader(ds, batch_size=6, shuffle=True, generator=g1)
    loader = pinloader.DataLoader(ds, batch_size=6, shuffle=True, generator=g2, num_workers=2)
    for _ in range(3):  # a new order each epoch, drawn from the generator as torch does
        assert [b[1].tolist() for b in loader] == [b[1].tolist() for b in ref]
    loader.close()


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_sampler_and_batch_sampler(mode):
    ds = D.Indexed(60)
    sub = list(range(0, 60, 3))
    got, ref = both(ds, make=lambda: dict(sampler=SubsetRandomSampler(
        sub, generator=torch.Generator().manual_seed(2))), batch_size=4, **mode)
    assert [g[1].tolist() for g in got] == [r[1].tolist() for r in ref]

    class Uneven:  # batches of 1, 2, 3, ... samples
        def __iter__(self):
            i, k = 0, 1
            while i < 60:
                yield list(range(i, min(i + k, 60)))
                i, k = i + k, k + 1

        def __len__(self):
            return sum(1 for _ in self.__iter__())

    got, ref = both(ds, make=lambda: dict(batch_sampler=Uneven()), **mode)
    assert [g[1].tolist() for g in got] == [r[1].tolist() for r in ref]
    loader = pinloader.DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 7, True))
    assert loader.batch_size is None and len(loader) == 8 and isinstance(loader.batch_sampler, BatchSampler)


def test_attributes_are_torch_objects():
    ds = D.Indexed(10)
    loader = pinloader.DataLoader(ds, batch_size=3, shuffle=True)
    assert loader.dataset is ds and loader.batch_size == 3
    assert type(loader.sampler).__name__ == "RandomSampler"
    assert isinstance(loader.batch_sampler, BatchSampler) and loader.batch_sampler.batch_size == 3
    assert type(pinloader.DataLoader(ds).sampler).__name__ == "SequentialSampler"


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_collate_fn_fixed_and_padded(mode):
    def stack(batch):
        return {"x": torch.stack([torch.as_tensor(a) for a, _ in batch]) * 2,
                "y": torch.tensor([b for _, b in batch])}

    got, ref = both(D.Indexed(21), batch_size=4, collate_fn=stack, **mode)
    for g, r in zip(got, ref):
        same(g, r)
    got, ref = both(D.Sequences(), batch_size=5, collate_fn=D.pad_collate, **mode)
    assert [g[0].shape for g in got] == [r[0].shape for r in ref]
    for g, r in zip(got, ref):
        same(g, r)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_unbatched(mode):
    got, ref = both(D.Mixed(7), batch_size=None, **mode)
    for g, r in zip(got, ref):
        same(g, r)
    got, ref = both(D.Indexed(9), batch_size=None, shuffle=True, **mode)
    assert [int(g[1]) for g in got] == [int(r[1]) for r in ref]


def test_worker_seeds_and_info_match_torch():
    # in_order=True: torch's assignment, batch k on worker k % num_workers
    for w in (1, 3):
        got, ref = both(D.WorkerInfo(), seed=5, batch_size=2, num_workers=w, in_order=True)
        same(got, ref)
    # global random state in workers, as torch seeds it: the same
    # augmentations, since batch k goes to worker k % num_workers as in torch
    for persistent in (True, False):
        got, ref = both(D.GlobalRandom(), seed=11, batch_size=4, num_workers=2,
                        persistent_workers=persistent, in_order=True)
        same(got, ref)
    # the default (balanced): worker info is torch's for whichever worker
    # read the batch: the same ids, count and seeds
    got, ref = both(D.WorkerInfo(), seed=5, batch_size=2, num_workers=3)
    seeds = {(int(i), int(s)) for b in ref for i, s in zip(b[1], b[3])}
    assert {(int(i), int(s)) for b in got for i, s in zip(b[1], b[3])} <= seeds
    assert [b[0].tolist() for b in got] == [b[0].tolist() for b in ref]


def test_spawned_workers_meet_torch_as_torch_workers_do():
    """A spawned worker does not import torch for pinloader (a second or
    more of CPU each); a dataset that imports it inside __getitem__ finds
    it seeded, with get_worker_info() and one thread, as in torch's own
    workers: the same draws as torch's DataLoader, the worker's info and
    thread count too. A dataset that needs no torch never imports it."""
    kw = dict(batch_size=2, num_workers=2, multiprocessing_context="spawn", in_order=True)
    got, ref = both(D.TorchInWorker(), seed=3, **kw)
    for k in (0, 2, 3, 4):
        same([b[k] for b in got], [b[k] for b in ref])
    # torch first met in each worker's first sample (torch's workers have
    # it from their start)
    assert [b[1].tolist() for b in got][:2] == [[0, 1], [0, 1]]
    assert {int(h) for b in got[2:] for h in b[1]} == {1}
    assert {int(n) for b in got for n in b[2]} == {1}
    assert sorted({int(w) for b in got for w in b[4]}) == [0, 1]
    for persistent in (True, False):
        got, ref = both(D.GlobalRandom(), seed=11, batch_size=4, num_workers=2,
                        persistent_workers=persistent, in_order=True,
                        multiprocessing_context="spawn")
        same(got, ref)
    loader = pinloader.DataLoader(D.NoTorch(), batch_size=4, num_workers=2,
                                  multiprocessing_context="spawn", output="numpy")
    assert [b[1].tolist() for b in loader] == [[0] * 4] * 3
    loader.close()


def test_late_torch_after_a_failed_first_sample_draws_as_torch():
    """The first batch's first sample raises: pinloader reads another for
    the batch's layout (torch reads none) and puts the generators back.
    torch imported by that read (spawn: its first import in the worker)
    is put back too, to the seed it was owed: the next batches draw what
    torch's workers draw."""
    def run(make):
        torch.manual_seed(2)
        loader = make(D.FirstRaisesTorchLate(), batch_size=2, num_workers=2,
                      multiprocessing_context="spawn")
        it, out = iter(loader), []
        while True:
            try:
                b = next(it)
            except StopIteration:
                break
            except Exception as e:  # the first batch: sample 0's error, as torch
                out.append("sample 0 is bad" if "sample 0 is bad" in str(e) else repr(e))
                continue
            out.append([b[0].tolist(), b[1].tolist()])
        return out

    got = run(lambda ds, **kw: pinloader.DataLoader(ds, in_order=True, **kw))
    ref = run(DataLoader)
    assert got == ref
    assert got[0] == "sample 0 is bad" and len(got) == 6


def test_numpy_worker_seed_is_torchs():
    """A worker's numpy seed is torch's (_generate_state), made without
    torch: numpy's SeedSequence over the same words."""
    import random

    from torch.utils.data._utils.worker import _generate_state

    from pinloader import _seeding

    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        rng = random.Random(5)
        for base in [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 63 + 12345] + [rng.getrandbits(64) for _ in range(200)]:
            for wid in (0, 1, 7, 255):
                _seeding.seed_worker(base, wid)
                got = np.random.rand(3).tolist()
                np.random.seed(_generate_state(base, wid))
                assert got == np.random.rand(3).tolist(), (base, wid)
    finally:
        random.setstate(saved[0]), np.random.set_state(saved[1]), torch.set_rng_state(saved[2])


def test_import_pinloader_leaves_torch_until_dataloader():
    """import pinloader does not import torch (0.1 s instead of about 1);
    pinloader.DataLoader does, and is torch's DataLoader's subclass, named
    pinloader.DataLoader, as before."""
    import subprocess
    import sys

    code = ("import sys, pinloader\n"
            "print(int('torch' in sys.modules))\n"
            "import pinloader.datasets, pinloader.transforms\n"
            "print(int('torch' in sys.modules))\n"
            "from pinloader import DataLoader\n"
            "import torch.utils.data\n"
            "print(int('torch' in sys.modules), int(issubclass(DataLoader, torch.utils.data.DataLoader)),\n"
            "      DataLoader.__module__, DataLoader.__name__, int(pinloader.DataLoader is DataLoader))\n"
            "print(int('DataLoader' in dir(pinloader)), int(hasattr(pinloader, 'no_such_name')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:4] == ["0", "0", "1 1 pinloader DataLoader 1", "1 0"], out


def test_balanced_workers_random_streams_are_reproducible():
    """Balanced workers (in_order=False): the global generators restart per
    batch from (base seed, epoch, batch), so the augmentations are the same with 2 or 3
    workers and from run to run (torch.manual_seed), differ between
    batches, and differ between epochs."""
    runs = []
    for w in (2, 3, 2):
        torch.manual_seed(4)
        loader = pinloader.DataLoader(D.GlobalRandom(), batch_size=4, num_workers=w, in_order=False)
        runs.append([[b[k].tolist() for k in range(4)] for _ in range(2) for b in loader])
        loader.close()
    assert runs[0] == runs[1] == runs[2]
    first = [b[1][0] for b in runs[0]]  # random.random() of each batch's first sample
    assert len(set(first)) == len(first)  # no two batches (nor epochs) repeat
    for b in runs[0]:
        assert len(set(b[2])) == len(b[2])  # numpy's stream runs on within a batch


def test_worker_init_fn_runs_in_each_worker():
    loader = pinloader.DataLoader(D.InitSeen(), batch_size=2, num_workers=2, worker_init_fn=D.init_record,
                                  in_order=True)
    seen = [b[1].tolist() for b in loader]
    assert seen == [[0, 0], [1, 1], [0, 0], [1, 1]]  # batch k on worker k % 2
    loader.close()


def test_sample_rng_same_for_any_workers():
    runs = []
    for kw in (dict(num_workers=0), dict(num_workers=2), dict(num_workers=3),
               dict(num_workers=2, worker_mode="thread")):
        loader = pinloader.DataLoader(D.PerSample(), batch_size=4, seed=1, shuffle=True, **kw)
        runs.append([dict(zip(b[0].tolist(), b[1].tolist())) for b in loader])
        loader.close()
    for r in runs[1:]:
        assert r == runs[0]
    with pytest.raises(RuntimeError, match="only available"):
        pinloader.sample_rng()


class Shards(IterableDataset):
    def __init__(self, n, jitter=0.0):
        self.n, self.jitter = n, jitter

    def __iter__(self):
        import random
        import time

        wi = torch.utils.data.get_worker_info()
        w, k = (0, 1) if wi is None else (wi.id, wi.num_workers)
        rnd = random.Random(w)
        for i in range(w, self.n, k):
            if self.jitter:  # workers and loader threads race each other
                time.sleep(rnd.uniform(0, self.jitter))
            yield {"x": np.full(2, i, np.float32), "i": i, "s": str(i)}


@pytest.mark.parametrize("workers", [0, 2, 3])
def test_iterable_dataset_shards_like_torch(workers):
    got, ref = both(Shards(29), batch_size=4, num_workers=workers)
    same(got, ref)
    got, ref = both(Shards(29), batch_size=4, num_workers=workers, drop_last=True)
    same(got, ref)
    loader = pinloader.DataLoader(Shards(10), batch_size=4, num_workers=workers)
    assert [b["i"].tolist() for b in loader] == [b["i"].tolist() for b in loader]  # every epoch
    loader.close()
    # batches reach each worker in order however the loader's threads race
    ref = [b["i"].tolist() for b in DataLoader(Shards(60), batch_size=2, num_workers=workers)]
    loader = pinloader.DataLoader(Shards(60, jitter=0.002), batch_size=2, num_workers=workers)
    for _ in range(3):
        assert [b["i"].tolist() for b in loader] == ref
    loader.close()


def test_zip_of_two_iterators_is_independent():
    ds = D.Indexed(20)
    loader = pinloader.DataLoader(ds, batch_size=5, num_workers=2)
    pairs = [(a[1].tolist(), b[1].tolist()) for a, b in zip(loader, loader)]
    assert pairs == [(list(range(i, i + 5)),) * 2 for i in range(0, 20, 5)]
    loader.close()


def test_keeping_every_batch_grows_the_pool():
    ds = D.Indexed(100)
    loader = pinloader.DataLoader(ds, batch_size=4, num_workers=2)
    kept = [b for _ in range(3) for b in loader]  # three epochs' labels, kept
    assert len(kept) == 75
    assert torch.cat([y for _, y in kept]).tolist() == list(range(100)) * 3
    loader.close()


def test_bad_arguments_as_torch():
    ds = D.Indexed(10)
    with pytest.raises(ValueError, match="mutually exclusive"):
        pinloader.DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="shuffle"):
        pinloader.DataLoader(ds, sampler=[0, 1], shuffle=True)
    with pytest.raises(ValueError, match="drop_last"):
        pinloader.DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="prefetch_factor"):
        pinloader.DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="num_workers"):
        pinloader.DataLoader(ds, num_workers=-1)


def test_native_labels_are_int64(mnist_like):
    ip, lp, images, labels = mnist_like
    (x, y), *_ = list(pinloader.DataLoader(pinloader.datasets.IDX(ip, lp), batch_size=37))
    assert y.dtype == torch.int64 and y.tolist() == labels.tolist()
    (x, y), *_ = list(pinloader.DataLoader(pinloader.datasets.IDX(ip, lp, label_dtype="uint8"),
                                           batch_size=37))
    assert y.dtype == torch.uint8
