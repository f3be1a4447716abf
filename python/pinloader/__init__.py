"""pinloader: PyTorch's DataLoader interface over a C loader.

    loader = pinloader.DataLoader(pinloader.datasets.IDX(images, labels),
                                  batch_size=256, shuffle=True, num_workers=4,
                                  device="cuda")
    for epoch in range(10):
        for image, label in loader:   # torch tensors on cuda:0, no extra copy
            ...

Workers are C threads: they read native datasets without the GIL, collate
into (page-locked) batch buffers and, for device="cuda", copy each batch to
the GPU asynchronously. Tensors share the batch's memory through DLPack; a
batch goes back to the pool when the last tensor made from it is freed.
"""
import atexit
import itertools
import weakref

from . import _pinloader as _C
from . import datasets
from ._pinloader import Error

__all__ = ["DataLoader", "Error", "datasets", "cuda_available", "__version__"]

__version__ = _C.version()

STATE_FORMAT = "pinloader.state.v1"


def cuda_available():
    """True when this build has the CUDA backend and a device is usable."""
    return _C.cuda_available()


def _torch():
    try:
        import torch
        import torch.utils.dlpack  # noqa: F401
    except ImportError:
        return None
    return torch


def _warn_cpu_pin(stacklevel):
    """pin_memory=True for CPU batches: said once, when the loader is made.
    Without a GPU in torch's words (so that filters written for torch's
    warning match); with one, that pinloader pins only what it copies."""
    import warnings
    if not cuda_available():
        msg = ("'pin_memory' argument is set as true but no accelerator is found, "
               "then device pinned memory won't be used.")
    else:
        msg = ("pin_memory=True with device='cpu': pinloader does not pin CPU batches; "
               "use device='cuda' to have batches staged in page-locked memory and "
               "copied to the GPU for you")
    warnings.warn(msg, UserWarning, stacklevel=stacklevel)


def _parse_device(device):
    """'cpu' | 'cuda' | 'cuda:N' | torch.device -> (kind, index); index -1
    means 'cuda' without an ordinal: LOCAL_RANK when set, else 0."""
    text = str(device)
    if text == "cpu":
        return "cpu", -1
    if text == "cuda":
        return "cuda", -1
    if text.startswith("cuda:") and text[5:].isdigit():
        return "cuda", int(text[5:])
    raise ValueError("device must be 'cpu', 'cuda' or 'cuda:N', not %r" % (device,))


def _numpy_from(fa):
    import numpy as np

    if fa.device[0] != "cpu":
        raise RuntimeError("numpy arrays cannot hold a CUDA batch: install torch, or use output='raw'")
    if hasattr(np, "from_dlpack"):
        return np.from_dlpack(fa)
    return np.asarray(fa)  # the buffer protocol


def _converter(output):
    if output == "raw":
        return lambda fa: fa
    torch = _torch() if output in ("auto", "torch") else None
    if output == "torch" and torch is None:
        raise ImportError("output='torch' but torch is not importable")
    if torch is not None:
        return torch.utils.dlpack.from_dlpack
    if output not in ("auto", "numpy"):
        raise ValueError("output must be 'auto', 'torch', 'numpy' or 'raw', not %r" % (output,))
    return _numpy_from


def _from_dataset(exc):
    """Whether exc was raised by a Python dataset's __getitem__ (the note
    _pinloader adds; before 3.11 such errors are PL_CALLBACK Errors)."""
    notes = getattr(exc, "__notes__", None) or ()
    return any(str(n).startswith("pinloader: raised by dataset[") for n in notes)


# How DataLoader's arguments reach the C option table (_C.loader_options(),
# pinloader.h PL_OPTION_MAP), which range-checks them (ValueError naming the
# range). Torch-style name -> table name; python/tests/test_options.py checks
# that every table option is reachable. prefetch = prefetch_factor *
# max(1, num_workers); device 'cuda:N' sets device_index too; epoch is set by
# set_epoch().
OPTION_NAMES = {
    "batch_size": "batch_size", "shuffle": "shuffle", "seed": "seed",
    "drop_last": "drop_last", "num_workers": "num_workers",
    "prefetch_factor": "prefetch", "device": "device", "pin_memory": "pin_memory",
    "non_blocking": "non_blocking", "pinned_budget": "pinned_budget",
    "max_batch_buffers": "max_batch_buffers", "direct_copy": "direct_copy",
    "copy_chunk_bytes": "copy_chunk_bytes", "rank": "rank", "world_size": "world_size",
    "timeout": "timeout_s", "log_level": "log_level", "cpu_budget": "cpu_budget",
    "replay_batches": "replay_batches", "replay_after": "replay_after", "timings": "timings",
}
OPTION_METHODS = {"epoch": "set_epoch", "device_index": "device='cuda:N'"}


