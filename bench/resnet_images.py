"""A ResNet-50 training step fed from the JPEG folder (issue 28): the model
(bf16 autocast, channels_last, SGD, batch 256) on synthetic data already on
the GPU, against the same model fed by pinloader.datasets.ImageFolder
(RandomResizedCrop(224) + flip, decode=cpu / auto / gpu) with the GPU
transforms to bf16 channels_last normalized, in the same run; and each
loader's time to its first batch (iter() + next(), CUDA already started).

    python3 bench/resnet_images.py [--decode cpu,auto] [--workers 16]
        [--steps 160] [--out DIR] [--name NAME]

The folder is bench/images_vs_torch.py's generated ImageNet-like one
(12,000 JPEGs under /tmp, made once). Each loader's loop runs 20 warm-up
steps, then --steps timed steps (160 x 256 = 40,960 images, more than three
passes over the folder), the synthetic loop the same. Writes NAME.json and
NAME.md (machine, date, commit, versions) into --out, else $PL_GPU_LOGS,
else "."."""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import benchinfo  # noqa: E402
import images_vs_torch as ivt  # noqa: E402

MEAN = (0.485, 0.456, 0.406)  # ConvertImageDtype scales uint8 to [0, 1] first
STD = (0.229, 0.224, 0.225)


def make_model(torch):
    import torchvision

    m = torchvision.models.resnet50(num_classes=100).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    return m, opt


def train_rate(torch, m, opt, batches, warmup, steps):
    """Images/s of `steps` training steps after `warmup` steps."""
    it = iter(batches)

    def run(k):
        n = 0
        for _ in range(k):
            x, y = next(it)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(m(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            n += x.shape[0]
        return n
    run(warmup)
    torch.cuda.synchronize()
    t = time.perf_counter()
    n = run(steps)
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t)


def forever(loader):
    while True:
        yield from loader


def loader_for(pl, root, mode, workers, batch):
    T = pl.transforms
    ds = pl.datasets.ImageFolder(root, size=224, decode=mode)
    import torch

    return pl.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, device="cuda",
                         drop_last=True,
                         transforms=[T.ConvertImageDtype(torch.bfloat16), T.Normalize(MEAN, STD),
                                     T.ChannelsLast()])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decode", default="cpu,auto")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--images", type=int, default=12000)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--out")
    ap.add_argument("--name", default="resnet50-images")
    a = ap.parse_args()
    root = "/tmp/pinloader-imagenet-like-%d-%d" % (a.images, a.classes)
    ivt.make_folder(root, a.images, a.classes, min(benchinfo.cores(), 16))  # before CUDA
    ivt.warm_page_cache(ivt.image_files(root))
    import torch
    import pinloader as pl

    if not torch.cuda.is_available():
        sys.exit("resnet_images.py needs a CUDA device")
    info = benchinfo.collect("cuda")
    torch.backends.cudnn.benchmark = True
    m, opt = make_model(torch)
    x = torch.randn(a.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch,), device="cuda")
    syn = train_rate(torch, m, opt, forever([(x, y)]), a.warmup, a.steps)
    res = {"batch": a.batch, "steps": a.steps, "warmup": a.warmup, "workers": a.workers,
           "root": root, "synthetic_images_s": syn, "loaders": {}}
    rows = [["synthetic data on the GPU", syn, "1.000", "-"]]
    for mode in [d for d in a.decode.split(",") if d]:
        ld = loader_for(pl, root, mode, a.workers, a.batch)
        t0 = time.perf_counter()
        it = iter(ld)
        xb, yb = next(it)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        assert xb.dtype == torch.bfloat16 and xb.is_contiguous(memory_format=torch.channels_last)
        assert tuple(xb.shape) == (a.batch, 3, 224, 224) and yb.dtype == torch.int64
        del it
        rate = train_rate(torch, m, opt, forever(ld), a.warmup, a.steps)
        rep = [f["text"] for f in ld.report(json=True)["findings"]
               if f.get("stage") in ("decode", "verdict", "workers")]
        ld.close()
        res["loaders"][mode] = {"images_s": rate, "of_synthetic": rate / syn, "first_batch_s": first,
                                "report": rep}
        rows.append(["pinloader ImageFolder, decode=%s" % mode, rate, "%.3f" % (rate / syn),
                     "%.2f" % first])
        print("decode=%s: %.0f images/s, %.1f%% of synthetic (%.0f), first batch %.2f s"
              % (mode, rate, 100 * rate / syn, syn, first), flush=True)
    notes = ["ResNet-50 (100 classes), bf16 autocast, channels_last, SGD momentum, batch %d: %d "
             "warm-up then %d timed steps per row, in one process on one GPU. Loaders: %d workers, "
             "RandomResizedCrop(224) + flip, then on the GPU ConvertImageDtype(bf16), Normalize, "
             "ChannelsLast; %s (12,000 JPEGs, 400-640 x 300-480, q90). `first batch`: iter() + "
             "next() with CUDA and the model already up." % (a.batch, a.warmup, a.steps,
                                                             a.workers, root)]
    benchinfo.write(a.out, a.name, info, res,
                    ["feed", "images/s", "of synthetic", "first batch s"], rows, notes)


if __name__ == "__main__":
    main()
