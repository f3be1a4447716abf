#!/usr/bin/env python3
"""Autotuning against a sweep of fixed settings (issue 15).

For each workload, runs the pinloader DataLoader with every fixed
(num_workers, prefetch_factor) of a sweep and with num_workers="auto",
prefetch_factor="auto" (which starts from 2 workers and tunes itself), and
reports samples/s of each, measured after the same warm-up, and the ratio of
auto to the best fixed setting (the goal: >= 0.90). Workloads:

  cifar_uint8   native CIFAR-10 files, uint8 images, shuffled
  python_aug    a Python map-style dataset over the same pixels doing a
                random crop with padding and a flip per sample (numpy)
  image_folder  datasets.ImageFolder over a generated folder of JPEGs
                (bench/images_vs_torch.py's generator, --images of them;
                RandomResizedCrop(224) + flip, uint8), swept over
                --image-workers (its best is near every core)

Every run: --seconds of loading after --warmup seconds, batch --batch,
device cuda when usable (else cpu). Auto, which starts from 2 workers, is
judged on the same length of loading after --auto-warmup seconds (the rate
it settles at; its rate after --warmup, while it may still be ramping, is
reported beside it). The JSON (--json) holds every run and the auto runs'
final workers/prefetch and report (loader.report()).
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

from cifar_files import RECORD, write_cifar  # bench/, the script's folder


def import_pinloader():
    try:
        import pinloader
        import pinloader.datasets  # noqa: F401
        return pinloader
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
        import pinloader
        return pinloader


class Augment:
    """Random crop (pad 4) and horizontal flip of CIFAR images, per sample,
    in numpy: the usual CIFAR training augmentation, done in Python."""

    def __init__(self, paths, seed=0):
        rec = np.concatenate([np.fromfile(p, dtype=np.uint8).reshape(-1, RECORD) for p in paths])
        self.images = rec[:, 1:].reshape(-1, 3, 32, 32)
        self.labels = rec[:, 0].astype(np.int64)
        self.seed = seed

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        rng = np.random.default_rng(self.seed * 1000003 + i)
        img = np.pad(self.images[i], ((0, 0), (4, 4), (4, 4)))
        y, x = rng.integers(0, 9, 2)
        img = img[:, y:y + 32, x:x + 32]
        if rng.random() < 0.5:
            img = img[:, :, ::-1]
        return np.ascontiguousarray(img), self.labels[i]


def image_folder(pl, tmp, a):
    """A folder of a.images JPEGs (ImageNet-like sizes, 100 classes), read
    once so that no run pays the disk."""
    from images_vs_torch import image_files, make_folder, warm_page_cache  # bench/

    root = os.path.join(tmp, "images")
    make_folder(root, a.images, 100, len(os.sched_getaffinity(0)))
    warm_page_cache(image_files(root))
    return pl.datasets.ImageFolder(root, size=224)


def rate_windows(loader, a, starts):
    """Samples/s in each window [start, start + a.seconds) of one run
    (seconds since it began), the run ending after the last."""
    counts, t0 = [0] * len(starts), time.perf_counter()
    end = max(starts) + a.seconds
    while True:
        for batch in loader.batches():
            now = time.perf_counter() - t0
            n = batch.size if hasattr(batch, "size") else a.batch
            for k, s in enumerate(starts):
                if s <= now < s + a.seconds:
                    counts[k] += n
            del batch
            if now >= end:
                return [c / a.seconds for c in counts]


def measure(pl, ds, a, workers, prefetch):
    """A fixed setting: samples/s after --warmup. Auto: the same window,
    and the one after --auto-warmup (once it has tuned), which is judged."""
    loader = pl.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=workers,
                           prefetch_factor=prefetch, device=a.device, output="raw")
    tuned = workers == "auto" or prefetch == "auto"
    rates = rate_windows(loader, a, [a.warmup, a.auto_warmup] if tuned else [a.warmup])
    out = {"workers": workers, "prefetch": prefetch, "samples_per_s": rates[-1]}
    if tuned:
        out["samples_per_s_after_warmup"] = rates[0]
    if tuned:
        rep = loader.report(json=True)
        out["final_workers"] = rep["timings"]["workers"]
        out["final_prefetch"] = rep["timings"]["prefetch"]
        out["report"] = loader.report()
    loader.close()
    return out


def sweep(pl, name, ds, a, workers=None):
    runs = []
    for w in workers or a.workers:
        for p in a.prefetch:
            r = measure(pl, ds, a, w, p)
            print("  %-12s workers %-3s prefetch %-3s %12.0f samples/s" % (name, w, p, r["samples_per_s"]),
                  flush=True)
            runs.append(r)
    auto = measure(pl, ds, a, "auto", "auto")
    best = max(runs, key=lambda r: r["samples_per_s"])
    ratio = auto["samples_per_s"] / best["samples_per_s"]
    print("  %-12s auto: %.0f samples/s after %g s (%.0f after %g s; ended at %d workers, prefetch %d); "
          "best fixed %.0f (workers %s, prefetch %s): ratio %.3f %s" % (
              name, auto["samples_per_s"], a.auto_warmup, auto["samples_per_s_after_warmup"], a.warmup,
              auto["final_workers"], auto["final_prefetch"],
              best["samples_per_s"], best["workers"], best["prefetch"], ratio,
              "ok" if ratio >= 0.90 else "BELOW 0.90"), flush=True)
    print(auto["report"])
    return {"workload": name, "fixed": runs, "auto": auto, "best": best, "ratio": ratio}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--auto-warmup", type=float, default=10.0,
                    help="auto is judged on the window after this many seconds "
                         "(the tuner starts from 2 workers; it is also measured "
                         "after --warmup)")
    ap.add_argument("--workers", default="1,2,4,8,12")
    ap.add_argument("--prefetch", default="2,4")
    ap.add_argument("--image-workers", default="2,4,8,12,16")
    ap.add_argument("--images", type=int, default=8000)
    ap.add_argument("--device", default=None)
    ap.add_argument("--only", default="cifar_uint8,python_aug,image_folder")
    ap.add_argument("--json")
    a = ap.parse_args()
    a.workers = [int(x) for x in a.workers.split(",")]
    a.prefetch = [int(x) for x in a.prefetch.split(",")]
    a.image_workers = [int(x) for x in a.image_workers.split(",")]
    pl = import_pinloader()
    a.device = a.device or ("cuda" if pl.cuda_available() else "cpu")
    print("autotune bench: device %s, %d cpus, batch %d, %g s after %g s warm-up" % (
        a.device, len(os.sched_getaffinity(0)), a.batch, a.seconds, a.warmup), flush=True)
    results = []
    only = a.only.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_cifar(tmp, a.records)
        if "cifar_uint8" in only:
            results.append(sweep(pl, "cifar_uint8", pl.datasets.CIFAR10(paths), a))
        if "python_aug" in only:
            results.append(sweep(pl, "python_aug", Augment(paths), a))
        if "image_folder" in only:
            results.append(sweep(pl, "image_folder", image_folder(pl, tmp, a), a, a.image_workers))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": a.device, "results": results}, f, indent=1)
    return 0 if all(r["ratio"] >= 0.90 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
