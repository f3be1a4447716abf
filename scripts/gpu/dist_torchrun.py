"""pinloader under torchrun: every rank loads its shard to its own GPU.

    torchrun --standalone --nproc_per_node=2 scripts/gpu/dist_torchrun.py \
        --cli build-gpu/pinloader

Each rank runs the pinloader CLI as a subprocess; the CLI reads RANK /
WORLD_SIZE / LOCAL_RANK from the environment torchrun sets, so rank r loads
DistributedSampler's share r onto cuda:LOCAL_RANK. The ranks then check,
through torch.distributed (NCCL, tensors on each rank's GPU):

  1. bytes: the CLI's --checksum (FNV-1a of the bytes read back from device
     memory, in delivery order) equals FNV-1a of the same samples taken
     straight from the files in the order the CLI reported (--order-out);
  2. coverage: the ranks' orders, interleaved by position, form one global
     order that covers every sample, repeating only the first
     ceil(n/W)*W - n positions (DistributedSampler's padding);
  3. a per-sample hash summed over what every rank delivered (all-reduced)
     equals the same sum computed over the whole data set plus padding.

Then it times several epochs on all ranks at once (aggregate bytes/s into
all GPUs) and on rank 0 alone with world size 1 (one GPU), and prints both.
Without CUDA it runs on the CPU with the gloo backend (for trying it out).
Exit status 0 only if every check passed on every rank.
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

RECORD = 3073  # CIFAR-10 binary: 1 label byte + 3 * 32 * 32 pixels
FNV_C = r"""
#include <stdint.h>
#include <stddef.h>
/* FNV-1a over records[order[0]], records[order[1]], ... as the CLI's
 * --checksum hashes delivered samples: image bytes, then the label byte. */
