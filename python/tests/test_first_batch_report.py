"""report() gives the time to the first batch: after DataLoader(), after
the first iter(), and after the first iter() following load_state_dict()
(structure and order of the times only: no wall-clock thresholds)."""
import numpy as np
import pytest

import pinloader
import pyw_data


@pytest.mark.parametrize("workers", [0, 2])
def test_report_has_first_batch_times(workers):
    dl = pinloader.DataLoader(np.arange(40), batch_size=4, shuffle=True, seed=2, num_workers=workers)
    assert dl.report(json=True)["first_batch"] == {"after_init_s": None, "after_iter_s": None,
                                                   "after_restore_s": None, "workers": None,
                                                   "workers_start_s": None, "workers_ready_s": None}
    assert "first batch:" not in dl.report()
    it = iter(dl)
    next(it)
    st = dl.state_dict()
    list(it)
    fb = dl.report(json=True)["first_batch"]
    assert 0 < fb["after_iter_s"] <= fb["after_init_s"] and fb["after_restore_s"] is None
    if workers:  # (an array is a Python dataset: read by worker processes)
        assert fb["workers"] == 2
        # (Started by the report() above, before iter(): within the time
        # from DataLoader().)
        assert 0 < fb["workers_start_s"] <= fb["workers_ready_s"] <= fb["after_init_s"]
    else:
        assert fb["workers"] is None and fb["workers_start_s"] is None and fb["workers_ready_s"] is None
    list(dl)  # a later epoch changes nothing
    assert dl.report(json=True)["first_batch"] == fb
    dl.load_state_dict(st)
    got = list(dl)
    assert len(got) == 9
    fb2 = dl.report(json=True)["first_batch"]
    assert fb2["after_restore_s"] > 0 and fb2["after_iter_s"] == fb["after_iter_s"]
    text = dl.report().splitlines()
    assert text[1].startswith("first batch: ") and "after iter() following load_state_dict()" in text[1]
    dl.close()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_report_first_batch_says_what_the_worker_processes_took(method):
    dl = pinloader.DataLoader(pyw_data.Indexed(24), batch_size=4, num_workers=2,
                              multiprocessing_context=method)
    it = iter(dl)
    x, y = next(it)
    assert x.tolist() == [[i] * 3 for i in range(4)] and y.tolist() == [0, 1, 2, 3]
    fb = dl.report(json=True)["first_batch"]
    assert fb["workers"] == 2
    # Started at iter(), all ready before the first batch came.
    assert 0 < fb["workers_start_s"] <= fb["workers_ready_s"] <= fb["after_iter_s"]
    line = dl.report().splitlines()[1]
    assert line.startswith("first batch: ")
    assert "; 2 worker processes started in " in line and ", all ready " in line
    assert [b[1].tolist() for b in it] == [list(range(k, k + 4)) for k in range(4, 24, 4)]
    assert dl.report(json=True)["first_batch"] == fb  # the first iteration's, kept
    dl.close()
