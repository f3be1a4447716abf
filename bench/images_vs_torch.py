"""Image folder throughput (issue 13): torchvision's ImageFolder +
RandomResizedCrop + RandomHorizontalFlip + PILToTensor (uint8) through
torch's DataLoader, against pinloader.datasets.ImageFolder, on the same
generated folder, in the same run, into the GPU or on the CPU.

    python3 bench/images_vs_torch.py [--device cuda|cpu] [--workers 16]
        [--batch 256] [--size 224] [--batches 40] [--images 12000]
        [--root DIR] [--require-torchvision] [--quick] [--out DIR] [--name N]
        [--decode cpu,auto,gpu]

  --device cuda   batches end in GPU memory: torch pins (pin_memory=True)
                  and copies with .to(non_blocking=True); pinloader copies
                  itself. --device cpu: batches stay in (pageable) host memory.
  --decode LIST   pinloader's decode modes to measure, each in turn (default
                  cpu): cpu (the workers), auto (workers + nvJPEG, split by
                  measured rates), gpu (nvJPEG for every JPEG it takes).
                  Each mode's loader report's decode line is kept.
  --quick         a correctness run of seconds: 96 images, 2 workers, batch
                  16, 4 batches (numbers mean nothing).
  Defaults: --device cuda 12,000 images, 16 workers, batch 256, 40 batches
  (issue 13's setup); --device cpu 2,000 images, 2 workers, batch 64, 20.
  --require-torchvision  fail when torchvision is missing (the GPU box).
                  Without it and without torchvision, the torch peer is
                  torch's DataLoader over the same PIL operations torchvision
                  applies to PIL images (pil_loader, get_params, crop, resize
                  BILINEAR, flip, PILToTensor), labelled "torch+PIL".

Without --root, generates an ImageNet-like folder (100 classes, JPEG q90,
400-640 x 300-480 pixels) under /tmp once, in parallel. Writes NAME.json and
NAME.md (default name images-DEVICE) into --out, else $PL_GPU_LOGS, else ".":
images/s, per worker and per core, with machine, date, commit and versions.
"""
import argparse
import gc
import math
import os
import random
import sys
import time

import numpy as np

import benchinfo


# ---------------------------------------------------------------- the folder

