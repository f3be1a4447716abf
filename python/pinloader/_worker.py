"""Filling batches from a Python dataset: in a worker process, or in the
loader's own threads (worker_mode="thread", num_workers=0).

The C side is python/pinloader/procset.c: a loader thread sends a worker
process a request (batch indices, epoch, seed, where each field lies in
the batch memory, whose memfd comes attached) and waits, without the GIL,
for the reply. The process writes each sample's fields straight into the
shared batch buffer (numpy views over the mapped memfd) and replies with
what could not go there, pickled (strings, objects; a collate_fn's odd
shapes), or with the exception it met.
"""
import mmap
import os
import pickle
import signal
import socket
import struct
import threading
import traceback

import numpy as np

from . import _collate
from . import _compat
from . import _pinloader as _C
from . import _state
from ._seeding import (_rng_states, _set_rng_states, _set_worker_info, seed_chunk, seed_worker,
                       torch_one_thread)

# The wire format, declared once in C (python/pinloader/wire.h) and read
# here. Request head: magic, nfields, n, flags; buffer id, fd_bytes, epoch,
# seed, batch, base_seed, first (the batch position of indices[0]: a chunk
# of a split batch). Reply head: magic, status, payload length.
_W = _C.WIRE
REQ = struct.Struct(_W["REQ"])
REP = struct.Struct(_W["REP"])
REQ_MAGIC, REP_MAGIC = _W["REQ_MAGIC"], _W["REP_MAGIC"]
REQ_RESEED, REQ_PROGRESS = _W["REQ_RESEED"], _W["REQ_PROGRESS"]
REP_OK, REP_ERROR, REP_PROGRESS = _W["REP_OK"], _W["REP_ERROR"], _W["REP_PROGRESS"]
# Parent -> worker before the loader's first batch (the C side never sends
# these): read the first sample and reply with the template made from it
# (kept, to be the first sample of the first batch); the template, pickled,
# for the workers that did not probe.
REQ_PROBE, REQ_TEMPLATE = _W["REQ_PROBE"], _W["REQ_TEMPLATE"]
# Balanced workers: the global generators restart every CHUNK samples of a
# batch (seed_chunk), and a batch that the first round of an iteration
# splits over idle workers is split at these boundaries (wire.h's
# SPLIT_CHUNK), so its samples draw the same numbers however it is split.
CHUNK = _W["CHUNK"]

# ---------------------------------------------------------------- per-sample RNG

_ctx = threading.local()  # seed, epoch, index of the sample being read


def sample_rng():
    """A numpy Generator for the sample being read, seeded by (loader seed,
    epoch, sample index) only: the same augmentation for that sample in that
    epoch with any number of workers, any start method, thread or process
    workers. Call it inside __getitem__ (or a transform it calls). Outside a
    pinloader read it raises RuntimeError."""
    seed = getattr(_ctx, "key", None)
    if seed is None:
        raise RuntimeError("pinloader.sample_rng() is only available while a pinloader "
                           "DataLoader reads a sample")
    return np.random.default_rng(seed)


def _set_sample(seed, epoch, index):
    _ctx.key = (0x706C, seed, epoch, index)  # a SeedSequence entropy tuple


class Spec:
    """What a worker needs: picklable (spawn, forkserver)."""

    def __init__(self, dataset, template, batch_size, collate_fn, unbatched, worker_init_fn,
                 num_workers, base_seed, iterable=False, drop_last=False, batch_seeding=False):
        self.dataset = dataset
        self.template = template
        self.batch_size = batch_size
        self.collate_fn = collate_fn
        self.unbatched = unbatched
        self.worker_init_fn = worker_init_fn
        self.num_workers = num_workers
        self.base_seed = base_seed
        self.iterable = iterable
        self.drop_last = drop_last
        self.batch_seeding = batch_seeding  # seed_chunk() every CHUNK samples
        self.keys = None  # Keys: an unbatched sampler's keys that are not ints
        # The loader's process, which a worker checks it is the child of
        # (None: forkserver's workers are the server's children).
        self.parent_pid = None


