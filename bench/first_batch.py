"""Time to the first batch: pinloader against torch's DataLoader in the same
run, for each worker count and start method, for a small dataset and for
one holding --objects-mb of Python objects (a list of dicts, as a dataset's
file index), and for pinloader after load_state_dict().

    python3 bench/first_batch.py --workers 1,4,16,32 --methods fork,forkserver,spawn \\
        --objects-mb 1024 --device cuda --out bench/results/...

Each case runs in a fresh interpreter (no worker, forkserver or import
left over from another case): it builds the dataset (not timed), then
times DataLoader() (`init`), and iter() + next() up to the first batch
(`first`; on cuda, the batch on the GPU and synchronized; CUDA itself
started before, as a training script's model has it, unless --cold-cuda).
`restore`:
pinloader only (torch has no state_dict): a loader given the state of
another taken at batch 3, from iter() to its first batch. Times are the
median of --reps runs (each in its own interpreter).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Small:
    """CIFAR-sized samples made on the fly: a 3x32x32 uint8 image and a label."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import numpy as np

        return np.full((3, 32, 32), i % 251, np.uint8), i % 10


class Objects(Small):
    """The same samples, the dataset holding a list of dicts of about
    `mb` MB (what an image folder's index holds: path, label, size)."""

    def __init__(self, n, mb):
        super().__init__(n)
        count = max(1, int(mb * 1e6 / 330))  # about 330 bytes a dict (measured with tracemalloc)
        self.index = [{"path": "train/n%08d/img_%08d.JPEG" % (i % 1000, i), "label": i % 1000,
                       "size": 100000 + i} for i in range(count)]

    def __getitem__(self, i):
        e = self.index[i % len(self.index)]
        import numpy as np

        return np.full((3, 32, 32), e["label"] % 251, np.uint8), e["label"] % 10


def _first(impl, ds, workers, method, device, batch, restore, work_s=0.0):
    """(init_s, first_s) of one loader. work_s: seconds of the script's own
    work between DataLoader() and iter() (a model being built), not timed."""
    import torch

    kw = dict(batch_size=batch, num_workers=workers,
              multiprocessing_context=method if workers else None)
    if impl == "torch":
        t0 = time.perf_counter()
        dl = torch.utils.data.DataLoader(ds, shuffle=True, pin_memory=device == "cuda", **kw)
        t1 = time.perf_counter()
        time.sleep(work_s)  # (the script's own work, as below)
        t1w = time.perf_counter()
        b = next(iter(dl))
        if device == "cuda":
            b = [x.cuda(non_blocking=True) for x in b]
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1w
    import pinloader

    kw.update(shuffle=True, seed=1, device=device)  # (seed=: the order state_dict() saves)
    state = None
    if restore:
        a = pinloader.DataLoader(ds, **kw)
        it = iter(a)
        for _ in range(3):
            next(it)
        state = a.state_dict()
        a.close()
    t0 = time.perf_counter()
    dl = pinloader.DataLoader(ds, **kw)
    if state is not None:
        dl.load_state_dict(state)  # (starts a Python dataset's workers)
    t1 = time.perf_counter()
    time.sleep(work_s)  # the script's own work (its model built), not timed
    t1w = time.perf_counter()
    b = next(iter(dl))
    if device == "cuda":
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    rep = dl.report(json=True).get("first_batch", {})
    dl.close()
    del b
    return t1 - t0, t2 - t1w, rep


def _cuda_ready():
    """CUDA started in this process before anything is timed, as in a
    training script whose model is on the GPU before its first batch:
    CUDA's own start (0.3-0.4 s on the H200, in a fresh interpreter) is
    then no loader's. Seconds it took."""
    import torch

    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def one(args):
    """A single case, in this interpreter: prints its JSON."""
    cuda_s = _cuda_ready() if args.device == "cuda" and not args.cold_cuda else None
    if args.torch_dataset:
        from first_batch_torch import TorchObjects as objects, TorchSmall as small
    else:
        objects, small = Objects, Small
    ds = small(args.n) if args.objects_mb == 0 else objects(args.n, args.objects_mb)
    got = _first(args.impl, ds, args.workers_one, args.method, args.device, args.batch, args.restore,
                 args.work_s)
    out = {"init_s": got[0], "first_s": got[1], "cuda_start_s": cuda_s}
    if len(got) > 2:
        out["report"] = got[2]
    print("RESULT " + json.dumps(out))


