"""Where the time to the first batch goes with JPEG decode on the GPU
(issue 28): one case per fresh interpreter, CUDA started first as a
training script's model has it.

  loader   ImageFolder(decode=cpu|gpu|auto), batch 256, into the GPU: the
           moments (from DataLoader(), which makes the C loader of a native
           dataset) of the loader's log lines (the decoder's open), of the
           C loader's return and of iter(); the first batch from iter();
           the times of batches 2..8.
  nvjpeg   nvJPEG alone through ctypes (PL_NVJPEG_LIB or libnvjpeg.so.13):
           dlopen, nvjpegCreateEx (hardware backend), then per thread
           (1 and 16 at once) a state, a batched init and two batched
           decodes of 16 JPEGs: what the first call of a context costs.

    python3 bench/decode_first_batch_probe.py [--workers 1,4,16] [--transforms] [--out DIR]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def loader_case(root, mode, workers, gpu_transforms=False):
    import logging
    import torch
    import pinloader as pl

    dev = os.environ.get("PL_PROBE_DEVICE", "cuda")  # cpu: a smoke test without a GPU
    if dev == "cuda":
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    t0 = [time.perf_counter()]  # DataLoader(), then iter() at marks["iter_at"]
    lines = []

    class H(logging.Handler):
        def emit(self, r):
            lines.append((time.perf_counter() - t0[0], r.getMessage()))
    lg = logging.getLogger("pinloader")
    lg.addHandler(H())
    lg.setLevel(logging.DEBUG)
    marks = {}
    C = pl._C.Loader

    def made(*a, **k):
        t = time.perf_counter()
        try:
            return C(*a, **k)
        finally:
            marks["c_loader_start"] = t - t0[0]
            marks["c_loader_end"] = time.perf_counter() - t0[0]
    pl._C.Loader = made
    ds = pl.datasets.ImageFolder(root, size=224, decode=mode)
    T = pl.transforms
    tf = [T.ConvertImageDtype(torch.bfloat16), T.Normalize(MEAN, STD), T.ChannelsLast()] \
        if gpu_transforms else None  # bench/resnet_images.py's
    ld = pl.DataLoader(ds, batch_size=256, shuffle=True, num_workers=workers, device=dev,
                       drop_last=True, transforms=tf)
    marks["iter_at"] = t = time.perf_counter() - t0[0]
    it = iter(ld)
    marks["iter"] = time.perf_counter() - t0[0] - t
    x, _ = next(it)
    sync()
    marks["first_batch"] = time.perf_counter() - t0[0] - t
    nxt = []
    for _ in range(7):
        t = time.perf_counter()
        x, _ = next(it)
        sync()
        nxt.append(time.perf_counter() - t)
    marks["next_batches"] = nxt
    marks["log"] = lines
    marks["report"] = [f["text"] for f in ld.report(json=True)["findings"]
                       if "GPU" in f["text"] or "decod" in f["text"]]
    del it
    return marks


class Image(ctypes.Structure):
    _fields_ = [("channel", ctypes.c_void_p * 4), ("pitch", ctypes.c_size_t * 4)]


def nvjpeg_case(root, threads):
    import torch
    from PIL import Image as PILImage
    import images_vs_torch as ivt

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    res = {}
    t = time.perf_counter()
    lib = ctypes.CDLL(os.environ.get("PL_NVJPEG_LIB", "libnvjpeg.so.13"))
    res["dlopen"] = time.perf_counter() - t
    h = ctypes.c_void_p()
    t = time.perf_counter()
    st = lib.nvjpegCreateEx(3, None, None, 0, ctypes.byref(h))  # HARDWARE
    res["create_hardware"] = (time.perf_counter() - t, st)
    if st != 0:
        t = time.perf_counter()
        st = lib.nvjpegCreateEx(2, None, None, 0, ctypes.byref(h))  # GPU_HYBRID
        res["create_gpu"] = (time.perf_counter() - t, st)
    files = [f for f, _ in ivt.image_files(root)[:16 * threads]]
    blobs = [open(f, "rb").read() for f in files]
    dims = [PILImage.open(f).size for f in files]
    out = [None] * threads

    def one(k):
        r = {}
        mine = list(range(16 * k, 16 * k + 16))
        dev = torch.cuda.current_device()
        torch.cuda.set_device(dev)
        s = torch.cuda.Stream()
        state = ctypes.c_void_p()
        t = time.perf_counter()
        st = lib.nvjpegJpegStateCreate(h, ctypes.byref(state))
        r["state"] = (time.perf_counter() - t, st)
        bufs = [torch.empty(dims[i][1] * dims[i][0] * 3, dtype=torch.uint8, device="cuda")
                for i in mine]
        imgs = (Image * 16)()
        for j, i in enumerate(mine):
            imgs[j].channel[0] = bufs[j].data_ptr()
            imgs[j].pitch[0] = dims[i][0] * 3
        data = (ctypes.c_char_p * 16)(*[blobs[i] for i in mine])
        lens = (ctypes.c_size_t * 16)(*[len(blobs[i]) for i in mine])
        for name in ("first", "second"):
            t = time.perf_counter()
            a = lib.nvjpegDecodeBatchedInitialize(h, state, 16, 1, 5)  # RGBI
            ti = time.perf_counter() - t
            b = lib.nvjpegDecodeBatched(h, state, data, lens, imgs, ctypes.c_void_p(s.cuda_stream))
            s.synchronize()
            r[name] = {"init": ti, "decode": time.perf_counter() - t - ti, "st": (a, b)}
        out[k] = r

    t = time.perf_counter()
    ths = [threading.Thread(target=one, args=(k,)) for k in range(threads)]
    [x.start() for x in ths]
    [x.join() for x in ths]
    res["threads"] = threads
    res["all_threads_s"] = time.perf_counter() - t
    res["per_thread"] = out
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,4,16")
    ap.add_argument("--modes", default="cpu,gpu,auto")
    ap.add_argument("--transforms", action="store_true",
                    help="also each case with resnet_images.py's GPU transforms (bf16, "
                         "Normalize, ChannelsLast)")
    ap.add_argument("--out", default=".")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    a = ap.parse_args()
    root = "/tmp/pinloader-imagenet-like-4096-16"
    if a.case:
        kind, arg1, arg2, *tf = a.case.split(":")
        r = loader_case(root, arg1, int(arg2), bool(tf)) if kind == "loader" else \
            nvjpeg_case(root, int(arg1))
        print("RESULT " + json.dumps(r))
        return
    import images_vs_torch as ivt
    ivt.make_folder(root, 4096, 16, 16)
    ivt.warm_page_cache(ivt.image_files(root))
    cases = ["nvjpeg:1:0", "nvjpeg:16:0"]
    cases += ["loader:%s:%s" % (m, w) for w in a.workers.split(",") for m in a.modes.split(",")]
    if a.transforms:
        cases += [c + ":t" for c in cases if c.startswith("loader:")]
    results = {}
    for c in cases:
        p = subprocess.run([sys.executable, __file__, "--case", c], capture_output=True,
                           text=True, timeout=120)
        got = [ln[7:] for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        results[c] = json.loads(got[0]) if got else {"rc": p.returncode,
                                                     "stderr": p.stderr[-2000:]}
        print(c, json.dumps(results[c])[:1500], flush=True)
    with open(os.path.join(a.out, "decode-first-batch-probe.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
