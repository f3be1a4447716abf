"""pinloader: PyTorch's DataLoader interface over a C loader.

    loader = pinloader.DataLoader(dataset, batch_size=256, shuffle=True,
                                  num_workers=8, device="cuda")
    for epoch in range(10):
        for image, label in loader:   # torch tensors on cuda:0, no extra copy
            ...

The C loader is the engine: it claims batches in order, prefetches, fills
them into (page-locked) batch buffers and, for device="cuda", copies each to
the GPU asynchronously. Native datasets (pinloader.datasets) are read by its
worker threads without the GIL. A Python dataset with num_workers > 0 is
read by worker PROCESSES that write each sample straight into the shared
batch buffer (a memfd the parent page-locks): no pickling of samples, no
pin-memory thread, no second host copy. Tensors share the batch's memory
through DLPack; a batch goes back to the pool when the last tensor made from
it is freed. See python/README.md, "Coming from torch".
"""
import atexit
import errno
import itertools
import os
import pickle
import random
import re
import select
import socket
import signal
import sys
import threading
import types
import weakref

from . import _collate
from . import _compat
from . import _pinloader as _C
from . import _state
from . import _worker
from . import datasets
from . import transforms as _transforms
from ._pinloader import Error
from ._worker import sample_rng

transforms = _transforms
__all__ = ["DataLoader", "DCPState", "Error", "datasets", "transforms", "cuda_available",
           "sample_rng", "__version__"]

__version__ = _C.version()

STATE_FORMAT = _state.STATE_FORMAT
DCPState = _state.DCPState

# A batch buffer count no consumer reaches: the pool grows as batches are
# kept, as torch's would (max_batch_buffers= sets a hard cap).
_UNBOUNDED_BUFFERS = 1 << 20
# An IterableDataset has no length: its loader runs over this many batch
# slots and the iteration ends when every worker has run out.
_ITERABLE_BATCHES = 1 << 40


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
        return _collate.torch_converter(torch)  # names a dtype torch lacks
    if output not in ("auto", "numpy"):
        raise ValueError("output must be 'auto', 'torch', 'numpy' or 'raw', not %r" % (output,))
    return _numpy_from


def _channels_last(convert, names):
    """torch tensors of the named [N,H,W,C] fields as their [N,C,H,W]
    channels_last view (transforms.ChannelsLast)."""
    def conv(fa):
        t = convert(fa)
        return t.permute(0, 3, 1, 2) if fa.name in names and hasattr(t, "permute") else t
    return conv


def _as_bool(x):
    """A uint8 field holding bools, viewed as bool (torch or numpy)."""
    if hasattr(x, "view") and hasattr(x, "dtype") and str(x.dtype).startswith("torch."):
        import torch

        return x.view(torch.bool)
    import numpy as np

    if isinstance(x, np.ndarray):
        return x.view(np.bool_)
    return x


def _cast(x, dtype):
    """x (a torch tensor or numpy array) as `dtype` ("int64")."""
    if hasattr(x, "to") and str(getattr(x, "dtype", "")).startswith("torch."):
        import torch

        return x.to(getattr(torch, dtype))
    if hasattr(x, "astype"):
        return x.astype(dtype)
    return x


def _from_dataset(exc):
    """Whether exc was raised by a Python dataset's __getitem__ (the note
    _pinloader adds; before 3.11 such errors are PL_CALLBACK Errors)."""
    notes = getattr(exc, "__notes__", None) or ()
    return any(str(n).startswith("pinloader: raised by dataset[") for n in notes)


def _add_note(exc, note):
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python < 3.11
        exc.__notes__ = list(getattr(exc, "__notes__", [])) + [note]


def _new_error(status, message):
    e = Error(message)
    e.status, e.code = status, _C.STATUS.get(status, 0)
    e.sample_index = e.path = e.errno = e.cuda_error = None  # as a C error without them
    return e


def _is_iterable_dataset(ds):
    torch = _torch()
    if torch is not None:
        from torch.utils.data import IterableDataset

        if isinstance(ds, IterableDataset):
            return True
    return not hasattr(ds, "__getitem__") and hasattr(ds, "__iter__")


def _mp_context(ctx):
    import multiprocessing

    if ctx is None:
        return multiprocessing.get_context()
    if isinstance(ctx, str):
        return multiprocessing.get_context(ctx)
    return ctx


def _torch_major():
    """The installed torch's major version (2 where torch is absent: the
    newest words)."""
    try:
        import torch
        return int(torch.__version__.split(".")[0])
    except (ImportError, ValueError):
        return 2


def _warn_past_length(dl, reported, yielded):
    """torch's warning (its words) for an IterableDataset that yields more
    batches than len(loader) said."""
    import warnings

    # In the installed torch's words: torch 2 dropped the space before "(".
    gap = " " if _torch_major() < 2 else ""
    msg = ("Length of IterableDataset {} was reported to be {}{}(when accessing len(dataloader)), "
           "but {} samples have been fetched. ").format(dl.dataset, reported, gap, yielded)
    if dl.num_workers > 0:
        msg += ("For multiprocessing data-loading, this could be caused by not properly "
                "configuring the IterableDataset replica at each worker. Please see "
                "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset "
                "for examples.")
    warnings.warn(msg)


def _check_mp_context(ctx, num_workers):
    """multiprocessing_context= checked as torch checks it; a start
    method's name becomes its context."""
    if ctx is None:
        return None
    import multiprocessing
    import multiprocessing.context

    if num_workers == 0:
        raise ValueError("multiprocessing_context can only be used with multi-process loading "
                         "(num_workers > 0), but got num_workers=%s" % (num_workers,))
    if isinstance(ctx, str):
        valid = multiprocessing.get_all_start_methods()
        if ctx not in valid:
            raise ValueError("multiprocessing_context option should specify a valid start method "
                             "in %r, but got multiprocessing_context=%r" % (valid, ctx))
        ctx = multiprocessing.get_context(ctx)
    if not isinstance(ctx, multiprocessing.context.BaseContext):
        raise TypeError("multiprocessing_context option should be a valid context object or a "
                        "string specifying the start method, but got multiprocessing_context=%s"
                        % (ctx,))
    return ctx


def _signal_name(code):
    import signal

    try:
        return signal.Signals(code).name
    except ValueError:
        return "signal %d" % code


# How DataLoader's arguments reach the C option table (_C.loader_options(),
# pinloader.h PL_OPTION_MAP), which range-checks them (ValueError naming the
# range). Torch-style name -> table name; python/tests/test_options.py checks
# that every table option is reachable. prefetch = prefetch_factor *
# max(1, num_workers); device 'cuda:N' sets device_index too; epoch is set by
# set_epoch(). DataLoader._loader_options is the one place that maps them.
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
OPTION_METHODS = {"epoch": "set_epoch", "device_index": "device='cuda:N'",
                  "explicit_order": "sampler= (or shuffle=True without seed=)",
                  "error_ends_epoch": "always off: as torch's, an iterator goes on past a "
                                      "batch that raised",
                  "decode": "datasets.ImageFolder(decode=...)"}


def _prefetch(prefetch_factor, num_workers):
    if prefetch_factor is None:  # torch >= 2's attribute without workers
        prefetch_factor = 2
    if isinstance(prefetch_factor, int) and isinstance(num_workers, int):
        return prefetch_factor * max(1, num_workers)
    return prefetch_factor  # not an int: the C side says what it must be


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


_live = weakref.WeakSet()


def _readable(fds, timeout):
    """The descriptors of fds (ints, or objects with fileno()) readable
    within timeout seconds (None: forever; 0: now), as their filenos. poll,
    not select: select() refuses descriptors above 1023 (a process with many
    files open)."""
    poller = select.poll()
    for f in fds:
        poller.register(f, select.POLLIN | select.POLLHUP | select.POLLERR)
    ms = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
    return {fd for fd, _ in poller.poll(ms)}


# Worker processes of this process's loaders (multiprocessing Process
# objects). A child forked from here (os.fork, a multiprocessing Process)
# inherits them in multiprocessing's children set, and multiprocessing's
# atexit (_exit_function) would terminate them, daemons that they are, when
# that child exits: they are the parent's, not the child's.
_worker_procs = weakref.WeakSet()
# Set in the parent while it forks a worker: the child (inheriting it)
# freezes what it inherited before anything is allocated there.
_fork_gc = None


def _after_fork_in_child():
    global _fork_gc
    try:
        import multiprocessing.process as mpp

        for p in list(_worker_procs):
            mpp._children.discard(p)
    except Exception:
        pass
    _worker_procs.clear()
    if _fork_gc is not None:
        # A forked worker must never collect the parent's garbage: a loader
        # freed there would stop the parent's threads' copies and shut the
        # parent's sockets. Frozen objects are never collected (Python's
        # advice for forked children). The parent forked with its
        # collector off, so that none ran here before this.
        import gc

        gc.freeze()
        if _fork_gc:
            gc.enable()
        _fork_gc = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_all():
    # Stop worker threads and processes before the interpreter finalizes:
    # a worker inside a Python __getitem__ must not meet a dying interpreter.
    for loader in list(_live):
        try:
            loader.close()
        except Exception:
            pass


