"""Image folder throughput: torchvision's ImageFolder + RandomResizedCrop +
RandomHorizontalFlip + PILToTensor (uint8) through torch's DataLoader,
against pinloader.datasets.ImageFolder, both into the GPU (or the CPU).

    python3 bench/images_vs_torch.py [--root DIR] [--images 12000] [--workers 16]
        [--batch 256] [--size 224] [--batches 40] [--device cuda] [--json OUT]

Without --root, generates an ImageNet-like folder (100 classes, JPEG q90,
400-640 x 300-480) under /tmp once. Prints images/s and images/s per core.
"""
import argparse
import json
import os
import time

import numpy as np


def make_folder(root, n, classes=100, seed=0):
    from PIL import Image
    marker = os.path.join(root, ".complete-%d" % n)
    if os.path.exists(marker):
        return
    rng = np.random.default_rng(seed)
    for i in range(n):
        d = os.path.join(root, "class%03d" % (i % classes))
        os.makedirs(d, exist_ok=True)
        w, h = int(rng.integers(400, 641)), int(rng.integers(300, 481))
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([np.sin(xx / rng.uniform(5, 40) + yy / rng.uniform(5, 40)) for _ in range(3)], -1)
        img = np.clip(128 + 100 * base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(d, "img%06d.jpg" % i), quality=90)
    open(marker, "w").close()


def run(loader, batches, device):
    import torch
    it = iter(loader)
    next(it)  # workers started, first batch
    t0, n = time.perf_counter(), 0
    for _ in range(batches):
        try:
            x = next(it)[0]
        except StopIteration:
            it = iter(loader)
            x = next(it)[0]
        if device == "cuda":
            x = x.to(device, non_blocking=True)
        n += len(x)
    if device == "cuda":
        torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/pinloader-imagenet-like")
    ap.add_argument("--images", type=int, default=12000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    import pinloader
    if a.device == "cuda" and not torch.cuda.is_available():
        a.device = "cpu"
    make_folder(a.root, a.images)
    res = {"workers": a.workers, "batch": a.batch, "size": a.size, "device": a.device,
           "images": a.images, "cores": os.cpu_count(), "torch": torch.__version__}
    try:
        import torchvision
        from torchvision import datasets as tvd, transforms as T
        tf = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.PILToTensor()])
        tl = torch.utils.data.DataLoader(tvd.ImageFolder(a.root, tf), batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers, pin_memory=a.device == "cuda",
                                         persistent_workers=True, drop_last=True)
        res["torchvision"] = torchvision.__version__
        res["torch_images_s"] = run(tl, a.batches, a.device)
    except ImportError:
        res["torch_images_s"] = None
    ds = pinloader.datasets.ImageFolder(a.root, size=a.size)
    pl = pinloader.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                              device=a.device, drop_last=True)
    res["pinloader_images_s"] = run(pl, a.batches, "cpu")  # pinloader copies itself
    for k in ("torch", "pinloader"):
        v = res["%s_images_s" % k]
        if v:
            res["%s_images_s_per_worker" % k] = v / a.workers
    if res["torch_images_s"]:
        res["ratio"] = res["pinloader_images_s"] / res["torch_images_s"]
    print(json.dumps(res, indent=1))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
