"""pinloader: PyTorch's DataLoader interface over a C loader.

    loader = pinloader.DataLoader(dataset, batch_size=256, shuffle=True,
                                  num_workers=8, device="cuda")
    for epoch in range(10):
        for image, label in loader:   # torch tensors on cuda:0, no extra copy
            ...

The C loader is the engine: it claims batches in order, prefetches, fills
them into (page-locked) batch buffers and, for device="cuda", copies each to
the GPU asynchronously. Native datasets (pinloader.datasets) are read by its
worker threads without the GIL. A Python dataset with num_workers > 0 is
read by worker PROCESSES that write each sample straight into the shared
batch buffer (a memfd the parent page-locks): no pickling of samples, no
pin-memory thread, no second host copy. Tensors share the batch's memory
through DLPack; a batch goes back to the pool when the last tensor made from
it is freed. See python/README.md, "Coming from torch".

This module is the public API; DataLoader and its options are _loader.py's,
made at first use (below: making it imports torch); a loader's
engine is _engine.py (its worker processes _procs.py, its iteration
_iterate.py), torch's sampler draws _orders.py, shared helpers _common.py.
"""
from . import _pinloader as _C
from . import _state
from . import _worker  # noqa: F401 (pinloader._worker, imported here as before)
from . import datasets
from . import transforms as _transforms
from ._dcp import DCPState
from ._pinloader import Error
from ._worker import sample_rng

# Private names this module held before the engine moved out, still
# reachable here (bench/startup_probe.py reads pinloader._Engine). To patch
# one, patch it in its own module, where the code looks it up.
from ._engine import _Engine  # noqa: E402,F401
from ._engine import _ITERABLE_BATCHES  # noqa: E402,F401
from ._iterate import _SKIP, _ENDS_ITERATION  # noqa: E402,F401
from ._procs import _readable, _rebuild, _WorkerView  # noqa: E402,F401

transforms = _transforms
__all__ = ["DataLoader", "DCPState", "Error", "datasets", "transforms", "cuda_available",
           "sample_rng", "__version__"]

__version__ = _C.version()

STATE_FORMAT = _state.STATE_FORMAT


def cuda_available():
    """True when this build has the CUDA backend and a device is usable."""
    return _C.cuda_available()


def __getattr__(name):
    """DataLoader, and the names _loader.py took from this module, at first
    use: _loader's class has torch's DataLoader as its base, so importing
    it imports torch (about 1 s of CPU), which a worker process, importing
    this package to run pinloader._worker, does not need."""
    if name.startswith("__") or name == "_loader":
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    import importlib

    _loader = importlib.import_module(__name__ + "._loader")
    try:
        value = getattr(_loader, name)
    except AttributeError:
        raise AttributeError("module %r has no attribute %r" % (__name__, name)) from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
