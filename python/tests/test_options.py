"""The C option table reaches Python: _C.Loader takes exactly its names,
range-checked in C (ValueError naming the range, where torch raises too);
every table option is reachable from DataLoader through OPTION_NAMES; the
environment's sharding rule; the library's log through `logging`; and the
structured fields of pinloader.Error."""
import errno
import inspect
import logging
import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest

import pinloader
from pinloader import _pinloader as _C

SHARD_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
              "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE")


@pytest.fixture(autouse=True)
def no_launcher(monkeypatch):
    for v in SHARD_VARS:
        monkeypatch.delenv(v, raising=False)


class Numbers:
    """sample i = [i] as int64: delivery order is visible."""

    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.array([i], dtype=np.int64)


def order(loader):
    return [int(x) for b in loader for x in np.asarray(b).ravel()]


def test_loader_options_is_the_c_table():
    opts = _C.loader_options()
    names = [o["name"] for o in opts]
    assert names == ["batch_size", "shuffle", "seed", "drop_last", "num_workers", "prefetch", "device",
                     "device_index", "pin_memory", "non_blocking", "pinned_budget", "max_batch_buffers",
                     "direct_copy", "copy_chunk_bytes", "rank", "world_size", "epoch", "timeout_s",
                     "log_level", "timings", "cpu_budget", "replay_batches", "replay_after",
                     "explicit_order", "error_ends_epoch", "decode"]
    by = {o["name"]: o for o in opts}
    assert by["batch_size"] == {"name": "batch_size", "type": "u32", "default": 1, "min": 1,
                                "max": 2**32 - 1, "doc": "samples per batch", "values": None}
    assert by["shuffle"]["default"] is False and by["pin_memory"]["default"] is True
    assert by["device"]["default"] == "auto" and by["device"]["values"] == "auto|cpu|cuda|cuda:N"
    assert by["timeout_s"]["type"] == "real" and by["timeout_s"]["max"] == 1e9
    assert by["max_batch_buffers"]["max"] == 1 << 20
    assert all(o["doc"] for o in opts)


def test_every_table_option_is_reachable_from_dataloader():
    table = {o["name"] for o in _C.loader_options()}
    reached = set(pinloader.OPTION_NAMES.values()) | set(pinloader.OPTION_METHODS)
    assert reached == table
    params = inspect.signature(pinloader.DataLoader.__init__).parameters
    for torch_name in pinloader.OPTION_NAMES:
        assert torch_name in params, torch_name
    for method in ("set_epoch",):
        assert callable(getattr(pinloader.DataLoader, method))


def test_dataloader_arguments_arrive_in_c():
    dl = pinloader.DataLoader(Numbers(), batch_size=3, shuffle=True, seed=2**64 - 1, drop_last=True,
                              num_workers=2, prefetch_factor=3, pin_memory=False, non_blocking=False,
                              pinned_budget=1 << 30, max_batch_buffers=9, direct_copy=True,
                              copy_chunk_bytes=12345, timeout=2, log_level="warn", output="numpy")
    got = dl._ld.options
    dl.close()
    assert got == {"batch_size": 3, "shuffle": True, "seed": 2**64 - 1, "drop_last": True, "num_workers": 2,
                   "prefetch": 6, "device": "cpu", "device_index": 0, "pin_memory": False,
                   "non_blocking": False, "pinned_budget": 1 << 30, "max_batch_buffers": 9,
                   "direct_copy": True, "copy_chunk_bytes": 12345, "rank": 0, "world_size": 1, "epoch": 0,
                   "timeout_s": 2.0, "log_level": "warn", "timings": True, "cpu_budget": 0.0,
                   "replay_batches": 0, "replay_after": 0, "explicit_order": False,
                   "error_ends_epoch": False, "decode": "cpu"}


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=2**64 + 3), "batch_size must be in [1, 4294967295], got 18446744073709551619"),
    (dict(batch_size=2.7), "batch_size must be an integer in [1, 4294967295], got 2.7"),
    (dict(batch_size=True), "batch_size must be an integer in [1, 4294967295], got True"),
    (dict(seed=2**64 + 5), "seed must be in [0, 18446744073709551615], got 18446744073709551621"),
    (dict(rank=-5, world_size=2), "rank must be in [0, 4294967294], got -5"),
    (dict(world_size=-3), "world_size must be in [1, 4294967295], got -3"),
    (dict(pinned_budget=-1), "pinned_budget must be in [0, 18446744073709551615], got -1"),
    (dict(max_batch_buffers=-1), "max_batch_buffers must be in [0, 1048576], got -1"),
    (dict(num_workers=2000), "num_workers must be in [0, 1024] or auto, got 2000"),
    (dict(timeout=float("nan")), "timeout_s must be a number in [0, 1e+09], got \"nan\""),
    (dict(rank=2, world_size=2), "rank must be below world_size: rank 2 is not below world_size 2"),
    (dict(log_level="loud"), "log_level must be debug, info, warn or error, got \"loud\""),
])
def test_out_of_range_arguments_raise_value_error(kwargs, message):
    with pytest.raises(ValueError) as e:
        pinloader.DataLoader(Numbers(), output="numpy", **kwargs)
    assert str(e.value) == message


