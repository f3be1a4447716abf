"""Resume of what a user brings: samplers, batch samplers and iterable
datasets (the StatefulDataLoader protocol); the loader's state in a
distributed checkpoint is _dcp.py's (DCPState), over these.

The loader's own order (seed=, or no shuffle) is the C loader's 64-byte
blob (pl_loader_save_state): it resumes into any num_workers, ranks or
batch size. Everything else is collected here, at the batch the consumer
stands at (never at what was prefetched):

- a sampler or batch sampler with state_dict()/load_state_dict() (or whose
  iterator has them): its state after each batch is taken when the epoch's
  order is drawn (the whole epoch at iter(), see _Engine._draw_order), so
  that the state at batch k is the sampler's after yielding batch k,
  whatever was prefetched after it. Restoring loads it and draws the rest
  of the epoch from the sampler, as torchdata's StatefulDataLoader does.
- torch's own samplers (RandomSampler, SequentialSampler, SubsetRandom-
  Sampler, WeightedRandomSampler, DistributedSampler, a BatchSampler over
  one): the state of the generator they draw from before the epoch was
  drawn, and k; restoring draws the same epoch again and skips k batches.
  torch's global generator is put back after that draw (a checkpoint
  restores it, or not, as the user's code does).
- an IterableDataset with state_dict() (or whose iterator has one): each
  worker sends its state with every batch it fills (in the batch's pickled
  extras); the parent keeps, per worker, the state sent with the last batch
  the consumer took. Restoring starts each worker's iterator from it, and
  the C loader at the next batch slot (the worker that comes next is the
  one that would have).

A sampler or batch sampler with no state of its own: the epoch's order is
drawn whole at iter() all the same, so the state holds the rest of that
order (the batches not yet taken, as indices: 8 bytes a sample); restoring
gives exactly those batches, and the epochs after it are drawn from the
sampler as it then stands (as a restarted torch program would), with one
warning per loader that says so. A state_dict() never fails for it: a
framework that checkpoints every loader with a state_dict() (Lightning)
keeps working. An IterableDataset without state: state_dict() raises
pinloader.Error naming it (its rest cannot be told).
Keys are torchdata's where a user would move a state between the two:
_index_sampler_state, _sampler_iter_state, _sampler_iter_yielded,
_num_yielded, _iterator_finished, and per worker, under
_snapshot/_worker_snapshots/worker_<i>: worker_id, dataset_state,
fetcher_state/{dataset_iter_state, fetcher_ended}.
"""
import copy
import pickle

from . import _pinloader as _C
from ._pinloader import Error

STATE_FORMAT = "pinloader.state.v1"

# torchdata's StatefulDataLoader key names (torchdata/stateful_dataloader).
INDEX_SAMPLER_STATE = "_index_sampler_state"
SAMPLER_ITER_STATE = "_sampler_iter_state"
SAMPLER_ITER_YIELDED = "_sampler_iter_yielded"
NUM_YIELDED = "_num_yielded"
ITERATOR_FINISHED = "_iterator_finished"
SNAPSHOT = "_snapshot"
MAIN_SNAPSHOT = "_main_snapshot"
WORKER_SNAPSHOTS = "_worker_snapshots"
SNAPSHOT_STEP = "_snapshot_step"
STEPS_SINCE_SNAPSHOT = "_steps_since_snapshot"
NUM_WORKERS = "_num_workers"
BASE_SEED = "_base_seed"
WORKER_ID = "worker_id"
DATASET_STATE = "dataset_state"
FETCHER_STATE = "fetcher_state"
DATASET_ITER_STATE = "dataset_iter_state"
FETCHER_ENDED = "fetcher_ended"
# torchdata's BatchSampler iterator: the state of a sampler that pinloader
# batches (sampler= with batch_size=).
SAMPLES_YIELDED = "samples_yielded"
SAMPLER_STATE = "sampler_state"
RAN_OUT = "sampler_ran_out"  # pinloader's: see _draw


# pinloader's: a stateless sampler's epoch, the batches not yet taken
# (flat indices and their batches' starts) and why it is told so.
DRAWN_INDICES = "drawn_indices"
DRAWN_STARTS = "drawn_starts"
DRAWN_WHY = "drawn_why"


def _flatten(batches):
    indices, starts = [], [0]
    for b in batches:
        indices.extend(int(i) for i in b)
        starts.append(len(indices))
    return indices, starts


