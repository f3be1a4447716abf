"""An engine's iteration: the C LoaderIter with its callbacks, the packer
that turns a batch's fields into what the consumer gets (default_collate's
structure, a collate_fn's, an IterableDataset's skips and end), and the
exception a failed next() raises. _Iteration is a mixin of _Engine
(_engine.py).
"""
import pickle
import re
import sys

from . import _collate
from . import _pinloader as _C
from . import _state
from ._common import _add_note, _as_bool, _cast, _new_error, _numpy_from, _torch
from ._pinloader import Error
from ._procs import _WorkerView, _rebuild


# Errors of next() after which the iteration cannot go on: a stall (the
# stuck worker is killed, the C loader skipped the epoch), a closed loader,
# a copy to the device that failed; and any dead worker (engine.broken).
_ENDS_ITERATION = frozenset(("PL_TIMEOUT", "PL_CLOSED", "PL_BAD_STATE", "PL_CUDA", "PL_NO_DEVICE",
                             "PL_UNSUPPORTED", "PL_NOT_READY"))


class _SkipType:
    __slots__ = ()


_SKIP = _SkipType()


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


class _Iteration:
    """_Engine's iteration and its errors (a mixin: its methods use the
    engine's C loader, ProcSet, workers and order bookkeeping)."""

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
        # The loader's own order and an iterable dataset's: the C state
        # after each batch taken, for a state_dict() after a worker died
        # (the C loader has stepped past the batch that failed with it,
        # which a restore must read again; an iterable's round robin
        # resumes at that batch's worker).
        own_order = plan.iterable or not dl._explicit

        def pack(b):
            engine._tick()
            engine.taken += 1
            if own_order:
                engine.delivered_state = engine._ld.save_state()
            if engine.first_batch is not None:
                engine.first_batch = engine.first_batch(engine)  # (None: once)
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
