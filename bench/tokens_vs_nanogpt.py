"""Token windows (issue 13): nanoGPT's get_batch (random windows from a
uint16 memmap, torch.stack, pin_memory, .to(non_blocking=True), in the
training loop) and torch's DataLoader over the same windows with workers,
against pinloader.datasets.Tokens(samples=...), at B=32, T=1024, in the same
run; then the loader's wait as a share of a training step (a busy loop of
--step-ms stands in for the model).

    python3 bench/tokens_vs_nanogpt.py [--device cuda|cpu] [--workers 4]
        [--tokens 200000000] [--steps 200] [--step-ms 20] [--B 32] [--T 1024]
        [--quick] [--out DIR] [--name N]

  --device cpu    batches stay in host memory (no pinning, no copy); defaults
                  then 50 M tokens and 2 workers (the 2-core machine).
  --quick         a correctness run of seconds (2 M tokens, 20 steps, 2 ms
                  steps, 2 workers); the numbers mean nothing.

Writes NAME.json and NAME.md (default tokens-DEVICE) into --out, else
$PL_GPU_LOGS, else ".".
"""
import argparse
import os
import sys
import time

import numpy as np

import benchinfo


def make_shard(path, n):
    if os.path.exists(path) and os.path.getsize(path) == 2 * n:
        return
    rng = np.random.default_rng(0)
    tmp = path + ".tmp"
    mm = np.memmap(tmp, dtype=np.uint16, mode="w+", shape=(n,))
    for s in range(0, n, 1 << 24):
        mm[s:s + (1 << 24)] = rng.integers(0, 50257, min(1 << 24, n - s), dtype=np.uint16)
    mm.flush()
    del mm
    os.replace(tmp, path)


def nanogpt(path, B, T, steps, device):
    """train.py's get_batch, verbatim but for the path."""
    import torch
    cuda = device == "cuda"
    x = y = None
    t0 = time.perf_counter()
    for _ in range(steps):
        data = np.memmap(path, dtype=np.uint16, mode="r")
        ix = torch.randint(len(data) - T, (B,))
        x = torch.stack([torch.from_numpy((data[i:i + T]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + T]).astype(np.int64)) for i in ix])
        if cuda:
            x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    if cuda:
        torch.cuda.synchronize()
    rate = steps * B * T / (time.perf_counter() - t0)
    check(x, y, B, T, device)
    return rate


class Windows:
    """The same windows as a map-style dataset, for torch's DataLoader."""

    def __init__(self, path, T, n):
        self.path, self.T, self.n, self.data = path, T, n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        if self.data is None:  # opened in the worker
            self.data = np.memmap(self.path, dtype=np.uint16, mode="r")
        s = int(torch.randint(len(self.data) - self.T, (1,)))
        w = torch.from_numpy(self.data[s:s + self.T + 1].astype(np.int64))
        return w[:-1], w[1:]


def torch_loader(path, B, T, steps, device, workers):
    import torch
    cuda = device == "cuda"
    ld = torch.utils.data.DataLoader(Windows(path, T, B * (steps + 8)), batch_size=B,
                                     num_workers=workers, pin_memory=cuda,
                                     persistent_workers=workers > 0)
    it = iter(ld)
    next(it)
    x = y = None
    t0 = time.perf_counter()
    for _ in range(steps):
        x, y = next(it)
        if cuda:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    if cuda:
        torch.cuda.synchronize()
    rate = steps * B * T / (time.perf_counter() - t0)
    check(x, y, B, T, device)
    del it, ld
    return rate


def check(x, y, B, T, device):
    """Right shape, dtype, place, and y is x shifted by one."""
    assert tuple(x.shape) == (B, T) and tuple(y.shape) == (B, T), (x.shape, y.shape)
    assert str(x.dtype) == "torch.int64", x.dtype
    assert x.device.type == device, (x.device, device)
    assert bool((x[:, 1:] == y[:, :-1]).all()), "y is not x shifted by one"


WARM_STEPS = 16  # the pool grows to what the loop holds (buffers pinned once)