def _unflatten(indices, starts):
    return [list(indices[a:b]) for a, b in zip(starts[:-1], starts[1:])]


def _warn_drawn(dl, why):
    """Once per loader: a state of a stateless sampler resumes this epoch
    only."""
    if getattr(dl, "_pl_warned_drawn", False):
        return
    dl._pl_warned_drawn = True
    import warnings

    warnings.warn("pinloader state_dict(): %s" % why, stacklevel=4)


def _error(msg):
    e = Error(msg)
    e.status, e.code = "PL_BAD_STATE", _C.STATUS.get("PL_BAD_STATE", 0)
    return e


def stateful(obj):
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def _name(obj):
    return type(obj).__name__


# ---------------------------------------------------------------- samplers

def passed_over(sampler, fn):
    """fn() (which iterates `sampler`), the sampler's state put back
    after: sizing the buffers must not move a sampler with state."""
    if not stateful(sampler):
        return fn()
    saved = copy.deepcopy(sampler.state_dict())
    try:
        return fn()
    finally:
        sampler.load_state_dict(saved)


def _torch_samplers():
    try:
        from torch.utils.data import (BatchSampler, DistributedSampler, RandomSampler,
                                      SequentialSampler, SubsetRandomSampler, WeightedRandomSampler)
    except ImportError:  # without torch: only samplers of the user's own
        return None, (), ()
    return (BatchSampler, (RandomSampler, SubsetRandomSampler, WeightedRandomSampler),
            (SequentialSampler, DistributedSampler))


class _Pieces:
    """What an explicit order is drawn from. wrap: torch's BatchSampler
    (pinloader's for sampler= with batch_size=, or the user's) over
    `inner`, batched here as it batches; else `inner` is the index sampler
    itself (a batch sampler, or a sampler for batch_size=None)."""

    def __init__(self, dl):
        BatchSampler, self.random_types, self.fixed_types = _torch_samplers()
        bs = dl.batch_sampler
        self.wrap = bs is not None and BatchSampler is not None and type(bs) is BatchSampler
        if self.wrap:
            self.inner, self.batch_size, self.drop_last = bs.sampler, bs.batch_size, bs.drop_last
        else:
            self.inner = bs if bs is not None else dl.sampler
        self.what = "sampler" if (self.wrap or bs is None) else "batch_sampler"
        self.unbatched = bs is None  # each item is one index (even a list: the dataset's key)

    def replayable(self):
        """torch's own sampler without state of its own: its epoch is a
        function of its generator's state (or none)."""
        t = type(self.inner)
        return not stateful(self.inner) and (t in self.random_types or t in self.fixed_types)

    def generators(self):
        """('gen', [g]), ('global', None) or ('none', None)."""
        if type(self.inner) in self.random_types:
            g = getattr(self.inner, "generator", None)
            return ("gen", [g]) if g is not None else ("global", None)
        return "none", None


class _EpochOrder:
    """The explicit epoch being iterated: how its state at batch k is told.
    kind 'replay': `pre` (generator states before the draw); 'sampler':
    snaps[k] (the index pieces' state after k batches); 'drawn': the
    epoch's batches themselves (a sampler without state: `why` says so)."""

    def __init__(self, kind, epoch, nbatches, pre=None, snaps=None, why=None, batches=None):
        self.kind, self.epoch, self.nbatches = kind, epoch, nbatches
        self.pre, self.snaps, self.why, self.batches = pre, snaps, why, batches


def _capture(p):
    kind, gens = p.generators()
    if kind == "gen":
        return {"generator_states": [g.get_state() for g in gens]}
    if kind == "global":
        import torch

        return {"rng_state": torch.get_rng_state()}
    epoch = getattr(p.inner, "epoch", None)  # DistributedSampler's set_epoch
    return {"sampler_epoch": epoch} if isinstance(epoch, int) else {}


def _replay(dl, p, pre):
    """Draws the epoch whose generators' states were `pre` again, with
    dl._epoch_batches (the same draws as torch's); torch's global generator
    is put back as it was."""
    import torch

    if "sampler_epoch" in pre and hasattr(p.inner, "set_epoch"):
        p.inner.set_epoch(pre["sampler_epoch"])
    kind, gens = p.generators()
    if kind == "gen":
        for g, st in zip(gens, pre["generator_states"]):
            g.set_state(st)
        return dl._epoch_batches()
    if kind == "global":
        now = torch.get_rng_state()
        torch.set_rng_state(pre["rng_state"])
        try:
            return dl._epoch_batches()
        finally:
            torch.set_rng_state(now)
    return dl._epoch_batches()


