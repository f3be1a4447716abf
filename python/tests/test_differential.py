"""Differential conformance: configurations drawn over pinloader's option
space (sources, tar shards among them, label dtypes, transform lists and orders, workers, worker
modes and start methods, orders, batch sizes, drop_last, persistent
workers, prefetch, state_dict / resume, epochs, break), each run through
pinloader and through an oracle independent of it (torch's DataLoader; for
native sources numpy readings of the files and docs/transforms.md in
numpy), every batch compared. See differential/runner.py and docs/testing.md.

PINLOADER_DIFF_N=<count>   how many configurations (default 180)
PINLOADER_DIFF_FIRST=<i>   the first configuration's id (default 0)
PINLOADER_DIFF_CASE=<ids>  only these (comma-separated ids)
"""
import gc
import os
import shlex
import sys

import pytest

torch = pytest.importorskip("torch")

import pinloader  # noqa: E402
from differential import runner, space  # noqa: E402

DEFAULT_N = 180

# torch's advice about more workers than this machine's cores
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")


def _ids():
    case = os.environ.get("PINLOADER_DIFF_CASE")
    if case:
        return [int(c) for c in case.replace(" ", "").split(",") if c]
    first = int(os.environ.get("PINLOADER_DIFF_FIRST", "0"))
    return list(range(first, first + int(os.environ.get("PINLOADER_DIFF_N", DEFAULT_N))))


@pytest.fixture(autouse=True)
def _collect():
    """A case's loaders, torch's worker queues (their semaphores) and the
    exceptions that hold them (with their tracebacks' frames) are freed
    before the next case, and before the other test files, which count
    file descriptors, mappings and child processes."""
    yield
    runner.HELD.clear()
    gc.collect()


def reproducer(i):
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("PYTHONPATH")
    env = "PINLOADER_DIFF_CASE=%d" % i + (" PYTHONPATH=%s" % shlex.quote(path) if path else "")
    return "cd %s && %s %s -m pytest -q -p no:cacheprovider test_differential.py" % (
        shlex.quote(here), env, sys.executable)


# PINLOADER_DIFF_N=0 (scripts/test.sh's second and third runs of the Python
# suite): no case, one skip that says so.
@pytest.mark.parametrize("case", _ids() or [pytest.param(None, marks=pytest.mark.skip(
    reason="PINLOADER_DIFF_N=0: no differential case in this run"), id="none")],
    ids=lambda i: "c%d" % i)
def test_differential(case, tmp_path):
    cfg = space.draw(case, cuda=pinloader.cuda_available())
    try:
        runner.run(cfg, str(tmp_path))
        failure = None
    except AssertionError as e:
        failure = str(e)
    if failure is not None:
        pytest.fail("REPRODUCE: %s\nconfig c%d: %s\n%s" % (reproducer(case), case, space.describe(cfg),
                                                          failure), pytrace=False)


def test_enumerator_is_deterministic():
    """A case id is its configuration on any machine and any budget."""
    assert space.draw(17) == space.draw(17)
    assert space.draw(17) != space.draw(18)
    assert space.draw(5, cuda=False)["device"] == "cpu"
