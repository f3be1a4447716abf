"""Worker processes: start methods, failures (exceptions, killed workers,
stuck workers, Ctrl-C, a dying parent), memory sharing through memfd, and
create / iterate / destroy cycles with nothing leaked. Also issue 17's
items 6, 7 and 8 with real signals."""
import gc
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import pinloader
import pyw_data as D

HERE = os.path.dirname(os.path.abspath(__file__))
START_METHODS = ["fork", "forkserver", "spawn"]


def ids(batches):
    return [int(v) for b in batches for v in np.asarray(b[1]).reshape(-1)]


# ---------------------------------------------------------------- start methods

@pytest.mark.parametrize("method", START_METHODS)
def test_start_methods_load_and_raise_as_themselves(method):
    loader = pinloader.DataLoader(D.Indexed(30, fail_at=17, exc=KeyError), batch_size=4,
                                  num_workers=2, multiprocessing_context=method, output="numpy")
    assert loader.worker_mode == "process"
    with pytest.raises(KeyError) as e:
        list(loader)
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "dataset[17]" in notes and "in worker" in notes
    assert "raise self.exc" in notes  # the worker's own traceback
    pids = loader.worker_pids
    assert len(pids) == 2 and os.getpid() not in pids
    loader.dataset.fail_at = None  # a pickled copy lives in spawned workers:
    loader.close()                 # a new loader sees the change
    loader = pinloader.DataLoader(D.Indexed(30), batch_size=4, num_workers=2,
                                  multiprocessing_context=method, output="numpy")
    assert ids(loader) == list(range(30))
    loader.close()


# A shared page (fork workers inherit it): [0] sample 0 was read, [1]
# worker 2 entered worker_init_fn, [2] the parent lets worker 2 go on.
_gate = None


def gated_init(worker_id):
    if worker_id != 2:
        return
    _gate[1] = 1
    while _gate[2] == 0:  # waits for the parent's byte (an event), not for a time
        time.sleep(0.001)
    if os.environ.get("PL_TEST_INIT_FAILS"):
        raise OSError("worker 2 could not start")


class MarksFirst(D.Indexed):
    def __getitem__(self, i):
        if i == 0:
            _gate[0] = 1
        return super().__getitem__(i)


def _release_after_sample_0():
    def go():
        while _gate[0] == 0:
            time.sleep(0.001)
        _gate[2] = 1

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_loader_made_while_a_worker_still_starts(monkeypatch):
    """iter() waits for no worker (each begins its first batch's first
    sample when it is ready, as torch's workers begin at iter()); worker 2
    is still in its worker_init_fn (let go only once sample 0 is read)
    while worker 0 reads: no deadlock, no "ready" lost (batches 2, 5, 8
    are worker 2's: all 40 come), and its error reaches the consumer,
    nothing left running."""
    import mmap
    import multiprocessing

    global _gate
    for fails in (False, True):
        _gate = mmap.mmap(-1, 3, flags=mmap.MAP_SHARED)
        if fails:
            monkeypatch.setenv("PL_TEST_INIT_FAILS", "1")
        before = {p.pid for p in multiprocessing.active_children()}  # other tests' loaders
        loader = pinloader.DataLoader(MarksFirst(40), batch_size=4, num_workers=3,
                                      worker_init_fn=gated_init, output="numpy",
                                      multiprocessing_context="fork")
        it = iter(loader)
        while _gate[1] == 0:  # worker 2 is in worker_init_fn, held there
            time.sleep(0.001)
        assert _gate[2] == 0  # iter() returned: it waited for no worker
        t = _release_after_sample_0()
        if not fails:
            assert ids(it) == list(range(40))
        else:
            with pytest.raises(OSError, match="worker 2 could not start"):
                list(it)
        t.join()
        loader.close()
        left = [p for p in multiprocessing.active_children()
                if p.pid not in before and p.name.startswith("pinloader-worker")]
        assert left == []


def test_worker_init_fn_exception_reaches_the_consumer():
    def bad_init(worker_id):
        raise OSError("no GPU for worker %d" % worker_id)

    loader = pinloader.DataLoader(D.Indexed(8), batch_size=2, num_workers=2, worker_init_fn=bad_init)
    with pytest.raises(OSError, match="no GPU for worker 0"):
        list(loader)
    loader.close()


