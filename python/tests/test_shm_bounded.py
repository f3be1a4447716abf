"""Issue 11: a bounded /dev/shm (Docker's default is 64 MB) does not matter.

Worker processes write batches into memfd pages (memfd_create), which are
not counted against the /dev/shm mount. The test proves it under a bound far
smaller than one batch: in a private mount namespace (`unshare -m`, root
only) it mounts a 1 MB tmpfs on /dev/shm, shows that a 2 MB file cannot be
written there (ENOSPC: the bound is real), then loads 4 MiB batches with two
worker processes under each start method for two epochs, checking every
byte, and checks that nothing was left in /dev/shm."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pinloader

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE_BYTES = 64 * 1024
BATCH = 64           # 64 samples of 64 KiB: a 4 MiB batch, 4x the bound
SAMPLES = 4 * BATCH  # 4 batches an epoch, with 2 workers and prefetching
SHM_BOUND = "1m"


def expected(i):
    """Sample i's bytes: a function of its index and of each byte's offset."""
    return ((np.arange(SAMPLE_BYTES, dtype=np.uint32) * 7 + i * 13) % 251).astype(np.uint8)


class Patterned:
    """Sample i: (uint8 [64 KiB] from expected(i), i). Importable by name,
    so spawn and forkserver workers can unpickle it."""

    def __len__(self):
        return SAMPLES

    def __getitem__(self, i):
        return expected(i), i


CHILD = textwrap.dedent("""
    import errno, os, sys
    import numpy as np
    import pinloader
    import test_shm_bounded as T

    st = os.statvfs("/dev/shm")
    shm_bytes = st.f_blocks * st.f_frsize
    assert shm_bytes <= 1 << 20, shm_bytes
    print("shm_bytes", shm_bytes)

    # The contrast: an ordinary 2 MB file does not fit.
    probe = "/dev/shm/pinloader-probe"
    try:
        with open(probe, "wb") as f:
            f.write(b"\\0" * (2 << 20))
            f.flush()
            os.fsync(f.fileno())
        print("probe written")
    except OSError as e:
        print("probe", errno.errorcode[e.errno])
    finally:
        if os.path.exists(probe):
            os.unlink(probe)
    before = sorted(os.listdir("/dev/shm"))

    for method in ("fork", "forkserver", "spawn"):
        loader = pinloader.DataLoader(T.Patterned(), batch_size=T.BATCH, num_workers=2,
                                      shuffle=True, seed=5, multiprocessing_context=method,
                                      output="numpy")
        assert loader.worker_mode == "process", loader.worker_mode
        for epoch in range(2):
            seen, batches, memfd = [], 0, False
            for data, idx in loader:
                data, idx = np.asarray(data), np.asarray(idx)
                assert data.shape == (T.BATCH, T.SAMPLE_BYTES) and data.dtype == np.uint8, data.shape
                for row, i in zip(data, idx):
                    assert np.array_equal(row, T.expected(int(i))), (method, epoch, int(i))
                seen += [int(i) for i in idx]
                batches += 1
                if not memfd:
                    with open("/proc/%d/maps" % loader.worker_pids[0]) as f:
                        memfd = "memfd:pinloader-batch" in f.read()
            assert sorted(seen) == list(range(T.SAMPLES)), (method, epoch)
            assert memfd, (method, "the worker does not map the batch memfd")
            print(method, "epoch", epoch, "batches", batches, "samples", len(seen), "exact")
        loader.close()
    after = sorted(os.listdir("/dev/shm"))
    assert after == before, (before, after)
    st = os.statvfs("/dev/shm")
    print("shm_used_after", (st.f_blocks - st.f_bfree) * st.f_frsize)
    print("OK")
""")


def _namespace_command(argv):
    """argv run with a private 1 MB /dev/shm; skips the test where that is not permitted."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs unshare(1) and mount(8)")
    mount = "mount -t tmpfs -o size=%s tmpfs /dev/shm" % SHM_BOUND
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", mount],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("cannot mount a private /dev/shm (needs root and mount namespaces): %s"
                    % (probe.stderr.strip() or "exit %d" % probe.returncode))
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            mount + ' && exec "$@"', "sh"] + argv


def test_batches_far_larger_than_a_bounded_dev_shm():
    cmd = _namespace_command([sys.executable, "-c", CHILD])
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(pinloader.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, pkg, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=HERE, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "shm_bytes %d" % (1 << 20)
    assert lines[1] == "probe ENOSPC"  # the bound is real for a plain file
    want = ["%s epoch %d batches 4 samples %d exact" % (m, e, SAMPLES)
            for m in ("fork", "forkserver", "spawn") for e in (0, 1)]
    assert lines[2:8] == want
    assert lines[8] == "shm_used_after 0"
    assert lines[9:] == ["OK"]