def pin(path, B, T, steps, device, workers, step_s, waits=None):
    """(tokens/s, time waiting for batches / total) for pinloader, timed
    after WARM_STEPS steps (the first batches allocate the pool's buffers:
    once per run, not per step). `waits`, a dict, gets the next() times'
    distribution and the warm-up steps' wait."""
    import torch
    import pinloader
    ds = pinloader.datasets.Tokens(path, context=T, samples=B * (steps + WARM_STEPS + 8))
    ld = pinloader.DataLoader(ds, batch_size=B, num_workers=workers, device=device)
    it = iter(ld)
    x = y = None

    def step(k):
        nonlocal x, y
        times = []
        for _ in range(k):
            w = time.perf_counter()
            x, y = next(it)
            times.append(time.perf_counter() - w)
            if step_s:
                end = time.perf_counter() + step_s  # the model's step
                while time.perf_counter() < end:
                    pass
        return times

    warm = step(WARM_STEPS)
    t0 = time.perf_counter()
    times = step(steps)
    if device == "cuda":
        torch.cuda.synchronize()
    total = time.perf_counter() - t0
    check(x, y, B, T, device)
    del it
    ld.close()
    if waits is not None:
        us = sorted(t * 1e6 for t in times)
        waits.update(median_us=us[len(us) // 2], p99_us=us[min(len(us) - 1, len(us) * 99 // 100)],
                     max_us=us[-1], over_1ms=sum(u > 1000 for u in us),
                     warmup_steps=WARM_STEPS, warmup_wait_ms=sum(warm) * 1e3)
    return steps * B * T / total, sum(times) / total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--path", help="a raw uint16 token file (default: generated under /tmp)")
    ap.add_argument("--tokens", type=int)
    ap.add_argument("--B", type=int, default=32)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--step-ms", type=float)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--name")
    a = ap.parse_args()
    quick = dict(tokens=2_000_000, steps=20, step_ms=2.0, workers=2)
    full = dict(tokens=200_000_000, steps=200, step_ms=20.0, workers=4)
    cpu = dict(tokens=50_000_000, steps=200, step_ms=20.0, workers=2)  # the 2-core machine
    for k, v in (quick if a.quick else cpu if a.device == "cpu" else full).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    path = a.path or "/tmp/pinloader-tokens-%d.bin" % a.tokens
    if not a.path:
        make_shard(path, a.tokens)

    import torch
    import pinloader
    if a.device == "cuda" and not (torch.cuda.is_available() and pinloader.cuda_available()):
        sys.exit("--device cuda: no usable CUDA device (torch %s, pinloader %s); use --device cpu"
                 % (torch.cuda.is_available(), pinloader.cuda_available()))
    torch.manual_seed(0)
    info = benchinfo.collect(a.device)
    res = {"B": a.B, "T": a.T, "steps": a.steps, "workers": a.workers, "tokens": os.path.getsize(path) // 2,
           "path": path, "step_ms": a.step_ms, "quick": a.quick}
    res["nanogpt_tokens_s"] = nanogpt(path, a.B, a.T, a.steps, a.device)
    res["torch_dataloader_tokens_s"] = torch_loader(path, a.B, a.T, a.steps, a.device, a.workers)
    res["pinloader_tokens_s"], res["pinloader_wait_share_unloaded"] = pin(
        path, a.B, a.T, a.steps, a.device, a.workers, 0)
    res["ratio_vs_nanogpt"] = res["pinloader_tokens_s"] / res["nanogpt_tokens_s"]
    res["ratio_vs_torch_dataloader"] = res["pinloader_tokens_s"] / res["torch_dataloader_tokens_s"]
    res["next_times"] = {}
    _, res["wait_share_of_step"] = pin(path, a.B, a.T, a.steps, a.device, a.workers, a.step_ms / 1000,
                                       res["next_times"])
    # nanoGPT's get_batch runs inside the step: its whole time is wait.
    per_batch = a.B * a.T / res["nanogpt_tokens_s"]
    res["nanogpt_wait_share_of_step"] = per_batch / (per_batch + a.step_ms / 1000)

    name = a.name or "tokens-%s%s" % (a.device, "-quick" if a.quick else "")
    rows = [["pinloader Tokens(samples=...), %d workers" % a.workers, res["pinloader_tokens_s"],
             "%.1fx" % res["ratio_vs_nanogpt"], "%.2f%%" % (100 * res["wait_share_of_step"])],
            ["nanoGPT get_batch (in the loop)", res["nanogpt_tokens_s"], "1.0x",
             "%.2f%%" % (100 * res["nanogpt_wait_share_of_step"])],
            ["torch DataLoader, memmap windows, %d workers" % a.workers,
             res["torch_dataloader_tokens_s"],
             "%.1fx" % (res["torch_dataloader_tokens_s"] / res["nanogpt_tokens_s"]), ""]]
    notes = ["B=%d, T=%d, random windows of a %d-token uint16 file (%s); int64 x and y; %d batches "
             "timed; into %s." % (a.B, a.T, res["tokens"], path, a.steps,
                                  "GPU memory (torch: pin_memory + .to(non_blocking=True))"
                                  if a.device == "cuda" else "host memory"),
             "Wait share: time in next() / total, with a %.0f ms busy loop per step standing in "
             "for the model (nanoGPT's: its get_batch time over get_batch + step)." % a.step_ms,
             "pinloader's next() in that loop: median %.0f us, p99 %.0f us, max %.0f us, %d of %d "
             "over 1 ms; timed after %d warm-up steps (the pool's buffers are allocated as the "
             "loop first holds them: %.1f ms of wait in all, once per run)." % (
                 res["next_times"]["median_us"], res["next_times"]["p99_us"],
                 res["next_times"]["max_us"], res["next_times"]["over_1ms"], a.steps,
                 res["next_times"]["warmup_steps"], res["next_times"]["warmup_wait_ms"])]
    if a.quick:
        notes.append("--quick: a correctness run; the numbers mean nothing.")
    benchinfo.write(a.out, name, info, res,
                    ["loader", "tokens/s", "vs nanoGPT", "wait share of a step"], rows, notes)


if __name__ == "__main__":
    main()