class Keys:
    """batch_size=None with a sampler that yields what is not an int (an
    index list, as torch's bulk loading reads dataset[[i, j, k]]): the C
    order holds each key's position in its epoch, and dataset[key] is read.
    The parent writes an epoch's keys to a file in a folder of its own
    (put) before the order that names them; a worker process reads them
    there (get), again when the file was replaced (set_epoch gives an epoch
    number new keys). Pickles as its folder's path only."""

    def __init__(self, folder):
        self.folder = folder
        self.epochs = {}  # epoch -> (file identity, keys)

    def __getstate__(self):
        return {"folder": self.folder, "epochs": {}}

    def _path(self, epoch):
        return os.path.join(self.folder, "keys-%d" % epoch)

    def put(self, epoch, keys):
        os.makedirs(self.folder, exist_ok=True)
        tmp = self._path(epoch) + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(keys, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self._path(epoch))  # whole, for a worker reading it

    def drop(self, epoch):
        """The epoch's order holds plain indices: no file for it."""
        try:
            os.unlink(self._path(epoch))
        except OSError:
            pass

    def get(self, epoch, position):
        """The key at position of epoch's order; position itself when the
        epoch has no keys file (its order holds plain indices)."""
        try:
            st = os.stat(self._path(epoch))
        except OSError:
            return position
        ident = (st.st_ino, st.st_mtime_ns, st.st_size)
        got = self.epochs.get(epoch)
        if got is None or got[0] != ident:
            with open(self._path(epoch), "rb") as f:
                got = (ident, pickle.load(f))
            self.epochs = {epoch: got}  # one epoch at a time is read
        return got[1][position]

    def remove(self):
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def _text_of(exc):
    """str(exc), else repr(exc), else a placeholder naming the type: an
    exception whose __str__ raises must still be reported, not kill the
    worker (as torch's ExceptionWrapper, through traceback)."""
    for how in (str, repr):
        try:
            s = how(exc)
            if isinstance(s, str):
                return s
        except BaseException:
            pass
    return "<unprintable %s object>" % type(exc).__name__


def _pickled(obj):
    """obj pickled, if it pickles and the consumer can rebuild it (the
    same check here: a class whose __init__ wants other arguments than its
    args fails only in loads); else None."""
    try:
        blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(blob)
        return blob
    except BaseException:
        return None


class ErrorReport:
    """A worker's exception, as it crosses the pipe: the exception itself
    when it pickles; else its type (rebuilt from the message, as torch's
    ExceptionWrapper does) and the type's name and message; the formatted
    traceback and the sample either way. Nothing of the exception's own
    code (__str__, __reduce__) may stop the report."""

    def __init__(self, exc, where, sample):
        cls = type(exc)
        self.type_name = "%s.%s" % (getattr(cls, "__module__", "?"), getattr(cls, "__qualname__", cls.__name__))
        self.message = _text_of(exc)
        try:
            self.traceback = "".join(traceback.format_exception(cls, exc, exc.__traceback__))
        except BaseException:
            self.traceback = "%s: %s\n" % (self.type_name, self.message)
        self.where = where
        self.sample = sample
        self.exc_blob = _pickled(exc)
        self.type_blob = _pickled(cls) if self.exc_blob is None else None

    def text(self):
        s = "%s at %s: %s" % (self.type_name.rsplit(".", 1)[-1], self.where, self.message)
        return s[:300]

    def rebuild(self):
        """The exception to raise in the consumer, of the worker's type;
        a RuntimeError naming the type when it cannot be rebuilt."""
        exc = None
        if self.exc_blob is not None:
            try:
                exc = pickle.loads(self.exc_blob)
            except Exception:
                exc = None
        if exc is None and getattr(self, "type_blob", None) is not None:
            try:
                exc = pickle.loads(self.type_blob)(self.message)
            except Exception:  # its __init__ wants other arguments
                exc = None
        if not isinstance(exc, BaseException):
            exc = RuntimeError("%s: %s" % (self.type_name, self.message))
        return exc