def _snap_wrap(p, it, samples):
    sd = {SAMPLES_YIELDED: samples}
    if stateful(p.inner):
        sd[SAMPLER_STATE] = copy.deepcopy(p.inner.state_dict())
    if stateful(it):
        sd[SAMPLER_ITER_STATE] = copy.deepcopy(it.state_dict())
    return {INDEX_SAMPLER_STATE: None, SAMPLER_ITER_STATE: sd}


def _snap_index(p, it):
    return {INDEX_SAMPLER_STATE: copy.deepcopy(p.inner.state_dict()) if stateful(p.inner) else None,
            SAMPLER_ITER_STATE: copy.deepcopy(it.state_dict()) if stateful(it) else None}


def _draw(p, it, samples=0, snapshot=True):
    """The batches left in `it` (the index pieces' iterator) and the
    pieces' state after each one (snaps[0]: before the first)."""
    batches, snaps = [], []
    take = (lambda: snaps.append(_snap_wrap(p, it, samples))) if p.wrap else \
        (lambda: snaps.append(_snap_index(p, it)))
    if snapshot:
        take()
    if not p.wrap:
        for b in it:
            batches.append([b] if p.unbatched else list(b))
            if snapshot:
                take()
        return batches, snaps
    batch = []
    for i in it:
        batch.append(i)
        samples += 1
        if len(batch) == p.batch_size:
            batches.append(batch)
            batch = []
            if snapshot:
                take()
    if batch and not p.drop_last:
        batches.append(batch)
        if snapshot:
            # Taken after the sampler ran out (a partial last batch is
            # known only then): its state is already the epoch's end.
            take()
            snaps[-1][RAN_OUT] = True
    return batches, snaps


def _restored_iter(p, parts):
    """Loads a state (torchdata's layout) into the index pieces; their
    iterator, where the state leaves them, and the samples yielded."""
    it_state = parts.get(SAMPLER_ITER_STATE)
    if p.wrap:
        sd = it_state or {}
        if SAMPLER_STATE in sd:
            p.inner.load_state_dict(sd[SAMPLER_STATE])
        it = iter(p.inner)
        if SAMPLER_ITER_STATE in sd:
            it.load_state_dict(sd[SAMPLER_ITER_STATE])
        return it, sd.get(SAMPLES_YIELDED, 0)
    if parts.get(INDEX_SAMPLER_STATE) is not None:
        p.inner.load_state_dict(parts[INDEX_SAMPLER_STATE])
    it = iter(p.inner)
    if it_state is not None:
        it.load_state_dict(it_state)
    return it, 0


def _epoch_of_sampler(dl, p):
    """A fresh epoch's batches from a sampler that is not torch's own (its
    state taken after each batch when it has one)."""
    it = iter(p.inner)
    if not (stateful(p.inner) or stateful(it)):
        batches, _ = _draw(p, it, snapshot=False)
        why = ("the %s %s has no state_dict()/load_state_dict() (nor has its iterator): the state "
               "holds the rest of this epoch's order, and the epochs after a restore are drawn "
               "from the sampler as it then is; define them (the StatefulDataLoader protocol), "
               "or use seed= for the loader's own order, to resume those too"
               % (p.what, _name(p.inner)))
        return batches, _EpochOrder("drawn", None, len(batches), why=why, batches=batches)
    batches, snaps = _draw(p, it)
    return batches, _EpochOrder("sampler", None, len(batches), snaps=snaps)


