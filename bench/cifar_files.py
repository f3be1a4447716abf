"""CIFAR-10 binary files with pseudo-random pixels, for the benchmarks that
read the same files through pinloader and torch (bench/vs_torch.py,
bench/autotune.py)."""
import os

import numpy as np

RECORD = 3073  # label byte + 3x32x32 CHW pixels


def write_cifar(directory, records, files=5, seed=0):
    """`records` records over `files` data_batch_N.bin files in `directory`;
    returns their paths."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(files):
        n = records // files + (i < records % files)
        rec = rng.integers(0, 256, (n, RECORD), dtype=np.uint8)
        rec[:, 0] %= 10
        p = os.path.join(directory, "data_batch_%d.bin" % (i + 1))
        rec.tofile(p)
        paths.append(p)
    return paths