def _make_one(job):
    root, i, classes, seed = job
    from PIL import Image
    rng = np.random.default_rng([seed, i])
    d = os.path.join(root, "class%03d" % (i % classes))
    w, h = int(rng.integers(400, 641)), int(rng.integers(300, 481))
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([np.sin(xx / rng.uniform(5, 40) + yy / rng.uniform(5, 40)) for _ in range(3)], -1)
    img = np.clip(128 + 100 * base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    Image.fromarray(img).save(os.path.join(d, "img%06d.jpg" % i), quality=90)


def make_folder(root, n, classes, procs, seed=0):
    """n JPEGs in `classes` folders; image i is a function of (seed, i)."""
    marker = os.path.join(root, ".complete-%d-%d" % (n, classes))
    if os.path.exists(marker):
        return
    for c in range(min(n, classes)):
        os.makedirs(os.path.join(root, "class%03d" % c), exist_ok=True)
    jobs = [(root, i, classes, seed) for i in range(n)]
    t0 = time.perf_counter()
    if procs > 1:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(procs) as pool:
            pool.map(_make_one, jobs, chunksize=16)
    else:
        for j in jobs:
            _make_one(j)
    open(marker, "w").close()
    print("generated %d images in %s (%.1f s)" % (n, root, time.perf_counter() - t0), flush=True)


def image_files(root):
    """ImageFolder's order: classes sorted, files of sorted(os.walk())."""
    out = []
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    for label, c in enumerate(classes):
        for dirpath, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for name in sorted(names):
                if name.lower().endswith((".jpg", ".jpeg", ".png")):
                    out.append((os.path.join(dirpath, name), label))
    return out


def warm_page_cache(files):
    """Read every file once so that neither loader pays the disk."""
    total = 0
    for path, _ in files:
        with open(path, "rb") as f:
            total += len(f.read())
    return total


# ---------------------------------------------------------------- torch peers

def torchvision_loader(root, size, batch, workers, pin, train=True):
    import torch
    from torchvision import datasets as tvd, transforms as T
    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.PILToTensor()] if train
                   else [T.Resize(size * 256 // 224), T.CenterCrop(size), T.PILToTensor()])
    return torch.utils.data.DataLoader(tvd.ImageFolder(root, tf), batch_size=batch, shuffle=True,
                                       num_workers=workers, pin_memory=pin,
                                       persistent_workers=workers > 0, drop_last=True)


class PILFolder:
    """torchvision's ImageFolder + RandomResizedCrop(size) + flip +
    PILToTensor on PIL images, for machines without torchvision: the same
    PIL calls (transforms.py get_params with torch's generator, F.crop then
    F.resize BILINEAR, F.hflip, PILToTensor)."""

    def __init__(self, files, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
        self.files, self.size, self.scale, self.ratio = files, size, scale, ratio

    def __len__(self):
        return len(self.files)

    def get_params(self, width, height):
        import torch
        area = height * width
        log_ratio = torch.log(torch.tensor(self.ratio))
        for _ in range(10):
            target_area = area * torch.empty(1).uniform_(self.scale[0], self.scale[1]).item()
            aspect = math.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1]).item())
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                i = torch.randint(0, height - h + 1, size=(1,)).item()
                j = torch.randint(0, width - w + 1, size=(1,)).item()
                return i, j, h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(self.ratio):
            w, h = width, int(round(width / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            h, w = height, int(round(height * max(self.ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __getitem__(self, index):
        import torch
        from PIL import Image
        path, label = self.files[index]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        i, j, h, w = self.get_params(*img.size)
        img = img.crop((j, i, j + w, i + h)).resize((self.size, self.size), getattr(Image, "Resampling", Image).BILINEAR)
        if torch.rand(1) < 0.5:
            img = img.transpose(getattr(Image, "Transpose", Image).FLIP_LEFT_RIGHT)
        x = torch.as_tensor(np.array(img, copy=True)).view(self.size, self.size, 3).permute(2, 0, 1)
        return x, label


def pil_loader(files, size, batch, workers, pin):
    import torch
    return torch.utils.data.DataLoader(PILFolder(files, size), batch_size=batch, shuffle=True,
                                       num_workers=workers, pin_memory=pin,
                                       persistent_workers=workers > 0, drop_last=True)


# ---------------------------------------------------------------- measuring

def check_batch(x, y, batch, size, device, classes):
    """A benchmark of wrong batches is no benchmark."""
    assert tuple(x.shape) == (batch, 3, size, size), x.shape
    assert str(x.dtype) == "torch.uint8", x.dtype
    assert x.device.type == device, (x.device, device)
    assert int(y.min()) >= 0 and int(y.max()) < classes, (y.min(), y.max())


def measure(loader, batches, device, copy, batch, size, classes, warmup=1):
    """Images/s over `batches` batches after the first `warmup` (workers
    started, queues filled; a whole epoch with --warmup-epoch, so that a
    start that goes on in the background, decode=auto's nvJPEG, is not
    timed). copy: the batch is moved to the device here (torch)."""
    import torch
    it = iter(loader)

    def one():
        nonlocal it
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            x, y = next(it)
        if copy and device == "cuda":
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        return x, y

    for _ in range(max(1, warmup)):
        x, y = one()
    if device == "cuda":
        torch.cuda.synchronize()
    check_batch(x, y, batch, size, device, classes)
    t0, n = time.perf_counter(), 0
    for _ in range(batches):
        x, y = one()
        n += len(x)
    if device == "cuda":
        torch.cuda.synchronize()
    rate = n / (time.perf_counter() - t0)
    check_batch(x, y, batch, size, device, classes)
    del it
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", help="an existing ImageFolder root (default: generated under /tmp)")
    ap.add_argument("--images", type=int)
    ap.add_argument("--classes", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batches", type=int)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--require-torchvision", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--name")
    ap.add_argument("--eval", action="store_true",
                    help="eval transforms: Resize(size*256/224) + CenterCrop(size) (torchvision "
                         "needed), pinloader ImageFolder(train=False)")
    ap.add_argument("--warmup-epoch", action="store_true",
                    help="time the batches after one whole epoch (every loader alike), not after "
                         "the first batch: decode=auto starts nvJPEG in the background")
    ap.add_argument("--decode", default="cpu",
                    help="comma-separated pinloader decode modes: cpu, auto, gpu")
    a = ap.parse_args()
    modes = [m for m in a.decode.split(",") if m]
    if not modes or any(m not in ("cpu", "auto", "gpu") for m in modes):
        sys.exit("--decode: a comma-separated list of cpu, auto, gpu")
    quick = dict(images=96, classes=4, workers=2, batch=16, batches=4)
    full = dict(images=12000, classes=100, workers=16, batch=256, batches=40)
    # The 2-core machine's comparison: 2 workers each, a smaller folder of
    # the same images (it is read from the page cache either way).
    cpu = dict(images=2000, classes=100, workers=2, batch=64, batches=20)
    for k, v in (quick if a.quick else cpu if a.device == "cpu" else full).items():
        if getattr(a, k) is None:
            setattr(a, k, v)

    try:
        import torchvision  # noqa: F401
        have_tv = True
    except ImportError:
        have_tv = False
        if a.require_torchvision or a.eval:
            sys.exit("torchvision is required here (--require-torchvision or --eval) and does "
                     "not import")
    # Generated (forked processes) before anything touches CUDA.
    root = a.root or "/tmp/pinloader-imagenet-like-%d-%d" % (a.images, a.classes)
    if not a.root:
        make_folder(root, a.images, a.classes, min(benchinfo.cores(), 16))
    import torch
    import pinloader
    if a.device == "cuda" and not (torch.cuda.is_available() and pinloader.cuda_available()):
        sys.exit("--device cuda: no usable CUDA device (torch %s, pinloader %s); use --device cpu"
                 % (torch.cuda.is_available(), pinloader.cuda_available()))
    files = image_files(root)
    classes = len({lbl for _, lbl in files})
    nbytes = warm_page_cache(files)
    cuda = a.device == "cuda"
    info = benchinfo.collect(a.device)
    res = {"workers": a.workers, "batch": a.batch, "size": a.size, "batches": a.batches,
           "images": len(files), "classes": classes, "mean_file_bytes": nbytes / len(files),
           "root": root, "quick": a.quick,
           "transform": ("Resize(%d) + CenterCrop(%d), uint8" % (a.size * 256 // 224, a.size)
                         if a.eval else "RandomResizedCrop(%d) + flip, uint8" % a.size)}
    random.seed(0)
    torch.manual_seed(0)

    peer = "torchvision" if have_tv else "torch+PIL"
    tl = (torchvision_loader(root, a.size, a.batch, a.workers, cuda, not a.eval) if have_tv
          else pil_loader(files, a.size, a.batch, a.workers, cuda))
    res["peer"] = peer
    warm = len(files) // a.batch if a.warmup_epoch else 1
    res["warmup_batches"] = warm
    res["torch_images_s"] = measure(tl, a.batches, a.device, True, a.batch, a.size, classes, warm)
    del tl
    gc.collect()  # the peer's worker processes end before pinloader runs

    for mode in modes:
        ds = pinloader.datasets.ImageFolder(root, size=a.size, decode=mode, train=not a.eval)
        if len(ds) != len(files):
            sys.exit("pinloader lists %d images, the folder has %d" % (len(ds), len(files)))
        pl = pinloader.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                  device=a.device, drop_last=True)
        key = "pinloader" if mode == modes[0] else "pinloader_decode_%s" % mode
        res["%s_images_s" % key] = measure(pl, a.batches, a.device, False, a.batch, a.size,
                                           classes, warm)
        res["%s_decode" % key] = mode
        res["%s_report" % key] = [f["text"] for f in pl.report(json=True)["findings"]
                                  if f.get("stage") in ("decode", "verdict", "workers", "cpu")]
        res["pinloader_replaced"] = ds.replaced
        pl.close()

    busy = min(a.workers, info["cores"])
    for k in ("torch", "pinloader"):
        v = res["%s_images_s" % k]
        res["%s_images_s_per_worker" % k] = v / a.workers
        res["%s_images_s_per_core" % k] = v / busy
    res["ratio"] = res["pinloader_images_s"] / res["torch_images_s"]

    name = a.name or "images-%s%s" % (a.device, "-quick" if a.quick else "")
    rows = [["pinloader ImageFolder, decode=%s" % modes[0], res["pinloader_images_s"],
             res["pinloader_images_s_per_core"], "%.2fx" % res["ratio"]]]
    for mode in modes[1:]:
        v = res["pinloader_decode_%s_images_s" % mode]
        rows.append(["pinloader ImageFolder, decode=%s" % mode, v, v / busy,
                     "%.2fx" % (v / res["torch_images_s"])])
    rows += [
            ["%s ImageFolder, torch DataLoader" % peer, res["torch_images_s"],
             res["torch_images_s_per_core"], "1.00x"]]
    notes = ["%d images (mean %.0f KB, %d classes) in %s; %s, "
             "uint8 [3, %d, %d]; batch %d, %d workers each, shuffled, %d batches timed after the "
             "first %d; into %s." % (len(files), res["mean_file_bytes"] / 1e3, classes, root,
                                     res["transform"].rsplit(",", 1)[0],
                                     a.size, a.size, a.batch, a.workers, a.batches, warm,
                                     "GPU memory (torch: pin_memory + .to(non_blocking=True))"
                                     if cuda else "host memory"),
             "Per core: images/s / min(workers, cores) = / %d." % busy]
    if not have_tv:
        notes.append("torchvision is not installed here: the peer runs torchvision's PIL "
                     "operations itself (bench/images_vs_torch.py PILFolder).")
    if a.quick:
        notes.append("--quick: a correctness run; the numbers mean nothing.")
    benchinfo.write(a.out, name, info, res,
                    ["loader", "images/s", "images/s per core", "vs torch"], rows, notes)


if __name__ == "__main__":
    main()