def epoch_batches(eng, epoch):
    """_Engine._draw_order's draw: this epoch's batches and the _Trailing /
    _Shadow draw still to come, noting how its state is told (eng.order).
    A pending restore (load_state_dict) of this epoch gives the batches
    after the saved one instead."""
    dl = eng.dl
    p = _Pieces(dl)
    pending, dl._pl_resume = getattr(dl, "_pl_resume", None), None
    if pending is not None and pending.get("epoch") != epoch:
        pending = None  # set_epoch moved the loader elsewhere
    k = pending[NUM_YIELDED] if pending is not None else 0
    trailing = None
    if p.replayable():
        pre = pending["pre"] if pending is not None else _capture(p)
        batches, trailing = _replay(dl, p, pre) if pending is not None else dl._epoch_batches()
        order = _EpochOrder("replay", epoch, len(batches), pre=pre)
    elif pending is not None and pending.get(DRAWN_STARTS) is not None:
        rest = _unflatten(pending[DRAWN_INDICES], pending[DRAWN_STARTS])
        batches = [None] * k + rest
        order = _EpochOrder("drawn", epoch, len(batches), batches=batches,
                            why=pending["saved"].get(DRAWN_WHY))
    elif pending is not None:
        it, samples = _restored_iter(p, pending)
        rest, snaps = _draw(p, it, samples)
        batches = [None] * k + rest
        order = _EpochOrder("sampler", epoch, len(batches), snaps=[None] * k + snaps)
    else:
        batches, order = _epoch_of_sampler(dl, p)
    order.epoch = epoch
    eng.order = order
    eng.taken = k
    eng.calls = k  # torch's requests of this epoch: the trailing draw's clock
    return batches[k:], trailing


def _explicit_state(dl, eng):
    pending = getattr(dl, "_pl_resume", None)
    if pending is not None and pending.get("kind") != "iterable":
        return dict(pending["saved"])
    o = getattr(eng, "order", None) if eng is not None else None
    deferred = getattr(eng, "deferred", None) if eng is not None else None
    if o is None or deferred is not None or o.epoch != eng.next_epoch - 1:
        # Before the epoch is drawn: nothing of it taken yet.
        epoch = deferred[0] if deferred is not None else (eng.next_epoch if eng is not None else 0)
        p = _Pieces(dl)
        if deferred is not None and p.replayable():
            # After iter(), before the first next() (which draws the order,
            # as torch's single-process iterator): the generators as that
            # draw will find them, not drawn here (an iterator dropped now
            # draws nothing). A restore draws this epoch from them; the
            # generators as they stand there (torch's global one, moved on
            # since) would give another.
            return {"order": "replay", "epoch": epoch, NUM_YIELDED: 0, ITERATOR_FINISHED: False,
                    SAMPLER_ITER_YIELDED: 0, BASE_SEED: eng.base_seed, "pre": _capture(p)}
        out = {"order": "fresh", "epoch": epoch, NUM_YIELDED: 0, ITERATOR_FINISHED: False}
        if not p.replayable() and stateful(p.inner):
            out[INDEX_SAMPLER_STATE if not p.wrap else SAMPLER_ITER_STATE] = \
                copy.deepcopy(p.inner.state_dict()) if not p.wrap else \
                {SAMPLES_YIELDED: 0, SAMPLER_STATE: copy.deepcopy(p.inner.state_dict())}
        return out
    k = eng.taken
    finished = k >= o.nbatches
    out = {"order": o.kind, "epoch": o.epoch, NUM_YIELDED: k, ITERATOR_FINISHED: finished,
           SAMPLER_ITER_YIELDED: k, BASE_SEED: eng.base_seed}
    if o.kind == "drawn":
        _warn_drawn(dl, o.why)
        out[DRAWN_INDICES], out[DRAWN_STARTS] = _flatten(o.batches[k:])
        out[DRAWN_WHY] = o.why
        return out
    if o.kind == "replay":
        out["pre"] = o.pre
    else:
        out.update(o.snaps[min(k, len(o.snaps) - 1)])
    return out


