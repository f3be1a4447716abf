"""CUDA batches through DLPack (run on the GPU box by scripts/gpu/30-python.sh).
Skipped when torch or a CUDA device is missing."""
import numpy as np
import pytest

import pinloader
from conftest import write_idx

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch.cuda is not available", allow_module_level=True)


def test_built_with_cuda():
    # torch sees a GPU: a host-only pinloader build would skip the rest silently.
    assert pinloader.cuda_available(), "pinloader was built without CUDA (no toolkit found at build time)"


@pytest.fixture
def big_idx(tmp_path):
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, size=(3000, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=3000, dtype=np.uint8)
    return (write_idx(tmp_path / "imgs.idx", images), write_idx(tmp_path / "labs.idx", labels), images, labels)


def cpu_reference(ds, **kw):
    return [(x.clone(), y.clone()) for x, y in pinloader.DataLoader(ds, device="cpu", **kw)]


def test_cuda_tensors_equal_file_bytes(big_idx):
    ip, lp, images, labels = big_idx
    loader = pinloader.DataLoader(pinloader.datasets.IDX(ip, lp), batch_size=256, num_workers=2, device="cuda")
    assert loader.device_name.startswith("cuda:0")
    xs, ys = [], []
    for x, y in loader:
        assert x.device == torch.device("cuda:0") and x.dtype == torch.uint8
        xs.append(x.cpu())
        ys.append(y.cpu())
    assert torch.equal(torch.cat(xs), torch.from_numpy(images))
    assert torch.equal(torch.cat(ys), torch.from_numpy(labels))
    st = loader.stats()
    assert st["batches_copied"] >= len(loader)


def test_direct_mode_large_samples(tmp_path):
    # 64 KiB images, direct_copy: the images are copied straight from the
    # page-locked file, the labels gathered; the bytes and the order equal
    # the CPU path's.
    rng = np.random.default_rng(9)
    images = rng.integers(0, 256, size=(300, 128, 512), dtype=np.uint8)
    labels = rng.integers(0, 10, size=300, dtype=np.uint8)
    ds = pinloader.datasets.IDX(write_idx(tmp_path / "i.idx", images), write_idx(tmp_path / "l.idx", labels))
    kw = dict(batch_size=32, shuffle=True, seed=5, num_workers=2)
    ref = cpu_reference(ds, **kw)
    loader = pinloader.DataLoader(ds, device="cuda", direct_copy=True, **kw)
    got = [(x.cpu(), y.cpu()) for x, y in loader]
    st = loader.stats()
    assert st["batches_direct"] >= len(loader)
    assert st["pinned_bytes"] >= images.nbytes
    assert len(got) == len(ref)
    for (x, y), (rx, ry) in zip(got, ref):
        assert torch.equal(x, rx) and torch.equal(y, ry)


def test_consumed_on_a_side_stream(big_idx):
    ip, lp, images, _ = big_idx
    ds = pinloader.datasets.to_float32(pinloader.datasets.IDX(ip, lp), "image", 1 / 255)
    kw = dict(batch_size=200, shuffle=True, seed=4, num_workers=3)
    ref = [cpu_reference(ds, **kw) for _ in range(1)][0]
    loader = pinloader.DataLoader(ds, device="cuda:0", **kw)
    side = torch.cuda.Stream()
    sums = []
    with torch.cuda.stream(side):
        for x, y in loader:  # from_dlpack passes `side`: it waits on the copy
            # Enough work that a missing wait or an early buffer reuse shows.
            sums.append(((x * 3 + 1) ** 2).sum(dim=(1, 2)))
    side.synchronize()
    got = torch.cat(sums).cpu()
    want = torch.cat([((x * 3 + 1) ** 2).sum(dim=(1, 2)) for x, _ in ref])
    assert torch.allclose(got, want, rtol=1e-5)


def test_batches_kept_and_checked_late(big_idx):
    ip, lp, _, _ = big_idx
    ds = pinloader.datasets.IDX(ip, lp)
    kw = dict(batch_size=128, shuffle=True, seed=9, num_workers=2)
    loader = pinloader.DataLoader(ds, device="cuda", max_batch_buffers=64, **kw)
    for epoch in range(2):
        ref = cpu_reference(ds, **kw) if epoch == 0 else ref2
        kept = list(loader)  # all of them alive at once
        torch.cuda.synchronize()
        assert len(kept) == len(ref)
        for (x, y), (rx, ry) in zip(kept, ref):
            assert torch.equal(x.cpu(), rx) and torch.equal(y.cpu(), ry)
        if epoch == 0:
            cpu = pinloader.DataLoader(ds, device="cpu", **kw)
            cpu.set_epoch(1)
            ref2 = [(x.clone(), y.clone()) for x, y in cpu]
        del kept


def test_raw_cuda_exporter(big_idx):
    ip, lp, images, _ = big_idx
    loader = pinloader.DataLoader(pinloader.datasets.IDX(ip, lp), batch_size=1000, device="cuda", output="raw")
    fa, la = next(iter(loader))
    assert fa.__dlpack_device__() == (2, 0)
    assert fa.device == ("cuda", 0)
    assert fa.tobytes() == images[:1000].tobytes()
    with pytest.raises(BufferError):
        memoryview(fa)
    s = torch.cuda.Stream()
    t = torch.utils.dlpack.from_dlpack(fa.__dlpack__(stream=s.cuda_stream))
    with torch.cuda.stream(s):
        total = t.sum(dtype=torch.int64)
    s.synchronize()
    assert int(total) == int(images[:1000].sum(dtype=np.int64))


def test_direct_mode_off_notice_reaches_logging(caplog, big_idx):
    # Logged from pl_loader_create with the GIL released: the log hook takes it.
    import logging

    ip, lp, _, _ = big_idx
    with caplog.at_level(logging.INFO, logger="pinloader"):
        loader = pinloader.DataLoader(pinloader.datasets.IDX(ip, lp), batch_size=256, num_workers=2,
                                      device="cuda", pin_memory=False, direct_copy=True)
    loader.close()
    msgs = [r.getMessage() for r in caplog.records if r.name == "pinloader"]
    assert "copies straight from the dataset's memory are off: pin_memory is off" in msgs, msgs