# torch's words when a process runs out of file descriptors.
_EMFILE_TEXT = ("Too many open files. Communication with the workers is no longer possible. "
                "Please increase the limit using `ulimit -n` in the shell or change the sharing "
                "strategy by calling `torch.multiprocessing.set_sharing_strategy('file_system')` "
                "at the beginning of your code")


def _check_worker_number(num_workers):
    """torch's check_worker_number_rationality: a UserWarning, in torch's
    words, for more workers than this process may use cores."""
    if not num_workers:
        return
    import warnings

    suggest, cpuset = None, False
    if hasattr(os, "sched_getaffinity"):
        try:
            suggest, cpuset = len(os.sched_getaffinity(0)), True
        except Exception:
            pass
    if suggest is None:
        suggest = os.cpu_count()
    if suggest is not None and num_workers <= suggest:
        return
    if suggest is None:
        told = "DataLoader is not able to compute a suggested max number of worker in current system."
    else:
        told = ("Our suggested max number of worker in current system is %d%s, which is smaller "
                "than what this DataLoader is going to create." % (
                    suggest, "" if cpuset else " (`cpuset` is not taken into account)"))
    warnings.warn("This DataLoader will create %d worker processes in total. %s Please be aware "
                  "that excessive worker creation might get DataLoader running slow or even "
                  "freeze, lower the worker number to avoid potential slowness/freeze if "
                  "necessary." % (num_workers, told), UserWarning, stacklevel=3)


def _keys_folder():
    """A folder name of this process's own for _worker.Keys (made at its
    first epoch of keys)."""
    import tempfile

    return os.path.join(tempfile.gettempdir(), "pinloader-keys-%d-%s" % (os.getpid(), os.urandom(6).hex()))


def _start_worker(p):
    """p.start() with the collector off: a forked child must not collect
    before _after_fork_in_child freezes what it inherited. The parent's own
    generations are left as they were (gc.freeze / unfreeze here would move
    every object of the parent into the oldest generation, where its
    cyclic garbage waits for a full collection)."""
    import gc

    global _fork_gc
    was = gc.isenabled()
    _fork_gc = was  # read by the child, if this start forks one
    gc.disable()
    try:
        p.start()
    finally:
        _fork_gc = None
        if was:
            gc.enable()


# ---------------------------------------------------------------- engines