def _load_explicit(dl, eng, st):
    """Puts the loader where st says: the next iter() draws st's epoch and
    gives the batches after the saved one; a finished epoch is drawn (and
    dropped) now, as the uninterrupted run drew it, and the next iter()
    begins the epoch after it."""
    p = _Pieces(dl)
    kind, epoch = st.get("order"), int(st.get("epoch", 0))
    if kind == "replay" and not p.replayable():
        raise _error("load_state_dict(): the state was saved from torch's own sampler; this "
                     "loader's %s is %s" % (p.what, _name(p.inner)))
    if kind == "drawn" and st.get(DRAWN_STARTS) is None:
        raise _error("load_state_dict(): the state names a drawn order but holds none")
    if kind == "sampler" and p.replayable():
        raise _error("load_state_dict(): the state holds a %s's own state; this loader's %s "
                     "(%s) has none" % (p.what, p.what, _name(p.inner)))
    eng.order = None
    if kind != "fresh":
        # The generators are put back as saved (now, or at the epoch's
        # draw): the base seed the engine drew before them is not the next
        # iter()'s draw; that iter() draws its own from them.
        eng.seed_ahead = False
    if kind == "fresh":
        if stateful(p.inner):
            part = st.get(SAMPLER_ITER_STATE) if p.wrap else st
            if p.wrap and part and SAMPLER_STATE in part:
                p.inner.load_state_dict(part[SAMPLER_STATE])
            elif not p.wrap and st.get(INDEX_SAMPLER_STATE) is not None:
                p.inner.load_state_dict(st[INDEX_SAMPLER_STATE])
        eng.next_epoch = epoch
        return
    _keep_base_seed(dl, eng, st.get(BASE_SEED), epoch)
    if st.get(ITERATOR_FINISHED):
        if kind == "replay":
            _, trailing = _replay(dl, p, st["pre"])
            _finish_draws(trailing)
        elif kind == "drawn":
            pass  # a sampler without state: nothing to run to the epoch's end
        elif st.get(RAN_OUT):
            _restored_iter(p, st)
        else:
            # Run to its end, as the uninterrupted epoch's draw was.
            _draw(p, _restored_iter(p, st)[0], snapshot=False)
        eng.next_epoch = epoch + 1
        return
    dl._pl_resume = {"kind": "explicit", "epoch": epoch, NUM_YIELDED: int(st[NUM_YIELDED]),
                     "pre": st.get("pre"), INDEX_SAMPLER_STATE: st.get(INDEX_SAMPLER_STATE),
                     SAMPLER_ITER_STATE: st.get(SAMPLER_ITER_STATE), "saved": st,
                     DRAWN_INDICES: st.get(DRAWN_INDICES), DRAWN_STARTS: st.get(DRAWN_STARTS)}
    eng.next_epoch = epoch


def _keep_base_seed(dl, eng, seed, epoch):
    """persistent_workers: torch's iterator draws its base seed once, at
    its first iter(); a restored loader keeps the saved one instead of
    drawing another (which would move the generator the orders come from)."""
    if seed is None or not dl.persistent_workers or dl.num_workers == 0:
        return
    eng.base_seed, eng.started = seed, True
    if eng.ps is not None:
        eng.ps.set_base_seed(epoch, seed & 0xFFFFFFFFFFFFFFFF)


def _finish_draws(trailing):
    """The draws torch's sampler makes by the end of an epoch run to its
    end (the trailing randperm; a shadow iterator run out)."""
    if trailing is None:
        return
    if hasattr(trailing, "advance"):
        trailing.advance(1 << 62)
    else:
        trailing.draw()


# ---------------------------------------------------------------- iterable datasets

def worker_state(filler):
    """A worker's state after the batch it just filled (None: neither its
    dataset nor its iterator has state_dict, and the parent refuses a
    state_dict() at a batch it gave). torchdata's per-worker layout; an
    iterator that is its dataset is saved as the iterator, as torchdata's."""
    ds, it = filler.spec.dataset, filler.iterator
    live = it if it is not None and it is not False else None
    it_stateful = live is not None and stateful(live)
    ds_stateful = stateful(ds) and live is not ds
    if it_stateful:
        filler.iter_had_state = True
    if not ds_stateful and not it_stateful and not getattr(filler, "iter_had_state", False):
        return None
    return {WORKER_ID: filler.worker_id,
            DATASET_STATE: copy.deepcopy(ds.state_dict()) if ds_stateful else None,
            FETCHER_STATE: {DATASET_ITER_STATE: copy.deepcopy(live.state_dict()) if it_stateful else None,
                            FETCHER_ENDED: it is False}}


def _first_slot(filler, epoch, batch):
    """This worker's first batch slot of a restored stream in `epoch`
    (None: no restore there)."""
    resume = getattr(filler.spec, "pl_resume", None)
    if resume is None or resume.get("epoch") != epoch or batch is None:
        return None
    first, nw = resume["first_batch"], resume["nworkers"]
    return first + (filler.worker_id - first) % nw


def before_resume(filler, epoch, batch):
    """A slot before this worker's first of the restored stream: asked by
    the C loader before its restore moved it (its result thrown away), so
    read nothing for it (the iterator, and a probe's item, are the
    restored stream's)."""
    slot = _first_slot(filler, epoch, batch)
    return slot is not None and batch < slot


