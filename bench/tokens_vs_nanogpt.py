"""Token windows: nanoGPT's get_batch (random windows from a uint16 memmap,
torch.stack, pin_memory, .to(non_blocking=True), in the training loop)
against pinloader.datasets.Tokens with samples=..., at B=32, T=1024, and
the loader's wait as a share of a step (a fixed GPU/CPU busy loop stands in
for the model).

    python3 bench/tokens_vs_nanogpt.py [--tokens 200000000] [--steps 200]
        [--step-ms 20] [--workers 4] [--device cuda] [--json OUT]
"""
import argparse
import json
import os
import time

import numpy as np


def make_shard(path, n):
    if os.path.exists(path) and os.path.getsize(path) == 2 * n:
        return
    rng = np.random.default_rng(0)
    mm = np.memmap(path, dtype=np.uint16, mode="w+", shape=(n,))
    for s in range(0, n, 1 << 24):
        mm[s:s + (1 << 24)] = rng.integers(0, 50257, min(1 << 24, n - s), dtype=np.uint16)
    mm.flush()


def nanogpt(path, B, T, steps, device):
    import torch
    t0 = time.perf_counter()
    for _ in range(steps):
        data = np.memmap(path, dtype=np.uint16, mode="r")
        ix = torch.randint(len(data) - T, (B,))
        x = torch.stack([torch.from_numpy(data[i:i + T].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + T].astype(np.int64)) for i in ix])
        if device == "cuda":
            x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return steps * B * T / (time.perf_counter() - t0)


def pin(path, B, T, steps, device, workers, step_s):
    import torch
    import pinloader
    ds = pinloader.datasets.Tokens(path, context=T, samples=B * (steps + 8))
    ld = pinloader.DataLoader(ds, batch_size=B, num_workers=workers, device=device)
    it = iter(ld)
    next(it)
    wait, t0 = 0.0, time.perf_counter()
    for _ in range(steps):
        w = time.perf_counter()
        x, y = next(it)
        wait += time.perf_counter() - w
        if step_s:
            end = time.perf_counter() + step_s  # the model's step
            while time.perf_counter() < end:
                pass
    if device == "cuda":
        torch.cuda.synchronize()
    total = time.perf_counter() - t0
    return steps * B * T / total, wait / total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", default="/tmp/pinloader-tokens.bin")
    ap.add_argument("--tokens", type=int, default=200_000_000)
    ap.add_argument("--B", type=int, default=32)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-ms", type=float, default=20.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        a.device = "cpu"
    make_shard(a.path, a.tokens)
    res = {"B": a.B, "T": a.T, "device": a.device, "torch": torch.__version__}
    res["nanogpt_tokens_s"] = nanogpt(a.path, a.B, a.T, a.steps, a.device)
    res["pinloader_tokens_s"], _ = pin(a.path, a.B, a.T, a.steps, a.device, a.workers, 0)
    res["ratio"] = res["pinloader_tokens_s"] / res["nanogpt_tokens_s"]
    _, res["wait_share_of_step"] = pin(a.path, a.B, a.T, a.steps, a.device, a.workers, a.step_ms / 1000)
    res["step_ms"] = a.step_ms
    print(json.dumps(res, indent=1))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