def _case(args, impl, workers, method, mb, restore):
    cmd = [sys.executable, os.path.abspath(__file__), "--one", "--impl", impl, "--workers-one", str(workers),
           "--method", method, "--objects-mb", str(mb), "--device", args.device, "--batch",
           str(args.batch), "--n", str(args.n)] + (["--restore"] if restore else []) + \
        (["--cold-cuda"] if args.cold_cuda else []) + ["--work-s", str(args.work_s)] + \
        (["--torch-dataset"] if args.torch_dataset else [])
    runs = []
    for _ in range(args.reps):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout)
        except subprocess.TimeoutExpired:
            return {"error": ["over --case-timeout %g s" % args.case_timeout]}
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:]}
        runs.append(json.loads(line[0][7:]))
    med = {k: statistics.median(r[k] for r in runs) for k in ("init_s", "first_s")}
    med["runs"] = runs
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,4,16,32")
    ap.add_argument("--methods", default="fork,forkserver,spawn")
    ap.add_argument("--objects-mb", default="0,1024",
                    help="dataset sizes in MB of Python objects, comma separated (0: the small one)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--n", type=int, default=50000, help="samples in the dataset")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--case-timeout", type=float, default=600)
    ap.add_argument("--out", default=None)
    ap.add_argument("--name", default="first-batch")
    ap.add_argument("--work-s", type=float, default=0.0,
                    help="seconds of the script's own work between DataLoader() and iter() (a "
                         "model being built; a sleep, not timed): `first` then shows what a "
                         "loader did beforehand")
    ap.add_argument("--torch-dataset", action="store_true",
                    help="the datasets as torch Datasets from a module that imports torch "
                         "(bench/first_batch_torch.py), as most are: spawned workers import "
                         "torch, a forkserver preloads it. Without: datasets that need no "
                         "torch (pinloader's workers then never import it)")
    ap.add_argument("--cold-cuda", action="store_true",
                    help="on cuda, leave CUDA unstarted before the timed part (each loader's "
                         "first batch then pays CUDA's start)")
    # one case (internal)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", default="pinloader", help=argparse.SUPPRESS)
    ap.add_argument("--workers-one", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--method", default="fork", help=argparse.SUPPRESS)
    ap.add_argument("--restore", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        args.objects_mb = float(args.objects_mb)
        return one(args)
    import benchinfo

    info = benchinfo.collect(args.device)
    header = ["dataset", "start", "workers", "torch first s", "torch total s", "pinloader first s",
              "pinloader total s", "pinloader total after restore s"]
    notes = ["`first`: iter() + next() to the first batch (worker start included; on cuda the batch "
             "is on the GPU). `total`: from DataLoader() to the first batch (neither reads "
             "the dataset in DataLoader()). `total after restore`: DataLoader(), "
             "load_state_dict() of another loader's state at batch 3 (which starts the workers), "
             "iter() and the first batch. Median of %d runs, each in a fresh interpreter; batch %d, "
             "%d samples; init and first apart in the JSON.%s %s" % (
                 args.reps, args.batch, args.n,
                 " %g s of the script's own work (a sleep) between DataLoader() and iter(), in "
                 "neither time." % args.work_s if args.work_s else "",
                 "" if args.device != "cuda" else
                 "CUDA started before the timed part (as a training script's model on the GPU "
                 "does; cuda_start_s in the JSON)." if not args.cold_cuda else
                 "CUDA not started before the timed part (--cold-cuda): each loader's first "
                 "batch pays its start.")]

    def cell(x, key):
        if "error" in x:
            return "error"
        return x["init_s"] + x["first_s"] if key == "total" else x[key]

    res, rows = [], []
    for mb in [float(x) for x in args.objects_mb.split(",")]:
        for method in args.methods.split(","):
            for w in [int(x) for x in args.workers.split(",")]:
                r = {"objects_mb": mb, "method": method, "workers": w}
                r["torch"] = _case(args, "torch", w, method, mb, False)
                r["pinloader"] = _case(args, "pinloader", w, method, mb, False)
                r["pinloader_restore"] = _case(args, "pinloader", w, method, mb, True)
                res.append(r)
                kind = ("small" if mb == 0 else "%g MB objects" % mb) + \
                    (", torch Dataset" if args.torch_dataset else "")
                rows.append([kind, method, w,
                             cell(r["torch"], "first_s"), cell(r["torch"], "total"),
                             cell(r["pinloader"], "first_s"), cell(r["pinloader"], "total"),
                             cell(r["pinloader_restore"], "total")])
                # The files after each row (a run stopped part-way keeps
                # what it measured) and the row in one short line.
                benchinfo.write(args.out, args.name, info, res, header, rows, notes, quiet=True)
                print("row: %s" % " | ".join(benchinfo._fmt(c) for c in rows[-1]), flush=True)
    benchinfo.write(args.out, args.name, info, res, header, rows, notes)


if __name__ == "__main__":
    main()
