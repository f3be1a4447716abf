"""Tar shards throughput: pinloader.datasets.Shards (local paths, and
through nginx on the loopback with readahead "whole" and "ranges") against
webdataset.WebDataset + torch's DataLoader (local, and the same URLs),
with the same decode and crop: RandomResizedCrop(size) + horizontal flip
to uint8 [3, size, size], labels from .cls, the same workers and batch.

    python3 bench/shards_vs_webdataset.py [--device cpu|cuda] [--workers N]
        [--batch B] [--size S] [--batches K] [--images N] [--per-shard M]
        [--root DIR] [--quick] [--out DIR] [--name NAME] [--no-http]
        [--repeats R]

--repeats R measures every loader R times, round after round, and keeps
each one's best (a shared machine's other load only ever slows a run down);
the load average before and after is recorded.

Shards are written once (Python's tarfile) from the ImageNet-like folder of
bench/images_vs_torch.py (the same generated JPEGs), under /tmp unless
--root. webdataset's peer decodes with PIL and crops as torchvision does
(torchvision's transforms when installed, else the same PIL calls:
images_vs_torch.PILFolder), shuffles shards and a 1000-sample buffer, and
splits shards over its workers; pinloader shuffles with seed 0 and
shuffle_buffer 1000. Over HTTP, pinloader's indexes are cached beforehand
and its shard cache emptied, so the measured batches fetch every shard they
read; webdataset streams each shard with curl (its default for http URLs).
Writes NAME.json and NAME.md (machine, date, commit, versions) into --out,
else $PL_GPU_LOGS, else ".".
"""
import argparse
import io
import os
import shutil
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import benchinfo  # noqa: E402
import images_vs_torch as ivt  # noqa: E402


def write_shards(folder, shard_dir, per_shard):
    """The folder's images in ImageFolder order, per_shard to a tar."""
    files = ivt.image_files(folder)
    marker = os.path.join(shard_dir, ".complete-%d-%d" % (len(files), per_shard))
    paths = [os.path.join(shard_dir, "train-%06d.tar" % s)
             for s in range((len(files) + per_shard - 1) // per_shard)]
    if os.path.exists(marker):
        return paths, files
    os.makedirs(shard_dir, exist_ok=True)
    for s, path in enumerate(paths):
        with tarfile.open(path + ".tmp", "w") as t:
            for i in range(s * per_shard, min(len(files), (s + 1) * per_shard)):
                src, label = files[i]
                for ext, data in (("jpg", open(src, "rb").read()), ("cls", b"%d" % label)):
                    ti = tarfile.TarInfo("%06d.%s" % (i, ext))
                    ti.size = len(data)
                    t.addfile(ti, io.BytesIO(data))
        os.replace(path + ".tmp", path)
    open(marker, "w").close()
    return paths, files


# ---------------------------------------------------------------- peers

def pinloader_shards(urls, size, batch, workers, device, **kw):
    import pinloader
    ds = pinloader.datasets.Shards(urls, fields={"image": "jpg", "label": "cls"}, size=size,
                                   train=True, shuffle_buffer=1000, **kw)
    return pinloader.DataLoader(ds, batch_size=batch, shuffle=True, seed=0, num_workers=workers,
                                drop_last=True, device=device)


def _pil_transform(size):
    """bytes -> uint8 [3, size, size]: torchvision's when installed, else
    images_vs_torch.PILFolder's PIL calls (the same operations)."""
    import numpy as np
    import torch
    from PIL import Image
    try:
        from torchvision import transforms as T
        tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.PILToTensor()])
        return lambda data: tf(Image.open(io.BytesIO(data)).convert("RGB"))
    except ImportError:
        pf = ivt.PILFolder([], size)

        def run(data):
            img = Image.open(io.BytesIO(data)).convert("RGB")
            i, j, h, w = pf.get_params(*img.size)
            img = img.crop((j, i, j + w, i + h)).resize(
                (size, size), getattr(Image, "Resampling", Image).BILINEAR)
            if torch.rand(1) < 0.5:
                img = img.transpose(getattr(Image, "Transpose", Image).FLIP_LEFT_RIGHT)
            return torch.as_tensor(np.array(img, copy=True)).permute(2, 0, 1)
        return run


class _Sample:
    """A picklable map for webdataset's pipeline (worker processes)."""

    def __init__(self, size):
        self.size, self.tf = size, None

    def __call__(self, s):
        if self.tf is None:
            self.tf = _pil_transform(self.size)
        return self.tf(s["jpg"]), int(s["cls"])


