#!/usr/bin/env python3
"""pinloader against torch.utils.data.DataLoader on the reference experiments, in
one run, on the same files, printing pinloader/PyTorch ratios.

  1. bandwidth: x.cuda(non_blocking) from pageable and pinned tensors, against
     the raw CUDA copies `pinloader bench bandwidth` measures.
  2. overlap: x.cuda(non_blocking); CPU work; GPU work using x; the time saved
     against min(copy, CPU work), torch against `pinloader bench overlap`.
  3. loader: a simulated training step (CIFAR-10 files, ToTensor, batch
     1024, 6 workers, a sleep per batch, pin on/off), then samples/s by
     workers with no step.

pinloader runs through its Python package (pinloader.DataLoader) when that is
importable, else through the CLI (`pinloader bench ... --json -`). Without a
GPU, experiments 1 and 2 are skipped and the loader runs on the CPU.

    python3 bench/vs_torch.py [--out DIR] [--cli build-gpu/pinloader] [--quick]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from cifar_files import RECORD, write_cifar  # bench/, the script's folder

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def find_cli(given):
    for c in [given, os.path.join(ROOT, "build-gpu/pinloader"),
              os.path.join(ROOT, "build/pinloader"), shutil.which("pinloader")]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def import_pinloader():
    try:
        import pinloader  # noqa: F401
        import pinloader.datasets  # noqa: F401
        return pinloader
    except ImportError:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        try:
            import pinloader  # noqa: F811
            return pinloader
        except ImportError:
            sys.path.pop(0)
            return None


class CifarBin(Dataset):
    """What torchvision's CIFAR10 does per sample, on the binary files:
    HWC uint8 -> PIL image -> ToTensor (float32 [0,1], CHW)."""

    def __init__(self, paths):
        self.parts = [np.memmap(p, dtype=np.uint8, mode="r").reshape(-1, RECORD) for p in paths]
        self.starts = np.cumsum([0] + [len(p) for p in self.parts])
        try:
            from PIL import Image
            from torchvision.transforms import ToTensor
            self.to_image, self.to_tensor = Image.fromarray, ToTensor()
        except ImportError:  # same arithmetic without torchvision
            self.to_image = None

    def __len__(self):
        return int(self.starts[-1])

    def __getitem__(self, i):
        f = int(np.searchsorted(self.starts, i, side="right")) - 1
        rec = self.parts[f][i - self.starts[f]]
        hwc = np.ascontiguousarray(rec[1:].reshape(3, 32, 32).transpose(1, 2, 0))
        if self.to_image is not None:
            x = self.to_tensor(self.to_image(hwc))
        else:
            x = torch.from_numpy(hwc).permute(2, 0, 1).float().div(255)
        return x, int(rec[0])


def sync(cuda):
    if cuda:
        torch.cuda.synchronize()


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


# ------------------------------------------------------------- torch side

def torch_bandwidth(sizes):
    rows = []
    dev = torch.empty(max(sizes), dtype=torch.uint8, device="cuda")
    for n in sizes:
        row = {"bytes": n}
        for pin in (False, True):
            src = torch.ones(n, dtype=torch.uint8)
            src = src.pin_memory() if pin else src
            reps = max(3, min(200, (256 << 20) // n))
            dev[:n].copy_(src, non_blocking=pin)
            sync(True)
            t = time.perf_counter()
            for _ in range(reps):
                dev[:n].copy_(src, non_blocking=pin)
            sync(True)
            row["pinned" if pin else "pageable"] = n * reps / (time.perf_counter() - t) / 1e9
        rows.append(row)
    return rows


def torch_overlap(nbytes, work_ms, reps=20):
    x = torch.ones(nbytes, dtype=torch.uint8)
    hosts = {True: x.pin_memory(), False: x}
    out = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def median_ms(fn):
        fn()
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            sync(True)
            ts.append((time.perf_counter() - t) * 1e3)
        return float(np.median(ts))

    rows = []
    for pin in (True, False):
        for nb in (True, False):
            h = hosts[pin]
            copy = median_ms(lambda: h.cuda(non_blocking=nb))
            cpu = median_ms(lambda: spin(work_ms / 1e3))
            d = h.cuda()
            gpu = median_ms(lambda: out.copy_(d))

            def pattern():
                g = h.cuda(non_blocking=nb)
                spin(work_ms / 1e3)
                out.copy_(g)  # GPU work that uses the copy
            total = median_ms(pattern)
            saved, most = copy + cpu + gpu - total, min(copy, cpu)
            rows.append({"pinned": pin, "non_blocking": nb, "total_ms": total,
                         "saved_ms": saved, "max_saved_ms": most,
                         "saved_pct": 100 * saved / most if most > 0 else 0})
    return rows


def run_epoch(loader, cuda, nb, work_s):
    sync(cuda)
    t, n = time.perf_counter(), 0
    for x, y in loader:
        if cuda:
            x, y = x.cuda(non_blocking=nb), y.cuda(non_blocking=nb)
        if work_s:
            time.sleep(work_s)
        n += x.shape[0]
    sync(cuda)
    return time.perf_counter() - t, n


def torch_seed(ds, a, cuda):
    rows = []
    for pin in ((True, False) if cuda else (False,)):
        ld = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                        pin_memory=pin)
        ts = [run_epoch(ld, cuda, pin, a.work_ms / 1e3)[0] for _ in range(a.epochs)]
        rows.append({"pin": pin, "epoch_s": ts, "mean_s": float(np.mean(ts))})
    return rows


def torch_sweep(ds, a, cuda):
    rows = []
    for w in a.sweep:
        for pin in ((True, False) if cuda else (False,)):
            ld = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=w,
                            pin_memory=pin, persistent_workers=w > 0)
            if w > 0:
                run_epoch(ld, cuda, pin, 0)  # start the workers outside the timing
            t, n = run_epoch(ld, cuda, pin, 0)
            rows.append({"workers": w, "pin": pin, "samples_per_s": n / t})
            del ld
    return rows


def torch_uint8(paths, a, cuda):
    """The uint8 workload as torch users run it at best: the whole data set
    in one uint8 tensor (TensorDataset: no decoding, no PIL), shuffled."""
    raw = np.concatenate([np.fromfile(p, dtype=np.uint8).reshape(-1, 3073) for p in paths])
    tds = TensorDataset(torch.from_numpy(raw[:, 1:].reshape(-1, 3, 32, 32).copy()),
                        torch.from_numpy(raw[:, 0].copy()))
    rows = []
    for w in a.uint8_workers:
        ld = DataLoader(tds, batch_size=a.batch_size, shuffle=True, num_workers=w,
                        pin_memory=cuda, persistent_workers=w > 0)
        run_epoch(ld, cuda, cuda, 0)  # start the workers outside the timing
        t, n = 0.0, 0
        for _ in range(2):
            dt, dn = run_epoch(ld, cuda, cuda, 0)
            t, n = t + dt, n + dn
        rows.append({"workers": w, "samples_per_s": n / t})
        del ld
    return rows


# ------------------------------------------------------------- pinloader side

def pl_uint8_py(pl, paths, a, cuda):
    ds = pl.datasets.CIFAR10(paths)
    rows = []
    for w in a.uint8_workers:
        ld = pl.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=w,
                           device="cuda" if cuda else "cpu", seed=0)
        py_epoch(ld, 0)
        t, n = 0.0, 0
        for _ in range(20):  # an epoch takes milliseconds: time many
            dt, dn = py_epoch(ld, 0)
            t, n = t + dt, n + dn
        rows.append({"workers": w, "samples_per_s": n / t})
        del ld
    return rows


def pl_uint8_cli(cli, paths, a, cuda):
    run = cli_json(cli, ["loader", "--no-seed", "--full", "--data", ",".join(paths),
                         "--batch-size", str(a.batch_size), "--device", "cuda" if cuda else "cpu",
                         "--sweep", ",".join(map(str, a.uint8_workers))])
    return [{"workers": r["workers"], "samples_per_s": r["samples_per_s"]}
            for r in run["loader"]["sweep"] if r["dtype"] == "uint8" and r["pin"]]


def cli_json(cli, args):
    cmd = [cli, "bench"] + args + ["--json", "-", "--no-plot", "--quiet"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout)


def py_epoch(loader, work_s):
    t, n = time.perf_counter(), 0
    for x, y in loader:
        if work_s:
            time.sleep(work_s)
        n += x.shape[0]
    sync(torch.cuda.is_available())
    return time.perf_counter() - t, n


def pl_loader_py(pl, paths, a, cuda):
    ds = pl.datasets.to_float32(pl.datasets.CIFAR10(paths), "image", 1 / 255)
    dev = "cuda" if cuda else "cpu"
    seed = []
    for pin in ((True, False) if cuda else (False,)):
        ld = pl.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                           pin_memory=pin, device=dev, non_blocking=pin, seed=0)
        ts = [py_epoch(ld, a.work_ms / 1e3)[0] for _ in range(a.epochs)]
        seed.append({"pin": pin, "epoch_s": ts, "mean_s": float(np.mean(ts))})
        del ld
    sweep = []
    for w in a.sweep:
        for pin in ((True, False) if cuda else (False,)):
            ld = pl.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=w,
                               pin_memory=pin, device=dev, non_blocking=True, seed=0)
            py_epoch(ld, 0)
            t, n = py_epoch(ld, 0)
            sweep.append({"workers": w, "pin": pin, "samples_per_s": n / t})
            del ld
    return seed, sweep


def pl_loader_cli(cli, paths, a, cuda):
    common = ["--data", ",".join(paths), "--batch-size", str(a.batch_size),
              "--device", "cuda" if cuda else "cpu"]
    seed_run = cli_json(cli, ["loader", "--no-sweep", "--workers", str(a.workers),
                              "--work-ms", str(a.work_ms), "--epochs", str(a.epochs)] + common)
    sweep_run = cli_json(cli, ["loader", "--no-seed", "--full",
                               "--sweep", ",".join(map(str, a.sweep))] + common)
    # The seed pattern is .cuda(non_blocking=pin): pin on/off with nb = pin.
    seed = [{"pin": r["pin"], "epoch_s": r["epoch_s"], "mean_s": r["mean_s"]}
            for r in seed_run["loader"]["seed"] if r["pin"] == r["non_blocking"]]
    sweep = [{"workers": r["workers"], "pin": r["pin"], "samples_per_s": r["samples_per_s"]}
             for r in sweep_run["loader"]["sweep"] if r["dtype"] == "float32"]
    return seed, sweep


# ------------------------------------------------------------- report

def ratio(a, b):
    return a / b if b else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write vs_torch.json into this directory")
    ap.add_argument("--cli", help="the pinloader CLI (default: build-gpu/pinloader, build/pinloader)")
    ap.add_argument("--data", help="CIFAR-10 binary files, comma-separated (default: generated)")
    ap.add_argument("--records", type=int, help="generated records (default 50000; quick 10000)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--work-ms", type=float, help="simulated training step (a sleep) per batch, ms (default 100; quick 10)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--sweep", help="worker counts (default 0,6,14; quick 0,2)")
    ap.add_argument("--uint8-workers", help="worker counts of the uint8 workload (default 6,14; quick 2)")
    ap.add_argument("--quick", action="store_true", help="small defaults: seconds on a CPU")
    ap.add_argument("--force-cli", action="store_true", help="use the CLI even if the package imports")
    a = ap.parse_args()
    q = a.quick
    a.records = a.records or (10000 if q else 50000)
    a.work_ms = a.work_ms if a.work_ms is not None else (10 if q else 100)
    a.sweep = a.sweep or ("0,2" if q else "0,6,14")
    a.sweep = [int(w) for w in a.sweep.split(",")]
    a.uint8_workers = [int(w) for w in (a.uint8_workers or ("2" if q else "6,14")).split(",")]
    cuda = torch.cuda.is_available()
    cli = find_cli(a.cli)
    pl = None if a.force_cli else import_pinloader()
    if pl is None and cli is None:
        sys.exit("vs_torch: neither the pinloader package nor the CLI is available (build it, or --cli)")
    via = "python package" if pl is not None else "CLI " + cli
    print("torch %s, %s, %d CPUs; pinloader via %s" % (
        torch.__version__, torch.cuda.get_device_name(0) if cuda else "no GPU", os.cpu_count(), via),
        flush=True)
    res = {"torch": torch.__version__, "cuda": cuda, "cpus": os.cpu_count(), "pinloader_via": via}
    tmp = None
    if a.data:
        paths = a.data.split(",")
    else:
        tmp = tempfile.mkdtemp(prefix="pinloader-vs-torch-")
        paths = write_cifar(tmp, a.records, 5)
        print("data: generated %d CIFAR-10-format records in 5 files in %s" % (a.records, tmp))
    try:
        if cuda and cli:
            sizes = [1 << 20, 16 << 20, 256 << 20]
            tb = torch_bandwidth(sizes)
            pb = cli_json(cli, ["bandwidth", "--min-size", "1M", "--max-size", "256M"])["bandwidth"]
            pbr = {r["bytes"]: r for r in pb["rows"]}
            print("\n1. host-to-device GB/s: torch .cuda() vs raw cudaMemcpy (pinloader bench)")
            print("%10s %14s %14s %8s %14s %14s %8s" % ("bytes", "torch pageable", "raw pageable",
                                                        "ratio", "torch pinned", "raw pinned", "ratio"))
            for r in tb:
                p = pbr.get(r["bytes"], {})
                raw_pg, raw_pin = p.get("h2d_pageable", 0), p.get("h2d_pinned_async", 0)
                r.update(raw_pageable=raw_pg, raw_pinned=raw_pin)
                print("%10d %14.2f %14.2f %7.2fx %14.2f %14.2f %7.2fx" % (
                    r["bytes"], r["pageable"], raw_pg, ratio(raw_pg, r["pageable"]),
                    r["pinned"], raw_pin, ratio(raw_pin, r["pinned"])))
            res["bandwidth"] = tb
            to = torch_overlap(64 << 20, 5)
            po = cli_json(cli, ["overlap", "--overlap-size", "64M", "--overlap-work-ms", "5"])["overlap"]
            print("\n2. overlap: copy 64 MiB, 5 ms CPU work, GPU work: %% of the most that can be saved")
            print("%-9s %-13s %8s %10s" % ("memory", "non_blocking", "torch", "pinloader"))
            for t in to:
                p = next((r for r in po.get("rows", []) if r["pinned"] == t["pinned"]
                          and r["non_blocking"] == t["non_blocking"]), {})
                t["pinloader_saved_pct"] = p.get("saved_pct")
                print("%-9s %-13s %7.0f%% %9.0f%%" % ("pinned" if t["pinned"] else "pageable",
                                                     "on" if t["non_blocking"] else "off",
                                                     t["saved_pct"], p.get("saved_pct") or 0))
            res["overlap"] = to
        else:
            print("\nno GPU (or no CLI): bandwidth and overlap skipped; the loader runs on the CPU")
        ds = CifarBin(paths)
        t0 = time.perf_counter()
        ts, tw = torch_seed(ds, a, cuda), torch_sweep(ds, a, cuda)
        t_torch = time.perf_counter() - t0
        ps, pw = pl_loader_py(pl, paths, a, cuda) if pl is not None else pl_loader_cli(cli, paths, a, cuda)
        print("\n3a. simulated training step: batch %d, %d workers, ToTensor, a %.0f ms sleep per batch, "
              "epoch s (floor %.2f s)" % (a.batch_size, a.workers, a.work_ms,
                                          -(-len(ds) // a.batch_size) * a.work_ms / 1e3))
        print("%-5s %10s %10s %16s" % ("pin", "torch", "pinloader", "pinloader/torch"))
        print("      (epoch seconds: lower is better; a ratio under 1 means pinloader is faster)")
        for t in ts:
            p = next((r for r in ps if r["pin"] == t["pin"]), None)
            t["pinloader_mean_s"] = p and p["mean_s"]
            print("%-5s %10.3f %10.3f %15.2fx" % ("on" if t["pin"] else "off", t["mean_s"],
                                                 p["mean_s"] if p else float("nan"),
                                                 ratio(p["mean_s"], t["mean_s"]) if p else float("nan")))
        print("\n3b. samples/s by workers, no training step (float32 images; higher is better)")
        print("%7s %-5s %12s %12s %16s" % ("workers", "pin", "torch", "pinloader", "pinloader/torch"))
        for t in tw:
            p = next((r for r in pw if r["pin"] == t["pin"] and r["workers"] == t["workers"]), None)
            t["pinloader_samples_per_s"] = p and p["samples_per_s"]
            print("%7d %-5s %12.0f %12.0f %15.2fx" % (
                t["workers"], "on" if t["pin"] else "off", t["samples_per_s"],
                p["samples_per_s"] if p else float("nan"),
                ratio(p["samples_per_s"], t["samples_per_s"]) if p else float("nan")))
        tu = torch_uint8(paths, a, cuda)
        pu = pl_uint8_py(pl, paths, a, cuda) if pl is not None else pl_uint8_cli(cli, paths, a, cuda)
        print("\n3c. uint8 CIFAR-10 (3,072-byte samples), shuffled, batch %d, into %s: samples/s"
              % (a.batch_size, "the GPU" if cuda else "host batches"))
        print("    torch: TensorDataset over one uint8 tensor%s; pinloader: CIFAR10 files"
              % (", pin_memory, .cuda(non_blocking=True)" if cuda else ""))
        print("%7s %12s %12s %16s" % ("workers", "torch", "pinloader", "pinloader/torch"))
        for t in tu:
            p = next((r for r in pu if r["workers"] == t["workers"]), None)
            t["pinloader_samples_per_s"] = p and p["samples_per_s"]
            print("%7d %12.0f %12.0f %15.2fx" % (
                t["workers"], t["samples_per_s"], p["samples_per_s"] if p else float("nan"),
                ratio(p["samples_per_s"], t["samples_per_s"]) if p else float("nan")))
        res.update(seed=ts, sweep=tw, uint8=tu, torch_loader_s=t_torch)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "vs_torch.json"), "w") as f:
            json.dump(res, f, indent=1)
        print("\nwrote %s" % os.path.join(a.out, "vs_torch.json"))


if __name__ == "__main__":
    main()
