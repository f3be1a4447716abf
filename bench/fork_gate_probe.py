"""Why 32 fork-started workers cost a parent holding torch and CUDA more
than 32 bare os.fork()s (issue 30's fork goal): 32 multiprocessing fork
Process.start()s of such a parent, each child busy for 20 or 60 ms of Python
(walking its inherited objects, as a starting worker touches them), plain,
and with every child held at its first Python step (an at-fork hook
waiting on a pipe) until the parent has forked all: whether the children
running beside the parent's forks (their copy-on-write faults on pages the
parent shares) is what slows the forks. Each case in a fresh interpreter.

    python3 bench/fork_gate_probe.py [--cpu]

Prints per case: forks_ms (the 32 starts), first_child_ms and
all_children_ms (each child's done, from the first start)."""
import gc
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

GATE = None


def _hold():
    """In a child forked while GATE is set: wait for the parent's EOF."""
    if GATE is not None:
        r, w = GATE
        os.close(w)
        while os.read(r, 1):
            pass
        os.close(r)


def child(tell, busy_ms):
    t = time.perf_counter()
    n = 0
    while (time.perf_counter() - t) * 1e3 < busy_ms:
        for _ in gc.get_objects()[n:n + 20000]:
            pass
        n += 20000
    os.write(tell, b"x")


def one(mode, n, busy_ms, cuda):
    global GATE
    import torch
    if cuda:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    ctx = mp.get_context("fork")
    r, w = os.pipe()
    if mode == "gate":
        os.register_at_fork(after_in_child=_hold)
        GATE = os.pipe()
    t0 = time.perf_counter()
    ps = []
    for i in range(n):
        p = ctx.Process(target=child, args=(w, busy_ms), daemon=True)
        p.start()
        ps.append(p)
    t1 = time.perf_counter()
    if GATE is not None:
        os.close(GATE[1])  # EOF: every held child goes on
        os.close(GATE[0])
        GATE = None
    first = None
    for i in range(n):
        os.read(r, 1)
        if first is None:
            first = time.perf_counter()
    t2 = time.perf_counter()
    for p in ps:
        p.join()
    print("RESULT " + json.dumps({"forks_ms": (t1 - t0) * 1e3, "first_child_ms": (first - t0) * 1e3,
                                  "all_children_ms": (t2 - t0) * 1e3}))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        one(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1")
        sys.exit(0)
    cuda = "--cpu" not in sys.argv
    for busy in (20, 60):
        for rep in range(3):
            for mode in ("plain", "gate"):
                p = subprocess.run([sys.executable, __file__, "--one", mode, "32", str(busy), "1" if cuda else "0"],
                                   capture_output=True, text=True, timeout=120)
                line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
                print(mode, "busy", busy, "rep", rep, line[0][7:] if line else p.stderr[-300:], flush=True)