def test_torch_raises_value_error_too():
    # Where torch defines the check, it raises the same exception type.
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, DistributedSampler

    with pytest.raises(ValueError):
        DataLoader(Numbers(), batch_size=2.7)
    with pytest.raises(ValueError):
        DistributedSampler(Numbers(), num_replicas=2, rank=-5)
    with pytest.raises(ValueError):
        DistributedSampler(Numbers(), num_replicas=-3, rank=0)
    with pytest.raises(ValueError):
        DistributedSampler(Numbers(), num_replicas=2, rank=2)
    del torch


def test_loader_takes_exactly_the_table_names():
    ds = pinloader.datasets.from_python(Numbers())._native
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeout'"):
        _C.Loader(ds, timeout=1)
    given = dict({o["name"]: o["default"] for o in _C.loader_options()}, device="cpu")
    ld = _C.Loader(ds, **given)
    assert ld.options == given
    ld.close()


def test_explicit_world_size_takes_rank_from_the_environment(monkeypatch, caplog):
    # torchrun: RANK=1 WORLD_SIZE=2; DataLoader(world_size=2) is rank 1.
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    # The C loader is made at iter() (the dataset is not read before): the
    # announcement comes then, once.
    with caplog.at_level(logging.INFO, logger="pinloader"):
        dl = pinloader.DataLoader(Numbers(), batch_size=5, world_size=2, output="numpy")
        assert order(dl) == [1, 3, 5, 7, 9]
        assert order(dl) == [1, 3, 5, 7, 9]
    dl.close()
    announced = [r for r in caplog.records if r.name == "pinloader" and "sharding" in r.getMessage()]
    assert [r.getMessage() for r in announced] == [
        "sharding from the environment: rank 1 of 2 (RANK, world_size set)"]
    assert announced[0].levelno == logging.INFO
    # Both explicit: the environment is not read.
    dl = pinloader.DataLoader(Numbers(), batch_size=5, rank=0, world_size=2, output="numpy")
    assert order(dl) == [0, 2, 4, 6, 8]
    dl.close()
    # Disagreeing world sizes: an error naming both.
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ValueError) as e:
        pinloader.DataLoader(Numbers(), world_size=2, output="numpy")
    assert str(e.value) == ("world_size 2 disagrees with the environment's WORLD_SIZE=4: "
                            "pass rank too, or make them agree")


def test_cpu_fallback_notice_reaches_logging(caplog):
    # Logged by pl_loader_create, which runs with the GIL released: the hook
    # takes it (PyGILState_Ensure) to reach the logger.
    if pinloader.cuda_available():
        pytest.skip("a CUDA device is usable: no CPU fallback to log")
    ds = pinloader.datasets.from_python(Numbers())._native
    with caplog.at_level(logging.INFO, logger="pinloader"):
        ld = _C.Loader(ds, device="auto")
    ld.close()
    msgs = [r.getMessage() for r in caplog.records if r.name == "pinloader"]
    assert msgs in (["no NVIDIA driver found; using the CPU"],  # plain words, not CUDA's
                    ["this build of pinloader has no CUDA support; using the CPU"]), msgs
    # log_level filters in C: nothing below it is passed.
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="pinloader"):
        _C.Loader(ds, device="auto", log_level="warn").close()
    assert [r for r in caplog.records if r.name == "pinloader"] == []


