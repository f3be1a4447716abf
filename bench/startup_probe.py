"""Where the first epoch of the CIFAR10 + ToTensor benchmark goes
(python_workers.py --parts seed): a timeline of pinloader's start on one
clock, parent and workers. It prints the time of raw forks, of each
DataLoader's forks, ready waits and C loader, each staging buffer (the
debug log), each worker's views and fills (rep 0 and 2), and Python's
garbage collections over 1 ms; then 3 whole epochs of pinloader and torch.
Needs torchvision and CUDA: python3 bench/startup_probe.py

The earlier versions that ran for bench/results (h200-debed47,
h200-77671e1, h200-4ece407) printed a subset: see each folder's README."""
import os, sys, time, pickle, tempfile
import numpy as np, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/
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
wrap(E, "_start_processes"); wrap(E, "_wait_ready"); wrap(pinloader._C, "ProcSet")
import gc, logging
class _PC(logging.Filter):
    def filter(self, r):
        r.pc = time.perf_counter(); return True
_h = logging.StreamHandler(); _h.addFilter(_PC()); _h.setFormatter(logging.Formatter("  [log %(pc).4f] %(message)s"))
logging.getLogger("pinloader").addHandler(_h); logging.getLogger("pinloader").setLevel(logging.DEBUG)
wrap(gc, "freeze")
_gc_t = {}
def _gc_cb(phase, info):
    if phase == "start":
        _gc_t["t"] = time.perf_counter()
    else:
        d = (time.perf_counter() - _gc_t.get("t", time.perf_counter())) * 1e3
        if d > 1 or info.get("generation") == 2:
            T.setdefault("gc gen%d" % info["generation"], []).append(round(d, 2))
gc.callbacks.append(_gc_cb)
Fill = _worker.Filler
_of = Fill.fill
def _fill(self, indices, *a):
    t = time.perf_counter(); r = _of(self, indices, *a)
    if os.environ.get("PROBE_CHILD"):
        sys.stderr.write("  [child %d: fill of %d samples %.3f..%.3f = %.1f ms]\n" % (os.getpid(), len(indices), t, time.perf_counter(), (time.perf_counter()-t)*1e3))
    return r
Fill.fill = _fill
_ov = Fill.views_for
def _views_for(self, buffer_id, *a):
    t = time.perf_counter(); r = _ov(self, buffer_id, *a)
    if os.environ.get("PROBE_CHILD"):
        sys.stderr.write("  [child %d: views_for %d %.4f..%.4f = %.1f ms]\n" % (os.getpid(), buffer_id % 1000, t, time.perf_counter(), (time.perf_counter()-t)*1e3))
    return r
Fill.views_for = _views_for
_oL = pinloader._C.Loader
def _Loader(*a, **k):
    t = time.perf_counter(); r = _oL(*a, **k)
    sys.stderr.write("  [Loader made %.4f..%.4f]\n" % (t, time.perf_counter()))
    return r
pinloader._C.Loader = _Loader
root = tempfile.mkdtemp()
pw.write_cifar_pickles(root)
import torchvision.transforms as Tr
ds = pw.torchvision_cifar(root, Tr.ToTensor())
torch.cuda.init(); torch.zeros(1, device="cuda")
print("rss MB", int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20)
t = time.perf_counter()
for i in range(1024): ds[i]
print("1024 samples in one process: %.1f ms" % ((time.perf_counter()-t)*1e3))
ft = []
for k in range(8):
    t = time.perf_counter(); pid = os.fork()
    if pid == 0:
        os._exit(0)
    ft.append(round((time.perf_counter() - t) * 1e3, 2))
for k in range(len(ft)):
    os.wait()

print("8 raw forks, ms:", ft)
for rep, W in ((0, 6), (1, 6), (2, 1)):
    os.environ["PROBE_CHILD"] = "1" if rep != 1 else ""
    T.clear()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ld = pinloader.DataLoader(ds, batch_size=1024, num_workers=W, device="cuda", log_level="debug" if rep == 0 else None)
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
