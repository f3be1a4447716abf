#!/usr/bin/env python3
"""What a Python dataset costs against a native source, CIFAR-shaped.

Loads N samples of 3072 bytes (uint8 [3, 32, 32] + a label) per epoch:
  native   pinloader.datasets.CIFAR10 over a binary batch file: workers read
           without the GIL;
  python   a map-style dataset whose __getitem__ slices an in-memory numpy
           array: every sample takes the GIL once (PyGILState_Ensure, the call,
           the checks, a 3 KiB copy), so extra workers cannot run in parallel;
  torch    torch.utils.data.DataLoader over the same Python dataset, for
           reference (worker processes, collate, shared-memory transfer).
and prints samples/s for 0 and 2 workers (best of --repeat epochs).

  python3 bench/python_gil_cost.py [--samples 50000] [--batch 256] [--repeat 3]
"""
import argparse
import os
import tempfile
import time

import numpy as np

import pinloader


class InMemoryCifar:
    """What a typical Python dataset does: index a numpy array."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], int(self.labels[i])


def epoch_rate(loader, repeat):
    best = 0.0
    for _ in range(repeat):
        n, t0 = 0, time.perf_counter()
        for x, _ in loader:
            n += len(x)
        best = max(best, n / (time.perf_counter() - t0))
    return best


def run(args):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(args.samples, 3, 32, 32), dtype=np.uint8)
    labels = rng.integers(0, 10, size=args.samples, dtype=np.uint8)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data_batch.bin")
        rec = np.concatenate([labels[:, None], images.reshape(args.samples, -1)], axis=1)
        rec.tofile(path)
        native = pinloader.datasets.CIFAR10(path)
        pyds = InMemoryCifar(images, labels)
        for workers in (0, 2):
            kw = dict(batch_size=args.batch, shuffle=True, num_workers=workers)
            rows.append(("native", workers, epoch_rate(pinloader.DataLoader(native, **kw), args.repeat)))
            rows.append(("python", workers, epoch_rate(pinloader.DataLoader(pyds, **kw), args.repeat)))
            if args.torch:
                import torch.utils.data as tud

                loader = tud.DataLoader(pyds, **kw)
                rows.append(("torch DataLoader", workers, epoch_rate(loader, args.repeat)))
    print("samples/s, %d samples of 3072 B, batch %d, %d CPUs" % (args.samples, args.batch, os.cpu_count()))
    print("%-18s %8s %12s" % ("dataset", "workers", "samples/s"))
    for name, w, rate in rows:
        print("%-18s %8d %12.0f" % (name, w, rate))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=int, default=50000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-torch", dest="torch", action="store_false", help="skip the torch DataLoader rows")
    args = p.parse_args()
    if args.torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            args.torch = False
    run(args)


if __name__ == "__main__":
    main()
