"""Cost as the dataset grows: an image folder of ImageNet's size and a
10 B-token shard set, pinloader against torch's DataLoader with the same
workers, in the same run.

    python3 bench/scale_vs_torch.py [--data DIR] [--files 100000,1281167]
        [--classes 1000] [--uniques 2000] [--tokens 1e9,1e10] [--shard 1e8]
        [--workers 0,2,4] [--batch 64] [--context 1024] [--cases images,tokens]
        [--out DIR] [--name scale-cpu]

The data is made once and kept under --data (default /tmp/pl-scale):
  images: --uniques small real JPEGs (PIL, 160-256 x 120-192 pixels), then
    for each --files count N a tree DATA/imgs-N/cNNNN/iNNNNNNN.jpg of N hard
    links to them in --classes class folders (contiguous, as ImageNet's). The
    links are made class by class and each finished class is recorded, so an
    interrupted run resumes where it stopped.
  tokens: for each --tokens count T, T / --shard nanoGPT .bin shards
    (uint16) made with truncate: sparse files of zeros, 2 bytes a token on
    paper and no disk blocks (10 B tokens are 20 GB; every window reads as
    zeros, which costs pinloader and torch the same page-cache reads).

Each case runs in a fresh interpreter and records: dataset construction
(`ds_s`) and the parent's RSS growth over it (`ds_mb`: the file index),
DataLoader() (`init_s`), iter() + next() (`first_s`), then, after the first
batch, the parent's RSS / USS / PSS and each worker process's (psutil; a
forked worker shares the parent's pages, so USS is what it adds and PSS
splits the shared ones), the total PSS, and len(pickle.dumps(state_dict())).
pinloader reads native datasets with threads of the parent, so it has no
worker processes: its parent numbers are the whole cost.

  pinloader: pinloader.datasets.ImageFolder(size=224, train=True) /
    Tokens(shards, context) (windows striding through each shard), through
    pinloader.DataLoader(shuffle=True, seed=1).
  torch: torchvision.datasets.ImageFolder with RandomResizedCrop(224) +
    RandomHorizontalFlip + PILToTensor (when torchvision is missing, a
    minimal equivalent: a sorted os.scandir walk and the same PIL steps,
    labelled torch+PIL); for tokens, a map-style dataset of the same windows
    over one np.memmap per shard (nanoGPT's style), through
    torch.utils.data.DataLoader(shuffle=True).

Then, per implementation and worker count, the slope between the two sizes:
bytes per file (or per window) of the index, of the parent after the first
batch, of each worker and of the total PSS. Writes NAME.json and NAME.md.
"""
import argparse
import json
import os
import pickle
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


# ---------------------------------------------------------------- the data