class _Engine:
    """One C loader with what fills it: a native dataset, or a Python
    dataset's filler (worker processes, or in-process on the loader's
    threads). A DataLoader has one; a second iterator alive at the same
    time (zip(loader, loader)) gets one of its own, as torch's does."""

    def __init__(self, dl, base_seed, first_epoch=0):
        # Weakly: the loader holds its engines, and a cycle between them
        # would keep a dropped loader (and its worker processes) alive until
        # a cyclic collection. The iterators hold the loader (iterate).
        self._dl = weakref.ref(dl)
        self.pid = os.getpid()
        self.procs = []
        self.ps = None
        self.broken = False
        self.closed = False
        self.started = False  # an iteration began on it
        self.fresh = False  # set_epoch / load_state_dict: begin where it stands
        self.exhausted = set()  # IterableDataset workers that ran out
        self.delivered_state = self.epoch_start_state = None  # (begin_epoch, iterate)
        self.next_epoch = first_epoch  # an explicit order's next epoch
        self.base_seed = base_seed
        self.seed_ahead = False  # base_seed drawn before an iter(): that iter()'s (_primary)
        self.extra = False  # a second iterator's engine (zip(loader, loader))
        self.guess = None  # the next epoch's order, guessed and queued
        self.look_at = None  # (epoch, batch index): when to guess it
        self.trailing = None  # the sampler's draw still to come (_Trailing)
        self.calls = 0  # next() calls of this epoch's iteration (torch's requests)
        self.deferred = None  # an explicit order drawn at the first next() (_draw_deferred)
        # Resume (_state): the explicit epoch's order, batches taken of it;
        # an IterableDataset's workers' states at the batches taken.
        self.order, self.taken, self.wstates, self.ran_out = None, 0, None, False
        self.first_batch = None  # records the iteration's first batch (_state.FirstBatch)
        plan = dl._plan
        self.spec = None
        self.socks = []  # worker processes' sockets, until the ProcSet takes them
        self.ready = []
        self._ld = None  # the C loader; for a Python dataset made at the first next()
        self._shadow = None  # until then, a loader over nothing (_ShadowLoader) keeps the order
        self.shadow_order = None  # (epoch, indices, starts) given to the shadow
        self.probes = None  # {worker: first sample asked of it} until the replies are read
        self.probed = {}  # {worker: its reply}: the layout each made
        if plan.native is not None:
            self.ds = plan.native
            threads = dl.num_workers
        else:
            # Worker processes get batches as torch assigns them (batch k to
            # worker k % num_workers, each worker's random state running on
            # as in torch), unless in_order=False asks for balanced workers:
            # any idle worker reads the next batch, the global generators
            # restart every 64 samples of a batch (_worker.seed_chunk). An
            # IterableDataset's batches belong to the worker whose share
            # they are.
            balanced = dl.worker_mode == "process" and dl.in_order is False and not plan.iterable
            spec = _worker.Spec(plan.dataset, plan.template, plan.c_batch, dl.collate_fn,
                                plan.unbatched, dl.worker_init_fn, dl.num_workers, base_seed,
                                plan.iterable, dl.drop_last, batch_seeding=balanced)
            _state.prepare_spec(dl, spec)
            if plan.unbatched and dl._explicit:
                spec.keys = _worker.Keys(_keys_folder())
            self.spec = spec
            if dl.worker_mode == "process":
                self._start_processes(spec, dl)
                threads = dl.num_workers
            else:
                self._local = _LocalFiller(spec)
                self.ps = _C.ProcSet([], [], [], self._local)
                # One iterator must be read in order: one thread at most.
                threads = min(dl.num_workers, 1) if plan.iterable else dl.num_workers
        self.threads = threads
        self.first_epoch = first_epoch
        depth = _prefetch(dl.prefetch_factor, threads)
        self.depth = depth if isinstance(depth, int) else 4 * max(1, threads)
        if plan.native is not None:
            extra = {"transforms": dl._xf_specs} if dl._xf_specs else {}
            self._ld = _C.Loader(self.ds, **extra, **dl._loader_options(threads, first_epoch))

    @property
    def ld(self):
        """The C loader; for a Python dataset before its first batch, the
        shadow loader (same order and options, over no data): the template
        comes from the first sample a worker reads (prepare)."""
        if self._ld is not None:
            return self._ld
        if self._shadow is None:
            if self.closed:
                raise _new_error("PL_CLOSED", "the loader is closed")
            self._shadow = _ShadowLoader(self.dl, self.threads, self.first_epoch)
        return self._shadow.ld

    # -- the first batch: the template, then the C loader

    def prepare(self):
        """_prepare with Ctrl-C held off: SIGINT while the first sample is
        read, the workers' "ready" read and the C loader made is raised
        once that is done (batch 0 then comes at the next next(), nothing
        lost): an interrupt half-way would leave a probe's reply or a
        "ready" unread. From a thread other than the main one, as is."""
        if threading.current_thread() is not threading.main_thread():
            return self._prepare()
        got = []

        def held(signum, frame):
            got.append(signum)

        try:
            old = signal.signal(signal.SIGINT, held)
        except (ValueError, TypeError):
            return self._prepare()
        try:
            ld = self._prepare()
        finally:
            signal.signal(signal.SIGINT, old)
        if got:
            if callable(old):
                old(signal.SIGINT, None)  # the handler that was there (Python's: KeyboardInterrupt)
            elif old == signal.SIG_DFL:
                raise KeyboardInterrupt
        return ld

    def _prepare(self):
        """At the first next(): the layout of the samples from the first
        sample read (by the worker that reads it first, as torch's would,
        or here with num_workers=0), then the C loader made for it, where
        the shadow stood. Returns the C loader (LoaderIter takes it)."""
        dl = self.dl
        plan = dl._plan
        shadow = self._shadow
        if shadow is None:
            self.ld  # noqa: B018 (made: the order of an engine made at iter())
            shadow = self._shadow
        state = None
        if self._shadow_placed():
            state = shadow.ld.save_state()
        epoch = shadow.ld.epoch
        b = shadow.ld.next()
        first = shadow.first(b)  # (index, epoch, seed, batch) or None: an empty epoch
        if first is not None:
            epoch = first[1]
        try:
            if plan.template is None or self.probes:
                t = self._learn(first)  # (replies to read also when another engine learned it)
            if plan.template is None:
                plan.template = t
                plan.c_fields = [("%d" % f.index, f.c_dtype, f.shape) for f in t.fields]
                # (batch_size=None: a sample laid out otherwise comes whole.)
                plan.needs_extra = (t.nobjs > 0 or dl.collate_fn is not None or plan.iterable
                                    or plan.unbatched)
            if self.socks:
                self._send_template()
                self._make_procset()
            elif self.spec is not None and self.spec.template is None:
                self.ps_filler.set_template(plan.template)
            self.spec.template = plan.template
            self.ds = _C.from_workers(self.ps, shadow.length, plan.c_fields)
            opts = dl._loader_options(self.threads, epoch)
            # The rank the shadow took (from the environment, announced
            # once), not read again.
            got = shadow.ld.options
            opts.update(rank=got["rank"], world_size=got["world_size"])
            ld = _C.Loader(self.ds, **opts)
            if state is not None and ld.save_state() != state:
                # (Only where it moved: loading restarts the stream, and a
                # batch a worker began would be read twice, its draws too.)
                ld.load_state(state)
            elif self.shadow_order is not None:
                _C.set_order(ld, *self.shadow_order)
            self._ld = ld
            self._finish_start()
        except BaseException:
            self.broken = True
            raise
        finally:
            if self.socks and self._ld is not None:
                for sk in self.socks:
                    sk.close()
                self.socks = []
        self._shadow = None
        shadow.close()
        return self._ld

    @property
    def ps_filler(self):
        return self._local.filler

    def start_probes(self):
        """At iter(), where torch's workers begin reading: each worker that
        reads one of the epoch's first batches (torch's assignment: worker
        w, batch w; an IterableDataset: every worker) is asked to read that
        batch's first sample and keep it, all at once, so that datasets
        that wait for their workers (a barrier) wait for nothing else. Its
        reply, the layout, is read at the first next() (_learn). Balanced
        workers: worker 0 reads batch 0's first sample alone."""
        if self._ld is not None or not self.socks or self.probes is not None:
            return
        self.probes = {}
        if self.dl._plan.template is not None:
            return  # learned by another engine of the loader: sent at _prepare
        n = len(self.socks)
        iterable = self.dl._plan.iterable
        for f in self._firsts(1 if self.spec.batch_seeding else n):
            index, epoch, seed, batch, rest = f
            w = batch % n
            ids = [] if iterable else [index, *rest]
            head = _worker.REQ.pack(_worker.REQ_MAGIC, 0, len(ids), _worker.REQ_PROBE,
                                    0, 0, epoch, seed, batch, self.base_seed & 0xFFFFFFFFFFFFFFFF, 0)
            try:
                self.socks[w].sendall(head + b"".join(i.to_bytes(8, sys.byteorder) for i in ids))
            except OSError:
                pass  # it died: said when its reply is read
            self.probes[w] = f

    def _shadow_placed(self):
        """Whether the C loader goes where the shadow stands (its state
        moved to it): the loader's own order; an IterableDataset's stream
        where a restore put it (load_state_dict: the first slot after the
        saved one, not batch 0, whose fill would move a worker's iterator)."""
        if self.dl._explicit:
            return False
        return not self.dl._plan.iterable or getattr(self.spec, "pl_resume", None) is not None

    def _firsts(self, want):
        """(index, epoch, seed, batch) of the epoch's first `want` batches'
        first samples, from the shadow, which is put back after."""
        dl, plan = self.dl, self.dl._plan
        self.ld  # noqa: B018 (the shadow, made)
        shadow = self._shadow
        state = shadow.ld.save_state() if self._shadow_placed() else None
        firsts = []
        try:
            while len(firsts) < want:
                f = shadow.first(shadow.ld.next())
                if f is None or (firsts and f[1] != firsts[0][1]):
                    break  # the epoch has fewer batches
                firsts.append(f)
        finally:
            if state is not None:
                shadow.ld.load_state(state)
            elif self.shadow_order is not None:
                _C.set_order(shadow.ld, *self.shadow_order)
        return firsts

    def _learn(self, first):
        """The template: of the first sample, read by the worker that reads
        it (an IterableDataset: the first worker whose share is not empty);
        a placeholder for an empty epoch."""
        dl = self.dl
        if not self.socks:
            if first is not None:
                try:
                    t = self.ps_filler.probe(*first)
                except Exception:
                    t = None  # kept: raised again by its batch, as torch raises it
                if t is not None:
                    return t
            # An empty epoch, as torch's (nothing to take shapes from), or a
            # first sample that raised: a placeholder layout.
            return _collate.Template(0)
        self.start_probes()  # (an iterator made before the loader had one)
        probes, self.probes = self.probes, {}
        chosen = None
        for w in sorted(probes, key=lambda w: probes[w][3]):
            got = self._probe_reply(w, probes[w])
            self.probed[w] = got
            if got[0] == "error":
                # Its worker raises it again at its batch, as torch's does;
                # another worker's sample gives the layout.
                continue
            if chosen is not None or got[0] == "none":
                continue
            if got[0] == "t":
                chosen = got[1]
            else:  # does not pickle: read here too
                index, epoch = probes[w][:2]
                keys = self.spec.keys
                chosen = _probe(dl, index if keys is None else keys.get(epoch, index))
        # Every first sample raised (each raised again by its batch, as
        # torch's), or an empty epoch: a placeholder layout.
        return chosen if chosen is not None else _collate.Template(0)

    def _probe_reply(self, w, first):
        s, p = self.socks[w], self.procs[w]
        if not self.ready[w]:
            self._wait_ready(w, s, p)
            self.ready[w] = True
        index, epoch, seed, batch = first[:4]
        iterable = self.dl._plan.iterable
        what = "its first item" if iterable else "batch %d of epoch %d (samples %d)" % (batch, epoch, index)
        status, payload = self._read_reply(w, s, p, self.dl.timeout, what)
        if status != _worker.REP_OK:
            tl = int.from_bytes(payload[:4], sys.byteorder)
            return "error", _rebuild(pickle.loads(payload[4 + tl:]), w, p.pid)
        return pickle.loads(payload)

    def _send_template(self):
        """The template to every worker but the one that made it (those
        whose share was empty included); when it does not pickle, its
        signature, and each worker makes it from its first sample."""
        t = self.dl._plan.template
        try:
            blob = pickle.dumps(("t", t), protocol=pickle.HIGHEST_PROTOCOL)
            pickle.loads(blob)
        except Exception:
            blob = pickle.dumps(("sig", _worker.signature(t)))
        head = _worker.REQ.pack(_worker.REQ_MAGIC, 0, 0, _worker.REQ_TEMPLATE, len(blob), 0,
                                0, 0, 0, 0, 0)
        sig = _worker.signature(t)
        for w, s in enumerate(self.socks):
            got = self.probed.get(w, ("none",))
            if self.spec.template is not None or (got[0] == "t" and _worker.signature(got[1]) == sig) \
                    or (got[0] == "local" and got[1] == sig):
                continue  # it made the same from its own first sample
            try:
                s.sendall(head + blob)
            except OSError:
                pass  # a dead worker: the C loader says so at its batch

    @property
    def dl(self):
        dl = self._dl()
        if dl is None:
            raise _new_error("PL_CLOSED", "the loader is closed")
        return dl

    # -- worker processes

    def _start_processes(self, spec, dl):
        """Forks (or spawns) the workers. Their sockets stay here until the
        first next(): the first sample is read (prepare), then the ProcSet
        and the C loader are made."""
        ctx = _mp_context(dl.multiprocessing_context)
        spec.parent_pid = None if ctx.get_start_method() == "forkserver" else os.getpid()
        try:
            for w in range(dl.num_workers):
                parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                self.socks.append(parent)
                self.ready.append(False)
                p = ctx.Process(target=_worker.worker_main, args=(child, spec, w), daemon=True,
                                name="pinloader-worker-%d" % w)
                try:
                    _start_worker(p)
                finally:
                    child.close()
                self.procs.append(p)
                _worker_procs.add(p)
        except BaseException as e:
            for sk in self.socks:
                sk.close()
            self.socks = []
            self._stop_processes()
            if isinstance(e, OSError) and e.errno == errno.EMFILE:
                raise RuntimeError(_EMFILE_TEXT) from None
            raise

    def _make_procset(self):
        """The ProcSet over the workers' sockets (its own copies of them).
        A batch may be split over idle workers (the first round of an
        iteration) when a chunk writes everything it holds into the batch
        memory: no pickled parts, no collate_fn."""
        spec = self.spec
        for w, s in enumerate(self.socks):
            if not self.ready[w] and _readable([s], 0):
                self._wait_ready(w, s, self.procs[w])
                self.ready[w] = True
        split = (spec.batch_seeding and spec.collate_fn is None and not spec.unbatched
                 and self.dl._plan.template.nobjs == 0)
        self.ps = _C.ProcSet([s.fileno() for s in self.socks], [p.sentinel for p in self.procs],
                             [p.pid for p in self.procs], balanced=spec.batch_seeding,
                             split=split, ready=list(self.ready))

    def _finish_start(self):
        """Waits for the workers still starting, each given batches as its
        "ready" comes (its error, from worker_init_fn, raised here). As
        torch's, timeout= does not limit a worker's start."""
        for w, s in enumerate(self.socks):
            if not self.ready[w]:
                self._wait_ready(w, s, self.procs[w])
                self.ready[w] = True
                self.ps.set_ready(w)

    def _read_reply(self, w, s, p, timeout, what):
        """(status, payload) of worker w's next reply. Its death is an
        Error naming it, its pid, what it was doing and the signal;
        timeout (seconds, 0: none) is torch's, for a batch."""
        head = b""
        while len(head) < _worker.REP.size:
            r = _readable([s, p.sentinel], timeout or None)
            if not r:
                p.kill()
                raise _new_error("PL_TIMEOUT", "DataLoader timed out after %s seconds: worker %d "
                                 "(pid %d) did not finish %s and was killed"
                                 % (self.dl._timeout_text, w, p.pid, what))
            if s.fileno() in r:
                try:
                    chunk = s.recv(_worker.REP.size - len(head))
                except OSError:
                    chunk = b""
                if chunk:
                    head += chunk
                    continue
            p.join(1.0)
            raise _new_error("PL_CALLBACK", "%spinloader worker %d (pid %d) exited while %s%s"
                             % (self._torch_death(p), w, p.pid, what, self._exit_text(p)))
        magic, status, n = _worker.REP.unpack(head)
        payload = b""
        while len(payload) < n:
            chunk = s.recv(n - len(payload))
            if not chunk:
                break
            payload += chunk
        return status, payload

    def _wait_ready(self, w, s, p):
        status, payload = self._read_reply(w, s, p, 0, "starting")
        if status != _worker.REP_OK:
            tl = int.from_bytes(payload[:4], sys.byteorder)
            report = pickle.loads(payload[4 + tl:])
            raise _rebuild(report, w, p.pid)

    @staticmethod
    def _exit_text(p):
        code = p.exitcode
        if code is None:
            return ""
        if code < 0:
            return " (killed by %s)" % _signal_name(-code)
        return " (exit code %d)" % code

    @staticmethod
    def _torch_death(p):
        """torch's words for a dead worker, first, for code that matches
        them (its signal handler's, then its iterator's)."""
        code = p.exitcode
        head = ""
        if code is not None and code < 0:
            try:
                name = signal.strsignal(-code) or _signal_name(-code)
            except ValueError:
                name = _signal_name(-code)
            head = "DataLoader worker (pid %d) is killed by signal: %s. " % (p.pid, name)
        return head + "DataLoader worker (pid(s) %d) exited unexpectedly: " % p.pid

    def describe_death(self, w):
        if w >= len(self.procs):
            return ""
        p = self.procs[w]
        p.join(1.0)
        return self._exit_text(p)

    def _stop_processes(self):
        if self.ps is not None:
            self.ps.shutdown()  # EOF: idle workers exit at once
        import time

        deadline = time.monotonic() + 0.5
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():  # busy in __getitem__: a process can be killed
                p.kill()
        for p in self.procs:
            p.join(5.0)
            try:
                p._pl_exitcode = p.exitcode  # (for _WorkerView, once closed)
                p.close()
            except Exception:
                pass
        self.procs = []

    def close(self):
        if self.closed or os.getpid() != self.pid:
            return  # an inherited copy in a forked child is not ours to stop
        self.closed = True
        if self.ps is not None:
            self.ps.shutdown()  # loader threads waiting on a worker return
        if self._ld is not None:
            self._ld.close()
        if self._shadow is not None:
            self._shadow.close()
            self._shadow = None
        for sk in self.socks:
            sk.close()  # EOF: the workers exit
        self.socks = []
        self._stop_processes()
        if self.ps is not None:
            self.ps.close()
        if self.spec is not None and self.spec.keys is not None:
            self.spec.keys.remove()

    # -- orders and iteration

    def begin_epoch(self, base_seed):
        """Make the C loader ready for an iteration. Go on with the epoch
        an interruption left (Ctrl-C, PL_EXHAUSTED: the pending batch comes
        first); else start the next epoch, its order drawn as torch draws
        it (an explicit order: kept in the stream when it is the one queued
        early, see _look_ahead) or made by the C loader (its own order)."""
        dl, ld = self.dl, self.ld
        mid, resumable = _C.iter_state(ld)
        if mid and resumable and not self.fresh:
            return
        if self.base_seed is None:  # an engine made before the first iter()
            self.base_seed = base_seed
        guess, self.guess, self.look_at = self.guess, None, None
        self.trailing = None  # a break before it: torch never draws it
        self.calls = 0
        self.taken, self.ran_out = 0, False
        if not self.fresh:
            self.wstates = None  # (a restore's, when fresh)
        if guess is not None and (mid or self.fresh or _C.has_pending(ld) or ld.epoch != guess.epoch):
            guess = None  # the stream does not go on into it (a break, set_epoch)
        _C.reset_iter_state(ld)
        plan = dl._plan
        went_on = False
        if dl._explicit:
            epoch = self.next_epoch
        elif self.fresh:
            epoch = ld.epoch  # set_epoch / load_state_dict put it there
        elif mid or (plan.iterable and self.started):
            epoch = ld.epoch + 1  # abandoned mid-epoch: torch starts anew
            if self.ps is not None:
                self.ps.clear_extras()  # of batches never taken
            ld.set_epoch(epoch)
        else:
            epoch = ld.epoch  # the stream already went on to it
            went_on = True
        if self.ps is not None:
            if self.started and not dl.persistent_workers and base_seed is not None:
                # As a fresh torch worker: reseeded, worker_init_fn again,
                # at this epoch's first batch.
                self.ps.set_base_seed(epoch, base_seed & 0xFFFFFFFFFFFFFFFF)
                if went_on and self.procs and not self.spec.batch_seeding:
                    # Batches the stream read ahead into this epoch were read
                    # with the last epoch's random states (torch's fresh
                    # workers read nothing before iter()): read them again.
                    self.ps.clear_extras()
                    ld.set_epoch(epoch)
        self.deferred = None
        if dl._explicit:
            # Each iter() is an epoch (its transforms' draws, its workers'
            # seeds), also one dropped before its first batch.
            self.next_epoch = epoch + 1
            if dl.num_workers == 0 and guess is None:
                # torch's single-process iterator draws the sampler's order
                # at the first next(), not at iter() (its worker processes
                # draw at iter(), for their first batches): an iter()
                # dropped before its first batch draws nothing there.
                self.deferred = (epoch, base_seed, guess)
            else:
                self._draw_order(epoch, base_seed, guess)
        self.started = True
        self.fresh = False
        self.exhausted = set()
        self.delivered_state = None  # the own order's state after the last batch taken
        own = not dl._explicit and not dl._plan.iterable and self._ld is not None
        self.epoch_start_state = self._ld.save_state() if own else None

    def _draw_order(self, epoch, base_seed, guess):
        """An explicit order's epoch: the sampler's batches, drawn as
        torch draws them, given to the C loader (unless it is the order
        already queued early, the guess)."""
        batches, self.trailing = _state.epoch_batches(self, epoch)
        self._tick(0)
        batches = self._keyed(epoch, batches)
        indices, starts = _order_arrays(batches)
        if guess is None or not guess.matches(epoch, base_seed, indices, starts):
            if self.ps is not None:
                self.ps.clear_extras()  # of batches never taken
            _C.set_order(self.ld, epoch, indices, starts)  # drops a queued guess
            if self._ld is None:  # the shadow's: the C loader takes it at its first batch
                self.shadow_order = (epoch, indices, starts)
        self._plan_guess(epoch, len(batches))

    def _keyed(self, epoch, batches):
        """batch_size=None: a sampler's keys that are not ints (index
        lists) go to the workers by file (_worker.Keys); the order holds
        their positions."""
        keys = self.spec.keys if self.spec is not None else None
        if keys is None:
            return batches
        import numpy as np

        if all(isinstance(b[0], (int, np.integer)) for b in batches):
            keys.drop(epoch)
            return batches
        keys.put(epoch, [b[0] for b in batches])
        return [[k] for k in range(len(batches))]

    def _draw_deferred(self):
        """LoaderIter's check, before each next(): the order a
        single-process iteration draws at its first next()."""
        d, self.deferred = self.deferred, None
        if d is not None:
            self._draw_order(*d)

    # -- the next epoch's order, guessed before iter() (beyond torch)
    #
    # torch's workers wait at each epoch's end: the next epoch's order is
    # drawn at iter(), from torch's generator. So waited this loader's, for
    # the prefetch depth's last batches of every epoch (8% of 14 workers'
    # time in bench/python_workers.py's aug). When pinloader made the
    # sampler itself (shuffle=True, no seed=, no sampler), it draws the next
    # epoch's order early, from a copy of the generator's state (the
    # generator itself is not touched), as iter() would draw it if nobody
    # drew from the generator meanwhile, and queues it
    # (pl_loader_queue_order): the workers go on into it. iter() still
    # draws the order from the generator, as torch; the queued batches stand
    # only if that order (and the base seed) is the one guessed, else the
    # stream restarts with it. The order and the generator are always
    # torch's; a wrong guess costs only work the workers did instead of
    # waiting.

    def _plan_guess(self, epoch, nbatches):
        dl = self.dl
        if self.extra or dl._user_sampler or not dl._explicit or nbatches == 0 or dl.num_workers == 0:
            return
        if dl._plan.native is None and (not self.procs or dl.in_order is not False):
            # A Python dataset read in this process (worker_mode="thread")
            # would run __getitem__ early here, moving torch's generator
            # before iter() draws from it; with in_order=True a dropped
            # guess would move the workers' own random streams (and the
            # round robin would meet the next epoch early).
            return
        self.look_at = (epoch, max(0, nbatches - 2 * self.depth))

    def _look_ahead(self, b):
        """Called with each batch packed: at look_at, guess and queue the
        next epoch's order."""
        if (b.index, b.epoch) != (self.look_at[1], self.look_at[0]):
            return
        self.look_at = None
        dl = self.dl
        try:
            trailing = self.trailing.n if isinstance(self.trailing, _Trailing) else None
            seed, indices, starts = _draw_ahead(dl, dl._kept_base_seed(self), trailing)
        except Exception:
            return  # iter() draws for itself and raises it there
        if len(starts) < 2:
            return  # an empty epoch: nothing to begin early
        epoch = self.next_epoch
        if self.ps is not None and not dl.persistent_workers:
            self.ps.set_base_seed(epoch, seed & 0xFFFFFFFFFFFFFFFF)
        try:
            _C.queue_order(self.ld, epoch, indices, starts)
        except Error:
            return
        self.guess = _Guess(epoch, seed, indices, starts)

    def _tick(self, calls=1):
        """Counts next() calls (a batch, a failed batch, the end), and draws
        the sampler's trailing randperm at the call torch's draws it."""
        self.calls += calls
        t = self.trailing
        if isinstance(t, _Shadow):
            t.advance(self.calls)
        elif t is not None and self.calls >= t.at:
            self.trailing = None
            t.draw()

    def set_epoch(self, epoch):
        self.guess = None
        self.look_at = None
        self.trailing = None
        _C.reset_iter_state(self.ld)
        if self.ps is not None:
            self.ps.clear_extras()
        self.ld.set_epoch(epoch)
        self.next_epoch = epoch
        self.fresh = True

    def iterate(self, raw=False):
        # The iterator's callbacks hold the loader (the engine holds it
        # weakly): `for b in DataLoader(...)` keeps it while it runs.
        dl = self.dl
        plan = dl._plan
        engine = self
        packer = [(lambda b: b) if raw else None]
        # torch's NOTE [ IterableDataset and __len__ ]: an iterator made
        # after len(loader) warns at each batch past that length.
        reported = dl._IterableDataset_len_called if plan.iterable else None
        yielded = [0]
        # The loader's own order: its state after each batch taken, for a
        # state_dict() after a worker died (the C loader has stepped past
        # the batch that failed with it, which a restore must read again).
        own_order = not dl._explicit and not plan.iterable

        def pack(b):
            engine._tick()
            engine.taken += 1
            if own_order:
                engine.delivered_state = engine._ld.save_state()
            if engine.first_batch is not None:
                engine.first_batch = engine.first_batch()  # (None: once)
            if engine.look_at is not None:
                engine._look_ahead(b)
            inner = packer[0]
            if inner is None:  # made with the template, at the first batch
                inner = packer[0] = engine._packer()
            out = inner(b)
            if reported is not None and out is not _SKIP:
                yielded[0] += 1
                if yielded[0] > reported:
                    _warn_past_length(dl, reported, yielded[0])
            return out

        def on_end():
            if dl is not None:  # (held for the iterator's life)
                engine._tick()

        check = dl._checker(self)
        if self.deferred is not None:
            inner_deferred = check

            def check():
                engine._draw_deferred()
                return inner_deferred() if inner_deferred is not None else None
        if self._ld is None:
            # The first next() learns the samples' layout and makes the C
            # loader (prepare); LoaderIter goes on with the loader returned.
            inner_check = check

            def check():
                if engine._ld is None:
                    if engine.deferred is not None:
                        engine._draw_deferred()  # the shadow's order, first
                    return engine.prepare()
                r = inner_check() if inner_check is not None else None
                # The C loader, each time: the iterator takes it if it still
                # holds the shadow (a prepare() that raised Ctrl-C after).
                return engine._ld if r is None else r
        skip = _SKIP if plan.iterable and not raw else None
        it = _C.LoaderIter(self.ld, pack, check, self._on_error, skip, on_end)
        it._workers = [_WorkerView(p) for p in self.procs]  # (no cycle through the engine)
        if self._ld is None and self.socks:
            self.start_probes()  # torch's workers begin at iter()
        return it

    def _packer(self):
        dl, plan, ps = self.dl, self.dl._plan, self.ps
        convert = dl._convert
        if plan.native is not None:
            structure, keys = plan.native_structure, plan.native_keys
            casts = plan.native_casts
            if structure == "bare":
                return lambda b: _cast(convert(b.field(0)), casts[0]) if 0 in casts else convert(b.field(0))

            def fields(batch):
                out = [convert(batch.field(i)) for i in range(batch.num_fields)]
                for i, to in casts.items():
                    if i < len(out):
                        out[i] = _cast(out[i], to)
                return out

            if structure == "list":
                return fields
            if structure == "dict":
                return lambda b: dict(zip(keys, fields(b)))
            if structure == "tuple":
                return lambda b: tuple(fields(b))
            return lambda b: structure(*fields(b))
        t = plan.template
        nf = len(t.fields)
        bools = [f.is_bool for f in t.fields]
        collate_obj = _default_collate_objects()
        unbatched, iterable, user_collate = plan.unbatched, plan.iterable, dl.collate_fn is not None
        # IterableDataset: each worker process iterates its own copy; one
        # filler (thread mode) is one iterator.
        workers = max(1, dl.num_workers) if self.procs else 1
        engine = self
        whole = (lambda s: s) if convert is _numpy_from else _default_convert()

        def pack(b):
            arrays = [convert(b.field(i)) for i in range(nf)]
            for i in range(nf):
                if bools[i]:
                    arrays[i] = _as_bool(arrays[i])
            raw = ps.take_extra(b.stream, b.epoch, b.index) if plan.needs_extra else None
            if iterable:
                got, objs, wstate = _state.split_payload(raw)
                _state.took_iterable(engine, b.index % workers, wstate)
                if got == 0:
                    engine.exhausted.add(b.index % workers)
                    if len(engine.exhausted) >= workers:
                        engine.ran_out = True
                        raise StopIteration
                    return _SKIP
                arrays = [a[:got] for a in arrays]
                if user_collate and not unbatched:
                    return _collate.build_collated(t, t.root, arrays, objs)
                return _collate.build(t, t.root, arrays, objs, collate_obj, unbatched)
            if user_collate and not unbatched:
                extras = pickle.loads(raw) if raw else {}
                return _collate.build_collated(t, t.root, arrays, extras)
            objs = pickle.loads(raw) if raw else [[] for _ in range(t.nobjs)]
            if isinstance(objs, _collate.Whole):
                return whole(objs.sample)
            return _collate.build(t, t.root, arrays, objs, collate_obj, unbatched)

        return pack

    def _on_error(self, it, exc):
        """A failed next(): the exception the consumer sees. As torch's, the
        iterator goes on past a batch that raised (in __getitem__, in
        collate_fn, in a worker or while the batch is put together here):
        only that batch is lost (the C loader's error_ends_epoch is off),
        and the epoch counts as begun, so that a new iter() starts the next
        one. A dead worker, a stall, a closed loader end the iteration."""
        if isinstance(exc, KeyboardInterrupt):
            return exc  # nothing was lost: iterating again resumes
        status = getattr(exc, "status", None)
        if status == "PL_EXHAUSTED" and isinstance(exc, Error):
            it.resumable = 1  # nothing lost: release batches and go on
            return exc
        out = self._error_for(exc, status)
        if self.broken or (isinstance(exc, Error) and status in _ENDS_ITERATION):
            # The stream itself may go on into the next epoch (the loader's
            # own order, an epoch queued early): that is the next iter()'s.
            it.mid_epoch = 0
            it.ended = 1
        else:
            it.mid_epoch = 1
            if not it.ended:
                self._tick()  # a failed batch is one of torch's requests too
                self.taken += 1
        return out

    def _error_for(self, exc, status):
        """The exception the consumer sees for exc (a worker's own, rebuilt;
        a dead worker named); sets broken when the workers must restart."""
        if not isinstance(exc, Error) or status is None:
            return exc
        msg = str(exc)
        if re.search(r"\[pinloader-died (\d+)\]", msg):
            self.broken = True  # (also with a worker's exception: a split batch)
        m = re.search(r"\[pinloader-error (\d+)\]", msg)
        if m and self.ps is not None:
            rep = self.ps.take_error(int(m.group(1)))
            if isinstance(rep, BaseException):  # in-process: itself
                sample = getattr(rep, "_pinloader_sample", None)
                where = "dataset[%d]" % sample if sample is not None else "a batch"
                _add_note(rep, "pinloader: raised by %s (%s)" % (where, msg))
                return rep
            if rep is not None:
                tl = int.from_bytes(rep[:4], sys.byteorder)
                report = pickle.loads(rep[4 + tl:])
                wm = re.search(r"\(worker (\d+), pid (\d+)\)", msg)
                w, pid = (int(wm.group(1)), int(wm.group(2))) if wm else (-1, -1)
                return _rebuild(report, w, pid)
            return exc
        m = re.search(r"\[pinloader-died (\d+)\]", msg)
        if m:
            self.broken = True
            w = int(m.group(1))
            text = msg.replace(m.group(0), "").rstrip() + self.describe_death(w)
            if w < len(self.procs):
                text = self._torch_death(self.procs[w]) + text
            text += "; the loader's workers are restarted at the next iteration"
            return _new_error(status, text)
        if status == "PL_TIMEOUT" and self.procs:
            self.broken = True  # the stuck worker is killed: start afresh
        if status != "PL_TIMEOUT" or self._dl() is None or msg.startswith("DataLoader timed out"):
            return exc
        m = re.match(r"sample (\d+): still loading after ([0-9.]+) s", msg)
        if m and self.dl.collate_fn is not None:
            # The worker's clock names the last sample it began; with a
            # collate_fn the batch may be past its samples, in collate_fn.
            text = ("no batch after %s s; the worker is in collate_fn, or in dataset[%s] (the "
                    "last sample it began)" % (m.group(2), m.group(1)))
        else:
            text = msg
        # torch's words first, for code that matches them
        e = _new_error(status, "DataLoader timed out after %s seconds: %s" % (self.dl._timeout_text, text))
        for field in ("sample_index", "path", "errno", "cuda_error"):
            setattr(e, field, getattr(exc, field, None))  # the C error's, as raised
        e.__cause__ = exc
        return e