def test_unpicklable_exception_keeps_its_message():
    class Local(Exception):  # a local class cannot be unpickled in the parent
        pass

    class DS(D.Indexed):
        def __getitem__(self, i):
            if i == 3:
                raise Local("local failure")
            return super().__getitem__(i)

    loader = pinloader.DataLoader(DS(10), batch_size=2, num_workers=1)
    with pytest.raises(Exception, match="local failure") as e:
        list(loader)
    assert "dataset[3]" in "\n".join(getattr(e.value, "__notes__", []))
    loader.close()


# ---------------------------------------------------------------- dead workers

@pytest.mark.parametrize("in_order", [True, None])
@pytest.mark.parametrize("how,sig", [("kill", "SIGKILL"), ("segv", "SIGSEGV"), ("exit", "exit code 7")])
def test_worker_death_names_pid_signal_and_samples(how, sig, in_order):
    loader = pinloader.DataLoader(D.Killer(kill_at=21, how=how), batch_size=4, num_workers=2,
                                  output="numpy", in_order=in_order)
    pids = None
    got = []
    t0 = time.monotonic()
    with pytest.raises(pinloader.Error) as e:
        for b in loader:
            pids = pids or loader.worker_pids
            got.append(b)
    assert time.monotonic() - t0 < 30  # no hang
    msg = str(e.value)
    assert sig in msg, msg
    assert "samples 20, 21, 22, 23" in msg and "batch 5" in msg
    import re

    w, pid = map(int, re.search(r"worker (\d+) \(pid (\d+)\)", msg).groups())
    assert pid == pids[w]
    if in_order:
        assert w == 1  # batch 5 on worker 5 % 2, as torch
    assert [int(v) for b in got for v in np.asarray(b)[:, 0]] == list(range(20))  # all before it
    # The next iteration starts new workers, at the next epoch.
    loader.dataset.kill_at = None
    if how != "segv":
        loader.close()
        return
    loader = pinloader.DataLoader(D.Killer(kill_at=-1), batch_size=4, num_workers=2, output="numpy")
    assert [int(v) for b in loader for v in np.asarray(b)[:, 0]] == list(range(64))
    loader.close()


def test_killed_worker_mid_epoch_then_next_iteration_restarts():
    ds = D.Indexed(40, sleep=0.01)
    loader = pinloader.DataLoader(ds, batch_size=4, num_workers=2, output="numpy")
    it = iter(loader)
    first = next(it)
    old = loader.worker_pids
    os.kill(old[1], signal.SIGKILL)
    with pytest.raises(pinloader.Error, match="SIGKILL"):
        for _ in it:
            pass
    # nothing hangs, and the loader goes on with new workers
    out = list(loader)
    assert ids(out) == list(range(40))
    assert set(loader.worker_pids).isdisjoint(old)
    assert ids([first]) == [0, 1, 2, 3]
    loader.close()


def test_stuck_worker_times_out_and_is_killed():
    loader = pinloader.DataLoader(D.Stuck(stuck_at=9), batch_size=4, num_workers=2, timeout=1.0,
                                  output="numpy")
    t0 = time.monotonic()
    with pytest.raises(pinloader.Error) as e:
        list(loader)
    assert e.value.status in ("PL_TIMEOUT", "PL_CALLBACK")
    assert time.monotonic() - t0 < 20
    stuck = loader.worker_pids[0]
    t0 = time.monotonic()
    loader.close()
    assert time.monotonic() - t0 < 5
    _wait_gone([stuck])


def _wait_gone(pids, limit=60.0):  # the limit only turns a hang into a failure
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError("processes still running: %r" % alive)


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except FileNotFoundError:
        return False


# ---------------------------------------------------------------- exceptions across epochs

@pytest.mark.parametrize("mode", [dict(num_workers=2), dict(num_workers=2, worker_mode="thread"),
                                  dict(num_workers=0)], ids=["processes", "threads", "inline"])
