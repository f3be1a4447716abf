"""torch interop: tensors by default, torch.from_dlpack / numpy on the raw
exporters, no copies. Skipped without torch."""
import numpy as np
import pytest

import pinloader

torch = pytest.importorskip("torch")


def test_yields_torch_tensors(mnist_like):
    ip, lp, images, labels = mnist_like
    loader = pinloader.DataLoader(pinloader.datasets.IDX(ip, lp), batch_size=10, num_workers=2)
    xs, ys = [], []
    for x, y in loader:
        assert isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and x.device.type == "cpu"
        assert x.is_contiguous()
        xs.append(x)
        ys.append(y)
    assert torch.equal(torch.cat(xs), torch.from_numpy(images))
    assert torch.equal(torch.cat(ys), torch.from_numpy(labels))


def test_float32_view_is_a_float_tensor(mnist_like):
    ip, lp, images, _ = mnist_like
    ds = pinloader.datasets.to_float32(pinloader.datasets.IDX(ip, lp), "image", 0.5)
    (x, _), = list(pinloader.DataLoader(ds, batch_size=37))
    assert x.dtype == torch.float32
    assert torch.equal(x, torch.from_numpy(images).float() * 0.5)


def test_raw_exporter_interop(mnist_like):
    ip, lp, images, _ = mnist_like
    loader = pinloader.DataLoader(pinloader.datasets.IDX(ip, lp), batch_size=37, output="raw")
    (fa, la), = list(loader)
    assert fa.__dlpack_device__() == (1, 0)
    assert fa.shape == (37, 5, 4) and fa.dtype == "uint8" and fa.name == "image"
    t = torch.utils.dlpack.from_dlpack(fa)
    n = np.asarray(fa)  # buffer protocol
    assert t.data_ptr() == n.ctypes.data  # the same memory: no copy
    assert torch.equal(t, torch.from_numpy(images))
    if hasattr(np, "from_dlpack"):
        np.testing.assert_array_equal(np.from_dlpack(la), np.asarray(la))
    assert fa.tobytes() == images.tobytes()
    cap = fa.__dlpack__()  # never consumed: its destructor frees it
    del cap
    with pytest.raises(ValueError):
        fa.__dlpack__(stream=0)


def test_python_dataset_of_tensors():
    data = [(torch.full((2,), float(i)), torch.tensor(i)) for i in range(6)]
    (x, y), = list(pinloader.DataLoader(data, batch_size=6))
    assert x.dtype == torch.float32 and y.dtype == torch.int64
    assert torch.equal(y, torch.arange(6))
    assert torch.equal(x[:, 1], torch.arange(6, dtype=torch.float32))


def test_tensors_outlive_loader_and_batches(indexed_records):
    ds, rec = indexed_records
    loader = pinloader.DataLoader(ds, batch_size=10, num_workers=2, max_batch_buffers=16)
    kept = list(loader)
    views = [p[1:] for _, p in kept]  # views keep the batch too
    del kept
    loader.close()
    del loader
    np.testing.assert_array_equal(torch.cat([v for v in views]).numpy(),
                                  np.concatenate([rec["payload"][i * 10 + 1:(i + 1) * 10] for i in range(10)]))


def test_freed_tensors_return_their_batches(indexed_records):
    ds, _ = indexed_records
    # 3 buffers for 100 batches per epoch: only works if every freed tensor
    # (DLPack deleter) gives its batch back.
    loader = pinloader.DataLoader(ds, batch_size=1, num_workers=2, max_batch_buffers=3)
    for _ in range(2):
        assert sum(int(x.sum()) for x, _ in loader) == sum(range(100))
    assert loader.stats()["batch_buffers"] <= 3