def make_uniques(data, count):
    src = os.path.join(data, "src")
    done = os.path.join(data, "src.done")
    if os.path.exists(done):
        return src
    import numpy as np
    from PIL import Image
    os.makedirs(src, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        w, h = int(rng.integers(160, 257)), int(rng.integers(120, 193))
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([np.sin(xx / rng.uniform(5, 40) + yy / rng.uniform(5, 40))
                         for _ in range(3)], -1)
        img = np.clip(128 + 100 * base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(src, "u%05d.jpg" % i), quality=85)
    open(done, "w").close()
    return src


def make_tree(data, n, classes, uniques):
    """DATA/imgs-N: n hard links in `classes` folders; resumable (the finished
    classes are listed in imgs-N.classes)."""
    root = os.path.join(data, "imgs-%d" % n)
    complete = root + ".complete"
    if os.path.exists(complete):
        return root
    src = make_uniques(data, uniques)
    log = root + ".classes"
    finished = set()
    if os.path.exists(log):
        with open(log) as f:
            finished = {int(x) for x in f.read().split()}
    t0 = time.perf_counter()
    with open(log, "a") as f:
        for c in range(classes):
            if c in finished:
                continue
            d = os.path.join(root, "c%04d" % c)
            os.makedirs(d, exist_ok=True)
            for i in range(c * n // classes, (c + 1) * n // classes):
                dst = os.path.join(d, "i%07d.jpg" % i)
                try:
                    os.link(os.path.join(src, "u%05d.jpg" % (i % uniques)), dst)
                except FileExistsError:
                    pass
            f.write("%d\n" % c)
            f.flush()
            if c % 100 == 99:
                print("  %s: %d/%d classes, %.0f s" % (root, c + 1, classes,
                                                     time.perf_counter() - t0), flush=True)
    open(complete, "w").close()
    return root


def make_tokens(data, tokens, shard):
    """DATA/tok-T/shard_NNNN.bin: sparse uint16 files (truncate)."""
    root = os.path.join(data, "tok-%d" % tokens)
    os.makedirs(root, exist_ok=True)
    paths, left, k = [], tokens, 0
    while left > 0:
        m = min(shard, left)
        p = os.path.join(root, "shard_%04d.bin" % k)
        if not os.path.exists(p) or os.path.getsize(p) != 2 * m:
            with open(p, "wb") as f:
                f.truncate(2 * m)
        paths.append(p)
        left -= m
        k += 1
    return paths


# ---------------------------------------------------------------- one case

class TorchTokens:
    """The windows pinloader's Tokens(context=T) strides through, as a
    map-style dataset over one np.memmap per shard (nanoGPT's style)."""

    def __init__(self, paths, T):
        import numpy as np
        self.paths, self.T, self.maps = paths, T, None
        counts = [(os.path.getsize(p) // 2 - 1) // T for p in paths]
        self.starts = np.cumsum([0] + counts)

    def __len__(self):
        return int(self.starts[-1])

    def __getitem__(self, i):
        import numpy as np
        import torch
        if self.maps is None:  # opened in the worker
            self.maps = [np.memmap(p, dtype=np.uint16, mode="r") for p in self.paths]
        f = int(np.searchsorted(self.starts, i, side="right")) - 1
        s = (i - int(self.starts[f])) * self.T
        w = torch.from_numpy(self.maps[f][s:s + self.T + 1].astype(np.int64))
        return w[:-1], w[1:]


class MiniImageFolder:
    """torchvision's ImageFolder where torchvision is missing: sorted class
    folders, a sorted scandir of each, [(path, class)]; PIL loads as RGB."""

    def __init__(self, root, transform):
        self.transform = transform
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        self.samples = []
        for c, name in enumerate(self.classes):
            d = os.path.join(root, name)
            for fn in sorted(e.name for e in os.scandir(d)):
                if fn.lower().endswith((".jpg", ".jpeg", ".png")):
                    self.samples.append((os.path.join(d, fn), c))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        from PIL import Image
        path, c = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        return self.transform(img), c


def _pil_transform():
    """RandomResizedCrop(224) + RandomHorizontalFlip + PILToTensor."""
    try:
        import torchvision.transforms as T
        return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    except ImportError:
        pass
    import math
    import random

    import numpy as np
    import torch
    from PIL import Image

    def tf(img):
        w, h = img.size
        area = w * h
        for _ in range(10):
            ta = area * random.uniform(0.08, 1.0)
            ar = math.exp(random.uniform(math.log(3 / 4), math.log(4 / 3)))
            cw, ch = int(round(math.sqrt(ta * ar))), int(round(math.sqrt(ta / ar)))
            if 0 < cw <= w and 0 < ch <= h:
                top, left = random.randint(0, h - ch), random.randint(0, w - cw)
                break
        else:
            cw, ch, top, left = w, h, 0, 0
        img = img.crop((left, top, left + cw, top + ch)).resize((224, 224), Image.BILINEAR)
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)
    return tf


def _mem(p):
    try:
        m = p.memory_full_info()
        return {"rss": m.rss, "uss": m.uss, "pss": getattr(m, "pss", None)}
    except Exception:  # a worker gone
        return None


def case(a):
    """Runs in its own interpreter; prints one JSON line."""
    import psutil
    import torch
    me = psutil.Process()
    rss0 = me.memory_info().rss
    if a.impl == "pinloader":
        import pinloader
        import pinloader.datasets as D
    t0 = time.perf_counter()
    if a.kind == "images":
        if a.impl == "pinloader":
            ds = D.ImageFolder(a.path, size=224, train=True)
        else:
            try:
                import torchvision
                ds = torchvision.datasets.ImageFolder(a.path, transform=_pil_transform())
            except ImportError:
                ds = MiniImageFolder(a.path, _pil_transform())
    else:
        paths = json.loads(a.path)
        if a.impl == "pinloader":
            ds = D.Tokens(paths, context=a.context)
        else:
            ds = TorchTokens(paths, a.context)
    t1 = time.perf_counter()
    rss_ds = me.memory_info().rss
    kw = dict(batch_size=a.batch, num_workers=a.workers, shuffle=True)
    if a.impl == "pinloader":
        dl = pinloader.DataLoader(ds, seed=1, **kw)
    else:
        dl = torch.utils.data.DataLoader(ds, **kw)
    t2 = time.perf_counter()
    it = iter(dl)
    b = next(it)
    t3 = time.perf_counter()
    assert len(b[0]) == a.batch
    parent = _mem(me)
    workers = [m for m in (_mem(c) for c in me.children(recursive=True)) if m]
    state = None
    if hasattr(dl, "state_dict"):
        state = len(pickle.dumps(dl.state_dict()))
    pss = [parent["pss"]] + [w["pss"] for w in workers]
    out = {"kind": a.kind, "impl": a.impl, "n": len(ds), "workers": a.workers,
           "ds_s": t1 - t0, "ds_bytes": rss_ds - rss0, "init_s": t2 - t1, "first_s": t3 - t2,
           "parent": parent, "worker_mem": workers, "worker_procs": len(workers),
           "total_pss": sum(pss) if None not in pss else None, "state_bytes": state}
    print("RESULT " + json.dumps(out), flush=True)
    del it
    os._exit(0)  # no teardown timing or hangs counted


# ---------------------------------------------------------------- the runner

def run_case(kind, impl, path, workers, a):
    cmd = [sys.executable, os.path.abspath(__file__), "--case", "--kind", kind, "--impl", impl,
           "--path", path, "--workers", str(workers), "--batch", str(a.batch),
           "--context", str(a.context)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError("case %s %s %s failed:\n%s\n%s" % (kind, impl, workers, r.stdout,
                                                          r.stderr[-3000:]))


def _mean_worker(r, key):
    ws = [w[key] for w in r["worker_mem"] if w.get(key) is not None]
    return sum(ws) / len(ws) if ws else None


def slopes(results):
    """Bytes per sample between the smallest and largest size of each
    (kind, impl, workers)."""
    out = []
    groups = {}
    for r in results:
        groups.setdefault((r["kind"], r["impl"], r["workers"]), []).append(r)
    for (kind, impl, w), rs in sorted(groups.items()):
        rs.sort(key=lambda r: r["n"])
        lo, hi = rs[0], rs[-1]
        dn = hi["n"] - lo["n"]
        if dn <= 0:
            continue

        def per(f):
            x, y = f(lo), f(hi)
            return None if x is None or y is None else (y - x) / dn
        out.append({"kind": kind, "impl": impl, "workers": w, "n_lo": lo["n"], "n_hi": hi["n"],
                    "index": per(lambda r: r["ds_bytes"]),
                    "parent_rss": per(lambda r: r["parent"]["rss"]),
                    "parent_uss": per(lambda r: r["parent"]["uss"]),
                    "worker_uss": per(lambda r: _mean_worker(r, "uss")),
                    "worker_rss": per(lambda r: _mean_worker(r, "rss")),
                    "total_pss": per(lambda r: r["total_pss"]),
                    "state": per(lambda r: r["state_bytes"])})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--case", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kind")
    ap.add_argument("--impl")
    ap.add_argument("--path")
    ap.add_argument("--data", default="/tmp/pl-scale")
    ap.add_argument("--files", default="100000,1281167")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--uniques", type=int, default=2000)
    ap.add_argument("--tokens", default="1e9,1e10")
    ap.add_argument("--shard", type=float, default=1e8)
    ap.add_argument("--workers", default="0,2,4")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--cases", default="images,tokens")
    ap.add_argument("--impls", default="pinloader,torch")
    ap.add_argument("--make-only", action="store_true", help="make the data and stop")
    ap.add_argument("--out")
    ap.add_argument("--name", default="scale-cpu")
    a = ap.parse_args()
    if a.case:
        a.workers = int(a.workers)
        return case(a)
    import benchinfo
    info = benchinfo.collect("cpu")
    kinds = a.cases.split(",")
    sets = []
    if "images" in kinds:
        for n in [int(float(x)) for x in a.files.split(",")]:
            t0 = time.perf_counter()
            root = make_tree(a.data, n, a.classes, a.uniques)
            print("images: %s ready (%.0f s)" % (root, time.perf_counter() - t0), flush=True)
            sets.append(("images", root))
    if "tokens" in kinds:
        for t in [int(float(x)) for x in a.tokens.split(",")]:
            sets.append(("tokens", json.dumps(make_tokens(a.data, t, int(a.shard)))))
    if a.make_only:
        return
    results = []
    for kind, path in sets:
        for w in [int(x) for x in a.workers.split(",")]:
            for impl in a.impls.split(","):
                r = run_case(kind, impl, path, w, a)
                if impl == "torch" and kind == "images" and info.get("torchvision") is None:
                    r["impl"] = "torch+PIL"
                results.append(r)
                print("%-6s %-9s n=%-9d w=%d ds %.2fs %.0fMB init %.3fs first %.2fs parent "
                      "rss %.0fMB uss %.0fMB workers %d uss %s MB state %s B" % (
                          kind, r["impl"], r["n"], w, r["ds_s"], r["ds_bytes"] / 1e6, r["init_s"],
                          r["first_s"], r["parent"]["rss"] / 1e6, r["parent"]["uss"] / 1e6,
                          r["worker_procs"],
                          "%.0f" % (_mean_worker(r, "uss") / 1e6) if r["worker_mem"] else "-",
                          r["state_bytes"]), flush=True)
    sl = slopes(results)
    mb = lambda v: None if v is None else v / 1e6  # noqa: E731
    rows = []
    for r in results:
        rows.append([r["kind"], r["impl"], r["n"], r["workers"], r["ds_s"], mb(r["ds_bytes"]),
                     r["init_s"], r["first_s"], mb(r["parent"]["rss"]), mb(r["parent"]["uss"]),
                     r["worker_procs"], mb(_mean_worker(r, "rss")), mb(_mean_worker(r, "uss")),
                     mb(r["total_pss"]), r["state_bytes"]])
    header = ["data", "impl", "samples", "workers", "dataset s", "index MB", "DataLoader() s",
              "first batch s", "parent RSS MB", "parent USS MB", "worker procs",
              "worker RSS MB", "worker USS MB", "total PSS MB", "state B"]
    f1 = lambda v: None if v is None else round(v, 1)  # noqa: E731
    notes = ["Per sample (bytes, slope between the two sizes):", "",
             "| data | impl | workers | index | parent RSS | parent USS | each worker USS |"
             " total PSS | state |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in sl:
        notes.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s |" % tuple(
            [s["kind"], s["impl"], s["workers"]] + ["" if f1(s[k]) is None else f1(s[k]) for k in
                                                    ("index", "parent_rss", "parent_uss",
                                                     "worker_uss", "total_pss", "state")]))
    notes += ["", "Data: images are %d JPEGs (160-256 x 120-192) hard-linked into each tree; "
              "token shards are sparse files (truncate) of %d tokens each, read as zeros." % (
                  a.uniques, int(a.shard)),
              "pinloader reads native datasets with threads of the parent (worker procs 0): "
              "its parent numbers are its whole cost. torch 1.13's DataLoader has no "
              "state_dict() (state B empty)."]
    benchinfo.write(a.out, a.name, info, {"cases": results, "per_sample": sl,
                                          "args": vars(a)}, header, rows, notes)


if __name__ == "__main__":
    main()