# Errors of next() after which the iteration cannot go on: a stall (the
# stuck worker is killed, the C loader skipped the epoch), a closed loader,
# a copy to the device that failed; and any dead worker (engine.broken).
_ENDS_ITERATION = frozenset(("PL_TIMEOUT", "PL_CLOSED", "PL_BAD_STATE", "PL_CUDA", "PL_NO_DEVICE",
                             "PL_UNSUPPORTED", "PL_NOT_READY"))


class _WorkerView:
    """One worker process as torch's iterators list them in _workers (code
    written for torch reads pid, join(), is_alive()), also once the loader
    has closed the Process object (it was joined then)."""

    __slots__ = ("_p", "pid", "name")

    def __init__(self, p):
        self._p, self.pid, self.name = p, p.pid, p.name

    def join(self, timeout=None):
        try:
            self._p.join(timeout)
        except ValueError:
            pass  # closed by the loader, after joining it

    def is_alive(self):
        try:
            return self._p.is_alive()
        except ValueError:
            return False

    @property
    def exitcode(self):
        try:
            return self._p.exitcode
        except ValueError:
            return getattr(self._p, "_pl_exitcode", None)  # as it was when the loader closed it

    def terminate(self):
        try:
            self._p.terminate()
        except ValueError:
            pass  # closed by the loader, after it exited

    def kill(self):
        try:
            self._p.kill()
        except ValueError:
            pass


