"""pinloader among torch's classes: torch's DataLoader as a base class
(frameworks test isinstance(loader, torch.utils.data.DataLoader)) and
DataPipes (shuffle settings, per-iteration seeds, sharding per worker), as
torch's DataLoader handles them. Without torch, none of this applies."""
import inspect
import mmap
import os
import struct


def _torch_data():
    try:
        import torch.utils.data
    except ImportError:
        return None
    return torch.utils.data


def loader_base():
    """The base class of pinloader.DataLoader: _TorchBase (a subclass of
    torch's DataLoader) where torch imports, else object."""
    data = _torch_data()
    if data is None:
        return object

    class _TorchBase(data.DataLoader):
        """torch's DataLoader as a base, none of its __init__ run. What of
        its machinery would act on pinloader's attributes is set aside:
        its multiprocessing_context property (a setter storing into a
        mangled name; pinloader checks and stores the context itself) and
        its _get_iterator (torch's iterators). Its __setattr__, __iter__
        and __len__ are pinloader's (defined on the subclass). Its
        _auto_collation / _index_sampler properties read pinloader's
        batch_sampler / sampler with torch's meaning, and stay."""

        multiprocessing_context = None
        _iterator = None
        _IterableDataset_len_called = None
        _dataset_kind = 0  # torch's _DatasetKind.Map

        def _get_iterator(self):
            return iter(self)

    _TorchBase.__module__ = __name__
    _TorchBase.__qualname__ = "_TorchBase"
    return _TorchBase


def _prefetch_default_none(data):
    """torch >= 2.0: DataLoader(prefetch_factor=None) and a loader without
    workers has prefetch_factor None (torch 1.13: 2, always)."""
    try:
        p = inspect.signature(data.DataLoader.__init__).parameters["prefetch_factor"]
    except (KeyError, TypeError, ValueError):
        return False
    return p.default is None


def torch_attributes(dl, prefetch_given):
    """The attributes torch's DataLoader has that pinloader's would lack,
    with torch's meaning (set in __init__, before the attribute guard)."""
    data = _torch_data()
    if data is None:
        return
    from torch.utils.data.dataloader import _DatasetKind, _InfiniteConstantSampler

    iterable = isinstance(dl.dataset, data.IterableDataset)
    dl._dataset_kind = _DatasetKind.Iterable if iterable else _DatasetKind.Map
    dl._IterableDataset_len_called = None
    dl._iterator = None
    if iterable and dl.sampler is None:
        # torch's: an endless constant sampler (and a BatchSampler over it)
        dl.sampler = _InfiniteConstantSampler()
        if dl.batch_size is not None:
            dl.batch_sampler = data.BatchSampler(dl.sampler, dl.batch_size, dl.drop_last)
    if dl.num_workers == 0 and not prefetch_given and _prefetch_default_none(data):
        # Read back by frameworks that remake loaders from attributes
        # (accelerate's prepare): torch >= 2 refuses 2 without workers.
        dl.prefetch_factor = None


# ---------------------------------------------------------------- DataPipes
#
# torch's DataLoader, for an IterDataPipe: shuffle= goes to the pipe's
# shufflers (graph_settings.apply_shuffle_settings) instead of a sampler;
# each iter() draws a shared seed from the loader's generator (before the
# workers' base seed) and seeds every random pipe from it
# (apply_random_seed), in the loader's process and, identically, in every
# worker (torch 1.13's multi-process iterator draws a second one after the
# base seed, for its own process: drawn and left, after_base_seed); each
# worker applies sharding (apply_sharding over num_workers x
# world_size) before worker_init_fn; without workers, the loader's process
# shards over world_size. pinloader's workers read the shared seed (and
# the distributed world) from a small shared cell written at iter().


def _datapipe_classes():
    data = _torch_data()
    if data is None:
        return None
    try:
        from torch.utils.data.datapipes.datapipe import IterDataPipe, _IterDataPipeSerializationWrapper
    except ImportError:
        return None
    return IterDataPipe, _IterDataPipeSerializationWrapper


class _SeedCell:
    """(shared seed, world size, rank) in shared memory, written by the
    loader at iter(), read by its workers when their iterators start.
    Forked workers inherit the mapping; spawned ones get the memfd."""

    FMT = "<qqq"

    def __init__(self, fd=None):
        if fd is None:
            fd = os.memfd_create("pinloader-datapipe-seed", getattr(os, "MFD_CLOEXEC", 0))
            os.ftruncate(fd, struct.calcsize(self.FMT))
        self.fd = fd
        self.map = mmap.mmap(fd, struct.calcsize(self.FMT))

    def write(self, seed, world, rank):
        self.map[:] = struct.pack(self.FMT, seed, world, rank)

    def read(self):
        return struct.unpack(self.FMT, self.map[:])

    def __reduce__(self):
        from multiprocessing.reduction import DupFd

        return _rebuild_cell, (DupFd(self.fd),)


