#!/usr/bin/env python3
"""Issue 2's CPU benchmark: pinloader against torch.utils.data.DataLoader on
the same uint8 data set (CIFAR-10-shaped records, 3x32x32 uint8 + a label
byte, in the CIFAR-10 binary format), shuffled, batch 1024, the same number
of workers, on the CPU, in one run. Prints the ratio of samples/s against
two torch baselines:

  map-style: a Dataset reading the file through np.memmap and returning
             torch tensors per sample, as a user would write it;
  TensorDataset: the whole file already in two tensors (torch's best case).

The stated target: at least 20x PyTorch's samples/s with the same workers on
2 cores. pinloader runs through the CLI: `pinloader bench loader --device cpu
--no-seed --sweep W --json -` (its uint8 row: the second epoch of a loader,
as torch's is timed here).

    /usr/bin/python3 bench/cpu_vs_torch.py [--workers 2] [--records 100000]
        [--epochs 2] [--cli build-bench/pinloader] [--out bench/results]
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

RECORD = 3073
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = 20.0


def find_cli(given):
    for c in [given] + [os.path.join(ROOT, d, "pinloader") for d in
                        ("build", "build-bench", "build-lead", "build-gpu")] + [shutil.which("pinloader")]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


class MemmapRecords(Dataset):
    """The map-style dataset a user writes: memmap the file, slice a record,
    hand back tensors."""

    def __init__(self, path):
        self.path = path
        self.mm = None
        self.n = os.path.getsize(path) // RECORD

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.mm is None:  # opened in each worker process
            self.mm = np.memmap(self.path, dtype=np.uint8, mode="r").reshape(-1, RECORD)
        rec = self.mm[i]
        return torch.from_numpy(rec[1:].reshape(3, 32, 32).copy()), int(rec[0])


def torch_rate(ds, workers, batch, epochs):
    """samples/s of the last of `epochs` epochs (the first pays for starting
    the worker processes)."""
    ld = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                    persistent_workers=workers > 0)
    rate = 0.0
    for _ in range(epochs):
        t, n = time.perf_counter(), 0
        for x, _y in ld:
            n += x.shape[0]
        rate = n / (time.perf_counter() - t)
    return rate


def pinloader_rate(cli, path, workers, batch):
    cmd = [cli, "bench", "loader", "--device", "cpu", "--data", path, "--no-seed",
           "--sweep", str(workers), "--batch-size", str(batch), "--full",
           "--json", "-", "--no-plot", "--quiet"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("cpu_vs_torch: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    rows = json.loads(p.stdout)["loader"]["sweep"]
    return next(r["samples_per_s"] for r in rows if r["dtype"] == "uint8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=2, help="torch epochs per loader; the last is timed")
    ap.add_argument("--cli", help="the pinloader CLI (default: build*/pinloader)")
    ap.add_argument("--out", help="write cpu_vs_torch.json and cpu_vs_torch.md into this directory")
    a = ap.parse_args()
    cli = find_cli(a.cli)
    if cli is None:
        sys.exit("cpu_vs_torch: no pinloader CLI found: build it, or pass --cli")
    tmp = tempfile.mkdtemp(prefix="pinloader-cpu-vs-torch-")
    try:
        path = os.path.join(tmp, "records.bin")
        rng = np.random.default_rng(0)
        rec = rng.integers(0, 256, (a.records, RECORD), dtype=np.uint8)
        rec[:, 0] %= 10
        rec.tofile(path)
        info = {"torch": torch.__version__, "cpus": os.cpu_count(), "machine": platform.machine(),
                "records": a.records, "batch_size": a.batch_size, "workers": a.workers,
                "cli": cli}
        print("torch %s, %d CPUs; %d records of 3x32x32 uint8, batch %d, shuffled, %d workers"
              % (torch.__version__, os.cpu_count(), a.records, a.batch_size, a.workers), flush=True)
        pl = pinloader_rate(cli, path, a.workers, a.batch_size)
        mapped = torch_rate(MemmapRecords(path), a.workers, a.batch_size, a.epochs)
        x = torch.from_numpy(rec[:, 1:].reshape(-1, 3, 32, 32).copy())
        y = torch.from_numpy(rec[:, 0].astype(np.int64))
        del rec
        tensor = torch_rate(TensorDataset(x, y), a.workers, a.batch_size, a.epochs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [("pinloader", pl, 1.0),
            ("torch map-style (memmap)", mapped, pl / mapped),
            ("torch TensorDataset", tensor, pl / tensor)]
    md = ["| loader | samples/s | pinloader / this |", "|---|---:|---:|"]
    md += ["| %s | %s | %.1fx |" % (n, "{:,.0f}".format(r), q) for n, r, q in rows]
    verdict = "target (>= %.0fx the map-style loader): %s" % (
        TARGET, "met" if pl / mapped >= TARGET else "NOT met (%.1fx)" % (pl / mapped))
    print("\n".join(md))
    print(verdict)
    info.update(pinloader_samples_per_s=pl, torch_map_samples_per_s=mapped,
                torch_tensor_samples_per_s=tensor, ratio_map=pl / mapped,
                ratio_tensor=pl / tensor, target=TARGET)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "cpu_vs_torch.json"), "w") as f:
            json.dump(info, f, indent=1)
        with open(os.path.join(a.out, "cpu_vs_torch.md"), "w") as f:
            f.write("# pinloader vs torch DataLoader on the CPU\n\n%s\n\n%s\n\n%s\n" % (
                ", ".join("%s: %s" % kv for kv in info.items() if not kv[0].startswith(("pinloader_", "torch_", "ratio"))),
                "\n".join(md), verdict))
        print("wrote %s/cpu_vs_torch.{json,md}" % a.out)


if __name__ == "__main__":
    main()