class _SkipType:
    __slots__ = ()


_SKIP = _SkipType()


def _rebuild(report, w, pid):
    exc = report.rebuild()
    where = report.where
    _add_note(exc, "pinloader: raised by %s in worker %d (pid %d). Original traceback:\n%s"
              % (where, w, pid, report.traceback.rstrip()))
    return exc


def _default_collate_objects():
    """How object leaves (strings, objects) of default-collated batches are
    collated in the consumer: torch's default_collate (strings -> lists)."""
    torch = _torch()
    if torch is None:
        return lambda vals: list(vals)
    from torch.utils.data import default_collate

    return default_collate


def _default_convert():
    """What torch's DataLoader does to a sample with batch_size=None:
    default_convert (numpy arrays to tensors)."""
    torch = _torch()
    if torch is None:
        return lambda s: s
    from torch.utils.data._utils.collate import default_convert

    return default_convert


class _LocalFiller:
    """Filling on the loader's own threads (worker_mode='thread', or
    num_workers=0), under the GIL: the same code the processes run."""

    def __init__(self, spec):
        self.filler = _worker.Filler(spec, 0)

    def fill_local(self, mv, offsets, indices, epoch, seed, batch_index):
        views = self.filler._field_views(mv, offsets)
        return self.filler.fill(indices, epoch, seed, batch_index, views,
                                writer=self.filler.writer(views))