class Filler:
    """Fills batches for one worker (or for the loader's threads)."""

    def __init__(self, spec, worker_id):
        self.spec = spec
        self.worker_id = worker_id
        self.maps = {}  # buffer id -> (mmap, fd_bytes)
        self.t = self.kinds = None
        self.views = {}  # (buffer id, offsets) -> ([ndarray per field], their SampleWriter)
        if spec.template is not None:
            self.set_template(spec.template)
        self.check = None  # ("sig", signature): derive the template, compare
        self.kept = None  # (epoch, batch, index, sample, rng states): the probed sample
        self.pushback = []  # IterableDataset: the probed item, first of this epoch's share
        self.seeded = None
        self.last = None  # (epoch, batch) of the last request since seeded
        self.progress = None  # report(sample) with a loader timeout
        self.iterator = None  # IterableDataset: this epoch's (False: ran out)
        self.iter_epoch = None

    # -- the template: learned from the first sample, not before

    def set_template(self, t):
        self.t = t
        self.kinds = _collate.writer_kinds(t)  # None: no SampleWriter
        self.views = {}

    def probe(self, index, epoch, seed, batch, rest=()):
        """Reads the first sample this worker produces (dataset[index], or
        the first item of this epoch's iterator) and returns the template
        made from it (None: an IterableDataset whose share is empty). The
        sample is kept, and the random states after reading it: it is the
        first sample of the first batch, read once, as torch reads it."""
        spec = self.spec
        if spec.iterable:
            self.iterator, self.iter_epoch = False, epoch  # (__iter__ raising: nothing more)
            try:
                # A DataPipe is seeded and sharded here first, as torch's;
                # a worker of a restored stream starts from its saved state
                # (and its first fill goes on from here, not again from it).
                restored = _state.resumes_here(self, epoch, batch)
                self.iterator = _state.start_iterator(self, epoch, _compat.start_iterator, restored)
                self.probe_restored = (epoch, batch) if restored else None
                if self.iterator is False:
                    return None  # its share had ended when the state was saved
                s0 = next(self.iterator)
            except StopIteration:
                self.iterator = False
                return None
            except BaseException as e:
                self.pushback = [_Raised(e)]  # raised again at this worker's first batch
                raise
            self.pushback = [s0]
        else:
            if spec.batch_seeding:
                seed_chunk(spec.base_seed, epoch, batch, 0)
            _set_sample(seed, epoch, index)
            try:
                s0 = spec.dataset[self.key(epoch, index)]
            except BaseException as e:
                try:
                    e._pinloader_sample = index
                except BaseException:
                    pass
                # Raised again where its batch is read, as torch raises it
                # there; the layout from the batch's next sample that reads.
                self.kept = (epoch, batch, index, _Raised(e), None)
                s0 = self._layout_sample(rest, epoch, seed)
                if s0 is None:
                    raise
                return make_template(spec, s0)
            finally:
                _ctx.key = None
            self.kept = (epoch, batch, index, s0, _rng_states() if spec.batch_seeding else None)
        return make_template(spec, s0)

    def _layout_sample(self, rest, epoch, seed):
        """The first of rest (the batch after a first sample that raised)
        that reads, only for its layout: torch reads no further in a batch
        that raised, so the random states are put back after."""
        states = _rng_states()
        try:
            for i in rest:
                _set_sample(seed, epoch, i)
                try:
                    return self.spec.dataset[self.key(epoch, i)]
                except Exception:
                    continue
            return None
        finally:
            _set_rng_states(states)

    def derive(self, index, epoch, seed, batch):
        """A worker the parent could not send the template (it does not
        pickle: a class defined in a function) makes it from its own first
        sample, and checks its layout is the parent's."""
        t = self.probe(index, epoch, seed, batch)
        if t is None or signature(t) != self.check[1]:
            raise _collate.Mismatch("worker %d's first sample (%s) is not laid out as the first "
                                    "sample's" % (self.worker_id, "dataset[%d]" % index))
        self.set_template(t)

    def _kept(self, epoch, batch, index):
        """The probed sample when it is dataset[index] of this batch (its
        random states put back: as if read just now), else None."""
        kept = self.kept
        if kept is None or kept[:3] != (epoch, batch, index):
            return None  # (kept for its batch: the loader's threads share one filler)
        self.kept = None
        if isinstance(kept[3], _Raised):
            raise kept[3].exc
        if self.spec.batch_seeding:
            # Balanced: the chunk's generators restart before its first
            # sample; put back where reading it left them. (Otherwise
            # nothing drew since: a worker process reads one batch at a
            # time, and the loader's threads of worker_mode="thread" may
            # have drawn meanwhile, which must stand.)
            _set_rng_states(kept[4])
        return kept[3]

    # -- views of the batch memory

    def _field_views(self, buf, offsets):
        out = []
        B = self.spec.batch_size
        for leaf, off in zip(self.t.fields, offsets):
            shape = (B,) + leaf.shape
            dt = np.bool_ if leaf.is_bool else leaf.dtype
            out.append(np.ndarray(shape, dtype=dt, buffer=buf, offset=off))
        for leaf in self.t.empty:  # zero-size: no bytes in the batch buffer
            out.append(np.empty((B,) + leaf.shape, dtype=np.bool_ if leaf.is_bool else leaf.dtype))
        return out

    def writer(self, views):
        """A SampleWriter of views (None when the template has object
        leaves, or for a collate_fn's output: not samples)."""
        if self.kinds is None or self.spec.collate_fn is not None:
            return None
        return _C.SampleWriter(self.t.root, self.kinds, views)

    def views_for(self, buffer_id, fd, fd_bytes, offsets):
        """The field views of that batch buffer and their SampleWriter."""
        key = (buffer_id, tuple(offsets))
        got = self.views.get(key)
        if got is not None:
            if fd >= 0:
                os.close(fd)
            return got
        m = self.maps.get(buffer_id)
        if m is None or m[1] != fd_bytes:
            if fd < 0:
                raise RuntimeError("batch buffer %d arrived without its memfd" % buffer_id)
            # MAP_POPULATE: the buffer's pages (the parent made them) are
            # mapped in one call, not by thousands of faults in the first
            # batch written here (12 MB: 3,000 faults, 10-40 ms of a
            # worker's first batch).
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            m = (mmap.mmap(fd, fd_bytes, flags, mmap.PROT_READ | mmap.PROT_WRITE), fd_bytes)
            self.maps[buffer_id] = m
        if fd >= 0:
            os.close(fd)
        v = self._field_views(m[0], offsets)
        self.views[key] = v, self.writer(v)
        return self.views[key]

    # -- seeding, as torch's workers

    def key(self, epoch, i):
        """What dataset[] is given for index i of epoch's order."""
        return i if self.spec.keys is None else self.spec.keys.get(epoch, i)

    def must_reseed(self, base_seed, epoch, batch):
        """A request flagged REQ_RESEED: reseed (as a fresh torch worker)
        for a new base seed, and, with torch's assignment, also for a batch
        not after the last one read: the epoch's stream was restarted (its
        first batches read ahead before iter() are read again), and what
        the stale read drew must not stand."""
        if self.seeded != base_seed:
            return True
        return not self.spec.batch_seeding and self.last is not None and (epoch, batch) <= self.last

    def reseed(self, base_seed):
        self.kept = None  # read under the old seed
        self.last = None
        seed_worker(base_seed, self.worker_id)
        self.seeded = base_seed
        _set_worker_info(self.worker_id, self.spec.num_workers, base_seed + self.worker_id,
                         self.spec.dataset)

    # -- one batch

    def fill(self, indices, epoch, seed, batch_index, views, first=0, writer=None):
        """Writes the batch (or, from position `first` on, a chunk of it)
        into views (through writer, views' SampleWriter, where it takes the
        sample); returns the pickled extras (bytes, b"" when none)."""
        spec, t = self.spec, self.t
        ds = spec.dataset
        n = len(indices)
        current = [None]
        # Balanced: random, numpy and torch restart at each CHUNK boundary.
        reseed = spec.batch_seeding and not spec.iterable
        try:
            if spec.iterable:
                return self._fill_iterable(n, epoch, views, writer, batch_index)
            if spec.unbatched:
                i = indices[0]
                current[0] = i
                s = self._kept(epoch, batch_index, i) if self.kept else None
                if s is None:
                    if reseed:
                        seed_chunk(spec.base_seed, epoch, batch_index, 0)
                    _set_sample(seed, epoch, i)
                    s = ds[self.key(epoch, i)]
                if spec.collate_fn is not None:
                    s = spec.collate_fn(s)
                objs = [[] for _ in range(t.nobjs)]
                try:
                    _collate.write_sample(t, t.root, s, 0, views, objs, "dataset[%r]" % (self.key(epoch, i),))
                except _collate.Mismatch:
                    return _collate.dumps(_collate.Whole(s))
                return _collate.dumps(objs) if t.nobjs else b""
            report = self.progress
            if spec.collate_fn is None:
                objs = [[] for _ in range(t.nobjs)]
                for k, i in enumerate(indices, first):
                    current[0] = i
                    if report is not None:
                        report(i)
                    if k == 0 and self.kept:
                        s = self._kept(epoch, batch_index, i)
                        if s is not None:
                            if writer is None or not writer.write(s, k):
                                _collate.write_sample(t, t.root, s, k, views, objs, "dataset[%d]" % i)
                            continue
                    if reseed and (k % CHUNK == 0 or k == first):
                        seed_chunk(spec.base_seed, epoch, batch_index, k // CHUNK)
                    _set_sample(seed, epoch, i)
                    s = ds[i]
                    if writer is None or not writer.write(s, k):
                        _collate.write_sample(t, t.root, s, k, views, objs, "dataset[%d]" % i)
                return _collate.dumps(objs) if t.nobjs else b""
            samples = []
            for k, i in enumerate(indices):
                current[0] = i
                if report is not None:
                    report(i)
                if k == 0 and self.kept:
                    s = self._kept(epoch, batch_index, i)
                    if s is not None:
                        samples.append(s)
                        continue
                if reseed and k % CHUNK == 0:
                    seed_chunk(spec.base_seed, epoch, batch_index, k // CHUNK)
                _set_sample(seed, epoch, i)
                samples.append(ds[i])
            current[0] = None
            out = spec.collate_fn(samples)
            extras = {}
            _collate.write_collated(t, t.root, out, n, views, extras)
            return _collate.dumps(extras) if extras else b""
        except BaseException as e:
            try:
                e._pinloader_sample = current[0]
            except BaseException:  # an exception that refuses attributes
                pass
            raise
        finally:
            _ctx.key = None

    def _fill_iterable(self, n, epoch, views, writer=None, batch=None):
        """IterableDataset: the next n items of this worker's iterator (a
        fresh iterator each epoch, as torch's workers make one per
        iteration). The payload says how many came; 0 means this worker
        has run out for the epoch."""
        spec, t = self.spec, self.t
        if _state.before_resume(self, epoch, batch):
            return _collate.dumps(_state.payload(0, None, None))  # (thrown away)
        restored = _state.resumes_here(self, epoch, batch)  # load_state_dict's workers
        if restored and getattr(self, "probe_restored", None) == (epoch, batch):
            restored = False  # the probe began it from the saved state: its item is kept
        self.probe_restored = None
        if restored or self.iterator is None or self.iter_epoch != epoch:
            # A DataPipe is seeded and sharded here first, as torch's.
            self.iterator = _state.start_iterator(self, epoch, _compat.start_iterator, restored)
            self.iter_epoch = epoch
            self.pushback = []  # (a probe's item: read again from the restored state)
        want = 1 if spec.unbatched else n
        samples = []
        pushed, self.pushback = self.pushback if self.iter_epoch == epoch else [], []
        if pushed and isinstance(pushed[0], _Raised):
            raise pushed[0].exc
        samples.extend(pushed)
        if self.iterator is not False:
            for _ in range(want - len(samples)):
                try:
                    samples.append(next(self.iterator))
                except StopIteration:
                    self.iterator = False  # ran out: 0 from now on this epoch
                    break
        got = len(samples)
        state = _state.worker_state(self)  # sent with the batch: the parent's at this batch
        if got == 0 or (got < want and self.spec.drop_last):
            return _collate.dumps(_state.payload(0, None, state))
        if spec.collate_fn is not None and not spec.unbatched:
            extras = {}
            _collate.write_collated(t, t.root, spec.collate_fn(samples), got, views, extras)
            return _collate.dumps(_state.payload(got, extras, state))
        objs = [[] for _ in range(t.nobjs)]
        for k, s in enumerate(samples):
            if spec.collate_fn is not None:
                s = spec.collate_fn(s)
            elif writer is not None and writer.write(s, k):
                continue
            _collate.write_sample(t, t.root, s, k, views, objs, "item %d of worker %d" % (k, self.worker_id))
        return _collate.dumps(_state.payload(got, objs, state))


class _Exhausted(Exception):
    pass


class _Raised:
    """A first sample's read that raised, kept as the sample would be."""

    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc


def make_template(spec, s0):
    """The template of sample s0 (a collate_fn's output over [s0] with a
    collate_fn and batches), with a placeholder field when it has no
    array-like leaf."""
    if spec.collate_fn is not None and not spec.unbatched and not spec.iterable:
        t = _collate.Template(spec.collate_fn([s0]), batched_probe=True)
    else:
        if spec.collate_fn is not None and spec.unbatched:
            s0 = spec.collate_fn(s0)
        t = _collate.Template(s0, numbers_are_fields=not spec.unbatched)
    if not t.fields:
        t.fields.append(_collate.Leaf(0, "uint8", (), "_"))
    return t


def signature(t):
    """What of a template must agree between the parent and a worker."""
    return ([(f.c_dtype, f.shape) for f in t.fields], [(f.c_dtype, f.shape) for f in t.empty],
            t.nobjs, repr(t.root))


# ---------------------------------------------------------------- the process

def _die_with_parent(parent_pid):
    """Linux: die with the parent (prctl PR_SET_PDEATHSIG, in C: no ctypes
    to import in every worker), and exit now if it is already gone. The
    socket's EOF is the other way a worker learns its parent is gone."""
    if not _C.die_with_parent(os.getppid() if parent_pid is None else parent_pid):
        os._exit(0)


def _recv_exact(sock, n, first=None):
    buf = bytearray(first or b"")
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv_request(sock):
    """(header fields, offsets, indices, fd) or None at EOF."""
    fds = []
    data, anc, _flags, _addr = sock.recvmsg(REQ.size, socket.CMSG_SPACE(4))
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.extend(struct.unpack("=%di" % (len(cdata) // 4), cdata[: len(cdata) // 4 * 4]))
    if not data:
        return None
    head = _recv_exact(sock, REQ.size, data)
    if head is None:
        return None
    magic, nf, n, flags, buf_id, fd_bytes, epoch, seed, batch, base_seed, first = REQ.unpack(head)
    if magic != REQ_MAGIC:
        raise RuntimeError("pinloader worker: bad request magic %#x" % magic)
    rest = _recv_exact(sock, 8 * (nf + n))
    if rest is None:
        return None
    offsets = struct.unpack_from("=%dQ" % nf, rest, 0)
    indices = np.frombuffer(rest, dtype=np.uint64, count=n, offset=8 * nf).tolist()
    fd = fds[0] if fds else -1
    for extra in fds[1:]:
        os.close(extra)
    return (flags, buf_id, fd_bytes, epoch, seed, batch, base_seed, first), offsets, indices, fd


def _reply(sock, status, payload=b""):
    sock.sendall(REP.pack(REP_MAGIC, status, len(payload)) + payload)


def error_payload(report):
    text = report.text().encode("utf-8", "replace")
    return struct.pack("=I", len(text)) + text + pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)


def _error_reply(e, where, sample):
    """The REP_ERROR payload for e; never raises (a report that fails is
    replaced by one of a RuntimeError naming what failed)."""
    try:
        return error_payload(ErrorReport(e, where, sample))
    except BaseException as failed:
        name = getattr(type(e), "__name__", "?")
        return error_payload(ErrorReport(RuntimeError(
            "%s raised at %s; reporting it failed: %s" % (name, where, type(failed).__name__)), where, sample))


def _where(e, batch, epoch):
    try:
        sample = getattr(e, "_pinloader_sample", None)
    except BaseException:
        sample = None
    if not isinstance(sample, int):
        sample = None
    return ("dataset[%d]" % sample if sample is not None else "batch %d of epoch %d" % (batch, epoch)), sample


def _reply_probe(sock, filler, index, epoch, seed, batch, rest=()):
    """The template of this worker's first sample, pickled: ("t", template),
    ("none",) for an empty share, or ("local", signature) when it does not
    pickle (the parent then reads the sample itself)."""
    try:
        t = filler.probe(index, epoch, seed, batch, rest)
    except BaseException as e:
        where, sample = _where(e, batch, epoch)
        _reply(sock, REP_ERROR, _error_reply(e, where, sample))
        return
    if t is None:
        payload = pickle.dumps(("none",))
    else:
        filler.set_template(t)
        try:
            payload = pickle.dumps(("t", t), protocol=pickle.HIGHEST_PROTOCOL)
            pickle.loads(payload)
        except BaseException:
            payload = pickle.dumps(("local", signature(t)))
    _reply(sock, REP_OK, payload)


def worker_main(sock, spec, worker_id):
    """A worker process: set up as torch's workers are, then serve batch
    requests until the parent closes the socket (or dies). The parent gone
    (its socket closed: a failed start, the loader closed) ends the worker
    quietly: no BrokenPipeError traceback on the user's stderr."""
    try:
        _serve(sock, spec, worker_id)
    except OSError:
        # The socket's own errors (EPIPE, ECONNRESET: the parent shut it);
        # the dataset's and worker_init_fn's are reported, not raised here.
        return
    finally:
        try:
            sock.close()
        except OSError:
            pass


def _serve(sock, spec, worker_id):
    _die_with_parent(spec.parent_pid)
    try:  # a crash in a worker prints its Python stack (as torch's workers report)
        import faulthandler

        faulthandler.enable()
    except Exception:
        pass
    # Ctrl-C is the parent's to handle: it goes on or closes the loader,
    # which ends the workers. A terminal's SIGINT reaches the whole process
    # group, so a worker must not die of it (a batch would be lost).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch_one_thread()
    filler = Filler(spec, worker_id)
    try:
        filler.reseed(spec.base_seed)
        if spec.worker_init_fn is not None:
            spec.worker_init_fn(worker_id)
    except BaseException as e:  # the parent raises it at the first batch
        where = "worker_init_fn in worker %d" % worker_id
        _reply(sock, REP_ERROR, _error_reply(e, where, None))
        return
    _reply(sock, REP_OK)  # ready
    while True:
        req = _recv_request(sock)
        if req is None:
            return  # the parent closed the loader, or died
        (flags, buf_id, fd_bytes, epoch, seed, batch, base_seed, first), offsets, indices, fd = req
        if flags & REQ_TEMPLATE:
            got = pickle.loads(_recv_exact(sock, buf_id) or b"")
            if got[0] == "t":
                filler.set_template(got[1])
            else:  # it does not pickle: each worker makes it, compared with its signature
                filler.check = got
                filler.t = None
            continue
        if flags & REQ_PROBE:
            _reply_probe(sock, filler, indices[0] if indices else 0, epoch, seed, batch, indices[1:])
            continue
        try:
            if filler.t is None:  # the parent's template did not pickle
                filler.derive(indices[0], epoch, seed, batch)
            if len(offsets) != len(filler.t.fields):
                raise RuntimeError("pinloader worker %d: %d fields in the batch, %d in its template"
                                   % (worker_id, len(offsets), len(filler.t.fields)))
            if flags & REQ_RESEED and filler.must_reseed(base_seed, epoch, batch):
                filler.reseed(base_seed)
                if spec.worker_init_fn is not None:
                    spec.worker_init_fn(worker_id)
            filler.last = (epoch, batch)
            views, writer = filler.views_for(buf_id, fd, fd_bytes, offsets)
            filler.progress = (lambda i: sock.sendall(REP.pack(REP_MAGIC, REP_PROGRESS, i))) \
                if flags & REQ_PROGRESS else None
            payload = filler.fill(indices, epoch, seed, batch, views, first, writer)
            status = REP_OK
        except BaseException as e:
            where, sample = _where(e, batch, epoch)
            payload, status = _error_reply(e, where, sample), REP_ERROR
        _reply(sock, status, payload)
