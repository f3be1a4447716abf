"""Is the VM's per-process slowdown with 6 busy processes hidden SMT? 6 forked
processes run NumpyAug's __getitem__ for 3 s each, placed: by the scheduler,
on even CPUs, on CPUs 0-5, on odd CPUs. Prints each process's us/sample."""
import os, sys, time, multiprocessing as mp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # bench/
import numpy as np
import python_workers as pw  # its NumpyAug (needs pinloader importable)
ds = pw.NumpyAug(n=50000)
def one(q, cpu, secs):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    np.random.seed(os.getpid())
    n = 0; t0 = time.perf_counter(); i = 0
    while time.perf_counter() - t0 < secs:
        for _ in range(64):
            ds[i % 50000]; i += 1
        n += 64
    q.put((cpu, (time.perf_counter() - t0) / n * 1e6, os.sched_getaffinity(0) if cpu is None else None))
def run(cpus, secs=3.0):
    q = mp.Queue(); ps = [mp.Process(target=one, args=(q, c, secs)) for c in cpus]
    for p in ps: p.start()
    out = [q.get() for _ in ps]
    for p in ps: p.join()
    us = sorted(round(o[1], 1) for o in out)
    print("%-28s us/sample %s  total %.0f samples/s" % (cpus if cpus[0] is not None else "scheduler", us, sum(1e6 / u for u in us)), flush=True)
t0 = time.perf_counter()
for i in range(3000): ds[i]
print("one process: %.1f us/sample" % ((time.perf_counter() - t0) / 3000 * 1e6))
run([None] * 6)
run([0, 2, 4, 6, 8, 10])
run([0, 1, 2, 3, 4, 5])
run([1, 3, 5, 7, 9, 11])
run([None] * 6)
run([0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11])
run([None] * 14)
run([None])
run([3])
