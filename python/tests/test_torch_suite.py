"""PyTorch's own DataLoader tests (torch_suite/test_dataloader.py, unmodified,
from Debian's source package pytorch 1.13.1+dfsg-4) run with
torch.utils.data.DataLoader replaced by pinloader.DataLoader, against the
outcomes listed in torch_suite/expected.txt (see torch_suite/README.md).

Fails when a test listed as passing fails, times out or crashes; tests that
newly pass are printed (update expected.txt). Skipped where the installed
torch is not the release the file is from: another torch's DataLoader tests
would not be comparable.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "torch_suite", "run.py")

_spec = importlib.util.spec_from_file_location("torch_suite_run", RUN)
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def _skip_reason():
    if os.environ.get("PINLOADER_SKIP_TORCH_SUITE") == "1":
        # scripts/test.sh runs the Python suite 3 times (CUDA build, host-only
        # build, installed wheel); the torch suite needs one of them.
        return "PINLOADER_SKIP_TORCH_SUITE=1"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed: the torch suite needs it"
    ok, version = suite.torch_version_matches()
    if not ok:
        return "torch %s installed; torch_suite/test_dataloader.py is torch %s's" % (
            version, suite.SUITE_TORCH_VERSION)
    return None


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_torch_dataloader_suite_has_no_regressions(tmp_path):
    # The runner in a process of its own: it starts (and, on a hang, kills)
    # its own child processes, away from this pytest's state. The per-test
    # limit only stops a new hang (the known ones are not run): generous, as
    # test_multiprocessing_contexts alone takes ~50 s on a loaded 2-core box.
    p = subprocess.run([sys.executable, RUN, "-j", "2", "--timeout", "300",
                        "--log", str(tmp_path / "torch-suite.log")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       stdin=subprocess.DEVNULL)
    print(p.stdout)
    regressions = [l for l in p.stdout.splitlines() if l.startswith("REGRESSION")]
    assert p.returncode == 0 and not regressions, "\n".join(regressions) or p.stdout[-3000:]
