"""Native datasets through the DataLoader: exact bytes, shapes, dtypes, errors.
Runs with numpy alone (output='numpy')."""
import os

import numpy as np
import pytest

import pinloader
from conftest import write_cifar, write_idx


def collect(loader):
    return [tuple(np.array(f) for f in b) for b in loader]


def test_idx_batches_equal_file_bytes(mnist_like):
    ip, lp, images, labels = mnist_like
    ds = pinloader.datasets.IDX(ip, lp)
    assert len(ds) == 37
    assert ds.fields == [("image", "uint8", (5, 4)), ("label", "uint8", ())]
    loader = pinloader.DataLoader(ds, batch_size=8, output="numpy")
    assert len(loader) == 5
    batches = collect(loader)
    assert [b[0].shape for b in batches] == [(8, 5, 4)] * 4 + [(5, 5, 4)]
    # labels as torch collates int labels; label_dtype="uint8" keeps the file's
    assert all(b[0].dtype == np.uint8 and b[1].dtype == np.int64 for b in batches)
    kept = collect(pinloader.DataLoader(pinloader.datasets.IDX(ip, lp, label_dtype="uint8"),
                                        batch_size=37, output="numpy"))
    assert kept[0][1].dtype == np.uint8
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), images)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), labels)


def test_idx_getitem_reads_one_sample(mnist_like):
    ip, lp, images, labels = mnist_like
    ds = pinloader.datasets.IDX(ip, lp)
    img, lab = ds[36]
    np.testing.assert_array_equal(img, images[36])
    assert int(lab) == labels[36]
    with pytest.raises(IndexError):
        ds[37]


def test_drop_last(mnist_like):
    ip, lp, images, _ = mnist_like
    loader = pinloader.DataLoader(pinloader.datasets.IDX(ip, lp), batch_size=8, drop_last=True,
                                  num_workers=2, output="numpy")
    assert len(loader) == 4
    batches = collect(loader)
    assert len(batches) == 4
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), images[:32])


def test_cifar10_two_files(tmp_path):
    rng = np.random.default_rng(2)
    imgs = rng.integers(0, 256, size=(9, 3, 32, 32), dtype=np.uint8)
    labs = rng.integers(0, 10, size=9, dtype=np.uint8)
    f1 = write_cifar(tmp_path / "data_batch_1.bin", imgs[:4], labs[:4])
    f2 = write_cifar(tmp_path / "data_batch_2.bin", imgs[4:], labs[4:])
    loader = pinloader.DataLoader(pinloader.datasets.CIFAR10([f1, f2]), batch_size=4, num_workers=2,
                                  output="numpy")
    batches = collect(loader)
    assert [b[0].shape for b in batches] == [(4, 3, 32, 32), (4, 3, 32, 32), (1, 3, 32, 32)]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), imgs)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), labs)


def test_records_fields_and_offsets(indexed_records):
    ds, rec = indexed_records
    assert ds.fields == [("idx", "int64", ()), ("payload", "uint8", (3,))]
    batches = collect(pinloader.DataLoader(ds, batch_size=16, output="numpy"))
    idx = np.concatenate([b[0] for b in batches])
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, np.arange(100))
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), rec["payload"])


def test_to_float32_scales(mnist_like):
    ip, lp, images, labels = mnist_like
    ds = pinloader.datasets.to_float32(pinloader.datasets.IDX(ip, lp), "image", 1 / 255)
    assert ds.fields[0] == ("image", "float32", (5, 4))
    batches = collect(pinloader.DataLoader(ds, batch_size=37, output="numpy"))
    assert batches[0][0].dtype == np.float32
    np.testing.assert_array_equal(batches[0][0], images.astype(np.float32) * np.float32(1 / 255))
    np.testing.assert_array_equal(batches[0][1], labels)


def test_missing_file_is_error_naming_it(tmp_path, mnist_like):
    ip, lp, _, _ = mnist_like
    missing = str(tmp_path / "no-such-images.idx")
    with pytest.raises(pinloader.Error) as e:
        pinloader.datasets.IDX(missing, lp)
    assert "no-such-images.idx" in str(e.value)
    assert e.value.status == "PL_IO"
    assert isinstance(e.value, RuntimeError)


def test_truncated_idx_is_format_error(tmp_path, mnist_like):
    _, lp, images, _ = mnist_like
    bad = tmp_path / "short-images.idx"
    write_idx(bad, images)
    data = bad.read_bytes()
    bad.write_bytes(data[:-7])
    with pytest.raises(pinloader.Error) as e:
        pinloader.datasets.IDX(str(bad), lp)
    assert "short-images.idx" in str(e.value)
    assert e.value.status == "PL_FORMAT"


def test_records_partial_record_is_error(tmp_path):
    p = tmp_path / "ragged.bin"
    p.write_bytes(bytes(10))
    with pytest.raises(pinloader.Error) as e:
        pinloader.datasets.Records(str(p), 0, 4, [("x", "uint8", (4,), 0)])
    assert "ragged.bin" in str(e.value)
    assert e.value.status == "PL_FORMAT"


