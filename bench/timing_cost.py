#!/usr/bin/env python3
"""What per-stage timing costs (issue 15: under 1% of throughput on the
CIFAR uint8 workload), measured so that the machine's own drift cancels.

Separate runs with timings on and off (`pinloader run --no-timings`)
differ by +-5-10% from one run to the next on a shared VM, which hides a 1%
effect (bench/results/h200-f72e409-2026-12-01). Here two loaders live in one process, the same in all but
`timings` (native CIFAR-10 uint8, shuffled, --batch, --workers, to the GPU
when there is one), and take turns: --turn-batches from one, then as many
from the other, --rounds times, the order swapped every round. Each round
gives one on/off ratio of samples/s; the median ratio and a 95% interval
(bootstrap over rounds) are the result.

    python3 bench/timing_cost.py [--rounds 40] [--turn-batches 400]
        [--batch 1024] [--workers 8] [--records 50000] [--json FILE]
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

from cifar_files import write_cifar  # bench/, the script's folder

try:
    import pinloader
    import pinloader.datasets  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import pinloader
    import pinloader.datasets  # noqa: F401

import benchinfo


def forever(loader):
    """Batches across epochs, one iterator kept between turns."""
    while True:
        yield from loader.batches()


def turn(gen, n):
    """Samples/s of the next n batches."""
    t0, samples = time.perf_counter(), 0
    for _ in range(n):
        b = next(gen)
        samples += b.size
        del b
    return samples / (time.perf_counter() - t0)


def interval(ratios, k=2000, seed=0):
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(k))
    return meds[int(0.025 * k)], meds[int(0.975 * k)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--turn-batches", type=int, default=400)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--device", default=None)
    ap.add_argument("--json")
    a = ap.parse_args()
    device = a.device or ("cuda" if pinloader.cuda_available() else "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        ds = pinloader.datasets.CIFAR10(write_cifar(tmp, a.records))
        make = lambda timings: pinloader.DataLoader(  # noqa: E731
            ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, device=device,
            output="raw", timings=timings)
        on, off = make(True), make(False)
        g_on, g_off = forever(on), forever(off)
        turn(g_on, a.turn_batches)  # warm-up: pools filled, caches warm
        turn(g_off, a.turn_batches)
        ratios, rates = [], []
        for r in range(a.rounds):
            if r % 2 == 0:
                x_on = turn(g_on, a.turn_batches)
                x_off = turn(g_off, a.turn_batches)
            else:
                x_off = turn(g_off, a.turn_batches)
                x_on = turn(g_on, a.turn_batches)
            ratios.append(x_on / x_off)
            rates.append((x_on, x_off))
        on.close()
        off.close()
    med = statistics.median(ratios)
    lo, hi = interval(ratios)
    info = benchinfo.collect(device)
    res = {"info": info, "device": device, "batch": a.batch, "workers": a.workers,
           "rounds": a.rounds, "turn_batches": a.turn_batches,
           "median_on_off": med, "ci95": [lo, hi], "cost_pct": 100 * (1 - med),
           "on_samples_per_s_median": statistics.median(x for x, _ in rates),
           "off_samples_per_s_median": statistics.median(y for _, y in rates),
           "ratios": ratios}
    print("timing cost: %s, %d workers, batch %d, %d rounds of %d batches each way" % (
        device, a.workers, a.batch, a.rounds, a.turn_batches))
    print("samples/s median: timings on %.0f, off %.0f" % (res["on_samples_per_s_median"],
                                                         res["off_samples_per_s_median"]))
    print("on/off ratio: median %.4f, 95%% interval [%.4f, %.4f]; cost %.2f%% (goal < 1%%)" % (
        med, lo, hi, res["cost_pct"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
