"""pinloader.transforms against an independent numpy computation of the
documented definitions (docs/transforms.md): the random draws (splitmix64
of seed, epoch, index, field), zero-padded crop, flip, (x / 255 - mean) /
std in float32 and one rounding to the output dtype; the same bytes for any
num_workers; on a GPU, CUDA batches equal CPU batches bit for bit."""
import math
import os

import numpy as np
import pytest

import pinloader
from pinloader import transforms as T

from conftest import write_cifar

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.247, 0.243, 0.261)
M64 = (1 << 64) - 1


def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def draw(seed, epoch, index, field, size, padded, p):
    key = mix64(seed ^ mix64(epoch ^ mix64(index ^ mix64(field))))

    def below(r, n):
        return ((r >> 32) * n) >> 32
    oy = below(mix64((key + 1) & M64), padded[0] - size[0] + 1)
    ox = below(mix64((key + 2) & M64), padded[1] - size[1] + 1)
    flip = (mix64((key + 3) & M64) >> 40) < math.floor(p * 2 ** 24)
    return oy, ox, flip


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (no NaNs here)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


def reference(chw, seed, epoch, index, pad, size, flip_p, mean, std, out, layout, fill=0):
    """One CIFAR image (uint8 CHW) through the recipe, in numpy."""
    c, h, w = chw.shape
    padded = np.full((c, h + 2 * pad, w + 2 * pad), fill, np.uint8)
    padded[:, pad:pad + h, pad:pad + w] = chw
    oy, ox, flip = draw(seed, epoch, index, 0, size, padded.shape[1:], flip_p)
    img = padded[:, oy:oy + size[0], ox:ox + size[1]]
    if flip:
        img = img[:, :, ::-1]
    x = img.astype(np.float32) / np.float32(255)
    if mean is not None:
        x = (x - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None, None]
    if layout == "hwc":
        x = x.transpose(1, 2, 0)
    x = np.ascontiguousarray(x, np.float32)
    if out == "float32":
        return x.view(np.uint32)
    if out == "float16":
        return x.astype(np.float16).view(np.uint16)
    return bf16_bits(x)


@pytest.fixture
def cifar(tmp_path):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(83, 3, 32, 32), dtype=np.uint8)
    labels = rng.integers(0, 10, size=83, dtype=np.uint8)
    path = write_cifar(tmp_path / "data_batch_1.bin", images, labels)
    return pinloader.datasets.CIFAR10([path]), images, labels


def recipe(out="float32", pad=4, size=32, layout="chw", p=0.5):
    ts = [T.RandomCrop(size, padding=pad), T.RandomHorizontalFlip(p),
          T.ConvertImageDtype(out), T.Normalize(MEAN, STD), T.ToInt64()]
    if layout == "hwc":
        ts.append(T.ChannelsLast())
    return ts


def bits_of(field):
    """A batch field's elements as unsigned ints of their width (works for
    bfloat16 through torch, whose DLPack import knows it)."""
    import torch
    t = torch.utils.dlpack.from_dlpack(field).cpu()
    if t.dtype == torch.bfloat16 or t.dtype == torch.float16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype == torch.float32:
        return t.view(torch.int32).numpy().view(np.uint32)
    return t.numpy()


