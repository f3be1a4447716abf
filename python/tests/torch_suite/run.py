#!/usr/bin/env python3
"""Runs PyTorch's own DataLoader tests (test_dataloader.py beside this file,
unmodified) with torch.utils.data.DataLoader replaced by pinloader.DataLoader,
and compares each test's outcome with expected.txt.

    python3 run.py                  # pinloader; exit 1 on a regression
    python3 run.py --loader torch   # the same file under torch's own loader
    python3 run.py -k TestDataLoader::test_sequential --show   # one test, its traceback

How the substitution is made: the tests run in a child process whose
__main__ is this file. Its top level (run again as __mp_main__ in every
process multiprocessing spawns, before a pickled test function is looked up)
sets torch.utils.data.DataLoader = pinloader.DataLoader before
test_dataloader.py is imported, so the file's own `from torch.utils.data
import DataLoader`, its subclasses of DataLoader and its isinstance checks
all see pinloader's class. torch.utils.data.dataloader.DataLoader (torch's
internals, and DataLoader2, which bound it at import) are left as they are.

Hangs cannot hang the run: the child reports each test's start and end on a
pipe; a test with no end after --timeout seconds has the child's whole
process group (its workers too) killed, is recorded as "timeout", and a new
child goes on with the tests after it. A crash is recorded the same way.
Tests listed as `hang` in expected.txt are not run unless --all is given.
"""
import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = "test_dataloader.py"
SUITE_TORCH_VERSION = "1.13.1"  # the version of the source package the file is from
EXPECTED = os.path.join(HERE, "expected.txt")
LOADER_ENV = "TORCH_SUITE_LOADER"
EVENTS_ENV = "TORCH_SUITE_EVENTS_FD"
STATES = ("pass", "fail", "hang", "skip")


def _setup_path():
    """test_dataloader.py importable by name (spawned processes unpickle its
    functions by module name), and the expecttest stand-in where the real
    package is missing (Debian 12 has none)."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    try:
        import expecttest  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "_shims"))


def substitute():
    import torch.utils.data
    import pinloader

    torch.utils.data.DataLoader = pinloader.DataLoader


if os.environ.get(LOADER_ENV) in ("pinloader", "torch"):
    # The child, or a process it spawned: this runs before anything imports
    # test_dataloader.py.
    _setup_path()
    if os.environ[LOADER_ENV] == "pinloader":
        substitute()


# ---------------------------------------------------------------- the child


class _Reporter:
    """pytest plugin: one JSON line per event on the parent's pipe."""

    def __init__(self, fd):
        self.fd = fd
        self.tests = {}

    def _emit(self, **event):
        data = (json.dumps(event) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]

    def pytest_collection_finish(self, session):
        self._emit(ev="collected", ids=[_short(i.nodeid) for i in session.items])

    def pytest_runtest_logstart(self, nodeid, location):
        self.tests[nodeid] = {"outcome": "passed", "message": ""}
        self._emit(ev="start", id=_short(nodeid))

    def pytest_runtest_logreport(self, report):
        t = self.tests[report.nodeid]
        if t["outcome"] != "passed":
            return
        if report.skipped:
            if hasattr(report, "wasxfail"):
                t["outcome"] = "xfailed"
            else:
                t["outcome"] = "skipped"
                lr = report.longrepr
                t["message"] = lr[2] if isinstance(lr, tuple) else str(lr)
        elif report.failed:
            t["outcome"] = "failed"
            crash = getattr(report.longrepr, "reprcrash", None)
            t["message"] = crash.message if crash is not None else str(report.longrepr)[-500:]
            t["longrepr"] = str(report.longrepr)[-6000:]

    def pytest_runtest_logfinish(self, nodeid, location):
        self._emit(ev="done", id=_short(nodeid), **self.tests.pop(nodeid))


def _short(nodeid):
    """'.../test_dataloader.py::TestX::test_y' -> 'TestX::test_y'."""
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def _child(argv):
    import pytest

    fd = int(os.environ[EVENTS_ENV])
    collect_only = argv[:1] == ["--collect-only"]
    ids = argv[1:] if collect_only else argv
    suite = os.path.join(HERE, SUITE)
    targets = [suite + "::" + i for i in ids] if ids else [suite]
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:timeout", "--noconftest",
            "--rootdir", HERE, "-c", os.devnull, "-W", "ignore::DeprecationWarning"]
    if collect_only:
        args.append("--collect-only")
    return pytest.main(args + targets, plugins=[_Reporter(fd)])


