"""Where the seeds' steady epochs spend their time over the 4.90 s floor:
per batch, the time in next() (the loop's fetch, packing included) and the
sleep's overshoot; pinloader and torch, 3 epochs each."""
import sys, time, tempfile, json, os
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import python_workers as pw
import torch, pinloader
try:
    import torchvision.transforms as T
except ImportError:
    T = None

def epochs(loader, n=3):
    out = []
    for e in range(n):
        pw.sync()
        t0 = time.perf_counter()
        fetch, over = [], []
        it = iter(loader)
        t_it = time.perf_counter() - t0
        while True:
            a = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                fetch.append(time.perf_counter() - a)
                break
            if x.device.type != pw.DEVICE:
                x, y = x.to(pw.DEVICE, non_blocking=True), y.to(pw.DEVICE, non_blocking=True)
            b = time.perf_counter()
            fetch.append(b - a)
            time.sleep(0.1)
            over.append(time.perf_counter() - b - 0.1)
        pw.sync()
        t = time.perf_counter() - t0
        f = np.array(fetch) * 1e3
        out.append({"epoch_s": t, "iter_ms": t_it * 1e3, "first_fetch_ms": f[0], "fetch_ms_sum_rest": float(f[1:].sum()),
                    "fetch_ms_median": float(np.median(f[1:-1])), "fetch_ms_max_rest": float(f[1:].max()),
                    "sleep_over_ms_sum": float(np.sum(over) * 1e3), "batches": len(over)})
        print("  epoch %.4f s: iter %.2f ms, first fetch %.1f ms, rest fetch sum %.2f ms (median %.3f, max %.2f), sleep overshoot %.2f ms, end %.2f ms" % (
            t, t_it * 1e3, f[0], f[1:].sum(), np.median(f[1:-1]), f[1:].max(), np.sum(over) * 1e3, f[-1]), flush=True)
    return out

root = tempfile.mkdtemp()
pw.write_cifar_pickles(root)
if T is not None:
    ds = pw.torchvision_cifar(root, T.ToTensor())
else:  # a stand-in here (no torchvision): uint8 HWC -> float CHW / 255
    class Stub:
        def __init__(self):
            self.x = np.random.default_rng(0).integers(0, 256, (50000, 32, 32, 3), dtype=np.uint8)
        def __len__(self):
            return 50000
        def __getitem__(self, i):
            return torch.from_numpy(self.x[i]).permute(2, 0, 1).float().div(255), 3
    ds = Stub()
res = {}
only = sys.argv[2] if len(sys.argv) > 2 else None
for name, make in (("pinloader", lambda: pinloader.DataLoader(ds, batch_size=1024, num_workers=6, device=pw.DEVICE)),
                   ("torch", lambda: torch.utils.data.DataLoader(ds, batch_size=1024, num_workers=6, pin_memory=pw.CUDA))):
    if only and name != only:
        continue
    print(name, flush=True)
    ld = make()
    res[name] = epochs(ld)
    if hasattr(ld, "close"):
        ld.close()
json.dump(res, open(sys.argv[1], "w"), indent=1)
