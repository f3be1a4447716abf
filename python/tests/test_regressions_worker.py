"""Regressions of the worker side (python/pinloader/_worker.py, _collate.py,
samples.c, batches.c): a dataset's exception that cannot be printed or
pickled, a user's forked child exiting, dict samples with keys in another
order, zero-size dimensions, uint16 fields on a torch without uint16,
negative sampler indices, and workers that exit quietly when a start fails.
Torch's DataLoader is the oracle where it defines the behaviour."""
import os
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader as TorchLoader
from torch.utils.data import Dataset

import pinloader


# ---------------------------------------------------------------- item 12: odd exceptions

class BadStr(Exception):
    """An exception whose __str__ raises (it pickles)."""

    def __str__(self):
        raise ValueError("no str for you")


class Unpicklable(Exception):
    """An exception that does not pickle (it holds a lock); its type can be
    rebuilt from a message, as torch's ExceptionWrapper rebuilds it."""

    def __init__(self, msg):
        super().__init__(msg)
        self.lock = threading.Lock()


class NeedsTwo(Exception):
    """Does not pickle, and its type cannot be built from a message alone."""

    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code
        self.lock = threading.Lock()


class BadStrUnpicklable(Unpicklable):
    def __str__(self):
        raise ValueError("no str either")


class Raising(Dataset):
    def __init__(self, exc):
        self.exc = exc

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise self.exc()
        return torch.tensor([i])


def _make(kind):
    return {"badstr": lambda: BadStr("x"), "unpicklable": lambda: Unpicklable("msg here"),
            "needstwo": lambda: NeedsTwo("msg here", 7),
            "both": lambda: BadStrUnpicklable("y")}[kind]


def _raised(loader):
    with pytest.raises(BaseException) as info:
        list(loader)
    return info.value


@pytest.mark.parametrize("kind", ["badstr", "unpicklable", "needstwo", "both"])
def test_worker_exception_that_cannot_print_or_pickle_is_reported(kind):
    ds = Raising(_make(kind))
    want = type(_raised(TorchLoader(ds, batch_size=2, num_workers=2)))
    assert want is {"badstr": BadStr, "unpicklable": Unpicklable, "needstwo": RuntimeError,
                    "both": BadStrUnpicklable}[kind]  # torch's own
    assert type(_raised(pinloader.DataLoader(ds, batch_size=2, num_workers=0))) is type(_make(kind)())
    e = _raised(pinloader.DataLoader(ds, batch_size=2, num_workers=2))
    assert type(e) is want, repr(e)
    note = "\n".join(getattr(e, "__notes__", []))
    assert re.search(r"pinloader: raised by dataset\[5\] in worker [01] \(pid \d+\)", note), note
    if kind == "unpicklable":
        assert e.args == ("msg here",)
    if kind == "needstwo":
        assert str(e) == "test_regressions_worker.NeedsTwo: msg here"
    if kind == "both":  # its str() raises: rebuilt from its repr
        assert e.args == ("BadStrUnpicklable('y')",)


# ---------------------------------------------------------------- workers exit quietly

QUIET_MODULE = textwrap.dedent(
    r"""
    import select, socket, sys
    import torch
    from torch.utils.data import Dataset, get_worker_info


    class DS(Dataset):
        def __init__(self, barrier):
            self.barrier = barrier

        def __len__(self):
            return 64

        def __getitem__(self, i):
            return torch.tensor([i])


    def _own_socket():
        # The worker's socket to the parent: a local of the worker's loop.
        f = sys._getframe()
        while f is not None:
            s = f.f_locals.get("sock")
            if isinstance(s, socket.socket):
                return s
            f = f.f_back
        raise AssertionError("no socket")


    def init(w):
        get_worker_info().dataset.barrier.wait()  # all four started
        if w == 0:
            raise ValueError("init failed in worker 0")
        # The others answer "ready" only once the parent has given up and
        # shut their sockets: the reply meets a closed pipe.
        s = _own_socket()
        select.select([s], [], [])
    """
)

QUIET_SCRIPT = textwrap.dedent(
    r"""
    import multiprocessing as mp
    import pinloader
    from quietmod import DS, init
    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        dl = pinloader.DataLoader(DS(ctx.Barrier(4)), batch_size=2, num_workers=4,
                                  worker_init_fn=init, multiprocessing_context=ctx)
        try:
            list(dl)
        except ValueError as e:
            print("got:", e)
    """
)


def test_failed_start_other_workers_exit_quietly(tmp_path):
    (tmp_path / "quietmod.py").write_text(QUIET_MODULE)
    (tmp_path / "main.py").write_text(QUIET_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    r = subprocess.run([sys.executable, str(tmp_path / "main.py")], capture_output=True, text=True,
                       timeout=240, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "got: init failed in worker 0\n", r.stdout + r.stderr
    assert "BrokenPipeError" not in r.stderr and "Traceback" not in r.stderr, r.stderr