# --------------------------------------------------------------- the parent


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_child(args, loader, timeout, log, on_event):
    """Runs one child; calls on_event(event) for each event; returns
    (returncode, id of the test running when it was killed or None)."""
    r, w = os.pipe()
    env = dict(os.environ, **{LOADER_ENV: loader, EVENTS_ENV: str(w)})
    env.setdefault("PYTHONUNBUFFERED", "1")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child"] + args,
                         env=env, pass_fds=(w,), cwd=HERE, stdin=subprocess.DEVNULL,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    os.close(w)
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    buf, current, deadline, killed = b"", None, None, None
    try:
        while True:
            # 1 s slices: a worker that outlived the child can keep the pipe
            # open, so the child's exit is also checked between events.
            if sel.select(1.0):
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    ev = json.loads(line)
                    if ev["ev"] == "start":
                        current, deadline = ev["id"], time.monotonic() + timeout
                    elif ev["ev"] == "done":
                        current = None
                    on_event(ev)
            elif p.poll() is not None:
                break
            if current is not None and time.monotonic() > deadline:
                killed = current
                break
    finally:
        _kill_group(p.pid)  # the timed-out test's, or leftover workers
        rc = p.wait()
        sel.close()
        os.close(r)
    return rc, (killed or current)


def collect(loader, log):
    ids = []

    def on(ev):
        if ev["ev"] == "collected":
            ids.extend(ev["ids"])

    rc, _ = _run_child(["--collect-only"], loader, 600, log, on)
    if not ids:
        raise RuntimeError("collecting %s failed (pytest exit %d); see %s" % (SUITE, rc, log.name))
    return ids


def run_tests(ids, loader, timeout, log, jobs=1, progress=None):
    """{id: {"outcome", "message", ...}} for every id; outcomes as pytest's
    plus "timeout" and "crash"."""
    results, started = {}, {}
    lock = threading.Lock()

    def on(ev):
        if ev["ev"] == "start":
            started[ev["id"]] = time.monotonic()
        if ev["ev"] == "done":
            ev["seconds"] = round(time.monotonic() - started.get(ev["id"], time.monotonic()), 2)
            with lock:
                results[ev["id"]] = ev
            if progress:
                progress(ev)

    def shard(part):
        todo = list(part)
        while todo:
            t0 = time.monotonic()
            rc, stuck = _run_child(todo, loader, timeout, log, on)
            if stuck is not None:
                outcome = "timeout" if time.monotonic() - t0 >= timeout else "crash"
                msg = ("no result after %ds" % timeout if outcome == "timeout"
                       else "the test process ended (exit %d) during the test" % rc)
                on({"ev": "done", "id": stuck, "outcome": outcome, "message": msg})
            with lock:
                left = [i for i in todo if i not in results]
            if len(left) == len(todo):  # nothing ran: do not loop forever
                for i in left:
                    on({"ev": "done", "id": i, "outcome": "crash",
                        "message": "the test process ended (exit %d) before the test" % rc})
                left = []
            todo = left

    parts = [ids[i::jobs] for i in range(jobs)]
    threads = [threading.Thread(target=shard, args=(p,)) for p in parts if p]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# ------------------------------------------------------------ expected.txt


