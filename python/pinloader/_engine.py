"""The engine of a DataLoader: one C loader with what fills it (a native
dataset, or a Python dataset's worker processes or in-process filler),
its epochs and explicit orders, the first batch (the samples' layout, then
the C loader where a shadow loader over no data stood), and the plans
(_Plan) a DataLoader makes of its dataset. The worker processes are
_procs._Processes's, the iteration and its errors _iterate._Iteration's,
both mixins of _Engine; the orders' draws are _orders'. DataLoader-level
things are reached through the engine's dl, never by importing __init__.
"""
import os
import pickle
import random
import signal
import sys
import threading
import weakref

from . import _collate
from . import _pinloader as _C
from . import _state
from . import _worker
from ._common import _new_error, _torch
from ._iterate import _Iteration
from ._orders import _Guess, _Shadow, _Trailing, _draw_ahead, _order_arrays
from ._pinloader import Error
from ._procs import _keys_folder, _Processes, _rebuild

# An IterableDataset has no length: its loader runs over this many batch
# slots and the iteration ends when every worker has run out.
_ITERABLE_BATCHES = 1 << 40


class _Engine(_Iteration, _Processes):
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
        # (start, end) of starting the worker processes, and when all were
        # ready (monotonic): report()'s first batch.
        self.start_span = self.ready_at = None
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
            # restart every 64 samples of a batch (_seeding.seed_chunk). An
            # IterableDataset's batches belong to the worker whose share
            # they are.
            balanced = dl.worker_mode == "process" and dl.in_order is False and not plan.iterable
            spec = _worker.Spec(plan.dataset, _learned(plan), plan.c_batch, dl.collate_fn,
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
            if _learned(plan) is None or self.probes:
                t = self._learn(first)  # (replies to read also when another engine learned it)
            if _learned(plan) is None and (plan.template is None or not t.placeholder):
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
        if _learned(self.dl._plan) is not None:
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
                # The first batch raised in full: a later batch's layout.
                t = self._later_layout(first[1], first[3])
                if t is not None:
                    return t
            # An empty epoch, as torch's (nothing to take shapes from), or
            # one whose every sample raised: a placeholder layout.
            return _placeholder()
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
        if chosen is None and probes:
            # Every first batch probed raised in full (each raises again
            # at its turn, as torch's): a later batch's layout.
            epoch = min(f[1] for f in probes.values())
            chosen = self._later_layout(epoch, max(f[3] for f in probes.values()))
        # An empty epoch, or one whose every sample raised: a placeholder.
        return chosen if chosen is not None else _placeholder()

    def _later_layout(self, epoch, probed):
        """The layout of the first sample that reads in batches after
        batch `probed` of `epoch`, every sample of those probed having
        raised. Read here, the random states put back (_probe): torch
        reads none of it now, and the batches between still raise at
        their turn, and the ones after come with their data, not laid out
        as nothing. The shadow walks on from where it stands (it is not
        used after _prepare). None: no later sample of the epoch reads, or
        an IterableDataset (its items come in its own order)."""
        dl = self.dl
        if dl._plan.iterable:
            return None
        shadow, keys = self._shadow, self.spec.keys
        while True:
            f = shadow.first(shadow.ld.next())
            if f is None or f[1] != epoch:
                return None  # the epoch's end
            if f[3] <= probed:
                continue
            for index in (f[0], *f[4]):
                try:
                    return _probe(dl, index if keys is None else keys.get(epoch, index))
                except Exception:
                    continue  # raised again at its batch

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

    def relearn_epoch(self):
        """The epoch a new engine starts the next iteration at, where this
        one's C loader was laid out on a placeholder (its epoch empty, or
        every sample of it raising) and that iteration starts a new epoch:
        its first sample that reads lays the loader out anew (torch's
        batches take their shapes from their own samples). None: keep this
        engine. The epoch is the one begin_epoch would take."""
        ld, spec = self._ld, self.spec
        if ld is None or spec is None or spec.template is None or not spec.template.placeholder:
            return None
        mid, resumable = _C.iter_state(ld)
        if mid and resumable and not self.fresh:
            return None  # an interrupted epoch goes on (its samples raised, or none)
        return self._iteration_epoch(mid)

    def _iteration_epoch(self, mid):
        """The epoch the next iteration loads (mid: the last one was left
        part way): an explicit order's next; where set_epoch or
        load_state_dict put the C loader (fresh); after an epoch abandoned
        part way, the one after it (torch starts anew); else the one the
        stream already went on to."""
        if self.dl._explicit:
            return self.next_epoch
        if self.fresh:
            return self.ld.epoch
        if mid or (self.dl._plan.iterable and self.started):
            return self.ld.epoch + 1
        return self.ld.epoch

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
        epoch = self._iteration_epoch(mid)
        streamed = not dl._explicit and not self.fresh  # the stream's own next epoch
        went_on = streamed and epoch == ld.epoch  # the stream already went on to it
        if streamed and not went_on:  # abandoned mid-epoch: torch starts anew
            if self.ps is not None:
                self.ps.clear_extras()  # of batches never taken
            ld.set_epoch(epoch)
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
        self.delivered_state = None  # the own order's (an iterable's) state after the last batch taken
        own = (dl._plan.iterable or not dl._explicit) and self._ld is not None
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
        # The depth the C loader resolved (and tuned, for PL_AUTO), now.
        self.look_at = (epoch, max(0, nbatches - 2 * self.ld.prefetch))

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


def _placeholder():
    """The layout of an epoch with no sample to take it from: one field,
    which the C loader needs. Not kept for the loader's later iterations
    (_learned): their first sample that reads gives the layout."""
    t = _collate.Template(0)
    t.placeholder = True
    return t


def _learned(plan):
    """The layout learned from a sample (a placeholder is none)."""
    t = plan.template
    return None if t is None or t.placeholder else t


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