# ---------------------------------------------------------------- plans

class _Plan:
    """What a DataLoader's dataset becomes for the C loader: a native
    dataset, or a Python dataset's template and C fields."""

    native = None
    native_casts = {}
    native_structure = "tuple"
    native_keys = None
    dataset = None
    template = None
    c_fields = None
    c_length = 0
    c_batch = 1
    unbatched = False
    iterable = False
    needs_extra = False


def _probe(dl, index):
    """The template of dataset[index] read here: only when the one a worker
    made does not pickle (a class defined in a function), with the global
    random states put back after, so that it draws nothing from torch's,
    numpy's or random's generators."""
    import numpy as np

    ds = dl.dataset
    torch = _torch()
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state() if torch else None)
    try:
        if dl._plan.iterable:
            it = iter(ds)
            try:
                s0 = next(it)
            finally:
                del it
        else:
            s0 = ds[index]
        spec = _worker.Spec(ds, None, dl._plan.c_batch, dl.collate_fn, dl._plan.unbatched, None,
                            dl.num_workers, 0, dl._plan.iterable)
        return _worker.make_template(spec, s0)
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        if torch is not None:
            torch.set_rng_state(states[2])


class _NoFill:
    """The shadow loader's filler: writes nothing; notes where each batch
    it was asked for begins (its first sample, epoch, sample seed)."""

    def __init__(self):
        self.calls = {}

    def fill_local(self, mv, offsets, indices, epoch, seed, batch_index):
        if indices:
            # (the rest of the batch: where a first sample that raises
            # leaves the layout to learn, _worker.Filler.probe)
            self.calls[(epoch, batch_index)] = (indices[0], epoch, seed, batch_index, tuple(indices[1:]))
        return b""


class _ShadowLoader:
    """A C loader over no data (one placeholder byte a sample), with the
    DataLoader's order and options: it stands for a Python dataset's loader
    until the first batch, whose first sample gives the layout (torch reads
    nothing before). Its length is the dataset's at iter() time."""

    def __init__(self, dl, threads, epoch):
        plan = dl._plan
        self.filler = _NoFill()
        self.length = _ITERABLE_BATCHES * plan.c_batch if plan.iterable else len(dl.dataset)
        ds = _C.from_workers(_C.ProcSet([], [], [], self.filler), self.length, [("_", "uint8", ())])
        # The DataLoader's options (what .options, stats() and report() show
        # before the first batch), but on the CPU: a byte a sample needs no
        # pinned memory, nor a device made ready before iteration.
        opts = dl._loader_options(threads, epoch)
        opts.update(device="cpu", pin_memory=False)
        self.ld = _C.Loader(ds, **opts)

    def first(self, b):
        """(index, epoch, seed, batch) of batch b's first sample; None for
        no batch (an empty epoch)."""
        if b is None:
            return None
        return self.filler.calls.get((b.epoch, b.index))

    def close(self):
        self.ld.close()


# ---------------------------------------------------------------- DataLoader

