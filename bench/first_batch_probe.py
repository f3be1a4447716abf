"""Where pinloader's time to the first batch goes (issue 30), one case per
fresh interpreter: the parent's phases on one clock (forks, the first
sample's layout, the ProcSet, the C loader, the wait for the remaining
workers, the first batch), for bench/first_batch.py's small dataset, batch
256, into the GPU, CUDA started before iter() as a training script's model
has it (--cold-cuda: not). Also the cost of CUDA's start alone (a fresh
interpreter that only makes a CUDA tensor).

    python3 bench/first_batch_probe.py [--workers 1,32] [--method fork] [--raw-forks 32]

--raw-forks N: also N bare os.fork()s (each child leaving at once) of an
interpreter with Python alone, with torch imported, and with CUDA started:
what a fork costs the parent before any of multiprocessing's or the
loader's work.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def probe(workers, method, device, cold):
    import torch  # noqa: F401 (as a training script has it)
    import pinloader
    from first_batch import Small

    marks = []

    def wrap(obj, name):
        f = getattr(obj, name)

        def g(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                marks.append((name, t, time.perf_counter()))
        setattr(obj, name, g)

    import multiprocessing.process as mpp
    E = pinloader._Engine
    for n in ("_start_processes", "start_probes", "_learn", "_send_template", "_make_procset",
              "_finish_start", "_wait_ready", "_send_template"):
        wrap(E, n)
    wrap(mpp.BaseProcess, "start")
    wrap(pinloader._C, "Loader")
    wrap(pinloader._C, "ProcSet")
    if device == "cuda" and not cold:  # as a training script's model has it
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    ds = Small(50000)
    dl = pinloader.DataLoader(ds, batch_size=256, num_workers=workers, shuffle=True, seed=1,
                              device=device, multiprocessing_context=method)
    t0 = time.perf_counter()
    it = iter(dl)
    t1 = time.perf_counter()
    next(it)
    if device == "cuda":
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    dl.close()
    out = {"iter_s": t1 - t0, "first_s": t2 - t0, "phases": {}}
    for name, a, b in marks:
        p = out["phases"].setdefault(name, {"calls": 0, "total_ms": 0.0, "first_at_ms": None,
                                            "last_end_ms": 0.0})
        p["calls"] += 1
        p["total_ms"] += (b - a) * 1e3
        if p["first_at_ms"] is None:
            p["first_at_ms"] = (a - t0) * 1e3
        p["last_end_ms"] = (b - t0) * 1e3
    print("RESULT " + json.dumps(out))


def cuda_alone():
    t0 = time.perf_counter()
    import torch
    t1 = time.perf_counter()
    torch.zeros(1).cuda()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    x = torch.empty(64 << 20, dtype=torch.uint8, pin_memory=True)
    t3 = time.perf_counter()
    print("RESULT " + json.dumps({"import_torch_s": t1 - t0, "cuda_init_s": t2 - t1,
                                  "pin_64mb_s": t3 - t2, "n": x.numel()}))


def raw_forks(count, cuda, torch_too):
    """count sequential os.fork()s of this process, each child leaving at
    once (os._exit): the kernel's and Python's cost of a fork alone, with
    torch imported and CUDA started or not. Each child is reaped before
    the next fork, so no live child shares the parent's pages when it forks
    again: a lower bound of a worker's start (bench/fork_gate_probe.py
    forks children that live on, as workers do)."""
    if torch_too:
        import torch

        if cuda:
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
    import resource

    ms = []
    for _ in range(count):
        t = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        ms.append((time.perf_counter() - t) * 1e3)
        os.waitpid(pid, 0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps({"fork_ms": ms, "max_rss_mb": rss}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,32")
    ap.add_argument("--method", default="fork")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--one", type=int, default=None)
    ap.add_argument("--cuda-alone", action="store_true")
    ap.add_argument("--cold-cuda", action="store_true", help="CUDA not started before iter()")
    ap.add_argument("--raw-forks", type=int, default=0,
                    help="also time this many bare os.fork()s: Python alone, with torch, and "
                         "with torch and CUDA started")
    ap.add_argument("--raw-one", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.cuda_alone:
        return cuda_alone()
    if a.raw_one is not None:
        return raw_forks(a.raw_forks, a.raw_one == "cuda", a.raw_one != "python")
    for kind in ("python", "torch", "cuda") if a.raw_forks else ():
        if kind == "cuda" and a.device != "cuda":
            continue
        r = subprocess.run([sys.executable, __file__, "--raw-forks", str(a.raw_forks), "--raw-one", kind],
                           capture_output=True, text=True, timeout=300)
        line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
        if not line:
            print("raw forks", kind, "error", r.stderr[-500:])
            continue
        got = json.loads(line[0][7:])
        f = sorted(got["fork_ms"])
        print("raw os.fork(), %-6s: %d forks, median %.2f ms, max %.2f ms, total %.1f ms (parent max RSS %.0f MB)"
              % (kind, len(f), f[len(f) // 2], f[-1], sum(f), got["max_rss_mb"]))
    if a.one is not None:
        return probe(a.one, a.method, a.device, a.cold_cuda)
    if a.device == "cuda":
        r = subprocess.run([sys.executable, __file__, "--cuda-alone"], capture_output=True, text=True)
        print("cuda alone:", [x for x in r.stdout.splitlines() if x.startswith("RESULT")] or r.stderr[-500:])
    for w in [int(x) for x in a.workers.split(",")]:
        for rep in range(a.reps):
            r = subprocess.run([sys.executable, __file__, "--one", str(w), "--method", a.method,
                                "--device", a.device] + (["--cold-cuda"] if a.cold_cuda else []), capture_output=True, text=True, timeout=300)
            line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
            if not line:
                print(w, "error", r.stderr[-800:])
                continue
            got = json.loads(line[0][7:])
            print("%s %d workers rep %d: iter %.1f ms, first batch %.1f ms" % (
                a.method, w, rep, got["iter_s"] * 1e3, got["first_s"] * 1e3))
            for name, p in sorted(got["phases"].items(), key=lambda kv: kv[1]["first_at_ms"]):
                print("   %-17s calls %3d  total %7.1f ms  from %7.1f to %7.1f ms" % (
                    name, p["calls"], p["total_ms"], p["first_at_ms"], p["last_end_ms"]))


if __name__ == "__main__":
    main()