uint64_t fnv_order(const uint8_t *rec, const int64_t *order, size_t n,
                   size_t rb) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *r = rec + (size_t)order[i] * rb;
    for (size_t k = 1; k <= rb; k++) {
      h ^= r[k % rb]; /* pixels 1..rb-1, then the label at 0 */
      h *= 0x100000001b3ull;
    }
  }
  return h;
}
"""


def log(rank, *a):
    print("[rank %d]" % rank, *a, flush=True)


def make_data(root, n, files):
    """CIFAR-10-format files with n records in all, deterministic bytes."""
    rng = np.random.default_rng(20261201)
    paths, left = [], n
    for f in range(files):
        k = left // (files - f)
        left -= k
        rec = rng.integers(0, 256, size=(k, RECORD), dtype=np.uint8)
        rec[:, 0] %= 10
        p = os.path.join(root, "data_batch_%d.bin" % (f + 1))
        rec.tofile(p + ".tmp")
        os.replace(p + ".tmp", p)
        paths.append(p)
    return paths


def fnv_lib(root):
    src = os.path.join(root, "fnv.c")
    so = os.path.join(root, "fnv.so")
    with open(src, "w") as f:
        f.write(FNV_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, src], check=True)
    lib = ctypes.CDLL(so)
    lib.fnv_order.restype = ctypes.c_uint64
    lib.fnv_order.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_size_t]
    return lib


def run_cli(cli, args, env=None):
    t0 = time.time()
    p = subprocess.run([cli, "run"] + args, capture_output=True, text=True, env=env)
    wall = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError("pinloader run %s: exit %d\n%s%s" % (" ".join(args), p.returncode,
                                                              p.stdout, p.stderr))
    out = {"wall": wall, "text": p.stdout}
    for key, pat in [("checksum", r"^checksum: ([0-9a-f]+)$"),
                     ("bytes_s", r"^bytes/s: ([0-9.]+)"),
                     ("device", r"^device: (.*)$"),
                     ("loaded", r"^loaded: (\d+) samples in (\d+) batches, ([0-9.]+) s")]:
        m = re.search(pat, p.stdout, re.M)
        if m:
            out[key] = m.groups() if key == "loaded" else m.group(1)
    return out


def sample_hashes(records):
    """A per-sample hash below 2^40 (a fixed random weighting of its bytes),
    so that sums over 50,000 samples fit an int64 exactly."""
    w = np.random.default_rng(7).integers(0, 1 << 20, size=RECORD, dtype=np.int64)
    h = np.empty(len(records), dtype=np.int64)
    for i in range(0, len(records), 4096):
        h[i:i + 4096] = records[i:i + 4096].astype(np.int64) @ w
    return h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build-gpu/pinloader")
    ap.add_argument("--samples", type=int, default=50000)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=10, help="for the timing runs")
    ap.add_argument("--data", default="/tmp/pl_dist_cifar")
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group("nccl")
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    device_flag = "cuda" if cuda else "cpu"

    def barrier():
        if cuda:
            dist.barrier(device_ids=[local])
        else:
            dist.barrier()

    def allreduce(values, op=dist.ReduceOp.SUM):
        t = torch.tensor(values, dtype=torch.int64, device=dev)
        dist.all_reduce(t, op=op)
        return t.cpu().tolist()

    cli = os.path.abspath(args.cli)
    n = args.samples
    os.makedirs(args.data, exist_ok=True)
    if rank == 0:
        t0 = time.time()
        paths = make_data(args.data, n, 5)
        fnv_lib(args.data)
        log(rank, "wrote %d CIFAR-10 records in 5 files (%.1f s)" % (n, time.time() - t0))
    barrier()
    paths = [os.path.join(args.data, "data_batch_%d.bin" % (f + 1)) for f in range(5)]
    spec = "cifar10:" + ",".join(paths)
    records = np.concatenate([np.fromfile(p, dtype=np.uint8).reshape(-1, RECORD)
                              for p in paths])
    assert len(records) == n
    lib = ctypes.CDLL(os.path.join(args.data, "fnv.so"))
    lib.fnv_order.restype = ctypes.c_uint64
    lib.fnv_order.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_size_t]
    work = tempfile.mkdtemp(prefix="pl_dist_r%d_" % rank)
    failures = []

    # ---- 1. one verified epoch per rank, concurrently
    order_path = os.path.join(work, "order")
    common = ["--dataset", spec, "--batch-size", str(args.batch_size),
              "--workers", str(args.workers), "--shuffle", "--seed", "1",
              "--device", device_flag, "--quiet"]
    r = run_cli(cli, common + ["--checksum", "--order-out", order_path])
    order = np.loadtxt(order_path, dtype=np.int64, ndmin=1)
    per_rank = -(-n // world)
    log(rank, "device %s: %s samples in %s batches; checksum %s" %
        (r.get("device"), r["loaded"][0], r["loaded"][1], r["checksum"]))
    if len(order) != per_rank:
        failures.append("rank %d loaded %d samples, want ceil(%d/%d) = %d" %
                        (rank, len(order), n, world, per_rank))
        order = np.resize(order, per_rank)
    order = np.ascontiguousarray(order)
    want = lib.fnv_order(records.ctypes.data, order.ctypes.data, len(order), RECORD)
    if int(r["checksum"], 16) != want:
        failures.append("rank %d: CLI checksum %s, files in the reported order give %016x" %
                        (rank, r["checksum"], want))

    # ---- 2. coverage: gather the orders, interleave by position
    mine = torch.tensor(order, dtype=torch.int64, device=dev)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    glob = torch.stack(every, dim=1).reshape(-1).cpu().numpy()  # position p = k*W + r
    pad = per_rank * world - n
    counts = np.bincount(glob, minlength=n)
    if not (counts.min() >= 1 and sorted(glob[:n].tolist()) == list(range(n))):
        failures.append("the ranks' orders do not cover the data set exactly once")
    if pad and not np.array_equal(glob[n:], glob[:pad]):
        failures.append("the padding is not the global order's first %d positions" % pad)

    # ---- 3. per-sample hash summed over ranks == over the data set
    h = sample_hashes(records)
    got = allreduce([int(h[order].sum())])[0]
    expect = int(h.sum()) + int(h[glob[:pad]].sum())
    if got != expect:
        failures.append("all-reduced sample-hash sum %d != data set's %d" % (got, expect))

    # ---- timing: all ranks at once, then rank 0 alone as world 1
    timing = common + ["--epochs", str(args.epochs)]
    barrier()
    t = run_cli(cli, timing)
    rank_bytes = int(t["loaded"][0]) * RECORD
    secs = float(t["loaded"][2])
    tot_bytes, = allreduce([rank_bytes])
    max_ms, = allreduce([int(secs * 1000)], op=dist.ReduceOp.MAX)
    single = None
    if rank == 0:
        env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK=str(local))
        single = run_cli(cli, timing, env=env)
    barrier()

    nfail, = allreduce([len(failures)])
    for f in failures:
        log(rank, "FAIL:", f)
    if rank == 0:
        agg = tot_bytes / max(max_ms / 1000, 1e-9)
        one = float(single["bytes_s"])
        print("dist: world %d, %d samples, batch %d, %d workers/rank, %d epochs, device %s" %
              (world, n, args.batch_size, args.workers, args.epochs, single.get("device")))
        print("dist: per-rank bytes/s (rank 0): %.3g" % float(t["bytes_s"]))
        print("dist: aggregate bytes/s into %d GPU(s): %.3g (%.2f GB/s)" % (world, agg, agg / 1e9))
        print("dist: single GPU (world 1) bytes/s: %.3g (%.2f GB/s); scaling x%.2f" %
              (one, one / 1e9, agg / one if one else 0))
        print("dist: checks %s (%d failure(s) over all ranks)" %
              ("PASSED" if nfail == 0 else "FAILED", nfail))
    dist.destroy_process_group()
    return 0 if nfail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
