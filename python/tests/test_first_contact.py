"""What a new user meets first from Python, with exact messages: pin_memory
for CPU batches, a CUDA device without a driver, a pool held by kept tensors,
and data files given in the wrong roles."""
import os
import warnings

import numpy as np
import pytest

import pinloader
from conftest import write_idx

TORCH_NO_ACCELERATOR = ("'pin_memory' argument is set as true but no accelerator is found, "
                        "then device pinned memory won't be used.")


@pytest.fixture
def idx_pair(tmp_path):
    images = np.arange(6 * 2 * 3, dtype=np.uint8).reshape(6, 2, 3)
    labels = np.arange(6, dtype=np.uint8)
    return (write_idx(tmp_path / "images.idx", images), write_idx(tmp_path / "labels.idx", labels))


def test_pin_memory_for_cpu_batches_warns_once(idx_pair):
    ds = pinloader.datasets.IDX(*idx_pair)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        loader = pinloader.DataLoader(ds, batch_size=4, pin_memory=True, output="numpy")
        for _ in range(2):  # iterating again says nothing more
            assert sum(len(b[0]) for b in loader) == 6
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    if pinloader.cuda_available():
        assert msgs == ["pin_memory=True with device='cpu': pinloader does not pin CPU batches; "
                        "use device='cuda' to have batches staged in page-locked memory and "
                        "copied to the GPU for you"]
    else:  # torch's own words, so that filters written for torch apply
        assert msgs == [TORCH_NO_ACCELERATOR]
    assert w[0].filename == __file__  # points at the caller's line
    loader.close()


def test_no_warning_without_pin_memory(idx_pair):
    ds = pinloader.datasets.IDX(*idx_pair)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pinloader.DataLoader(ds, batch_size=4, output="numpy").close()
        pinloader.DataLoader(ds, batch_size=4, pin_memory=False, output="numpy").close()


@pytest.mark.skipif(pinloader.cuda_available() or os.path.exists("/proc/driver/nvidia/version"),
                    reason="an NVIDIA driver is present")
def test_cuda_without_a_driver_says_so(idx_pair):
    ds = pinloader.datasets.IDX(*idx_pair)
    with pytest.raises(pinloader.Error) as e:
        pinloader.DataLoader(ds, batch_size=4, device="cuda")
    if str(e.value) == "this build of pinloader has no CUDA support":
        pytest.skip("built without CUDA")
    assert str(e.value) == "no NVIDIA driver found"
    assert e.value.status == "PL_NO_DEVICE"


def test_exhausted_pool_message_says_it_once(idx_pair):
    ds = pinloader.datasets.IDX(*idx_pair)
    loader = pinloader.DataLoader(ds, batch_size=1, max_batch_buffers=3, output="numpy")
    kept = []
    with pytest.raises(pinloader.Error) as e:
        for b in loader:
            kept.append(b)
    assert str(e.value) == ("all 3 batch buffers are held by tensors of earlier batches: release "
                            "some (drop the tensors, or .clone() what you keep) or raise "
                            "DataLoader(max_batch_buffers=...)")
    assert e.value.status == "PL_EXHAUSTED"
    kept.clear()
    loader.close()


def test_idx_files_in_the_wrong_roles(idx_pair):
    images, labels = idx_pair
    with pytest.raises(pinloader.Error) as e:
        pinloader.datasets.IDX(labels, images)
    assert str(e.value) == ("%s: an IDX images file has 2 or more dims, this one has 1: it looks like "
                            "a labels file (the images file comes first, then the labels)" % labels)
    assert e.value.status == "PL_FORMAT"
    with pytest.raises(pinloader.Error) as e:
        pinloader.datasets.IDX(images, images)
    assert str(e.value) == ("%s: an IDX labels file has 1 dim, this one has 3: it looks like an "
                            "images file (the images file comes first, then the labels)" % images)


def test_empty_cifar10_file(tmp_path):
    empty = tmp_path / "data_batch_1.bin"
    empty.write_bytes(b"")
    with pytest.raises(pinloader.Error) as e:
        pinloader.datasets.CIFAR10([str(empty)])
    assert str(e.value) == "%s: empty: no records" % empty