def resumes_here(filler, epoch, batch):
    """Whether this fill is the first of this worker in a restored stream:
    batch `batch` of `epoch` is the first batch slot at or after the saved
    one that is this worker's. (The C loader made before the restore may
    already have asked for earlier slots, of the stream that load_state
    restarts: those fills are thrown away, and this one starts again.)"""
    return batch is not None and _first_slot(filler, epoch, batch) == batch


def start_iterator(filler, epoch, start, restored=False):
    """The worker's iterator for `epoch` (start: iter(dataset), with
    DataPipe seeding); restored: from the state a restore gave."""
    spec = filler.spec
    st = spec.pl_resume["workers"].get("worker_%d" % filler.worker_id) if restored else None
    if st is None:
        return start(spec.dataset)
    if st.get(DATASET_STATE) is not None:
        spec.dataset.load_state_dict(st[DATASET_STATE])
    fs = st.get(FETCHER_STATE) or {}
    if fs.get(FETCHER_ENDED):
        return False
    it = start(spec.dataset)
    if fs.get(DATASET_ITER_STATE) is not None:
        it.load_state_dict(fs[DATASET_ITER_STATE])
    return it


def payload(got, objs, state):
    return (got, objs) if state is None else (got, objs, state)


def split_payload(raw):
    """(got, objs, worker state or None) of an IterableDataset's batch."""
    if not raw:
        return 0, None, None
    t = pickle.loads(raw)
    return t[0], t[1], (t[2] if len(t) > 2 else None)


def took_iterable(eng, worker, state):
    """The consumer took a batch of `worker` (also one it ran out in)."""
    ws = getattr(eng, "wstates", None)
    if ws is None:
        ws = eng.wstates = {}
    ws[worker] = state if state is not None else "none"


def _iterable_state(dl, eng):
    workers = _iterable_workers(dl)
    ws = getattr(eng, "wstates", None) or {}
    snaps = {}
    for w in range(workers):
        s = ws.get(w)
        if s == "none":
            raise _error("state_dict(): the IterableDataset %s has no state_dict()/load_state_dict() "
                         "(nor has its iterator): define them (the StatefulDataLoader protocol) to "
                         "resume it" % _name(dl.dataset))
        snaps["worker_%d" % w] = s if s is not None else {WORKER_ID: w, DATASET_STATE: None,
                                                          FETCHER_STATE: None}
    finished = bool(getattr(eng, "ran_out", False))
    blob = _delivered_blob(eng)
    return {"order": "iterable", "state": blob, "epoch": eng.ld.epoch, ITERATOR_FINISHED: finished,
            NUM_WORKERS: workers, BASE_SEED: eng.base_seed,
            SNAPSHOT: {WORKER_SNAPSHOTS: snaps}}


def _delivered_blob(eng):
    """The C loader's state; after a worker died, the one after the last
    batch taken (the epoch's start when none was): the failed batch was
    not delivered, and the C loader has stepped past it."""
    if eng.broken and eng.started:
        kept = eng.delivered_state or eng.epoch_start_state
        if kept is not None:
            return kept
    return eng.ld.save_state()


def _iterable_workers(dl):
    return max(1, dl.num_workers) if dl.worker_mode == "process" and dl.num_workers > 0 else 1


# ---------------------------------------------------------------- the loader's state

def state_dict(dl):
    """DataLoader.state_dict()."""
    if dl._explicit and not dl._plan.iterable:
        out = _explicit_state(dl, dl._engine)
        out["format"] = STATE_FORMAT
        out.setdefault("state", None)
        return out
    # An engine whose worker died (broken) is kept until the next iter():
    # its C loader still tells the batches delivered before the death,
    # which a new engine (the next epoch's) would lose.
    eng = dl._engine
    if eng is None or eng.closed:
        eng = dl._primary()
    if dl._plan.iterable:
        out = _iterable_state(dl, eng)
    else:
        return {"format": STATE_FORMAT, "state": _delivered_blob(eng)}
    out["format"] = STATE_FORMAT
    out.setdefault("state", None)
    return out