@pytest.mark.parametrize("out", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_recipe_matches_numpy(cifar, out, layout):
    pytest.importorskip("torch")
    ds, images, labels = cifar
    loader = pinloader.DataLoader(ds, batch_size=16, shuffle=True, seed=9, num_workers=2,
                                  transforms=recipe(out, layout=layout))
    seen = 0
    for batch in loader.batches():
        x, y = bits_of(batch.field(0)), bits_of(batch.field(1))
        assert y.dtype == np.int64
        for i, idx in enumerate(batch.sample_indices):
            want = reference(images[idx], 9, batch.epoch, idx, 4, (32, 32), 0.5, MEAN, STD, out, layout)
            np.testing.assert_array_equal(x[i], want)
            assert y[i] == labels[idx]
            seen += 1
    assert seen == 83


def test_odd_crop_without_normalize_numpy_output(cifar):
    ds, images, _ = cifar
    ts = [T.RandomCrop((27, 30), padding=3, fill=200), T.RandomHorizontalFlip(0.7)]
    loader = pinloader.DataLoader(ds, batch_size=10, shuffle=True, seed=2, output="numpy", transforms=ts)
    for batch in loader.batches():
        x = np.from_dlpack(batch.field(0)) if hasattr(np, "from_dlpack") else np.asarray(batch.field(0))
        assert x.shape[1:] == (3, 27, 30) and x.dtype == np.uint8
        for i, idx in enumerate(batch.sample_indices):
            c, h, w = images[idx].shape
            padded = np.full((c, h + 6, w + 6), 200, np.uint8)
            padded[:, 3:3 + h, 3:3 + w] = images[idx]
            oy, ox, flip = draw(2, batch.epoch, idx, 0, (27, 30), padded.shape[1:], 0.7)
            want = padded[:, oy:oy + 27, ox:ox + 30]
            np.testing.assert_array_equal(x[i], want[:, :, ::-1] if flip else want)


def test_same_bytes_for_any_worker_count(cifar):
    ds, _, _ = cifar

    def epoch_bytes(workers):
        loader = pinloader.DataLoader(ds, batch_size=8, shuffle=True, seed=4, num_workers=workers,
                                      output="numpy", transforms=recipe("float16"))
        return b"".join(np.asarray(x).tobytes() + np.asarray(y).tobytes() for x, y in loader)
    assert epoch_bytes(0) == epoch_bytes(1) == epoch_bytes(5)


def test_draws_cover_offsets_and_flip_half(cifar):
    flips = sum(draw(0, 0, i, 0, (32, 32), (40, 40), 0.5)[2] for i in range(4000))
    assert 1800 < flips < 2200
    offsets = {draw(0, 0, i, 0, (32, 32), (40, 40), 0.5)[:2] for i in range(4000)}
    assert len(offsets) == 81


def test_float32_matches_torch_normalize(cifar):
    torch = pytest.importorskip("torch")
    ds, images, _ = cifar
    ts = [T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)]
    loader = pinloader.DataLoader(ds, batch_size=83, output="torch", transforms=ts)
    (x, _), = list(loader)
    # torchvision's ToTensor + Normalize, written with torch ops
    ref = torch.from_numpy(images).float().div(255)
    ref = ref.sub(torch.tensor(MEAN).view(1, 3, 1, 1)).div(torch.tensor(STD).view(1, 3, 1, 1))
    diff = (x.view(torch.int32).long() - ref.view(torch.int32).long()).abs().max().item()
    assert diff <= 1  # ulps; numpy above is the exact oracle


def test_channels_last_view_and_int64_labels(cifar):
    torch = pytest.importorskip("torch")
    ds, _, labels = cifar
    loader = pinloader.DataLoader(ds, batch_size=16, output="torch",
                                  transforms=recipe("bfloat16", layout="hwc"))
    x, y = next(iter(loader))
    assert x.shape == (16, 3, 32, 32) and x.dtype == torch.bfloat16
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert y.dtype == torch.int64 and y.tolist() == labels[:16].tolist()


def test_bad_lists_are_clear_errors(cifar):
    ds, _, _ = cifar
    with pytest.raises(pinloader.Error, match="crop is larger than the padded image"):
        pinloader.DataLoader(ds, transforms=[T.RandomCrop(48, padding=4)])
    with pytest.raises(pinloader.Error, match="field 'nope': the dataset has no such field"):
        pinloader.DataLoader(ds, transforms=[T.RandomHorizontalFlip(field="nope")])
    with pytest.raises(pinloader.Error, match="given twice"):
        pinloader.DataLoader(ds, transforms=[T.RandomHorizontalFlip(), T.RandomHorizontalFlip()])
    with pytest.raises(ValueError, match="dtype must be float32, bfloat16 or float16"):
        T.ConvertImageDtype("int32")
    with pytest.raises(TypeError, match="pinloader.transforms objects"):
        pinloader.DataLoader(ds, transforms=[lambda x: x])


@pytest.mark.skipif(not pinloader.cuda_available(), reason="no usable CUDA device")
@pytest.mark.parametrize("out", ["float32", "bfloat16", "float16"])
def test_cuda_equals_cpu(cifar, out):
    torch = pytest.importorskip("torch")
    ds, _, _ = cifar

    def epoch(device, workers):
        loader = pinloader.DataLoader(ds, batch_size=16, shuffle=True, seed=1, num_workers=workers,
                                      device=device, transforms=recipe(out, layout="hwc"))
        xs, ys = zip(*[(x.cpu().contiguous(), y.cpu()) for x, y in loader])
        return torch.cat(xs), torch.cat(ys)
    cx, cy = epoch("cpu", 2)
    for w in (0, 3):
        gx, gy = epoch("cuda", w)
        assert torch.equal(gx.view(torch.int16 if out != "float32" else torch.int32),
                           cx.view(torch.int16 if out != "float32" else torch.int32))
        assert torch.equal(gy, cy)


# ------------------------------------------------- labels through transforms

