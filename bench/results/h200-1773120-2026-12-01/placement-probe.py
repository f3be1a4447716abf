"""Is the VM's per-process slowdown with 6 busy processes hidden SMT? 6 forked
processes run NumpyAug's __getitem__ for 3 s each, placed: by the scheduler,
on even CPUs, on CPUs 0-5, on odd CPUs. Prints each process's us/sample."""
import os, sys, time, multiprocessing as mp
import numpy as np
MEAN = np.array([0.4914, 0.4822, 0.4465], np.float32).reshape(3, 1, 1)
STD = np.array([0.2470, 0.2435, 0.2616], np.float32).reshape(3, 1, 1)
class NumpyAug:  # bench/python_workers.py's
    def __init__(self, n=50000, seed=0):
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 10, n).tolist()
    def __getitem__(self, i):
        img = np.pad(self.images[i], ((4, 4), (4, 4), (0, 0)), mode="reflect")
        y, x = np.random.randint(0, 9, 2)
        img = img[y:y + 32, x:x + 32]
        if np.random.rand() < 0.5:
            img = img[:, ::-1]
        chw = img.transpose(2, 0, 1).astype(np.float32) / 255.0
        return (chw - MEAN) / STD, self.labels[i]
ds = NumpyAug(n=50000)
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
