"""Fork safety with real os.fork() (issue 17): a forked child that uses an
inherited DataLoader gets a clear pinloader.Error, never a hang; a child
that merely exits (running atexit, which closes every loader) never hangs;
a child can build and use a loader of its own. Through the public API only."""
import os
import subprocess
import sys
import textwrap

import numpy as np

from conftest import write_cifar

SCRIPT = textwrap.dedent(
    r"""
    import os, signal, sys
    import numpy as np
    import pinloader
    path, mode = sys.argv[1], sys.argv[2]
    ds = pinloader.datasets.CIFAR10([path])
    loader = pinloader.DataLoader(ds, batch_size=4, num_workers=3, output="numpy")
    it = iter(loader)
    next(it)  # workers busy prefetching while we fork
    for k in range(8):
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a hang dies of SIGALRM: the parent sees it
            if mode == "use":
                try:
                    next(it)
                except pinloader.Error as e:
                    want = "a forked child (process %d) cannot use it: create a new loader" % os.getpid()
                    if want not in str(e) or "created in process %d" % os.getppid() not in str(e):
                        print("wrong message:", e)
                        os._exit(2)
                else:
                    os._exit(3)
                mine = pinloader.DataLoader(ds, batch_size=5, num_workers=2, output="numpy")
                n = sum(len(lab) for img, lab in mine)
                if n != len(ds):
                    os._exit(4)
            sys.exit(0)  # atexit closes the inherited loader: must not hang
        _, st = os.waitpid(pid, 0)
        if not os.WIFEXITED(st) or os.WEXITSTATUS(st) != 0:
            print("child", k, "status", st)
            sys.exit(1)
    n = 4 + sum(len(lab) for img, lab in it)
    print("parent", n)
    """
)


def _run(tmp_path, mode):
    rng = np.random.default_rng(0)
    path = write_cifar(tmp_path / "d.bin", rng.integers(0, 256, (60, 3, 32, 32)), rng.integers(0, 10, 60))
    r = subprocess.run([sys.executable, "-c", SCRIPT, path, mode], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("parent 60")


def test_child_using_inherited_loader_gets_error(tmp_path):
    _run(tmp_path, "use")


def test_child_that_only_exits_does_not_hang(tmp_path):
    _run(tmp_path, "exit")
