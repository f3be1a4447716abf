"""The global random generators of a worker (random, numpy, torch): put
back (_rng_states), seeded as torch seeds its workers (seed_worker), or
restarted per chunk of a batch for balanced workers (seed_chunk); and
torch's get_worker_info() set inside a worker. What _worker.Filler runs.

Torch only where the dataset brought it: a worker does not import torch
itself (about 1 s of CPU a process; spawn and forkserver workers that
need none start without it). What torch would have been given (its seed,
get_worker_info(), one thread) is kept and given to it the moment it is
imported (_TorchHook): a dataset that imports torch inside __getitem__
draws the same numbers as in torch's own workers, where torch is always
there. numpy's seed is torch's _generate_state, which is numpy's
SeedSequence over [worker_id, base_seed's low and high words]
(python/tests/test_torch_compat.py checks it against torch's).
"""
import importlib.abc
import random
import sys

import numpy as np


class _TorchHook(importlib.abc.MetaPathFinder):
    """Finds torch as the other finders do, and runs _after_torch once its
    module is executed. In sys.meta_path only while torch is not imported
    and something waits for it."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        _disarm()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _AfterTorchLoader(spec.loader)
        return spec


class _AfterTorchLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # torch's own loader from here on, as if no hook had been there
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _after_torch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


_hook = _TorchHook()
# What torch is owed when it comes: its generator's seed (a function of
# torch), get_worker_info()'s arguments, and set_num_threads(1).
_pending = {"seed": None, "info": None, "threads": False}


def _arm():
    if _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)


def _disarm():
    try:
        sys.meta_path.remove(_hook)
    except ValueError:
        pass


def _after_torch(torch):
    seed, info, threads = _pending["seed"], _pending["info"], _pending["threads"]
    _pending.update(seed=None, info=None, threads=False)
    try:
        if threads:
            torch.set_num_threads(1)
        if seed is not None:
            seed(torch)
        if info is not None:
            _set_worker_info(*info)
    except Exception:  # torch's own import error is the dataset's to see
        pass


def _when_torch(key, value):
    """value for torch now if it is imported, else when it is."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch
    _pending[key] = value
    _arm()
    return None


def torch_one_thread():
    """torch.set_num_threads(1), as torch's workers run (now or at its
    import)."""
    torch = _when_torch("threads", True)
    if torch is not None:
        try:
            torch.set_num_threads(1)
        except Exception:
            pass


def _rng_states():
    """The three generators' states; torch's, while it is not imported, as
    the seed it is owed (its state then: nothing drew from it)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return random.getstate(), np.random.get_state(), torch.get_rng_state(), None
    return random.getstate(), np.random.get_state(), None, _pending["seed"]


def _set_rng_states(states):
    """Puts back _rng_states()'s; torch imported meanwhile gets the seed it
    was owed then, as if what drew since had not."""
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch = sys.modules.get("torch")
    if states[2] is not None:
        if torch is not None:
            torch.set_rng_state(states[2])
    elif torch is not None:
        if states[3] is not None:
            states[3](torch)
    else:
        _pending["seed"] = states[3]


def seed_worker(base_seed, worker_id):
    """Seeds random, numpy and torch as torch's workers do."""
    seed = base_seed + worker_id
    random.seed(seed)
    torch = _when_torch("seed", lambda t: t.manual_seed(seed))
    if torch is not None:
        torch.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32])
                   .generate_state(4))


_M64 = (1 << 64) - 1


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def seed_chunk(base_seed, epoch, batch, chunk):
    """Balanced workers (in_order not True: any idle worker reads the next
    batch): random, numpy's global generator and torch's default generator
    restart at each CHUNK samples of a batch from (base seed, epoch, batch
    index, chunk), so that a batch's random augmentations depend neither on
    which worker reads it, nor on how many workers there are, nor on how
    the batch was split. base_seed is the one the loader drew from torch's
    generator when it started its workers (not a later iteration's: batches
    of the next epoch may be read before that epoch's iter() draws one), so
    torch.manual_seed still makes a run reproducible; the epoch makes each
    epoch's draws new. About 20 us a chunk (0.3 us a sample). Chunk 0's
    seed is the batch's alone."""
    h = _splitmix64(_splitmix64(_splitmix64(base_seed & _M64) ^ (epoch & _M64)) ^ (batch & _M64))
    if chunk:
        h = _splitmix64(h ^ _splitmix64(chunk & _M64))
    h2 = _splitmix64(h)
    random.seed(h)
    np.random.seed([h2 & 0xFFFFFFFF, h2 >> 32])
    torch_seed = _splitmix64(h2) >> 1
    torch = _when_torch("seed", lambda t: t.default_generator.manual_seed(torch_seed))
    if torch is not None:
        torch.default_generator.manual_seed(torch_seed)


def _set_worker_info(worker_id, num_workers, seed, dataset):
    """torch.utils.data.get_worker_info() inside a worker: torch's own
    WorkerInfo object, set where torch looks for it (when torch is
    imported: now, else at its import)."""
    if _when_torch("info", (worker_id, num_workers, seed, dataset)) is None:
        return
    try:
        from torch.utils.data._utils import worker as tw
    except Exception:
        return
    tw._worker_info = tw.WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