def _prefetch(prefetch_factor, num_workers):
    if isinstance(prefetch_factor, int) and isinstance(num_workers, int):
        return prefetch_factor * max(1, num_workers)
    return prefetch_factor  # not an int: the C side says what it must be


_live = weakref.WeakSet()


@atexit.register
def _close_all():
    # Stop worker threads before the interpreter finalizes: a worker inside a
    # Python __getitem__ must not meet a dying interpreter.
    for loader in list(_live):
        try:
            loader.close()
        except Exception:
            pass


class DataLoader:
    """torch.utils.data.DataLoader's interface over the C loader.

    Differences from torch: workers are threads and persist for the loader's
    life (persistent_workers is accepted and has no effect); there is no
    sampler / collate_fn: samples are collated by field (a batch is one
    tensor per field, [batch_size, *field shape]); shuffling uses the
    loader's own permutation of (seed, epoch); `timeout` bounds how long one
    sample may take to read (a slower read fails the batch with
    pinloader.Error, status PL_TIMEOUT).

    pin_memory defaults to None: page-locked staging when device is CUDA,
    none for CPU batches; pin_memory=False with a CUDA device stages in
    pageable memory, as torch does without pinning (slower; for comparison).

    Extra arguments: seed, device ('cpu' | 'cuda' | 'cuda:N'), non_blocking,
    pinned_budget (bytes of page-locked memory, 0 = what prefetch needs),
    direct_copy (CUDA: copy samples of 64 KiB and more straight from the
    page-locked data files, no CPU gather; IDX and records datasets),
    max_batch_buffers (batch buffers the pool may grow to, counting batches
    you keep; 0 = prefetch + 2 + num_workers), copy_chunk_bytes, rank /
    world_size (sharding as DistributedSampler; one left out comes from
    torchrun's / MPI's environment: see docs/distributed.md), log_level
    (least level the library logs to the "pinloader" logger), output
    ('auto': torch tensors when torch imports, else numpy arrays; 'torch',
    'numpy', or 'raw' for the DLPack exporters), num_workers / prefetch_factor
    "auto" (tuned while running within cpu_budget cores; an int factor with
    auto workers means 2 per active worker), replay_batches / replay_after
    (headroom: cached batches handed out again), timings (per-stage clocks for
    report(); docs/report.md). OPTION_NAMES maps these to
    the C option table, which range-checks them.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, num_workers=0, pin_memory=None,
                 drop_last=False, prefetch_factor=2, persistent_workers=False, timeout=0, seed=0,
                 device="cpu", non_blocking=True, pinned_budget=0, rank=None, world_size=None,
                 max_batch_buffers=0, output="auto", direct_copy=False, copy_chunk_bytes=0,
                 log_level=None, cpu_budget=0, replay_batches=0, replay_after=0, timings=True):
        if batch_size is None or int(batch_size) < 1:
            raise ValueError("batch_size must be a positive integer (unbatched loading is not supported)")
        # "auto": the C loader tunes workers / depth while it runs (-1 is
        # PL_AUTO), within cpu_budget cores; loader.report() shows the result.
        auto_workers = num_workers == "auto"
        auto_prefetch = prefetch_factor == "auto"
        if auto_workers:
            num_workers = -1
        elif num_workers < 0:
            raise ValueError("num_workers must be >= 0 or 'auto'")
        if prefetch_factor is None:
            prefetch_factor = 2
        if not auto_prefetch and prefetch_factor < 1:
            raise ValueError("prefetch_factor must be >= 1 or 'auto'")
        if timeout < 0:
            raise ValueError("timeout must be >= 0")
        kind, index = _parse_device(device)
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.num_workers = int(num_workers)
        # None: pinned staging for CUDA batches (the point of the exercise);
        # False keeps PyTorch's meaning: pageable staging, a plain copy.
        self.pin_memory = (kind == "cuda") if pin_memory is None else bool(pin_memory)
        if pin_memory and kind == "cpu":
            _warn_cpu_pin(stacklevel=3)
        self.drop_last = bool(drop_last)
        self.prefetch_factor = prefetch_factor if auto_prefetch else int(prefetch_factor)
        self.persistent_workers = bool(persistent_workers)
        self.timeout = float(timeout)
        self.seed = int(seed)
        self.device = kind if index < 0 else "%s:%d" % (kind, index)
        self._convert = _converter(output)
        # A Python dataset gets a callback wrapper of its own, so that the
        # exceptions its __getitem__ raises reach this loader.
        self._ds = datasets.from_python(dataset)
        # The arguments as given (batch_size=2.7 is an error, not 2); None:
        # the table's default, or the environment's sharding.
        self._ld = _C.Loader(self._ds._native, **{
            OPTION_NAMES[k]: v for k, v in dict(
                batch_size=batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last,
                num_workers="auto" if auto_workers else num_workers,
                # auto workers with a fixed factor: the depth follows them
                prefetch_factor="auto" if auto_prefetch else (
                    0 if auto_workers else _prefetch(self.prefetch_factor, num_workers)),
                device=self.device, pin_memory=self.pin_memory, non_blocking=non_blocking,
                pinned_budget=pinned_budget, max_batch_buffers=max_batch_buffers,
                direct_copy=direct_copy, copy_chunk_bytes=copy_chunk_bytes, rank=rank,
                world_size=world_size, timeout=timeout, log_level=log_level, cpu_budget=cpu_budget,
                replay_batches=replay_batches, replay_after=replay_after,
                timings=timings).items()})
        self._mid_epoch = False  # an iteration stopped before the epoch's end
        self._iter_gen = itertools.count(1)
        self._active = 0  # generation of the iterator allowed to run
        _live.add(self)

    # -- torch's interface

    def __len__(self):
        return self._ld.num_batches

    def __iter__(self):
        return self._iterate(self._begin(), self._packer())

    def _begin(self):
        if self._mid_epoch:
            # Like torch: a new iteration is a new epoch, here the next one.
            self._ld.set_epoch(self._ld.epoch + 1)
            self._mid_epoch = False
        self._active = next(self._iter_gen)
        return self._active

    def _iterate(self, gen, pack):
        while True:
            if self._active != gen:
                raise RuntimeError("this DataLoader iterator was superseded by a newer iter() or "
                                   "set_epoch()/load_state_dict() on the same loader")
            try:
                batch = self._ld.next()
            except Error as e:
                # A failed batch ends its epoch; an exhausted pool loses
                # nothing (the epoch goes on once batches are released).
                # getattr: __getitem__ may raise a pinloader.Error of its own.
                if getattr(e, "status", None) != "PL_EXHAUSTED" or _from_dataset(e):
                    self._mid_epoch = False
                raise
            except KeyboardInterrupt:
                # Raised by __getitem__: the C side ended the epoch, and the
                # next iter() begins the next one. Raised while waiting: the
                # next iter() goes on with this epoch, nothing lost.
                self._mid_epoch = False
                raise
            except BaseException:
                self._mid_epoch = False  # __getitem__ raised: epoch ended
                raise
            if batch is None:
                self._mid_epoch = False
                return
            self._mid_epoch = True
            item = pack(batch)
            # Hold no batch in this frame while the consumer runs: a kept
            # traceback or a suspended iterator must not pin a buffer.
            del batch
            yield item
            del item

    def _packer(self):
        convert = self._convert
        structure, keys = self._ds._structure, self._ds._keys

        def fields(batch):
            return [convert(batch.field(i)) for i in range(batch.num_fields)]

        if structure == "bare":
            return lambda b: convert(b.field(0))
        if structure == "list":
            return fields
        if structure == "dict":
            return lambda b: dict(zip(keys, fields(b)))
        if structure == "tuple":
            return lambda b: tuple(fields(b))
        return lambda b: structure(*fields(b))  # a namedtuple class

    def set_epoch(self, epoch):
        """Make the next iteration load `epoch` (its order is a function of
        (seed, epoch)); abandons a partly consumed epoch."""
        epoch = int(epoch)
        if self._mid_epoch or self._ld.epoch != epoch:
            self._ld.set_epoch(epoch)
        self._mid_epoch = False
        self._active = 0

    @property
    def epoch(self):
        """The epoch the next batch belongs to."""
        return self._ld.epoch

    def state_dict(self):
        """The resumable position (pl_loader_save_state) as a dict."""
        return {"format": STATE_FORMAT, "state": self._ld.save_state()}

    def load_state_dict(self, state):
        """Continue from a state_dict(): the next iteration resumes where
        the saved loader stood, also with other num_workers or ranks."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ValueError("not a pinloader DataLoader state_dict (format %r)" % (STATE_FORMAT,))
        self._ld.load_state(state["state"])
        self._mid_epoch = False
        self._active = 0

    # -- extras

    def batches(self):
        """Iterate over raw Batch objects (batch.field(i) exports DLPack;
        batch.sample_indices, .epoch, .index describe it); epochs advance as
        for iter()."""
        return self._iterate(self._begin(), lambda b: b)

    def stats(self):
        """The loader's counters (pl_loader_stats) as a dict."""
        return self._ld.stats()

    def report(self, json=False):
        """The bottleneck report (pl_loader_report): which stage bounds
        throughput (your step, the workers, the copy, ...), by how much, and
        the measurements behind it. json=True: a dict ('bound', 'findings',
        'timings')."""
        text = self._ld.report(json=bool(json))
        if not json:
            return text
        import json as _json
        return _json.loads(text)

    @property
    def device_name(self):
        return self._ld.device[2]

    def close(self):
        """Stop the workers now. Tensors already handed out stay valid."""
        self._ld.close()
        _live.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "pinloader.DataLoader(%d samples, batch_size=%d, num_workers=%d, device=%r)" % (
            len(self.dataset), self.batch_size, self.num_workers, self.device)
