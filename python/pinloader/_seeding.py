"""The global random generators of a worker (random, numpy, torch): put
back (_rng_states), seeded as torch seeds its workers (seed_worker), or
restarted per chunk of a batch for balanced workers (seed_chunk); and
torch's get_worker_info() set inside a worker. What _worker.Filler runs.
"""
import random
import sys

import numpy as np


def _rng_states():
    torch = sys.modules.get("torch")
    return (random.getstate(), np.random.get_state(),
            torch.get_rng_state() if torch is not None else None)


def _set_rng_states(states):
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch = sys.modules.get("torch")
    if torch is not None and states[2] is not None:
        torch.set_rng_state(states[2])


def seed_worker(base_seed, worker_id):
    """Seeds random, numpy and torch as torch's workers do."""
    seed = base_seed + worker_id
    random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    try:
        from torch.utils.data._utils.worker import _generate_state

        np.random.seed(_generate_state(base_seed, worker_id))
    except Exception:
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
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.manual_seed(_splitmix64(h2) >> 1)


def _set_worker_info(worker_id, num_workers, seed, dataset):
    """torch.utils.data.get_worker_info() inside a worker: torch's own
    WorkerInfo object, set where torch looks for it."""
    try:
        from torch.utils.data._utils import worker as tw
    except Exception:
        return
    tw._worker_info = tw.WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