def _from_torchdata(st):
    """A torchdata StatefulDataLoader state in pinloader's terms (its
    sampler's and workers' parts; the epoch is the one loaded next)."""
    if SNAPSHOT in st:
        snap = st[SNAPSHOT]
        main = snap.get(MAIN_SNAPSHOT, {})
        k = snap.get(SNAPSHOT_STEP, 0) + st.get(STEPS_SINCE_SNAPSHOT, 0)
        parts = {INDEX_SAMPLER_STATE: main.get(INDEX_SAMPLER_STATE),
                 SAMPLER_ITER_STATE: main.get(SAMPLER_ITER_STATE)}
        workers = snap.get(WORKER_SNAPSHOTS, {})
        if st.get(STEPS_SINCE_SNAPSHOT, 0) and workers and any(
                (w or {}).get(FETCHER_STATE) for w in workers.values()):
            raise _error("load_state_dict(): this torchdata state is %d steps past its snapshot "
                         "(snapshot_every_n_steps > 1): an iterable dataset's workers cannot be "
                         "placed there; save with snapshot_every_n_steps=1"
                         % st[STEPS_SINCE_SNAPSHOT])
    else:
        k = st.get(NUM_YIELDED, 0)
        parts = {INDEX_SAMPLER_STATE: st.get(INDEX_SAMPLER_STATE),
                 SAMPLER_ITER_STATE: st.get(SAMPLER_ITER_STATE)}
        workers = None
        if st.get(FETCHER_STATE) is not None or st.get(DATASET_STATE) is not None:
            workers = {"worker_0": {WORKER_ID: 0, DATASET_STATE: st.get(DATASET_STATE),
                                    FETCHER_STATE: st.get(FETCHER_STATE)}}
    return k, parts, workers


def load_state_dict(dl, st):
    """DataLoader.load_state_dict(): a pinloader state, or a torchdata
    StatefulDataLoader's (its sampler's and datasets' parts)."""
    if isinstance(st, dict) and "format" not in st and (SNAPSHOT in st or NUM_YIELDED in st):
        return _load_torchdata(dl, st)
    if not isinstance(st, dict) or st.get("format") != STATE_FORMAT:
        raise ValueError("not a pinloader DataLoader state_dict (format %r)" % (STATE_FORMAT,))
    if dl._plan.iterable:
        return _load_iterable(dl, st)
    if st.get("order") is not None:
        if not dl._explicit:
            raise _error("load_state_dict(): the state is of a sampler's order (%s); this loader "
                         "draws its own (seed=)" % st["order"])
        eng = dl._primary()
        _load_explicit(dl, eng, st)
        _C.reset_iter_state(eng.ld)
        eng.fresh = True
        dl._last_iter = None
        return
    if dl._explicit:
        raise _error("load_state_dict(): the state is of the loader's own order (seed=); this "
                     "loader's order comes from its sampler")
    eng = dl._primary()
    eng.ld.load_state(st["state"])  # a refusal leaves everything as it was
    _C.reset_iter_state(eng.ld)
    eng.fresh = True
    dl._last_iter = None


def _load_torchdata(dl, st):
    k, parts, workers = _from_torchdata(st)
    if dl._plan.iterable:
        raise _error("load_state_dict(): a torchdata state of an IterableDataset cannot place "
                     "pinloader's C loader; move its worker states (%s/%s) into a pinloader state "
                     "instead" % (SNAPSHOT, WORKER_SNAPSHOTS))
    if not dl._explicit:
        raise _error("load_state_dict(): a torchdata state needs a loader whose order comes from "
                     "a sampler (no seed=)")
    eng = dl._primary()
    mine = {"order": "sampler", "epoch": eng.next_epoch, NUM_YIELDED: k,
            ITERATOR_FINISHED: bool(st.get(ITERATOR_FINISHED)), **parts}
    p = _Pieces(dl)
    if p.replayable():
        raise _error("load_state_dict(): the loader's %s (%s) has no state to load a torchdata "
                     "state into" % (p.what, _name(p.inner)))
    _load_explicit(dl, eng, mine)
    _C.reset_iter_state(eng.ld)
    eng.fresh = True
    dl._last_iter = None