def read_expected(path=EXPECTED):
    """{id: (state, reason)}; lines 'STATE ID [REASON]', '#' comments."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 2 or parts[0] not in STATES:
                raise ValueError("%s:%d: want 'STATE ID [REASON]', STATE one of %s" % (path, n, STATES))
            out[parts[1]] = (parts[0], parts[2] if len(parts) > 2 else "")
    return out


def _line(result):
    msg = result.get("message", "").strip()
    return msg.splitlines()[0][:200] if msg else ""


def compare(expected, results, ran, collected):
    """(regressions, newly passing, notes): lists of lines. ran: the ids
    run, collected: every id of the file."""
    regressions, newly, notes = [], [], []
    for tid in ran:
        res = results[tid]
        got = res["outcome"]
        state, reason = expected.get(tid, (None, ""))
        if state is None:
            notes.append("%s: %s (not in expected.txt)" % (tid, got))
        elif state == "pass" and got in ("failed", "timeout", "crash"):
            regressions.append("%s: %s: %s" % (tid, got, _line(res)))
        elif state == "pass" and got != "passed":
            notes.append("%s: listed as passing but %s: %s" % (tid, got, _line(res)))
        elif state in ("fail", "hang") and got == "passed":
            newly.append("%s (was: %s)" % (tid, reason))
        elif state == "skip" and got == "passed":
            notes.append("%s: listed as skipped, passes here" % tid)
    for tid, (state, _) in expected.items():
        if state == "pass" and tid not in collected:
            regressions.append("%s: listed as passing but not collected" % tid)
    return regressions, newly, notes


def torch_version():
    """The installed torch's release. Debian's python3-torch 1.13.1 calls
    itself '1.13.0a0' (torch.__version__), so where torch is Debian's the
    package's version is asked instead."""
    import torch

    if torch.__file__.startswith("/usr/lib/python3/dist-packages/"):
        try:
            deb = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "python3-torch"],
                                 capture_output=True, text=True, check=True).stdout
            return deb.split(":")[-1].split("+")[0].split("-")[0]
        except (OSError, subprocess.CalledProcessError):
            pass
    return torch.__version__.split("+")[0]


def torch_version_matches():
    version = torch_version()
    return version == SUITE_TORCH_VERSION, version


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loader", choices=("pinloader", "torch"), default="pinloader")
    ap.add_argument("--timeout", type=float, default=90, help="seconds per test (default 90)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="tests run in N processes at once")
    ap.add_argument("-k", action="append", default=[], metavar="ID",
                    help="only tests whose id contains ID (repeatable)")
    ap.add_argument("--all", action="store_true", help="run the tests listed as 'hang' too")
    ap.add_argument("--expected", default=EXPECTED, metavar="FILE", help="default: expected.txt")
    ap.add_argument("--json", metavar="FILE", help="write every test's result here")
    ap.add_argument("--log", metavar="FILE", help="the children's output (default: a temp file)")
    ap.add_argument("--show", action="store_true", help="print each failure's traceback")
    ap.add_argument("-v", action="store_true", help="one line per test")
    a = ap.parse_args(argv)

    ok, version = torch_version_matches()
    if not ok:
        print("torch %s installed, %s is from torch %s: not comparable" % (version, SUITE, SUITE_TORCH_VERSION))
        return 2
    expected = read_expected(a.expected)
    log = open(a.log, "wb") if a.log else tempfile.NamedTemporaryFile(
        prefix="torch-suite-", suffix=".log", delete=False)
    t0 = time.monotonic()
    collected = ids = collect(a.loader, log)
    if a.k:
        ids = [i for i in ids if any(k in i for k in a.k)]
    if not a.all and not a.k:
        ids = [i for i in ids if expected.get(i, ("",))[0] != "hang"]

    def progress(ev):
        if a.v:
            print("%-8s %5.1fs %s  %s" % (ev["outcome"], ev["seconds"], ev["id"], _line(ev)),
                  flush=True)

    results = run_tests(ids, a.loader, a.timeout, log, max(1, a.jobs), progress)
    log.close()
    counts = {}
    for r in results.values():
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    if a.show:
        for tid in ids:
            r = results[tid]
            if r["outcome"] not in ("passed", "skipped", "xfailed"):
                print("=" * 70, "\n%s: %s\n%s" % (tid, r["outcome"], r.get("longrepr", r.get("message"))))
    print("%s with %s.DataLoader: %s in %.0fs (output: %s)" % (
        SUITE, a.loader, ", ".join("%d %s" % (v, k) for k, v in sorted(counts.items())),
        time.monotonic() - t0, log.name))
    if a.loader == "torch":
        return 0
    regressions, newly, notes = compare(expected, results, ids, set(collected))
    if not a.k:
        listed = sum(1 for s, _ in expected.values() if s != "skip")
        passing = sum(1 for tid, (s, _) in expected.items()
                      if s != "skip" and results.get(tid, {}).get("outcome") == "passed")
        print("pass under pinloader: %d of the %d tests that pass under torch" % (passing, listed))
    for line in notes:
        print("note:", line)
    for line in newly:
        print("newly passes (update expected.txt):", line)
    for line in regressions:
        print("REGRESSION:", line)
    return 1 if regressions else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        sys.exit(_child(sys.argv[2:]))
    sys.exit(main())