def test_exceptions_keep_their_type_in_every_epoch(mode):
    # issue 17, item 8: prefetched failures of the next epoch keep theirs.
    ds = D.Indexed(24, fail_at={5, 22}, exc=KeyError)
    loader = pinloader.DataLoader(ds, batch_size=4, shuffle=True, seed=3, output="numpy", **mode)
    for epoch in range(4):
        with pytest.raises(KeyError):
            list(loader)
    loader.close()


# ---------------------------------------------------------------- Ctrl-C

def _run_with_interrupts(loader, epochs, expect, mean_gap, min_signals=0):
    """Iterates `epochs` epochs while another thread sends SIGINT every
    ~mean_gap s; after each KeyboardInterrupt goes on with the same
    iterator or a new one. Returns (the samples of each epoch, signals)."""
    allow = threading.Event()
    stop = threading.Event()
    sending = threading.Lock()  # allow's check and the kill, as one step
    sent = [0]

    def fire():
        rnd = random.Random(1)
        while not stop.is_set():
            time.sleep(rnd.uniform(0, 2 * mean_gap))
            with sending:
                if allow.is_set():
                    os.kill(os.getpid(), signal.SIGINT)
                    sent[0] += 1

    def quiet():
        # Under the lock no signal is on its way: one sent before the clear
        # is pending here (kill() delivers it before it returns), and none
        # comes after it. Without the lock a thread preempted between its
        # check of allow and its kill (a loaded machine) sent one later,
        # outside any try. The pending one is handled here, in the try.
        while True:
            try:
                with sending:
                    allow.clear()
                for _ in range(3):
                    time.sleep(0.002)
                return
            except KeyboardInterrupt:
                pass

    t = threading.Thread(target=fire, daemon=True)
    t.start()
    rnd = random.Random(2)
    epochs_out = []
    try:
        while len(epochs_out) < epochs or (sent[0] < min_signals and len(epochs_out) < 5000):
            got = []
            it = iter(loader)
            while True:
                try:
                    allow.set()
                    for b in it:
                        got.append(b)
                    quiet()
                    break
                except KeyboardInterrupt:
                    quiet()
                    if len(ids(got)) == len(expect):
                        # The interrupt came after the epoch's last batch
                        # (between the loop's end and `break`): the epoch is
                        # whole; iterating again would begin the next one.
                        break
                    if rnd.random() < 0.5:
                        it = iter(loader)  # a new iterator resumes the epoch
            epochs_out.append(ids(got))
            del got
    finally:
        stop.set()
        quiet()
        t.join()
    for e in epochs_out:
        assert e == expect, "an epoch lost or repeated batches under Ctrl-C"
    return epochs_out, sent[0]


def test_ctrl_c_loses_no_batch_process_workers():
    loader = pinloader.DataLoader(D.Indexed(120, sleep=0.0005), batch_size=4, num_workers=2,
                                  output="numpy")
    _, sent = _run_with_interrupts(loader, 4, list(range(120)), 0.004, min_signals=150)
    assert sent >= 150
    loader.close()


def test_ctrl_c_loses_no_batch_native_dataset(indexed_records):
    ds, _ = indexed_records
    loader = pinloader.DataLoader(ds, batch_size=2, num_workers=2, output="numpy")

    def ids_native(batches):
        return [int(v) for b in batches for v in np.asarray(b[0])]

    global ids
    saved, ids = ids, ids_native
    try:
        _, sent = _run_with_interrupts(loader, 12, list(range(100)), 0.002, min_signals=200)
    finally:
        ids = saved
    assert sent >= 200
    loader.close()


def test_ctrl_c_inside_getitem_inline_loses_nothing():
    loader = pinloader.DataLoader(D.Indexed(60, sleep=0.001), batch_size=3, output="numpy")
    _, sent = _run_with_interrupts(loader, 3, list(range(60)), 0.01)
    assert sent >= 10
    loader.close()


