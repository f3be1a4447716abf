"""pinloader.DataLoader, torch's DataLoader over the C loader, and the
helpers that turn its arguments into the C loader's options.

Kept out of the package's __init__ (which makes it at first use, through
its module __getattr__): the class's base is torch's DataLoader, so making
it imports torch, a second or more of CPU per process, and a worker process
(spawn, forkserver) imports the package to run pinloader._worker, never
this module. A dataset that needs no torch then starts its workers without
it; one that imports torch pays for it in each worker, as with torch's own
DataLoader.
"""
import os
import random
import threading
import types
import weakref

from . import _collate
from . import _compat
from . import _pinloader as _C
from . import _state
from . import datasets
from . import transforms as _transforms
from ._common import _new_error, _numpy_from, _prefetch, _torch
from ._engine import _Engine, _Plan, _ShadowLoader
from ._orders import _SeededSampler, _Shadow, _Trailing, _own_generators
from ._procs import _check_worker_number, _live, _start_forkserver_early
from . import cuda_available

# A batch buffer count no consumer reaches: the pool grows as batches are
# kept, as torch's would (max_batch_buffers= sets a hard cap).
_UNBOUNDED_BUFFERS = 1 << 20


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


def _is_iterable_dataset(ds):
    torch = _torch()
    if torch is not None:
        from torch.utils.data import IterableDataset

        if isinstance(ds, IterableDataset):
            return True
    return not hasattr(ds, "__getitem__") and hasattr(ds, "__iter__")


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
        else:
            _start_forkserver_early(self.multiprocessing_context, dataset, worker_init_fn)
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

    def _primary(self, base_seed=None, remake_at=None):
        """The loader's engine, made (or, after a worker died, remade with
        new workers at the next epoch; or at epoch remake_at) on demand."""
        if self._closed:
            raise _new_error("PL_CLOSED", "the loader is closed")
        eng = self._engine
        if eng is None or eng.broken or remake_at is not None:
            first = 0
            if eng is not None:
                first = (remake_at if remake_at is not None
                         else eng.next_epoch if self._explicit else eng.ld.epoch + 1)
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
        # Laid out on a placeholder (an epoch empty or raising in full):
        # a new engine, which takes the layout from its first sample.
        relearn = None if self._engine is None else self._engine.relearn_epoch()
        eng = self._primary(seed, relearn)
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

# The class is the package's public one: named as pinloader.DataLoader.
DataLoader.__module__ = "pinloader"