def _label_sources(tmp_path):
    """{name: (open(label_dtype) -> dataset, labels read back from the files
    with numpy, the image's shape, whether the source takes label_dtype)}."""
    from conftest import write_idx
    rng = np.random.default_rng(7)
    n = 23
    out = {}
    idx_img = write_idx(tmp_path / "i-idx3-ubyte", rng.integers(0, 256, (n, 8, 8), dtype=np.uint8))
    idx_lab = write_idx(tmp_path / "l-idx1-ubyte", rng.integers(0, 10, n, dtype=np.uint8))
    out["idx"] = (lambda d: pinloader.datasets.IDX(idx_img, idx_lab, label_dtype=d),
                  np.frombuffer(open(idx_lab, "rb").read()[8:], np.uint8), (8, 8), True)
    cif = write_cifar(tmp_path / "c.bin", rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8),
                      rng.integers(0, 10, n, dtype=np.uint8))
    out["cifar"] = (lambda d: pinloader.datasets.CIFAR10([cif], label_dtype=d),
                    np.fromfile(cif, np.uint8).reshape(n, 3073)[:, 0], (3, 32, 32), True)
    rec = np.zeros((n, 2 + 3 * 6 * 6), np.uint8)
    rec[:, 1] = rng.integers(0, 200, n)
    rec[:, 2:] = rng.integers(0, 256, (n, 108))
    rec.tofile(tmp_path / "r.bin")
    out["records"] = (lambda d: pinloader.datasets.Records(
        str(tmp_path / "r.bin"), 0, rec.shape[1],
        [("image", "uint8", (3, 6, 6), 2), ("label", "uint8", (), 1)]),
        np.fromfile(tmp_path / "r.bin", np.uint8).reshape(n, -1)[:, 1], (3, 6, 6), False)
    PIL = pytest.importorskip("PIL.Image")
    root = tmp_path / "folder"
    for c, cls in enumerate(["zeta", "alpha", "mid"]):
        os.makedirs(root / cls)
        for j in range(3 + c):
            arr = rng.integers(0, 256, (12, 14, 3), dtype=np.uint8)
            PIL.fromarray(arr).save(root / cls / ("%d.png" % j))
    names = sorted(os.listdir(root))
    folder_labels = np.array([names.index(cls) for cls in names
                              for _ in os.listdir(root / cls)], np.int64)
    out["images"] = (lambda d: pinloader.datasets.ImageFolder(root, size=10),
                     folder_labels, (3, 10, 10), False)
    return out


def _label_lists(shape):
    size = shape[-1] - 2
    combo = [T.RandomCrop(size, padding=2), T.RandomHorizontalFlip(), T.ConvertImageDtype("bfloat16"),
             T.Normalize(0.5, 0.25), T.ChannelsLast()]
    lists = [None, [T.Normalize(0.5, 0.5)], [T.RandomHorizontalFlip()],
             [T.RandomCrop(size, padding=1)], [T.ConvertImageDtype("float16")], [T.ChannelsLast()],
             combo[:2], combo]
    return lists + [(l or []) + [T.ToInt64()] for l in lists]


def _run_labels(ds, lists, want, label_dtype, device, expect_int64):
    torch = pytest.importorskip("torch")
    for k, xf in enumerate(lists):
        widened = expect_int64 or any(isinstance(t, T.ToInt64) for t in xf or [])
        loader = pinloader.DataLoader(ds, batch_size=4, num_workers=2 * (k % 2), transforms=xf,
                                      device=device)
        for epoch in range(2):  # the second epoch reuses batch buffers
            got = [y.cpu() for _, y in loader]
            assert {str(y.dtype) for y in got} == {"torch.int64" if widened else "torch.uint8"}, xf
            labels = torch.cat(got).numpy()
            assert labels.tolist() == want.tolist(), (label_dtype, xf, epoch)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not pinloader.cuda_available(), reason="no usable CUDA device"))])
@pytest.mark.parametrize("source", ["idx", "cifar", "records", "images"])
def test_labels_survive_every_transform_list(tmp_path, source, device):
    """A field no transform names (the label without ToInt64) is delivered as
    read: it came out as zeros (int64 labels) or stale batch memory (uint8)."""
    open_ds, want, shape, takes_dtype = _label_sources(tmp_path)[source]
    lists = _label_lists(shape)
    for label_dtype in (("int64", "uint8") if takes_dtype else (None,)):
        ds = open_ds(label_dtype)
        expect_int64 = label_dtype == "int64" or source == "images"
        _run_labels(ds, lists, want, label_dtype, device, expect_int64)
