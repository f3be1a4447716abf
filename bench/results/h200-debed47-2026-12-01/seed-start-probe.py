"""Where the seed benchmark's first epoch goes: a timeline of pinloader's start."""
import os, sys, time, pickle, tempfile
import numpy as np, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
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
root = tempfile.mkdtemp()
pw.write_cifar_pickles(root)
import torchvision.transforms as Tr
ds = pw.torchvision_cifar(root, Tr.ToTensor())
torch.cuda.init(); torch.zeros(1, device="cuda")
print("rss MB", int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20)
t = time.perf_counter()
for i in range(1024): ds[i]
print("1024 samples in one process: %.1f ms" % ((time.perf_counter()-t)*1e3))
for rep in range(2):
    T.clear()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ld = pinloader.DataLoader(ds, batch_size=1024, num_workers=6, device="cuda")
    t1 = time.perf_counter()
    it = iter(ld)
    t2 = time.perf_counter()
    x, y = next(it)
    t3 = time.perf_counter()
    waits = []
    for k in range(8):
        time.sleep(0.1); s = time.perf_counter(); next(it); waits.append(round((time.perf_counter()-s)*1e3, 2))
    print("rep %d: construct %.1f ms, iter %.1f ms, first next %.1f ms; next waits %s" % (rep, (t1-t0)*1e3, (t2-t1)*1e3, (t3-t2)*1e3, waits))
    for k, v in T.items(): print("   ", k, v)
    del it; ld.close()
# the whole epochs, as the bench does
for name in ("pinloader", "torch"):
    ld = (pinloader.DataLoader(ds, batch_size=1024, num_workers=6, device="cuda") if name == "pinloader"
          else torch.utils.data.DataLoader(ds, batch_size=1024, num_workers=6, pin_memory=True))
    ts = [pw.run_epoch(ld, work_s=0.1)[0] for _ in range(3)]
    print(name, "epochs", ["%.3f" % t for t in ts], "mean %.3f" % np.mean(ts), flush=True)
    if hasattr(ld, "close"): ld.close()