def _rebuild_cell(dupfd):
    return _SeedCell(dupfd.detach())


def _wrapper_class():
    got = _datapipe_classes()
    if got is None:
        return None
    global _PipeWrapper
    if _PipeWrapper is None:
        IterDataPipe, Wrapper = got

        class PipeWrapper(Wrapper):
            """torch's _IterDataPipeSerializationWrapper (what torch's
            loader.dataset is for an IterDataPipe), with the seed cell."""

            def __init__(self, datapipe):
                super().__init__(datapipe)
                self._pl_seeds = _SeedCell()

            def __getstate__(self):
                # The cell goes to a worker being spawned (its memfd sent
                # along); any other pickling (graph traversal, a copy) has
                # torch's state, the copy a cell of its own.
                from multiprocessing import context

                if context.get_spawning_popen() is None:
                    return super().__getstate__()
                return ("pinloader", super().__getstate__(), self._pl_seeds)

            def __setstate__(self, state):
                if len(state) == 3 and state[0] == "pinloader":
                    _, state, self._pl_seeds = state
                else:
                    self._pl_seeds = _SeedCell()
                super().__setstate__(state)

        PipeWrapper.__module__ = __name__
        PipeWrapper.__qualname__ = "PipeWrapper"
        _PipeWrapper = PipeWrapper
    return _PipeWrapper


_PipeWrapper = None


def __getattr__(name):
    # pickle finds the wrapper's class here (a spawned worker)
    if name == "PipeWrapper" and _wrapper_class() is not None:
        return _PipeWrapper
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def datapipe_dataset(dataset, shuffle):
    """DataLoader(dataset, shuffle=...) for an IterDataPipe, as torch's:
    (the dataset to keep, the shuffle to go on with). The shufflers take
    shuffle= (torch applies it to the pipe and keeps the pipe from before;
    a Shuffler it appends for a pipe without one is lost there too, with
    its warning); the loader keeps torch's serialization wrapper, carrying
    the seed cell. Other datasets come back as given."""
    got = _datapipe_classes()
    if got is None or not isinstance(dataset, got[0]):
        return dataset, shuffle
    from torch.utils.data import graph_settings

    if shuffle is not None:
        graph_settings.apply_shuffle_settings(dataset, shuffle=shuffle)
    return _wrapper_class()(dataset), None


def _world():
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def begin_iteration(dl):
    """At iter(): a DataPipe loader's shared seed, drawn from its generator
    before the workers' base seed (as torch's _BaseDataLoaderIter), and the
    distributed world, for the iterators that start now."""
    ds = dl.dataset
    if _PipeWrapper is None or not isinstance(ds, _PipeWrapper):
        return
    import torch

    seed = int(torch.empty((), dtype=torch.int64).random_(generator=dl.generator).item())
    world, rank = _world()
    ds._pl_seeds.write(seed, world, rank)


def after_base_seed(dl, drawn):
    """After the base seed: torch's multi-process iterator (a new one, not
    a persistent one resumed) draws one more shared seed in its first
    _reset, for the loader's process only (its workers have the first):
    drawn here too, so that later draws of the generator stay torch's."""
    ds = dl.dataset
    if (not drawn or dl.num_workers == 0 or _PipeWrapper is None
            or not isinstance(ds, _PipeWrapper)):
        return
    import torch

    torch.empty((), dtype=torch.int64).random_(generator=dl.generator)


def start_iterator(dataset):
    """iter(dataset) where an IterableDataset's epoch starts (a worker
    process, or the loader's thread): a DataPipe is seeded from the shared
    seed and sharded first, as torch's workers / single-process iterator."""
    if _PipeWrapper is None or not isinstance(dataset, _PipeWrapper):
        return iter(dataset)
    import torch
    from torch.utils.data import get_worker_info, graph_settings

    seed, world, rank = dataset._pl_seeds.read()
    rng = torch.Generator()
    rng.manual_seed(seed)
    graph_settings.apply_random_seed(dataset, rng)
    info = get_worker_info()
    if info is None:  # no worker processes: shard over the ranks
        graph_settings.apply_sharding(dataset, world, rank)
    else:
        graph_settings.apply_sharding(dataset, info.num_workers * world, info.id * world + rank)
    return iter(dataset)