def test_bad_arguments():
    with pytest.raises(ValueError):
        pinloader.datasets.Records("x", 0, 4, [("x", "complex64", (2,), 0)])
    with pytest.raises(ValueError):
        pinloader.DataLoader([np.zeros(2)], batch_size=0)
    with pytest.raises(ValueError):
        pinloader.DataLoader([np.zeros(2)], device="tpu")


# ------------------------------------------- ImageFolder as torchvision's

def _tv_image_folder(directory):
    """torchvision.datasets.ImageFolder's classes, class_to_idx and samples,
    as torchvision/datasets/folder.py defines them (find_classes,
    make_dataset), restricted to the extensions pinloader decodes."""
    import os
    directory = os.path.expanduser(directory)
    classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    class_to_idx = {c: i for i, c in enumerate(classes)}
    samples = []
    for target_class in sorted(class_to_idx):
        target_dir = os.path.join(directory, target_class)
        for root, _, fnames in sorted(os.walk(target_dir, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(root, fname)
                if path.lower().endswith((".jpg", ".jpeg", ".png")):
                    samples.append((path, class_to_idx[target_class]))
    return classes, class_to_idx, samples


def test_image_folder_has_torchvision_attributes(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(5)
    layout = {"zebra": ["b.jpg", "a.png", "sub/z.jpeg", "sub/deeper/y.PNG"],
              "Apple": ["x.jpg"], "mango": ["m1.png", "m0.png"]}
    for cls, files in layout.items():
        for f in files:
            path = tmp_path / cls / f
            path.parent.mkdir(parents=True, exist_ok=True)
            img = PIL.fromarray(rng.integers(0, 256, (9, 11, 3), dtype=np.uint8))
            img.save(path, format="PNG" if f.lower().endswith("png") else "JPEG")
    (tmp_path / "mango" / "notes.txt").write_text("not an image")
    (tmp_path / "README").write_text("a file at the top is not a class")
    for root in (str(tmp_path), str(tmp_path) + "/"):
        ds = pinloader.datasets.ImageFolder(root, size=8)
        try:
            import torchvision
            tv = torchvision.datasets.ImageFolder(root)
            want = (tv.classes, tv.class_to_idx, [tuple(s) for s in tv.samples])
        except ImportError:
            want = _tv_image_folder(root)
        classes, class_to_idx, samples = want
        assert classes == ["Apple", "mango", "zebra"]
        assert ds.classes == classes
        assert ds.class_to_idx == class_to_idx
        assert ds.samples == samples
        assert ds.imgs == samples
        assert ds.targets == [t for _, t in samples]
        assert [int(ds[i][1]) for i in range(len(ds))] == ds.targets
        assert ds.size == (8, 8)
    # a list file: samples and targets, no class folders
    lst = tmp_path / "list.txt"
    lst.write_text("zebra/b.jpg 4\nApple/x.jpg 2\n")
    ds = pinloader.datasets.ImageFolder(lst, size=8)
    assert ds.samples == [(str(tmp_path / "zebra/b.jpg"), 4), (str(tmp_path / "Apple/x.jpg"), 2)]
    assert ds.targets == [4, 2] and ds.classes is None and ds.class_to_idx is None


def test_image_folder_links_and_folders_named_as_images(tmp_path):
    """The listing takes each entry's type from the directory where it can
    (no stat per file) and stat()s links: a linked class folder, a linked
    subfolder and a linked image are followed as torchvision's os.walk(
    followlinks=True) follows them; a folder named x.jpg is a folder."""
    PIL = pytest.importorskip("PIL.Image")
    data = tmp_path / "data"
    root = tmp_path / "root"
    for d in (data / "cls", data / "sub", root / "b" / "d.jpg"):
        d.mkdir(parents=True)
    for path in (data / "cls" / "k.jpg", data / "sub" / "s.jpg", data / "one.jpg",
                 root / "b" / "d.jpg" / "in.jpg", root / "b" / "plain.jpg"):
        PIL.fromarray(np.zeros((9, 9, 3), np.uint8)).save(path, format="JPEG")
    os.symlink(data / "cls", root / "a")
    os.symlink(data / "sub", root / "b" / "linked")
    os.symlink(data / "one.jpg", root / "b" / "file.jpg")
    ds = pinloader.datasets.ImageFolder(str(root), size=8)
    classes, _, samples = _tv_image_folder(str(root))
    r = str(root)
    assert samples == [(r + "/a/k.jpg", 0), (r + "/b/file.jpg", 1), (r + "/b/plain.jpg", 1),
                       (r + "/b/d.jpg/in.jpg", 1), (r + "/b/linked/s.jpg", 1)]
    assert ds.classes == classes == ["a", "b"]
    assert ds.samples == samples


def test_image_folder_size_is_a_pair(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    (tmp_path / "c").mkdir()
    PIL.fromarray(np.zeros((9, 9, 3), np.uint8)).save(tmp_path / "c" / "a.png")
    for size in (6, (6, 6), [6, 6]):
        ds = pinloader.datasets.ImageFolder(tmp_path, size=size)
        assert ds.size == (6, 6)
        assert ds[0][0].shape == (3, 6, 6)
    with pytest.raises(ValueError, match=r"size must be an int or a pair \(h, w\) with h == w"):
        pinloader.datasets.ImageFolder(tmp_path, size=(6, 7))
