"""Where the seed benchmark's first epoch goes: a timeline of pinloader's start."""
import os, sys, time, pickle, tempfile
import numpy as np, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # bench/
import python_workers as pw
import pinloader
from pinloader import _worker
E = pinloader._Engine
T = {}
def wrap(obj, name, key=None):
    f = getattr(obj, name)
    def g(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally: T.setdefault(key or name, []).append(round((time.perf_counter()-t)*1e3, 2))
    setattr(obj, name, g)
import multiprocessing.process as mpp
wrap(mpp.BaseProcess, "start", "fork")
wrap(E, "_start_processes"); wrap(E, "_wait_ready"); wrap(pinloader._C, "Loader"); wrap(pinloader._C, "ProcSet")
import gc
wrap(gc, "freeze")
Fill = _worker.Filler
_of = Fill.fill
def _fill(self, indices, *a):
    t = time.perf_counter(); r = _of(self, indices, *a)
    if os.environ.get("PROBE_CHILD"):
        sys.stderr.write("  [child %d: fill of %d samples %.3f..%.3f = %.1f ms]\n" % (os.getpid(), len(indices), t, time.perf_counter(), (time.perf_counter()-t)*1e3))
    return r
Fill.fill = _fill
root = tempfile.mkdtemp()
pw.write_cifar_pickles(root)
import torchvision.transforms as Tr
ds = pw.torchvision_cifar(root, Tr.ToTensor())
torch.cuda.init(); torch.zeros(1, device="cuda")
print("rss MB", int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20)
t = time.perf_counter()
for i in range(1024): ds[i]
print("1024 samples in one process: %.1f ms" % ((time.perf_counter()-t)*1e3))
for rep, W in ((0, 6), (1, 6), (2, 1)):
    os.environ["PROBE_CHILD"] = "1" if rep != 1 else ""
    T.clear()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ld = pinloader.DataLoader(ds, batch_size=1024, num_workers=W, device="cuda")
    t1 = time.perf_counter()
    it = iter(ld)
    t2 = time.perf_counter()
    print("   iter() returned at %.3f" % t2, flush=True)
    x, y = next(it)
    t3 = time.perf_counter()
    print("   first next() returned at %.3f" % t3, flush=True)
    waits = []
    for k in range(8 if W > 1 else 2):
        time.sleep(0.1); s = time.perf_counter(); next(it); waits.append(round((time.perf_counter()-s)*1e3, 2))
    print("rep %d: construct %.1f ms, iter %.1f ms, first next %.1f ms; next waits %s" % (rep, (t1-t0)*1e3, (t2-t1)*1e3, (t3-t2)*1e3, waits))
    for k, v in T.items(): print("   ", k, v)
    del it; ld.close(); time.sleep(0.3)
os.environ["PROBE_CHILD"] = ""
# the whole epochs, as the bench does
for name in ("pinloader", "torch"):
    ld = (pinloader.DataLoader(ds, batch_size=1024, num_workers=6, device="cuda") if name == "pinloader"
          else torch.utils.data.DataLoader(ds, batch_size=1024, num_workers=6, pin_memory=True))
    ts = [pw.run_epoch(ld, work_s=0.1)[0] for _ in range(3)]
    print(name, "epochs", ["%.3f" % t for t in ts], "mean %.3f" % np.mean(ts), flush=True)
    if hasattr(ld, "close"): ld.close()
