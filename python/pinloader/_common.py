"""Helpers shared by the modules of the Python side (__init__, _engine,
_iterate, _procs, _orders): torch when importable, pinloader.Error as the C
side makes them, the prefetch depth, the array conversions of a batch's
fields. A leaf: it imports none of pinloader's Python modules, so that
there is no import cycle (__init__ -> _engine -> _iterate / _procs /
_orders -> _common).
"""
from . import _pinloader as _C
from ._pinloader import Error


def _torch():
    try:
        import torch
        import torch.utils.dlpack  # noqa: F401
    except ImportError:
        return None
    return torch


def _numpy_from(fa):
    import numpy as np

    if fa.device[0] != "cpu":
        raise RuntimeError("numpy arrays cannot hold a CUDA batch: install torch, or use output='raw'")
    if hasattr(np, "from_dlpack"):
        return np.from_dlpack(fa)
    return np.asarray(fa)  # the buffer protocol


def _as_bool(x):
    """A uint8 field holding bools, viewed as bool (torch or numpy)."""
    if hasattr(x, "view") and hasattr(x, "dtype") and str(x.dtype).startswith("torch."):
        import torch

        return x.view(torch.bool)
    import numpy as np

    if isinstance(x, np.ndarray):
        return x.view(np.bool_)
    return x


def _cast(x, dtype):
    """x (a torch tensor or numpy array) as `dtype` ("int64")."""
    if hasattr(x, "to") and str(getattr(x, "dtype", "")).startswith("torch."):
        import torch

        return x.to(getattr(torch, dtype))
    if hasattr(x, "astype"):
        return x.astype(dtype)
    return x


def _from_dataset(exc):
    """Whether exc was raised by a Python dataset's __getitem__ (the note
    _pinloader adds; before 3.11 such errors are PL_CALLBACK Errors)."""
    notes = getattr(exc, "__notes__", None) or ()
    return any(str(n).startswith("pinloader: raised by dataset[") for n in notes)


def _add_note(exc, note):
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python < 3.11
        exc.__notes__ = list(getattr(exc, "__notes__", [])) + [note]


def _new_error(status, message):
    e = Error(message)
    e.status, e.code = status, _C.STATUS.get(status, 0)
    e.sample_index = e.path = e.errno = e.cuda_error = None  # as a C error without them
    return e


def _prefetch(prefetch_factor, num_workers):
    if prefetch_factor is None:  # torch >= 2's attribute without workers
        prefetch_factor = 2
    if isinstance(prefetch_factor, int) and isinstance(num_workers, int):
        return prefetch_factor * max(1, num_workers)
    return prefetch_factor  # not an int: the C side says what it must be
