"""The worker-process side of a Python dataset's loader: starting workers
(forked with the collector off, _start_worker), the atexit close of every
live loader, what a forked child drops of its parent's, and _Processes,
the mixin of _Engine (_engine.py) that starts, waits for, reads, describes
and stops an engine's worker processes. _WorkerView is what iterators list
in _workers; _rebuild raises a worker's exception again here.
"""
import atexit
import errno
import os
import pickle
import select
import signal
import socket
import sys
import types
import weakref

from . import _pinloader as _C
from . import _worker
from ._common import _add_note, _new_error


def _mp_context(ctx):
    import multiprocessing

    if ctx is None:
        return multiprocessing.get_context()
    if isinstance(ctx, str):
        return multiprocessing.get_context(ctx)
    return ctx


def _preload_forkserver(ctx, dataset, worker_init_fn=None):
    """forkserver, before its server starts: have the server import once
    what every worker would import again (pinloader's worker and numpy;
    torch and torchvision where this process has them and the dataset's
    code names them): the workers fork from it with those imported,
    seconds less each when the dataset uses torch (beyond torch, which
    leaves the preload list as it is). A dataset that names no torch does
    not wait for the server to import it (about 0.7 s here, 3 s on the
    H200); a main module that imports torch has it imported there anyway
    (the list's "__main__"). The user's own list (set_forkserver_preload)
    is kept and extended; a server already running is left as it is (the
    list is read at its start). The dataset's own module is not added: an
    import that fails in the server other than with ImportError ends the
    server, and every worker start after it, where in a worker it is that
    worker's error."""
    if ctx.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    if server is None or getattr(server, "_forkserver_pid", None) is not None:
        return
    mods = list(getattr(server, "_preload_modules", ["__main__"]))
    try:
        named = _packages_named(dataset, worker_init_fn)
    except Exception:  # an odd object: preload as if it named them all
        named = set(_PRELOAD)
    wanted = ["pinloader._worker"] + [m for m in _PRELOAD if m in sys.modules and
                                      (m == "numpy" or m in named)]
    added = [m for m in wanted if m not in mods]
    if added:
        ctx.set_forkserver_preload(mods + added)


_PRELOAD = ("numpy", "torch", "torchvision")


def _packages_named(*objs):
    """Top-level packages the code of objs names: the modules of their
    classes (bases included), of their attributes' classes (a transform
    held by the dataset), and what those modules and a function's globals
    hold (import torch; from torchvision import transforms). A guess, used
    only to choose a preload: a dataset that imports torch inside a method
    is not seen, and its workers import torch themselves (correct, slower)."""
    tops = set()

    def add_module_of(obj):
        name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
        if isinstance(name, str):
            tops.add(name.partition(".")[0])

    def add_namespace(ns):
        for v in list(ns.values()):
            add_module_of(v)

    for obj in objs:
        if obj is None:
            continue
        classes = [c for c in type(obj).__mro__ if c is not object]
        if isinstance(obj, types.FunctionType):
            add_namespace(obj.__globals__)
        attrs = getattr(obj, "__dict__", None)
        for v in (list(attrs.values()) if isinstance(attrs, dict) else []):
            classes += [c for c in type(v).__mro__ if c is not object]
        for c in dict.fromkeys(classes):
            add_module_of(c)
        for name in dict.fromkeys(c.__module__ for c in classes):  # each module once
            mod = sys.modules.get(name) if isinstance(name, str) else None
            if mod is not None and name != "builtins":
                add_namespace(vars(mod))
    return tops


def _start_forkserver_early(ctx, dataset, worker_init_fn=None):
    """At DataLoader(), for worker processes started by a forkserver (the
    default start method from Python 3.14): the server is started now, with
    the preload list above, so that its imports (torch's: about 3 s on the
    H200) run while the training script goes on (its model built, moved to
    the GPU) instead of after iter(). No worker starts before iter(), as in
    torch; the server is the one every later start uses (torch's DataLoader
    starts it at its first worker instead). A server already running is
    left alone; a failure here is left for iter() to raise."""
    try:
        ctx = _mp_context(ctx)
        if ctx.get_start_method() != "forkserver":
            return
        _preload_forkserver(ctx, dataset, worker_init_fn)
        from multiprocessing import forkserver

        forkserver.ensure_running()
    except Exception:
        pass  # (iter() starts it, or says why it cannot)


def _signal_name(code):
    import signal

    try:
        return signal.Signals(code).name
    except ValueError:
        return "signal %d" % code


# The live DataLoaders (DataLoader.__init__ adds each), closed at exit.
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


class _Processes:
    """_Engine's worker processes (a mixin: its methods read and set the
    engine's procs, socks, ready, ps and spec, and its dl)."""

    def _start_processes(self, spec, dl):
        """Forks (or spawns) the workers. Their sockets stay here until the
        first next(): the first sample is read (prepare), then the ProcSet
        and the C loader are made."""
        import time

        ctx = _mp_context(dl.multiprocessing_context)
        spec.parent_pid = None if ctx.get_start_method() == "forkserver" else os.getpid()
        _preload_forkserver(ctx, spec.dataset, spec.worker_init_fn)
        began = time.monotonic()
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
            # report()'s first batch: the parent's time starting them (a
            # fork each, where most of a fork start's first batch goes).
            self.start_span = (began, time.monotonic())
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
        import time

        for w, s in enumerate(self.socks):
            if not self.ready[w]:
                self._wait_ready(w, s, self.procs[w])
                self.ready[w] = True
                self.ps.set_ready(w)
        self.ready_at = time.monotonic()  # report()'s first batch: every "ready" read

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


def _rebuild(report, w, pid):
    exc = report.rebuild()
    where = report.where
    _add_note(exc, "pinloader: raised by %s in worker %d (pid %d). Original traceback:\n%s"
              % (where, w, pid, report.traceback.rstrip()))
    return exc