def webdataset_loader(urls, size, batch, workers, pin):
    import torch
    import webdataset as wds
    ds = (wds.WebDataset(urls, shardshuffle=True, nodesplitter=wds.single_node_only)
          .shuffle(1000).map(_Sample(size)))
    return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=pin,
                                       persistent_workers=workers > 0, drop_last=True)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--workers", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batches", type=int)
    ap.add_argument("--images", type=int)
    ap.add_argument("--per-shard", type=int, default=200)
    ap.add_argument("--root")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--name")
    a = ap.parse_args()
    gpu = a.device == "cuda"
    a.workers = a.workers or (2 if a.quick else 16 if gpu else 2)
    a.batch = a.batch or (16 if a.quick else 256 if gpu else 64)
    a.batches = a.batches or (4 if a.quick else 40 if gpu else 20)
    a.images = a.images or (160 if a.quick else 12000 if gpu else 2000)
    if a.quick:
        a.per_shard = min(a.per_shard, 20)
    root = a.root or os.path.join(tempfile.gettempdir(), "pinloader-bench-images-%d" % a.images)
    ivt.make_folder(root, a.images, 100, os.cpu_count())
    paths, files = write_shards(root, root + "-shards-%d" % a.per_shard, a.per_shard)
    ivt.warm_page_cache([(p, 0) for p in paths])
    classes = 1 + max(label for _, label in files)
    info = benchinfo.collect(a.device)
    info.update(images=len(files), shards=len(paths), per_shard=a.per_shard, workers=a.workers,
                batch=a.batch, size=a.size, batches=a.batches)
    runs = [("pinloader Shards, local", lambda: pinloader_shards(
        paths, a.size, a.batch, a.workers, a.device), False),
        ("webdataset + torch DataLoader, local", lambda: webdataset_loader(
            paths, a.size, a.batch, a.workers, gpu), True)]
    server = tmp = None
    notes = []
    if not a.no_http:
        from shard_servers import NGINX, FaultServer, Nginx
        tmp = tempfile.mkdtemp(prefix="pinloader-bench-http-")
        if NGINX is None:  # the GPU box: no Debian packages
            server, srv_name = FaultServer(os.path.dirname(paths[0])), "Python http.server"
            notes.append("no nginx here: HTTP served by Python's ThreadingHTTPServer "
                         "(python/tests/shard_servers.py), itself a bottleneck")
        else:
            server, srv_name = Nginx(os.path.dirname(paths[0]), os.path.join(tmp, "nginx")), "nginx"
        if True:
            urls = [server.url + "/" + os.path.basename(p) for p in paths]
            cache = os.path.join(tmp, "cache")

            def remote(readahead):
                # indexes cached, shards not: the measured batches fetch them
                pinloader_shards(urls, a.size, a.batch, 0, "cpu", cache_dir=cache,
                                 readahead="ranges")
                for f in os.listdir(cache):
                    if f.endswith(".tar"):
                        os.unlink(os.path.join(cache, f))
                return pinloader_shards(urls, a.size, a.batch, a.workers, a.device,
                                        cache_dir=cache, readahead=readahead)
            runs += [("pinloader Shards, %s loopback, readahead=whole" % srv_name,
                      lambda: remote("whole"), False),
                     ("pinloader Shards, %s loopback, readahead=ranges" % srv_name,
                      lambda: remote("ranges"), False)]
            if shutil.which("curl"):
                runs.append(("webdataset + torch DataLoader, %s loopback (curl)" % srv_name,
                             lambda: webdataset_loader(urls, a.size, a.batch, a.workers, gpu), True))
            else:
                notes.append("webdataset over HTTP skipped: no curl command")
    res, rows = [], []
    load0 = os.getloadavg()
    best = {}
    try:
        for _ in range(a.repeats):
            for name, make, copy in runs:
                try:
                    loader = make()
                except Exception as e:  # no libcurl.so.4 on this machine, say
                    notes.append("%s: not run: %s" % (name, e))
                    print("%-60s not run: %s" % (name, e), flush=True)
                    continue
                rate = ivt.measure(loader, a.batches, a.device, copy, a.batch, a.size, classes)
                del loader
                best[name] = max(best.get(name, 0), rate)
                print("%-60s %10.0f images/s" % (name, rate), flush=True)
        res = [{"loader": name, "images_per_s": best[name]} for name, _, _ in runs if name in best]
    finally:
        if server:
            server.close()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    base = {r["loader"]: r["images_per_s"] for r in res}
    wds_local = base.get("webdataset + torch DataLoader, local")
    local = base.get("pinloader Shards, local")
    for r in res:
        r["vs_webdataset_local"] = r["images_per_s"] / wds_local if wds_local else None
        r["vs_pinloader_local"] = r["images_per_s"] / local if local else None
        rows.append([r["loader"], r["images_per_s"],
                     "%.2fx" % r["vs_webdataset_local"] if wds_local else "",
                     "%.2fx" % r["vs_pinloader_local"] if local else ""])
    notes.append("%d images in %d shards of %d, %d workers, batch %d, size %d, %d batches measured "
                 "after the first; device %s; best of %d rounds. Load average (1, 5, 15 min) "
                 "%.1f %.1f %.1f before, %.1f %.1f %.1f after." % (
                     len(files), len(paths), a.per_shard, a.workers, a.batch, a.size, a.batches,
                     a.device, a.repeats, *load0, *os.getloadavg()))
    info["loadavg_before"], info["loadavg_after"] = load0, os.getloadavg()
    benchinfo.write(a.out, a.name or "shards-%s" % a.device, info, res,
                    ["loader", "images/s", "vs webdataset local", "vs pinloader local"], rows, notes)


if __name__ == "__main__":
    main()