class DataLoader(_compat.loader_base()):
    """torch.utils.data.DataLoader's interface over the C loader.

    The arguments are torch's, in torch's order, with the same meaning
    (sampler, batch_sampler, collate_fn, worker_init_fn, generator,
    multiprocessing_context, prefetch_factor, persistent_workers, timeout,
    batch_size=None for unbatched loading, IterableDataset). Batches are made
    as default_collate makes them. See python/README.md, "Coming from
    torch", for what differs and why.

    pinloader's own arguments (keyword only):
      seed          shuffle with the loader's own permutation of (seed,
                    epoch), resumable with state_dict() and sharded by rank
                    (None: shuffle=True follows torch's generator / global
                    seed, as torch's RandomSampler)
      device        'cpu' | 'cuda' | 'cuda:N': batches arrive there
      non_blocking  copy asynchronously, ordered by events (default)
      pinned_budget bytes of page-locked memory (0: what prefetch needs)
      direct_copy   CUDA, native datasets: copy large samples straight from
                    the page-locked data files
      max_batch_buffers  a hard cap on batch buffers, counting batches you
                    keep (0: none; the pool grows as batches are kept)
      rank, world_size   shard the loader's own order as DistributedSampler
                    (None: torchrun's / MPI's environment, else 0 of 1)
      output        'auto' (torch tensors when torch imports, else numpy),
                    'torch', 'numpy', or 'raw' (DLPack exporters)
      in_order      None (default) or True: batch k goes to worker
                    k % num_workers with torch's per-worker seeding and
                    random streams, exactly as torch; False: balanced, any
                    idle worker process reads the next batch, and the
                    global random generators restart per batch from (base
                    seed, epoch, batch): reproducible with any number of
                    workers, not torch's draws. Batches arrive in order
                    either way. The dataset is never read in this process:
                    the samples' layout comes from the first sample a
                    worker reads (from iter() on, as torch).
      worker_mode   'process' (Python datasets with num_workers > 0: worker
                    processes writing into shared batch memory) or 'thread'
                    (the loader's threads, under the GIL; the default for
                    native datasets, which need no GIL)
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=None, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="", in_order=None,
                 seed=None, device="cpu", non_blocking=True, pinned_budget=0, rank=None,
                 world_size=None, max_batch_buffers=0, output="auto", direct_copy=False,
                 copy_chunk_bytes=0, log_level=None, cpu_budget=0, replay_batches=0, replay_after=0,
                 timings=True, transforms=None, worker_mode=None):
        prefetch_given = prefetch_factor is not None
        self._first_batch = _state.FirstBatch()  # report()'s time to the first batch
        # An IterDataPipe: shuffle= goes to its shufflers, as torch's.
        dataset, shuffle = _compat.datapipe_dataset(dataset, shuffle)
        # "auto": the C loader tunes its threads / depth while it runs
        # (within cpu_budget cores; loader.report() shows the result). A
        # Python dataset's worker processes are started up front: one per
        # core the tuner may use, the C threads choosing how many are busy.
        self._auto_workers = num_workers == "auto"
        self._auto_prefetch = prefetch_factor == "auto"
        if self._auto_workers:
            try:
                cores = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                cores = os.cpu_count() or 1
            num_workers = max(1, min(cores, int(cpu_budget) or cores))
        if self._auto_prefetch:
            prefetch_factor = 2
        if isinstance(num_workers, bool) or int(num_workers) != num_workers or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor < 1:
            raise ValueError("prefetch_factor must be >= 1")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        kind, index = _parse_device(device)
        iterable = _is_iterable_dataset(dataset)
        if iterable:
            if shuffle not in (None, False):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 "but got shuffle=%r" % (shuffle,))
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 "option, but got sampler=%s" % (sampler,))
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 "batch_sampler option, but got batch_sampler=%s" % (batch_sampler,))
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        # The options that reach the C loader as given, by the C table's
        # names: one dict, built here once and passed unchanged to the check
        # and to every loader (_loader_options adds those worked out there).
        self._options = {OPTION_NAMES[k]: v for k, v in dict(
            non_blocking=non_blocking, pinned_budget=pinned_budget, max_batch_buffers=max_batch_buffers,
            direct_copy=direct_copy, copy_chunk_bytes=copy_chunk_bytes, rank=rank,
            world_size=world_size, timeout=timeout, log_level=log_level, cpu_budget=cpu_budget,
            replay_batches=replay_batches, replay_after=replay_after, timings=timings).items()}
        # The C option table's checks, now (ValueError naming the range),
        # though a Python dataset's loader is made at the first iteration.
        _C.check_options(**self._options, **{OPTION_NAMES[k]: v for k, v in dict(
            batch_size=1 if batch_size is None else batch_size, shuffle=bool(shuffle),
            seed=0 if seed is None else seed, drop_last=drop_last, num_workers=num_workers,
            prefetch_factor="auto" if self._auto_prefetch else _prefetch(prefetch_factor, num_workers),
            device=str(device),
            pin_memory=bool(pin_memory) if pin_memory is not None else True).items()})
        if worker_mode not in (None, "process", "thread"):
            raise ValueError("worker_mode must be 'process' or 'thread', not %r" % (worker_mode,))
        multiprocessing_context = _check_mp_context(multiprocessing_context, num_workers)
        _check_worker_number(num_workers if not self._auto_workers else 0)

        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self.num_workers = int(num_workers)
        self.collate_fn = collate_fn
        self.drop_last = bool(drop_last)
        self.timeout = float(timeout)
        self._timeout_text = str(timeout)  # torch's message shows it as given
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = int(prefetch_factor)
        self.persistent_workers = bool(persistent_workers)
        self.pin_memory_device = pin_memory_device
        # Batches always arrive in order; in_order=True also keeps torch's
        # worker assignment and random streams (see _Engine).
        self.in_order = in_order
        self.shuffle = bool(shuffle)
        self.seed = None if seed is None else int(seed)
        self.device = kind if index < 0 else "%s:%d" % (kind, index)
        self._kind, self._index = kind, index
        # None: pinned staging for CUDA batches (the point of the exercise);
        # False keeps PyTorch's meaning: pageable staging, a plain copy.
        self.pin_memory = (kind == "cuda") if pin_memory is None else bool(pin_memory)
        if pin_memory and kind == "cpu":
            _warn_cpu_pin(stacklevel=3)
        self._convert = _converter(output)
        # pinloader.transforms (RandomCrop, Normalize...): in C, on a native
        # dataset's fields (on the GPU after the copy for CUDA batches).
        self._xf_specs, channels_last = _transforms.specs(transforms)
        if transforms and not isinstance(dataset, datasets.Dataset):
            raise ValueError("transforms= applies to pinloader's native datasets (their named "
                             "fields); a Python dataset transforms in __getitem__")
        if channels_last:
            self._convert = _channels_last(self._convert, channels_last)
        self._lock = threading.Lock()

        native = isinstance(dataset, datasets.Dataset)
        if native and collate_fn is not None:
            raise ValueError("collate_fn needs a Python dataset: a native pinloader dataset is "
                             "collated by field in C")
        if worker_mode is None:
            worker_mode = "process" if (not native and self.num_workers > 0) else "thread"
        if native:
            worker_mode = "thread"
        self.worker_mode = worker_mode

        # The order: the loader's own (no sampler, sequential or seeded
        # shuffle: resumable, sharded) or an explicit one from a torch
        # sampler, drawn in Python each epoch as torch draws it.
        self._user_sampler = sampler is not None or batch_sampler is not None
        self._explicit = not iterable and (self._user_sampler or (self.shuffle and self.seed is None
                                                                 and _torch() is not None))
        self.sampler, self.batch_sampler = self._samplers(sampler, batch_sampler)

        plan = self._plan = _Plan()
        plan.iterable = iterable
        plan.unbatched = self.batch_size is None and batch_sampler is None
        plan.c_batch = 1 if plan.unbatched else (self.batch_size or self._max_batch_len())
        if native:
            plan.native = dataset._native
            plan.native_structure, plan.native_keys = dataset._structure, dataset._keys
            plan.native_casts = dict(getattr(dataset, "_casts", {}))
        else:
            # The samples' layout (plan.template) comes from the first
            # sample a worker reads (from iter() on): torch reads
            # nothing of the dataset before (_Engine.start_probes, prepare).
            plan.dataset = dataset
        self._next_explicit_epoch = 0
        self._engine = None
        self._extra_engines = []
        self._last_iter = None
        self._closed = False
        if native or self.worker_mode == "thread":
            self._engine = _Engine(self, None)  # cheap: threads, no processes
        _live.add(self)
        _compat.torch_attributes(self, prefetch_given)  # torch's, where torch is installed
        self._initialized = True

    # As torch's: what the iteration was planned from cannot change after.
    _FIXED = frozenset(("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                        "persistent_workers"))
    _initialized = False
    _IterableDataset_len_called = None  # torch's: len(loader) of an IterableDataset, once asked

    def __setattr__(self, attr, val):
        if self._initialized and attr in self._FIXED:
            raise ValueError("%s attribute should not be set after %s is initialized"
                             % (attr, type(self).__name__))
        object.__setattr__(self, attr, val)

    # DataLoader[int], as torch's DataLoader (a Generic) allows.
    __class_getitem__ = classmethod(types.GenericAlias)

    # -- torch's samplers

    def _samplers(self, sampler, batch_sampler):
        torch = _torch()
        if torch is None or _is_iterable_dataset(self.dataset):
            return sampler, batch_sampler
        from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

        if sampler is None and batch_sampler is None:
            if self.shuffle and self.seed is None:
                sampler = RandomSampler(self.dataset, generator=self.generator)
            elif self.shuffle:
                sampler = _SeededSampler(self)
            else:
                sampler = SequentialSampler(self.dataset)
        if batch_sampler is None and self.batch_size is not None:
            batch_sampler = BatchSampler(sampler, self.batch_size, self.drop_last)
        return sampler, batch_sampler

    def _max_batch_len(self):
        """A user batch_sampler: buffers sized for its longest batch. torch's
        BatchSampler says it (batch_size) without being iterated: iterating
        it here would draw its sampler's permutation (from its generator, or
        torch's global one) before torch would, and shift every epoch. Any
        other batch sampler is passed over once now; one whose batches grow
        later than that is refused at set_order with a clear error."""
        bs = self.batch_sampler
        try:
            from torch.utils.data import BatchSampler
        except ImportError:
            BatchSampler = None
        if (BatchSampler is not None and isinstance(bs, BatchSampler)
                and type(bs).__iter__ is BatchSampler.__iter__
                and isinstance(bs.batch_size, int) and bs.batch_size > 0):
            return bs.batch_size
        # (a batch sampler with state is put back after: _state)
        return _state.passed_over(bs, lambda: max((len(b) for b in bs), default=1))

    def _epoch_batches(self):
        """This epoch's batches, drawn as torch's DataLoader draws them, and
        the _Trailing draw still to come (None: drawn already, or none)."""
        s, bs = self.sampler, self.batch_sampler
        torch = _torch()
        if not self._user_sampler and torch is not None:
            from torch.utils.data import BatchSampler, RandomSampler

            n = len(self.dataset)
            if (type(s) is RandomSampler and s.generator is not None and not s.replacement
                    and s._num_samples is None and n > 0
                    and (bs is None or type(bs) is BatchSampler)):
                perm = torch.randperm(n, generator=s.generator).tolist()
                if bs is None:
                    batches, requests = [[i] for i in perm], n + 1
                else:
                    k = bs.batch_size
                    batches = [perm[i:i + k] for i in range(0, n, k)]
                    if bs.drop_last and n % k:
                        batches.pop()
                    requests = len(batches) + (0 if (n % k and not bs.drop_last) else 1)
                ahead = _prefetch(self.prefetch_factor, self.num_workers) if self.num_workers else 0
                at = requests if not self.num_workers else max(0, requests - ahead)
                return batches, _Trailing(s.generator, n, at)
        gens = _own_generators(s, bs) if self._user_sampler else None
        states = [g.get_state() for g in gens] if gens else None
        if bs is not None:
            batches = [list(b) for b in bs]
        else:
            batches = [[i] for i in s]  # unbatched
        if not gens:
            return batches, None
        for g, st in zip(gens, states):
            g.set_state(st)  # as before the epoch: the shadow draws again
        ahead = _prefetch(self.prefetch_factor, self.num_workers) if self.num_workers else 0
        if not isinstance(ahead, int):  # prefetch_factor="auto": torch's default
            ahead = 2 * self.num_workers
        return batches, _Shadow(bs if bs is not None else s, ahead)

    def _kept_base_seed(self, eng):
        """The base seed an iter() keeps instead of drawing one: with
        persistent_workers, torch's DataLoader has one iterator for its
        life, whose base seed was drawn once; so does pinloader's engine
        (until a worker died: a new engine draws anew). None: draw."""
        if (self.persistent_workers and self.num_workers > 0 and eng is not None
                and eng.started and not eng.broken):
            return eng.base_seed
        return None

    def _draw_base_seed(self):
        """torch's base seed for this iteration's workers: one draw of the
        loader's generator (or the global one) per iter(), as torch's."""
        torch = _torch()
        if torch is None:
            return random.getrandbits(63)
        return int(torch.empty((), dtype=torch.int64).random_(generator=self.generator).item())

    # -- the C loader's options: every DataLoader argument that reaches C

    def _loader_options(self, threads, epoch=0):
        """DataLoader arguments -> _C.Loader options (the C table's names,
        OPTION_NAMES), in one place. Values go as given where the user gave
        them, so that the C table's range checks name them."""
        plan = self._plan
        native_order = not self._explicit and not plan.iterable
        opts = dict(self._options)  # as given (DataLoader.__init__)
        if not native_order:  # an explicit order is this rank's already
            opts["rank"], opts["world_size"] = 0, 1
        # 0: no cap of the user's; the pool then grows as batches are kept.
        opts["max_batch_buffers"] = opts["max_batch_buffers"] or _UNBOUNDED_BUFFERS
        opts.update({OPTION_NAMES[k]: v for k, v in dict(
            batch_size=plan.c_batch,
            shuffle=self.shuffle and native_order,
            seed=self.seed or 0,
            drop_last=self.drop_last if native_order else False,
            num_workers=threads,
            prefetch_factor=_prefetch(self.prefetch_factor, threads),
            device=self.device,
            pin_memory=self.pin_memory,
        ).items()})
        if self._auto_workers:  # the C loader tunes its threads
            opts["num_workers"] = "auto"
            opts["prefetch"] = "auto" if self._auto_prefetch else 0
        elif self._auto_prefetch:
            opts["prefetch"] = "auto"
        out = opts
        out["epoch"] = epoch
        # A sampler's order: no batch of the C loader's own is read before
        # iter() gives the first (a read would also move an in_order=True
        # worker's random state away from torch's).
        out["explicit_order"] = self._explicit
        # As torch's iterator, a batch that raised is lost alone: the next
        # next() returns the batch after it (_Engine._on_error).
        out["error_ends_epoch"] = False
        # An ImageFolder's decode= (cpu, gpu, auto): the C option.
        decode = getattr(self.dataset, "decode", None)
        if decode is not None:
            out["decode"] = decode
        return out

    # -- iteration

    def __len__(self):
        if self._plan.iterable:
            n = len(self.dataset)  # TypeError without __len__, as torch
            # (As torch: the dataset's length, compared with the batches
            # an iterator made from now on yields.)
            self._IterableDataset_len_called = n
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        if self._explicit:
            return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)
        eng = self._engine
        if self._plan.native is None and (eng is None or eng._ld is None):
            # Before the first batch: the dataset's length now (as torch's
            # sampler reads it), no worker started for it.
            if self._closed:
                raise _new_error("PL_CLOSED", "the loader is closed")
            epoch = 0 if eng is None else (eng._shadow.ld.epoch if eng._shadow else eng.first_epoch)
            sh = _ShadowLoader(self, 1, epoch)
            try:
                return sh.ld.num_batches
            finally:
                sh.close()
        return self._primary().ld.num_batches

    def _primary(self, base_seed=None):
        """The loader's engine, made (or, after a worker died, remade with
        new workers at the next epoch) on demand."""
        if self._closed:
            raise _new_error("PL_CLOSED", "the loader is closed")
        eng = self._engine
        if eng is None or eng.broken:
            first = 0
            if eng is not None:
                first = eng.next_epoch if self._explicit else eng.ld.epoch + 1
                eng.close()
                self._engine = None
            ahead = base_seed is None
            if ahead:
                base_seed = self._draw_base_seed()
            self._engine = _Engine(self, base_seed, first)
            # Made before an iter() (load_state_dict, len, set_epoch): its
            # workers start with a seed drawn now, which the next iter()
            # takes as its own draw; drawing again there would move the
            # generator the sampler's order comes from off torch's.
            self._engine.seed_ahead = ahead
            if eng is not None:
                self._engine.fresh = True
        return self._engine

    def __iter__(self):
        return self._start(raw=False)

    def _start(self, raw):
        clock = self._first_batch.begin()
        _compat.begin_iteration(self)  # a DataPipe's shared seed, before the base seed
        last = self._last_iter() if self._last_iter is not None else None
        if (last is not None and not last.ended and not last.resumable
                and self._engine is not None):
            # Another iterator of this loader is alive: this one is
            # independent, with an engine of its own (zip(loader, loader)),
            # as torch's iterators are. Each iter() is a new epoch: this
            # one loads the epoch after the other's.
            seed = self._draw_base_seed()
            _compat.after_base_seed(self, True)
            first = self._engine.next_epoch if self._explicit else self._engine.ld.epoch + 1
            eng = _Engine(self, seed, first)
            eng.fresh = True
            eng.extra = True
            self._extra_engines = [e for e in self._extra_engines if not e.closed] + [eng]
            eng.begin_epoch(seed)
            it = eng.iterate(raw)
            weakref.finalize(it, eng.close)
            return it
        kept = self._kept_base_seed(self._engine)
        ahead = self._engine is not None and self._engine.seed_ahead and not self._engine.broken
        if ahead:
            kept, self._engine.seed_ahead = self._engine.base_seed, False
        seed = kept if kept is not None else self._draw_base_seed()
        _compat.after_base_seed(self, kept is None or ahead)
        eng = self._primary(seed)
        eng.begin_epoch(seed)
        eng.first_batch = clock
        it = eng.iterate(raw)
        self._last_iter = weakref.ref(it)
        return it

    def _checker(self, engine):
        return None

    def set_epoch(self, epoch):
        """Make the next iteration load `epoch` (for the loader's own order
        a function of (seed, epoch)); abandons a partly consumed epoch."""
        self._primary().set_epoch(int(epoch))
        self._last_iter = None

    @property
    def epoch(self):
        """The epoch the next batch belongs to."""
        return self._primary().ld.epoch

    def state_dict(self):
        """The resumable position as a dict: the loader's own order's
        (pl_loader_save_state), or, for a sampler's order or an
        IterableDataset, their own states at the batch taken last
        (python/pinloader/_state.py; pinloader.Error where a piece has
        none)."""
        return _state.state_dict(self)

    def load_state_dict(self, state):
        """Continue from a state_dict() (or a torchdata StatefulDataLoader's):
        the next iteration gives the batches after the saved one; the
        loader's own order also with other num_workers or ranks."""
        _state.load_state_dict(self, state)
        self._first_batch.restored = True

    # -- extras

    def batches(self):
        """Iterate over raw Batch objects (batch.field(i) exports DLPack;
        batch.sample_indices, .epoch, .index describe it); epochs advance as
        for iter()."""
        return self._start(raw=True)

    def stats(self):
        """The loader's counters (pl_loader_stats) as a dict."""
        return self._primary().ld.stats()

    def report(self, json=False):
        """The bottleneck report (pl_loader_report): which stage bounds
        throughput (your step, the workers, the copy, ...), by how much, and
        the measurements behind it. json=True: a dict ('bound', 'findings',
        'timings')."""
        text = self._primary().ld.report(json=bool(json))
        if not json:
            return _state.report_text(text, self._first_batch)
        import json as _json
        out = _json.loads(text)
        out["first_batch"] = self._first_batch.as_dict()
        return out

    @property
    def device_name(self):
        return self._primary().ld.device[2]

    @property
    def _ld(self):
        """The C loader (its .options, .stats())."""
        return self._primary().ld

    @property
    def worker_pids(self):
        """Pids of the worker processes (empty for thread workers)."""
        eng = self._engine
        return [p.pid for p in eng.procs] if eng is not None else []

    def close(self):
        """Stop the workers (threads and processes) now. Tensors already
        handed out stay valid."""
        self._closed = True
        for eng in [self._engine] + self._extra_engines:
            if eng is not None:
                eng.close()
        self._extra_engines = []
        _live.discard(self)

    def __del__(self):
        try:
            for eng in [self._engine] + self._extra_engines:
                if eng is not None:
                    eng.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        n = "?" if self._plan.iterable else len(self.dataset)
        return "pinloader.DataLoader(%s samples, batch_size=%s, num_workers=%d, device=%r)" % (
            n, self.batch_size, self.num_workers, self.device)


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
