"""Where a pinloader worker's extra per-sample cost goes, against bare
processes running ds[i] alone. argv: variant (base | nowrite | private | bare).
  base     pinloader 6 workers on bench/python_workers.py's aug
  nowrite  the same, every sample's write skipped (writer and write_sample no-ops)
  private  the same, writes into private numpy arrays, not the shared batch memory
  bare     6 forked processes running ds[i] for 3 s (python_workers.ceiling)
Prints samples/s and the workers' user and system CPU seconds per sample."""
import json, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import numpy as np
import python_workers as pw
from pinloader import _worker, _collate
v = sys.argv[1]
W = 6
ds = pw.NumpyAug(n=50000)

def ut_st(pid):
    with open("/proc/%d/stat" % pid) as f:
        x = f.read().rsplit(")", 1)[1].split()
    t = os.sysconf("SC_CLK_TCK")
    return int(x[11]) / t, int(x[12]) / t

if v == "bare":
    r = pw.ceiling(ds, W)
    print(json.dumps({"variant": v, "samples_per_s": round(r)}), flush=True)
    sys.exit(0)
if v == "nowrite":
    _collate.writer_kinds = lambda t: None
    _collate.write_sample = lambda *a: None
if v == "private":
    orig = _worker.Filler.views_for
    def views_for(self, buffer_id, fd, fd_bytes, offsets):
        views, writer = orig(self, buffer_id, fd, fd_bytes, offsets)
        key = ("private", buffer_id)
        if key not in self.views:
            mine = [np.empty_like(a) for a in views]
            self.views[key] = (mine, self.writer(mine))
        return self.views[key]
    _worker.Filler.views_for = views_for
loader = pw.pl_loader(ds, 256, W)
pw.run_epoch(loader)
pids = list(loader.worker_pids)
a = [ut_st(p) for p in pids]
t0 = time.perf_counter()
runs = [pw.run_epoch(loader) for _ in range(3)]
wall = time.perf_counter() - t0
b = [ut_st(p) for p in pids]
n = sum(x[1] for x in runs)
user = sum(y[0] - x[0] for x, y in zip(a, b))
sys_ = sum(y[1] - x[1] for x, y in zip(a, b))
print(json.dumps({"variant": v, "samples_per_s": round(max(x[1] / x[0] for x in runs)),
                  "user_us_per_sample": round(user / n * 1e6, 1), "sys_us_per_sample": round(sys_ / n * 1e6, 1),
                  "busy": round((user + sys_) / (wall * W), 3)}), flush=True)
loader.close()
