"""The native token, NumPy and image sources against independent readings:
numpy for tokens and arrays (byte-exact), PIL for images (the same crop,
decoded and resized by PIL, within 35 dB PSNR)."""
import math
import os

import numpy as np
import pytest

import pinloader
from pinloader import datasets

PIL = pytest.importorskip("PIL.Image")


# ---------------------------------------------------------------- tokens

def write_llmc(path, toks, dtype=np.uint16):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1] = (20240520, 1) if dtype == np.uint16 else (20240801, 7)
    header[2] = len(toks)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype=dtype).tobytes())


def test_tokens_stride_matches_numpy(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 50257, 1000).astype(np.uint16)
    b = rng.integers(0, 50257, 333).astype(np.uint16)
    a.tofile(tmp_path / "a.bin")          # nanoGPT raw
    write_llmc(tmp_path / "b.bin", b)      # llm.c shard
    T = 64
    ds = datasets.Tokens([tmp_path / "a.bin", tmp_path / "b.bin"], context=T)
    want = []
    for data in (a, b):
        for k in range((len(data) - 1 - T) // T + 1):
            want.append(data[k * T:k * T + T + 1])
    assert len(ds) == len(want) == 15 + 5
    for i, w in enumerate(want):
        x, y = ds[i]
        assert x.dtype == np.int64 and x.shape == (T,)
        assert np.array_equal(x, w[:-1].astype(np.int64))
        assert np.array_equal(y, w[1:].astype(np.int64))


def test_tokens_random_windows_are_windows_of_one_shard(tmp_path):
    a = np.arange(0, 500, dtype=np.uint32)
    b = np.arange(100000, 100300, dtype=np.uint32)
    write_llmc(tmp_path / "a.bin", a, np.uint32)
    write_llmc(tmp_path / "b.bin", b, np.uint32)
    T = 32
    ds = datasets.Tokens([tmp_path / "a.bin", tmp_path / "b.bin"], context=T, samples=200,
                         dtype="uint32")
    assert len(ds) == 200
    loader = pinloader.DataLoader(ds, batch_size=50, num_workers=2, seed=7, output="numpy")
    starts = []
    for x, y in loader:
        assert x.dtype == np.uint32
        # consecutive tokens inside one shard: never spanning the two
        assert (np.diff(x, axis=1) == 1).all() and (y == x + 1).all()
        starts.extend(x[:, 0].tolist())
    assert len(set(starts)) > 100  # random offsets, not a stride
    # The same windows for any number of workers (a function of seed, epoch, index).
    again = pinloader.DataLoader(ds, batch_size=50, num_workers=0, seed=7, output="numpy")
    assert [v for x, _ in again for v in x[:, 0].tolist()] == starts


def test_tokens_errors(tmp_path):
    (tmp_path / "odd.bin").write_bytes(b"\x01\x02\x03")
    with pytest.raises(pinloader.Error, match="odd.bin: 3 bytes are not a whole number of 2-byte tokens"):
        datasets.Tokens(tmp_path / "odd.bin", context=4)
    write_llmc(tmp_path / "short.bin", np.arange(10))
    with open(tmp_path / "short.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(pinloader.Error, match="the header says 10 tokens"):
        datasets.Tokens(tmp_path / "short.bin", context=4)
    with pytest.raises(pinloader.Error, match="no shard has context"):
        np.arange(8, dtype=np.uint16).tofile(tmp_path / "tiny.bin")
        datasets.Tokens(tmp_path / "tiny.bin", context=8)


# ---------------------------------------------------------------- numpy

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "complex64", "complex128", ">i4", ">f8"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_dtypes_byte_exact(tmp_path, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((7, 3, 2)) * 100).astype(dtype)
    np.save(tmp_path / "x.npy", x)
    ds = datasets.NPY(tmp_path / "x.npy")
    assert len(ds) == 7
    host = x.astype(x.dtype.newbyteorder("=")) if x.dtype.byteorder == ">" else x
    for i in range(7):
        (got,) = ds[i]
        want = host[i]
        if want.dtype.kind == "c":
            want = want.view(want.real.dtype).reshape(want.shape + (2,))
        assert got.tobytes() == np.ascontiguousarray(want).tobytes()


def test_npy_zip_and_npz(tmp_path):
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    y = np.arange(10, dtype=np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    ds = datasets.NPY(tmp_path / "x.npy", tmp_path / "y.npy")
    assert [f.name for f in ds.fields] == ["x", "y"]
    np.savez(tmp_path / "d.npz", image=x, label=y)
    dz = datasets.NPY(tmp_path / "d.npz")
    assert [f.name for f in dz.fields] == ["image", "label"]
    for i in range(10):
        assert np.array_equal(ds[i][0], x[i]) and ds[i][1] == y[i]
        assert np.array_equal(dz[i][0], x[i]) and dz[i][1] == y[i]
    batches = list(pinloader.DataLoader(dz, batch_size=4, output="numpy"))
    assert np.array_equal(np.concatenate([b[0] for b in batches]), x)


def test_npy_refusals(tmp_path):
    np.save(tmp_path / "f.npy", np.asfortranarray(np.zeros((3, 4))))
    with pytest.raises(pinloader.Error, match="f.npy: Fortran-order arrays are not supported"):
        datasets.NPY(tmp_path / "f.npy")
    np.save(tmp_path / "o.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    with pytest.raises(pinloader.Error, match="o.npy: object arrays"):
        datasets.NPY(tmp_path / "o.npy")
    np.savez_compressed(tmp_path / "c.npz", a=np.zeros(5))
    with pytest.raises(pinloader.Error, match="c.npz: member 'a.npy': the member is compressed"):
        datasets.NPY(tmp_path / "c.npz")
    np.save(tmp_path / "a.npy", np.zeros(5))
    np.save(tmp_path / "b.npy", np.zeros(6))
    with pytest.raises(pinloader.Error, match="array 'b' has 6 rows but 'a' has 5"):
        datasets.NPY(tmp_path / "a.npy", tmp_path / "b.npy")


# ---------------------------------------------------------------- images

def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def natural_image(w, h, seed):
    """Smooth gradients plus texture: closer to photos than noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([
        128 + 100 * np.sin(xx / (17 + seed) + yy / 29),
        128 + 90 * np.cos(yy / (13 + seed)) * np.sin(xx / 41),
        128 + 60 * np.sin((xx + yy) / 23),
    ], axis=-1)
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def make_folder(root, n_per_class=3):
    sizes = [(500, 375), (333, 480), (640, 427), (300, 300)]
    k = 0
    for c, cls in enumerate(["b_dogs", "a_cats"]):
        os.makedirs(root / cls)
        for j in range(n_per_class):
            w, h = sizes[k % len(sizes)]
            arr = natural_image(w, h, k)
            im = PIL.fromarray(arr)
            if k % 3 == 1:
                im.convert("L").save(root / cls / ("img%d.jpg" % j), quality=92)
            elif k % 3 == 2:
                im.save(root / cls / ("img%d.png" % j))
            else:
                im.save(root / cls / ("img%d.jpeg" % j), quality=92)
            k += 1
    (root / "a_cats" / "notes.txt").write_text("not an image")


def pil_reference(path, crop, size):
    top, left, h, w, flipped = (int(v) for v in crop)
    im = PIL.open(path).convert("RGB").crop((left, top, left + w, top + h))
    im = im.resize((size, size), PIL.BILINEAR)
    if flipped:
        im = im.transpose(PIL.FLIP_LEFT_RIGHT)
    return np.asarray(im).transpose(2, 0, 1)


def files_of(root):
    out = []
    for cls in sorted(os.listdir(root)):
        out += [os.path.join(root, cls, f) for f in sorted(os.listdir(root / cls))
                if f.endswith((".jpg", ".jpeg", ".png"))]
    return out


def test_image_folder_layout_and_labels(tmp_path):
    make_folder(tmp_path)
    ds = datasets.ImageFolder(tmp_path, size=64)
    assert len(ds) == 6
    assert [f.name for f in ds.fields] == ["image", "label"]
    assert [int(ds[i][1]) for i in range(6)] == [0, 0, 0, 1, 1, 1]  # a_cats first


@pytest.mark.parametrize("dct", [False, True])
def test_train_crops_match_pil(tmp_path, dct):
    make_folder(tmp_path)
    size = 96
    ds = datasets.ImageFolder(tmp_path, size=size, crop_field=True, dct_scaling=dct)
    paths = files_of(tmp_path)
    loader = pinloader.DataLoader(ds, batch_size=3, num_workers=2, seed=3, output="numpy")
    worst = float("inf")
    for epoch in range(2):
        i = 0
        for image, label, crop in loader:
            for k in range(len(image)):
                ref = pil_reference(paths[i], crop[k], size)
                worst = min(worst, psnr(image[k], ref))
                i += 1
    assert worst >= (35.0 if dct else 45.0), worst


def test_eval_center_crop_matches_pil(tmp_path):
    make_folder(tmp_path)
    ds = datasets.ImageFolder(tmp_path, size=64, train=False, resize=73)
    for i, path in enumerate(files_of(tmp_path)):
        im = PIL.open(path).convert("RGB")
        w, h = im.size
        nw, nh = (73, int(73 * h / w)) if w <= h else (int(73 * w / h), 73)
        im = im.resize((nw, nh), PIL.BILINEAR)
        top, left = int(round((nh - 64) / 2.0)), int(round((nw - 64) / 2.0))
        ref = np.asarray(im.crop((left, top, left + 64, top + 64))).transpose(2, 0, 1)
        assert psnr(ds[i][0], ref) >= 35.0


def test_bad_image_fails_or_is_replaced(tmp_path):
    make_folder(tmp_path)
    bad = tmp_path / "a_cats" / "img1.jpg"
    bad.write_bytes(bad.read_bytes()[:300])  # truncated
    ds = datasets.ImageFolder(tmp_path, size=32)
    # The file and the decoder's reason; the reason's wording depends on the
    # libjpeg build ("Premature end of JPEG file" with Debian's, "missing SOS
    # marker" with the H200 machine's).
    with pytest.raises(pinloader.Error, match=r"img1\.jpg: JPEG: \S") as info:
        ds[1]
    skip = datasets.ImageFolder(tmp_path, size=32, on_error="skip")
    got = [skip[i][0] for i in range(6)]
    assert skip.replaced == 1
    assert all(g.shape == (3, 32, 32) for g in got)


def test_list_file(tmp_path):
    make_folder(tmp_path)
    lst = tmp_path / "list.txt"
    lst.write_text("# path label\nb_dogs/img0.jpeg 7\n\na_cats/img2.png 3\n")
    ds = datasets.ImageFolder(lst, size=32, train=False)
    assert len(ds) == 2 and int(ds[0][1]) == 7 and int(ds[1][1]) == 3
    lst.write_text("b_dogs/img0.jpeg seven\n")
    with pytest.raises(pinloader.Error, match="list.txt:1: want 'PATH LABEL'"):
        datasets.ImageFolder(lst)


def test_list_file_label_over_int64_is_refused(tmp_path):
    """strtoll saturated such labels to INT64_MAX: now refused naming the
    list, the line and the text."""
    make_folder(tmp_path, n_per_class=1)
    lst = tmp_path / "list.txt"
    for text in ("99999999999999999999", str(2 ** 63)):
        lst.write_text("b_dogs/img0.jpeg 1\na_cats/img0.jpeg %s\n" % text)
        with pytest.raises(pinloader.Error) as e:
            datasets.ImageFolder(lst)
        assert str(e.value) == ("%s:2: label '%s' does not fit in int64 (at most "
                                "9223372036854775807)" % (lst, text))
        assert e.value.path == str(lst)
    lst.write_text("b_dogs/img0.jpeg %d\n" % (2 ** 63 - 1))
    assert int(datasets.ImageFolder(lst, size=8)[0][1]) == 2 ** 63 - 1


def _jpeg_folder(root, n=20, bad=7):
    """n JPEGs in two classes (sorted order = index order), image `bad`
    truncated; returns the bad file's path."""
    for i in range(n):
        cls = root / ("c%d" % (i * 2 // n))
        cls.mkdir(exist_ok=True)
        PIL.fromarray(natural_image(40 + i, 36, i)).save(cls / ("%02d.jpg" % i), quality=90)
    path = root / ("c%d" % (bad * 2 // n)) / ("%02d.jpg" % bad)
    path.write_bytes(path.read_bytes()[:400])
    return str(path)


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_in_dataloader_delivers_every_batch(tmp_path, caplog, workers):
    """on_error="skip": the bad sample's status stayed in the batch's error
    after a successful replacement, so every batch holding it failed with
    that file's error; the warning named a replacement's error."""
    import logging
    import re
    torch = pytest.importorskip("torch")
    bad = _jpeg_folder(tmp_path)
    ds = datasets.ImageFolder(tmp_path, size=16, train=False, on_error="skip")
    loader = pinloader.DataLoader(ds, batch_size=6, num_workers=workers)
    caplog.set_level(logging.WARNING, logger="pinloader")
    for epoch in range(2):
        batches = list(loader)
        assert [len(y) for _, y in batches] == [6, 6, 6, 2]
        images = torch.cat([x for x, _ in batches])
        labels = torch.cat([y for _, y in batches])
        # workers may read on into the next epoch: at least one a epoch, all alike
        warns = [r.getMessage() for r in caplog.records if "replaced" in r.getMessage()]
        assert len(warns) >= epoch + 1 and len(set(warns)) == 1, warns
        m = re.fullmatch(r"images: sample 7 replaced by sample (\d+): (.*)", warns[0])
        assert m, warns[0]
        assert m.group(2).startswith(bad + ": JPEG: "), m.group(2)
        other = int(m.group(1))
        assert other != 7
        # documented: the replacement is another sample, chosen from the index alone
        assert torch.equal(images[7], torch.from_numpy(ds[other][0].copy()))
        assert int(labels[7]) == int(ds[other][1])
        keep = [i for i in range(20) if i != 7]
        assert labels[keep].tolist() == [i * 2 // 20 for i in keep]
    assert ds.replaced >= 2  # once an epoch (and a read-ahead one)


def _cli():
    from pinloader import _cli
    exe = _cli.executable()
    if os.access(exe, os.X_OK):
        return exe
    exe = os.path.join(os.path.dirname(__file__), "..", "..", "build", "pinloader")
    return exe if os.access(exe, os.X_OK) else None


_FIFO_READS = """
import sys, pinloader
ds = pinloader.datasets.ImageFolder(sys.argv[1], size=8)
for name, read in (("ds[1]", lambda: ds[1]),
                   ("DataLoader", lambda: list(pinloader.DataLoader(ds, batch_size=2,
                                                                    num_workers=2)))):
    try:
        read()
        print(name, "read")
    except pinloader.Error as e:
        print(name, "|", e, "|", e.path)
"""


def test_fifo_named_like_an_image_is_refused(tmp_path):
    """open() without O_NONBLOCK waited for a writer forever: ds[i], the
    DataLoader and the CLI hung. Run in child processes so that old code
    fails the test (its timeout) instead of hanging the suite."""
    import subprocess
    import sys
    (tmp_path / "c0").mkdir()
    PIL.fromarray(natural_image(20, 20, 0)).save(tmp_path / "c0" / "a.png")
    fifo = str(tmp_path / "c0" / "x.jpg")
    os.mkfifo(fifo)
    why = "%s: not a regular file (a FIFO)" % fifo
    out = subprocess.run([sys.executable, "-c", _FIFO_READS, str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.splitlines() == [
        "ds[1] | sample 1: %s | %s" % (why, fifo),
        "DataLoader | sample 1: %s | %s" % (why, fifo),
    ], out.stderr
    cli = _cli()
    if cli is None:
        pytest.skip("no pinloader CLI built")
    run = subprocess.run([cli, "run", "--dataset", "images:%s?size=8" % tmp_path, "--quiet"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert why in run.stderr, run.stderr


def test_error_path_names_the_file(tmp_path):
    """pinloader.Error.path: the file the message names (it was None for
    image and .npy errors)."""
    bad = _jpeg_folder(tmp_path)
    ds = datasets.ImageFolder(tmp_path, size=16)
    with pytest.raises(pinloader.Error) as e:
        ds[7]
    assert e.value.path == bad and str(e.value).startswith("sample 7: %s: JPEG: " % bad)
    with pytest.raises(pinloader.Error) as e:
        list(pinloader.DataLoader(ds, batch_size=4))
    assert e.value.path == bad
    missing = str(tmp_path / "c0" / "none.jpg")
    (tmp_path / "list.txt").write_text("%s 0\n" % missing)
    with pytest.raises(pinloader.Error) as e:
        datasets.ImageFolder(tmp_path / "list.txt")[0]
    assert e.value.path == missing and e.value.errno == 2
    npy = tmp_path / "x.npy"
    npy.write_bytes(b"not an array")
    with pytest.raises(pinloader.Error) as e:
        datasets.NPY(str(npy))
    assert str(e.value) == "%s: not a .npy file (no \\x93NUMPY magic)" % npy
    assert e.value.path == str(npy)
    with pytest.raises(pinloader.Error) as e:
        datasets.CIFAR10([str(tmp_path / "nothing.bin")])
    assert e.value.path == str(tmp_path / "nothing.bin")
    # no file named: no path
    with pytest.raises(pinloader.Error) as e:
        datasets.ImageFolder(tmp_path, size=16, scale=(0.5, 0.2))
    assert e.value.path is None


# ---------------------------------------------------------------- registry

def test_source_registry_lists_each_kind_with_its_keys():
    from pinloader import _pinloader as C
    rows = C.sources()
    assert [r["kind"] for r in rows] == ["idx", "cifar10", "tokens", "npy", "images", "shards"]
    by = {r["kind"]: r for r in rows}
    assert by["tokens"]["keys"] == ("context", "samples", "stride", "dtype", "format")
    assert by["idx"]["keys"] == () and by["idx"]["usage"] == "idx:IMAGES,LABELS"
    assert "flip_p" in by["images"]["keys"]
    assert all(r["usage"].startswith(r["kind"] + ":") and r["doc"] for r in rows)
