"""The loader in a torch.distributed.checkpoint next to the model and the
optimizer: two gloo processes on the CPU save mid-epoch and exit; two new
ones load and load exactly the samples the first ones had left, rank by
rank; three new ones (elastic) load the rest of the epoch between them,
every sample once (the loader's own order, seed=). Each process is waited
for by its exit (a hang fails after the limit, it never decides a pass).
Where torch.distributed.checkpoint does not import (torch 1.13 under
Python 3.11: its _shard package fails on a dataclass default), the ranks
write the same flat state dict through the coordinator with torch.save
(dcp_rank.py): pinloader.DCPState is the same either way."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is needed", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT_S = 300


def _run(phase, world, ckpt, kind, k=2):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in sys.path if p])
    procs, outs = [], []
    for r in range(world):
        out = os.path.join(ckpt, "%s-%d-%d.json" % (phase, world, r))
        outs.append(out)
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "dcp_rank.py"), phase, str(r),
                                       str(world), ckpt, out, kind, str(k)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=LIMIT_S)[0].decode(errors="replace"))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log
    results = []
    for out in outs:
        with open(out) as f:
            results.append(json.load(f))
    return results


def _samples(batches):
    return [v for b in batches for v in b]


@pytest.mark.parametrize("kind", ["seed", "distributed_sampler"])
def test_dcp_two_ranks_restart(tmp_path, kind):
    ckpt = str(tmp_path)
    saved = _run("save", 2, ckpt, kind)
    loaded = _run("load", 2, ckpt, kind)
    for r in range(2):
        assert loaded[r]["rest"] == saved[r]["rest"], "rank %d" % r
        assert loaded[r]["weight"] == saved[r]["weight"]
    seen = sorted(_samples(saved[0]["taken"] + saved[1]["taken"] + saved[0]["rest"] + saved[1]["rest"]))
    assert seen == list(range(60))


def test_dcp_elastic_two_to_three_ranks(tmp_path):
    ckpt = str(tmp_path)
    saved = _run("save", 2, ckpt, "seed")
    loaded = _run("load", 3, ckpt, "seed")
    before = _samples(saved[0]["taken"] + saved[1]["taken"])
    after = _samples(sum((x["rest"] for x in loaded), []))
    assert len(before) == 12 and len(after) == 48
    assert sorted(before + after) == list(range(60))  # every sample once


def test_dcp_elastic_refused_for_a_sampler(tmp_path):
    ckpt = str(tmp_path)
    _run("save", 2, ckpt, "distributed_sampler")
    loaded = _run("load", 3, ckpt, "distributed_sampler")
    for x in loaded:
        assert x["error"].startswith("load_state_dict(): the checkpoint was saved by 2 ranks, this "
                                     "run has 3")


def test_dcp_state_without_a_process_group():
    """One process, no process group: DCPState round-trips the loader's state."""
    import numpy as np

    import pinloader
    from resume_data import StatefulPerm

    a = pinloader.DataLoader(np.arange(20), batch_size=3, sampler=StatefulPerm(20, 2))
    it = iter(a)
    next(it)
    saved = pinloader.DCPState(a).state_dict()
    assert list(saved) == ["pinloader_ranks"] and isinstance(saved["pinloader_ranks"], bytes)
    rest = [x.tolist() for x in it]
    b = pinloader.DataLoader(np.arange(20), batch_size=3, sampler=StatefulPerm(20, 2))
    pinloader.DCPState(b).load_state_dict(saved)
    assert [x.tolist() for x in b] == rest
