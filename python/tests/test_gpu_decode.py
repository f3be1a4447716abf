"""ImageFolder(decode="gpu" | "auto") on a GPU: a DataLoader's crops from
nvJPEG agree with decode="cpu"'s for the same draws (PSNR >= 35 dB each,
the lowest printed), in train and eval mode; PNG and progressive JPEGs
come back exactly the CPU's, and the report counts them; the GPU's crops
are written in the batch's device memory, and the device transforms read
them there. Skipped without
a GPU or without nvJPEG (scripts/gpu/66-nvjpeg.sh provides it and fails
on a skip)."""
import math

import numpy as np
import pytest

import pinloader
from pinloader import datasets
from pinloader import transforms as T

from test_sources import natural_image

torch = pytest.importorskip("torch")
PIL = pytest.importorskip("PIL.Image")
if not (torch.cuda.is_available() and pinloader.cuda_available()):
    pytest.skip("no usable GPU", allow_module_level=True)

N_BASE = 24


def _folder(root):
    """N_BASE baseline JPEGs (400-640 x 300-480, q90), then a progressive
    one and a PNG."""
    cls = root / "c0"
    cls.mkdir()
    for i in range(N_BASE + 2):
        w, h = 400 + (i * 53) % 241, 300 + (i * 37) % 181
        im = PIL.fromarray(natural_image(w, h, i))
        if i == N_BASE + 1:
            im.save(cls / ("%02d.png" % i))
        else:
            im.save(cls / ("%02d.jpg" % i), quality=90, progressive=(i == N_BASE))
    return str(root)


def _psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def _epoch(root, decode, train, transforms=None):
    ds = datasets.ImageFolder(root, size=224, train=train, decode=decode)
    try:
        # In index order (the crops are still drawn from (seed, epoch, index)),
        # given as a sampler: an explicit order's stream ends with its epoch,
        # so the report's decode counters count this epoch only (the loader's
        # own order goes on into the next one, as far as the prefetch depth).
        dl = pinloader.DataLoader(ds, batch_size=8, seed=5, num_workers=2, device="cuda",
                                  sampler=list(range(len(ds))), transforms=transforms)
        out = [(x.cpu().numpy().copy(), y.cpu().numpy().copy()) for x, y in dl]
    except pinloader.Error as e:
        if "nvJPEG not found" in str(e):
            pytest.skip(str(e))
        raise
    report = dl.report(json=True)
    dl.close()
    return out, report


@pytest.mark.parametrize("train", [True, False])
def test_gpu_crops_agree_with_cpu(tmp_path, train):
    root = _folder(tmp_path)
    want, _ = _epoch(root, "cpu", train)
    got, report = _epoch(root, "gpu", train)
    worst = math.inf
    k = 0
    for (gx, gy), (wx, wy) in zip(got, want):
        assert np.array_equal(gy, wy)
        for g, w in zip(gx, wx):
            if k >= N_BASE:  # progressive, PNG: the CPU path's own bytes
                assert np.array_equal(g, w)
            else:
                p = _psnr(g, w)
                assert p >= 35, (k, p)
                worst = min(worst, p)
            k += 1
    assert k == N_BASE + 2
    print("decode=gpu, train=%s: lowest PSNR %.2f dB over %d crops" % (train, worst, N_BASE))
    t = report["timings"]
    assert t["decode_gpu"] == 1
    assert t["decode_gpu_images"] == N_BASE
    assert t["decode_not_gpu"] == 2 and t["decode_gpu_failed"] == 0
    assert t["decode_gpu_in_place"] == N_BASE  # no host round trip
    assert any(f["stage"] == "decode" for f in report["findings"]) or t["batches"] < 2


def test_auto_splits(tmp_path):
    root = _folder(tmp_path)
    _, report = _epoch(root, "auto", True)
    t = report["timings"]
    assert t["decode_gpu"] == 1
    # The GPU took its share, or was offered it while nvJPEG started in the
    # background (this short epoch may end first: auto never waits for it;
    # tests/gpu/test_gpu_nvjpeg.c holds the start and sees the GPU join).
    assert t["decode_gpu_images"] + t["decode_gpu_warming"] > 0
    assert t["decode_gpu_images"] + t["decode_cpu_images"] == N_BASE + 2
    assert t["decode_gpu_failed"] == 0


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def test_device_transforms_read_the_gpu_crops(tmp_path):
    """The GPU's crops land in the batch's device memory, and the device
    transforms (float32, Normalize, ChannelsLast) run after them on that
    memory: mapped back to 0..255 each crop agrees with decode="cpu"'s
    (PSNR >= 35 dB), the CPU path's samples exactly; every GPU crop was
    written in place."""
    root = _folder(tmp_path)
    recipe = [T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD), T.ChannelsLast()]
    want, _ = _epoch(root, "cpu", True, recipe)
    got, report = _epoch(root, "gpu", True, recipe)
    mean = np.array(MEAN, np.float32).reshape(3, 1, 1)
    std = np.array(STD, np.float32).reshape(3, 1, 1)
    k = 0
    for (gx, gy), (wx, wy) in zip(got, want):
        assert gx.shape == wx.shape and gx.shape[1:] == (3, 224, 224)
        assert np.array_equal(gy, wy)
        for g, w in zip(gx, wx):
            if k >= N_BASE:
                assert np.array_equal(g, w)
            else:
                p = _psnr((g * std + mean) * 255, (w * std + mean) * 255)
                assert p >= 35, (k, p)
            k += 1
    assert k == N_BASE + 2
    t = report["timings"]
    assert t["decode_gpu_images"] == N_BASE and t["decode_gpu_in_place"] == N_BASE