def test_error_fields_for_a_missing_file(tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(pinloader.Error) as e:
        pinloader.datasets.IDX(missing, missing)
    assert e.value.status == "PL_IO"
    assert e.value.path == missing
    assert e.value.errno == errno.ENOENT
    assert e.value.sample_index is None


class SlowAt:
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            time.sleep(1.0)
        return np.array([i], dtype=np.int64)


def test_error_fields_for_a_timed_out_sample():
    dl = pinloader.DataLoader(SlowAt(), batch_size=4, num_workers=1, timeout=0.2, output="numpy")
    with pytest.raises(pinloader.Error) as e:
        order(dl)
    dl.close()
    assert e.value.status == "PL_TIMEOUT"
    assert e.value.sample_index == 5
    assert e.value.path is None and e.value.errno is None


class FailsAt:
    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == 7:
            raise KeyError("seven")
        return np.array([i], dtype=np.int64)


def test_dataset_exception_is_found_by_the_sample_field():
    dl = pinloader.DataLoader(FailsAt(), batch_size=4, num_workers=2, output="numpy")
    with pytest.raises(KeyError) as e:
        order(dl)
    dl.close()
    assert "seven" in str(e.value)
    notes = getattr(e.value, "__notes__", [])
    assert notes and notes[0].startswith("pinloader: raised by dataset[7] ")


def test_cli_usage_lists_every_option():
    cli = os.environ.get("PL_CLI") or os.path.join(os.path.dirname(__file__), "..", "..", "build", "pinloader")
    if not os.path.exists(cli):
        cli = shutil.which("pinloader")
    if not cli:
        pytest.skip("no pinloader CLI built (tests/test_options.c checks this in ctest)")
    usage = subprocess.run([cli, "run", "--help"], check=True, capture_output=True, text=True).stdout
    for o in _C.loader_options():
        flag = "--" + o["name"].replace("_", "-")
        assert re.search(re.escape(flag) + r"[ ,]", usage), flag


def test_direct_mode_off_notice_reaches_logging(caplog, mnist_like):
    # direct_copy on a CPU loader: the library says why it is off (before,
    # Python installed no log hook and the message vanished).
    ip, lp, _, _ = mnist_like
    with caplog.at_level(logging.INFO, logger="pinloader"):
        dl = pinloader.DataLoader(pinloader.datasets.IDX(ip, lp), batch_size=8, num_workers=2,
                                  direct_copy=True, output="numpy")
    dl.close()
    msgs = [r.getMessage() for r in caplog.records if r.name == "pinloader"]
    assert msgs == ["copies straight from the dataset's memory are off: they need a CUDA device "
                    "(these batches live in host memory)"]


@pytest.mark.parametrize("kwargs, depth", [
    (dict(num_workers=2, prefetch_factor=3), 6),
    (dict(num_workers=3), 6),  # torch's default prefetch_factor 2
    (dict(num_workers=2, prefetch_factor="auto"), 4),  # PL_AUTO starts at 2 a worker
])
def test_the_resolved_prefetch_depth_is_read_from_c(tmp_path, kwargs, depth):
    """The depth the C loader resolved (pl_tune_setup) is what Python reads
    (Loader.prefetch); the next epoch's order is guessed that many batches,
    twice over, before the end (_Engine._plan_guess), not from a second
    guess of the depth in Python."""
    np.save(tmp_path / "x.npy", np.arange(400, dtype=np.int64).reshape(100, 4))
    data = pinloader.datasets.NPY(str(tmp_path / "x.npy"))
    dl = pinloader.DataLoader(data, batch_size=2, shuffle=True, output="numpy", **kwargs)
    try:
        assert dl._ld.prefetch == depth
        it = iter(dl)
        assert dl._engine.look_at == (0, 50 - 2 * depth)
        assert len(list(it)) == 50
    finally:
        dl.close()
