"""ImageFolder(decode=...): where a DataLoader decodes JPEGs. These run
without a GPU (CI): the keyword, the option, "auto" falling back to the
CPU with the same batches, "gpu" failing with a clear error, and where the
nvidia-nvjpeg wheel's library is looked for. With a GPU,
test_gpu_decode.py compares the GPU path's crops with the CPU's."""
import logging
import os
import sys

import numpy as np
import pytest

import pinloader
from pinloader import _pinloader as _C
from pinloader import datasets

from test_sources import natural_image

PIL = pytest.importorskip("PIL.Image")


def _folder(root, n=12):
    for i in range(n):
        cls = root / ("c%d" % (i % 2))
        cls.mkdir(exist_ok=True)
        im = PIL.fromarray(natural_image(60 + 7 * i, 50 + 5 * i, i))
        if i % 4 == 3:
            im.save(cls / ("%02d.png" % i))
        else:
            im.save(cls / ("%02d.jpg" % i), quality=90, progressive=(i % 4 == 2))
    return str(root)


def _batches(ds, **kw):
    dl = pinloader.DataLoader(ds, batch_size=4, shuffle=True, seed=3, **kw)
    return [(b[0].numpy().copy(), b[1].numpy().copy()) for b in dl]


def test_default_and_bad_value(tmp_path):
    root = _folder(tmp_path)
    assert datasets.ImageFolder(root, size=32).decode == "cpu"
    with pytest.raises(ValueError, match=r"decode must be 'cpu', 'gpu' or 'auto', not 'nvjpeg'"):
        datasets.ImageFolder(root, size=32, decode="nvjpeg")


def test_option_table_has_decode():
    by = {o["name"]: o for o in _C.loader_options()}
    assert by["decode"]["type"] == "decode"
    assert by["decode"]["values"] == "cpu|gpu|auto"
    assert by["decode"]["default"] == "cpu"


@pytest.mark.skipif(pinloader.cuda_available(), reason="a GPU is usable: test_gpu_decode.py covers it")
def test_auto_without_gpu_is_the_cpu_path(tmp_path, caplog):
    root = _folder(tmp_path)
    want = _batches(datasets.ImageFolder(root, size=32))
    with caplog.at_level(logging.INFO, logger="pinloader"):
        got = _batches(datasets.ImageFolder(root, size=32, decode="auto"))
    assert len(got) == len(want) == 3
    for (gi, gl), (wi, wl) in zip(got, want):
        assert np.array_equal(gi, wi) and np.array_equal(gl, wl)
    notes = [r.getMessage() for r in caplog.records if "decode=auto" in r.getMessage()]
    assert notes and notes[0].startswith("decode=auto: decoding on the CPU only: ")


def test_gpu_without_gpu_is_an_error(tmp_path):
    if pinloader.cuda_available():
        pytest.skip("a GPU is usable: decode=gpu may open here")
    root = _folder(tmp_path)
    ds = datasets.ImageFolder(root, size=32, decode="gpu")
    with pytest.raises(pinloader.Error, match="decode=gpu: GPU decode: (this build of pinloader has no CUDA "
                       "support|no CUDA device)"):
        _batches(ds)


def test_wheel_library_is_found(tmp_path, monkeypatch):
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (tmp_path / "nvidia" / "__init__.py").write_text("")
    (lib / "libnvjpeg.so.13").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, m)
    assert datasets._nvjpeg_wheel_lib() == str(lib / "libnvjpeg.so.13")
    monkeypatch.delenv("PL_NVJPEG_LIB", raising=False)
    datasets._nvjpeg_from_wheel()
    assert os.environ["PL_NVJPEG_LIB"] == str(lib / "libnvjpeg.so.13")
    monkeypatch.setenv("PL_NVJPEG_LIB", "/mine/libnvjpeg.so.13")
    datasets._nvjpeg_from_wheel()  # the user's choice is kept
    assert os.environ["PL_NVJPEG_LIB"] == "/mine/libnvjpeg.so.13"