def test_ctrl_c_stops_every_worker_when_it_ends_the_program():
    code = textwrap.dedent("""
        import sys, time
        sys.path.insert(0, %r)
        import pinloader, pyw_data as D
        loader = pinloader.DataLoader(D.Indexed(10**6, sleep=0.01), batch_size=8, num_workers=2)
        it = iter(loader)
        next(it)
        print(" ".join(map(str, loader.worker_pids)), flush=True)
        for b in it:
            pass
    """ % HERE)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=HERE)
    pids = [int(x) for x in p.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(x) for x in pids)
    p.send_signal(signal.SIGINT)
    assert p.wait(30) != 0
    _wait_gone(pids)


# ---------------------------------------------------------------- a dying parent

def _read_n(fd, n):
    """n bytes from a pipe, waiting for them (b"" at EOF: fewer came)."""
    got = b""
    while len(got) < n:
        chunk = os.read(fd, n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def test_parent_killed_with_busy_workers_leaves_no_orphan():
    # A worker says when it is inside __getitem__ (a byte each on a pipe;
    # was a 0.5 s sleep), where it stays: only its parent's death can end
    # it; the idle one too.
    r, w = os.pipe()
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        import pinloader, pyw_data as D
        loader = pinloader.DataLoader(D.Blocks(10**6, int(sys.argv[1])), batch_size=64, num_workers=2)
        it = iter(loader)
        print(" ".join(map(str, loader.worker_pids)), flush=True)
        next(it)
    """ % HERE)
    p = subprocess.Popen([sys.executable, "-c", code, str(w)], stdout=subprocess.PIPE, text=True,
                         cwd=HERE, pass_fds=[w])
    os.close(w)
    try:
        pids = [int(x) for x in p.stdout.readline().split()]
        # Worker 0 is inside __getitem__ (the first next() has it read the
        # first sample alone, for the samples' layout); worker 1 waits idle.
        assert _read_n(r, 1) == b"x"
    finally:
        os.close(r)
    assert all(_alive(x) for x in pids)
    p.kill()
    p.wait(10)
    _wait_gone(pids)


# ---------------------------------------------------------------- memory

def test_batch_memory_is_memfd_not_dev_shm():
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    loader = pinloader.DataLoader(D.Indexed(64), batch_size=8, num_workers=2, output="numpy")
    it = iter(loader)
    next(it)
    w = loader.worker_pids[0]
    with open("/proc/%d/maps" % w) as f:
        maps = f.read()
    assert "memfd:pinloader-batch" in maps
    assert "/dev/shm" not in maps
    with open("/proc/self/maps") as f:
        assert "memfd:pinloader-batch" in f.read()
    del it
    loader.close()
    after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    assert after == before


def _fds():
    return len(os.listdir("/proc/self/fd"))


def _children():
    me = str(os.getpid())
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                out.append(int(d))
    return out


def _memfd_maps():
    with open("/proc/self/maps") as f:
        return sum("pinloader-batch" in line for line in f)


def leak_cycles(cycles):
    """The cycles of the leak test, in a process of their own (run by
    test_create_iterate_destroy_cycles_leak_nothing): asserts that they
    leave no process, file descriptor or memfd mapping behind."""
    # warm up once: the forkserver, imports, lazily opened files
    for _ in range(2):
        with pinloader.DataLoader(D.Indexed(16), batch_size=4, num_workers=2) as ld:
            list(ld)
    ld = None
    gc.collect()
    fds, kids, maps = _fds(), _children(), _memfd_maps()
    for c in range(cycles):
        kind = c % 3
        ld = pinloader.DataLoader(D.Indexed(16, fail_at=9 if kind == 2 else None), batch_size=4,
                                  num_workers=2, shuffle=kind == 1)
        try:
            for i, b in enumerate(ld):
                if kind == 1 and i == 1:
                    break  # abandoned mid-epoch
        except ValueError:
            pass
        ld.close()
        b = None  # a batch held keeps its buffers (and the workers' fds) alive
        del ld
    gc.collect()
    assert _fds() == fds
    assert _children() == kids
    assert _memfd_maps() == maps


def test_create_iterate_destroy_cycles_leak_nothing():
    """In a fresh interpreter: in this one the counts before the cycles
    took in what earlier tests' loaders still held and let go of during
    the cycles (a thread of a closed loader still in a slow __getitem__
    keeps that loader's batch memfds until it returns; an unjoined
    process's pipe goes when multiprocessing reaps it): fewer were open
    after than before (`assert 16 == 29`). What a fresh process counts is
    its own loaders' alone."""
    cycles = int(os.environ.get("PINLOADER_CYCLES", "60"))
    code = "import sys; sys.path.insert(0, %r); import test_workers; test_workers.leak_cycles(%d)" % (
        HERE, cycles)
    p = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_close_while_workers_are_busy_is_quick():
    # Both workers inside a read that never ends (each says so on a pipe;
    # was a 0.5 s sleep, and a 3 s bound on close()): close() returning at
    # all is its not waiting for the batches; the workers are then gone.
    r, w = os.pipe()
    loader = pinloader.DataLoader(D.Blocks(100, w), batch_size=50, num_workers=2)
    it = iter(loader)
    try:
        assert _read_n(r, 2) == b"xx"
    finally:
        os.close(r)
        os.close(w)
    pids = loader.worker_pids
    loader.close()
    _wait_gone(pids)
    del it


# ---------------------------------------------------------------- balancing

class SlowWorkerZero:
    """Worker 0 sleeps 20 ms a sample, worker 1 not at all; each sample says
    which worker read it."""

    def __len__(self):
        return 80

    def __getitem__(self, i):
        import torch

        info = torch.utils.data.get_worker_info()  # None: the parent's probe
        w = -1 if info is None else info.id
        if w == 0:
            time.sleep(0.02)
        return np.int64(i), np.int64(w)


@pytest.mark.parametrize("seed", [None, 3])
def test_torch_round_robin_by_default_and_in_order_false_is_balanced(seed):
    pytest.importorskip("torch")
    kw = dict(batch_size=2, shuffle=True, num_workers=2, output="numpy")
    got = {}
    for in_order in (None, False):
        if seed is None:
            import torch

            torch.manual_seed(7)  # the order follows torch's global seed
        loader = pinloader.DataLoader(SlowWorkerZero(), in_order=in_order, seed=seed, **kw)
        batches = [(b[0].tolist(), b[1].tolist()) for b in loader]
        loader.close()
        got[in_order] = batches
    same_order = [s for s, _ in got[None]]
    assert [s for s, _ in got[False]] == same_order  # the same samples, in order
    assert sorted(i for b in same_order for i in b) == list(range(80))
    for s, w in got[None] + got[False]:
        assert w[0] == w[1]  # a batch is read by one worker
    by_worker = lambda run: [sum(w[0] == k for _, w in run) for k in (0, 1)]
    assert by_worker(got[None]) == [20, 20]  # batch k on worker k % 2, as torch
    rr = [w[0] for _, w in got[None]]
    assert rr == [k % 2 for k in range(40)]
    zero, one = by_worker(got[False])
    # Worker 0 takes 40 ms a batch, worker 1 about 1: it reads every batch
    # but those worker 0 holds; the prefetch window (4 batches) bounds
    # how far ahead it runs, so worker 0 still gets one in five or so.
    assert one >= 2 * zero, (zero, one)


# ---------------------------------------------------------------- CUDA (the GPU box)

def test_worker_processes_into_cuda_match_cpu():
    torch = pytest.importorskip("torch")
    if not pinloader.cuda_available() or not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    ds = D.Mixed(70)
    for method in ("fork", "spawn"):
        cpu = [b for b in pinloader.DataLoader(ds, batch_size=16, num_workers=2)]
        gpu = pinloader.DataLoader(ds, batch_size=16, num_workers=2, device="cuda",
                                   multiprocessing_context=method)
        got = list(gpu)
        assert len(got) == len(cpu) == 5
        for g, c in zip(got, cpu):
            assert g["img"].is_cuda and g["img"].dtype == torch.uint8
            assert torch.equal(g["img"].cpu(), c["img"]) and torch.equal(g["label"].cpu(), c["label"])
            assert g["flag"].dtype == torch.bool and torch.equal(g["flag"].cpu(), c["flag"])
            assert g["name"] == c["name"]
        st = gpu.stats()
        assert st["pinned_bytes"] > 0 and st["pinned_fallbacks"] == 0
        gpu.close()


@pytest.mark.parametrize("user_preload", [None, ["json"]])
@pytest.mark.parametrize("dataset", ["pyw_torch_data.ParentHasTorchDataset", "pyw_data.ParentHasTorch"])
def test_forkserver_server_imports_torch_once_for_every_worker(user_preload, dataset):
    """forkserver: the server imports torch (and numpy, pinloader's worker)
    before it forks the workers, so that each does not import it again
    (seconds a worker: bench/first_batch.py), where the dataset's code
    names torch (its module imports it; here it is a torch Dataset); one
    that does not name it does not wait for the server to import it. Seen
    from the workers: their parent, the server, has torch's library mapped
    or not. A preload list of the user's own is kept. In a fresh
    interpreter: no server running yet; the main module (-c) is no file,
    so the server imports nothing of it."""
    module = dataset.partition(".")[0]
    code = textwrap.dedent("""
        import multiprocessing, sys
        sys.path.insert(0, %r)
        import torch, pinloader, %s
        if %r is not None:
            multiprocessing.get_context("forkserver").set_forkserver_preload(%r)
        dl = pinloader.DataLoader(%s(), batch_size=2, num_workers=2,
                                  multiprocessing_context="forkserver")
        print(sorted({int(x) for b in dl for x in b}))
        from multiprocessing import forkserver
        print(forkserver._forkserver._preload_modules)
    """) % (HERE, module, user_preload, user_preload, dataset)
    p = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    seen, preload = p.stdout.splitlines()[-2:]
    names_torch = module == "pyw_torch_data"
    assert seen == ("[1]" if names_torch else "[0]")
    first = user_preload or ["__main__"]
    assert preload == str(first + ["pinloader._worker", "numpy"] + (["torch"] if names_torch else []))


def test_forkserver_preload_follows_what_the_dataset_names():
    """The packages a dataset's code names, for the forkserver's preload:
    its classes' modules and what they import, its attributes' classes, a
    worker_init_fn's globals."""
    torch = pytest.importorskip("torch")
    import pyw_torch_data

    from pinloader._procs import _packages_named

    assert "torch" not in _packages_named(D.Indexed(4))
    assert "numpy" in _packages_named(D.Indexed(4))  # pyw_data imports it
    assert "torch" in _packages_named(pyw_torch_data.ParentHasTorchDataset())
    held = D.Indexed(4)
    held.mean = torch.zeros(3)  # a tensor (or a transform) the dataset holds
    assert "torch" in _packages_named(held)
    assert "torch" in _packages_named(D.Indexed(4), pyw_torch_data.seed_torch)
    assert "torch" not in _packages_named(D.Indexed(4), D.seed_nothing)


def test_forkserver_starts_at_dataloader_and_no_worker_before_iter():
    """forkserver: the server starts at DataLoader() (its imports run while
    the script goes on, beyond torch, which starts it at iter()), and no
    worker exists before iter(), as in torch; fork starts nothing. Then the
    batches are the dataset's. In a fresh interpreter: no server running."""
    code = textwrap.dedent("""
        import multiprocessing, os, sys
        sys.path.insert(0, %r)
        import pinloader, pyw_data
        from multiprocessing import forkserver
        fs = forkserver._forkserver
        forked = pinloader.DataLoader(pyw_data.Indexed(6), batch_size=3, num_workers=2,
                                      multiprocessing_context="fork")
        print(fs._forkserver_pid is None)
        dl = pinloader.DataLoader(pyw_data.Indexed(6), batch_size=3, num_workers=2,
                                  multiprocessing_context="forkserver")
        pid = fs._forkserver_pid
        print(pid is not None and os.waitpid(pid, os.WNOHANG) == (0, 0))
        print(multiprocessing.active_children())
        print([b[1].tolist() for b in dl])
        print(fs._forkserver_pid == pid)
    """) % (HERE,)
    p = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-5:] == ["True", "True", "[]", "[[0, 1, 2], [3, 4, 5]]", "True"]