def _load_iterable(dl, st):
    if st.get("order") != "iterable":
        raise _error("load_state_dict(): not the state of a loader over an IterableDataset")
    workers = _iterable_workers(dl)
    if st.get(NUM_WORKERS) != workers:
        raise _error("load_state_dict(): the state holds %s workers' iterators; this loader has %d "
                     "(an IterableDataset is split by its workers: resume with as many)"
                     % (st.get(NUM_WORKERS), workers))
    snaps = st[SNAPSHOT][WORKER_SNAPSHOTS]
    if dl._engine is not None:
        # The blob checked by the C loader first: a refusal changes nothing
        # (this engine is replaced anyway).
        dl._engine.ld.load_state(st["state"])
    finished = bool(st.get(ITERATOR_FINISHED))
    blob = st["state"]
    position, batch = int.from_bytes(blob[40:48], "little"), int.from_bytes(blob[48:52], "little")
    dl._pl_resume = None if finished else {"kind": "iterable", "epoch": int(st["epoch"]),
                                          "workers": snaps,
                                          "first_batch": position // max(1, batch),
                                          "nworkers": workers}
    if dl._engine is not None:
        dl._engine.close()
        dl._engine = None
    eng = dl._primary(st.get(BASE_SEED))
    # dl._pl_resume stays until prepare_spec takes it: a Python dataset's
    # workers' Spec is made at the first next() (the layout comes from a
    # worker's first sample), after this.
    eng.ld.load_state(st["state"])
    _C.reset_iter_state(eng.ld)
    if finished:
        eng.started = True  # the next iter() begins the epoch after it
    else:
        eng.fresh = True
        eng.wstates = {int(k.split("_")[1]): v for k, v in snaps.items()
                       if v is not None and v.get(FETCHER_STATE) is not None}
    dl._last_iter = None


def prepare_spec(dl, spec):
    """_Engine: a restore's worker states travel with the workers' Spec."""
    pending = getattr(dl, "_pl_resume", None)
    spec.pl_resume = None
    if pending is not None and pending.get("kind") == "iterable":
        spec.pl_resume, dl._pl_resume = pending, None


# ---------------------------------------------------------------- time to the first batch

class FirstBatch:
    """report()'s time to the first batch: from DataLoader() and from the
    first iter() (which starts a Python dataset's worker processes) to
    the first batch handed out; and from the first iter() after a
    load_state_dict() to its first batch."""

    def __init__(self):
        import time

        self.made = time.monotonic()
        self.after_init_s = self.after_iter_s = self.after_restore_s = None
        self.restored = False
        # The first batch's worker processes: how many, the parent's time
        # starting them, and from their start to every one's "ready" (a
        # spawned worker's imports), where that iteration started them.
        self.workers = self.workers_start_s = self.workers_ready_s = None

    def begin(self):
        """At iter(): a recorder for the iteration's first batch, or None
        when nothing is left to record."""
        import time

        if self.after_iter_s is None:
            which = "first"
        elif self.restored:
            which = "restore"
        else:
            return None
        self.restored = False
        t0 = time.monotonic()

        def record(engine):
            now = time.monotonic()
            if which == "first" and self.after_iter_s is None:
                self.after_iter_s, self.after_init_s = now - t0, now - self.made
                self._workers_of(engine)
            elif which == "restore":
                self.after_restore_s = now - t0
            return None
        return record

    def _workers_of(self, engine):
        span = engine.start_span
        if span is None:
            return  # no processes (threads, num_workers=0, a native source)
        self.workers = len(engine.procs)
        self.workers_start_s = span[1] - span[0]
        if engine.ready_at is not None:
            self.workers_ready_s = engine.ready_at - span[0]

    def as_dict(self):
        return {"after_init_s": self.after_init_s, "after_iter_s": self.after_iter_s,
                "after_restore_s": self.after_restore_s, "workers": self.workers,
                "workers_start_s": self.workers_start_s, "workers_ready_s": self.workers_ready_s}


def report_text(text, fb):
    """The C report with the time to the first batch after its first line."""
    if fb.after_iter_s is None:
        return text
    line = "first batch: %.3g s after the first iter() (%.3g s after DataLoader())" % (
        fb.after_iter_s, fb.after_init_s)
    if fb.workers is not None:
        line += "; %d worker processes started in %.3g s" % (fb.workers, fb.workers_start_s)
        if fb.workers_ready_s is not None:
            line += ", all ready %.3g s after the first began" % fb.workers_ready_s
    if fb.after_restore_s is not None:
        line += "; %.3g s after iter() following load_state_dict()" % fb.after_restore_s
    head, sep, rest = text.partition("\n")
    return head + "\n" + line + sep + rest if sep else head + "\n" + line
