"""report() gives the time to the first batch: after DataLoader(), after
the first iter(), and after the first iter() following load_state_dict()
(structure and order of the times only: no wall-clock thresholds)."""
import numpy as np
import pytest

import pinloader


@pytest.mark.parametrize("workers", [0, 2])
def test_report_has_first_batch_times(workers):
    dl = pinloader.DataLoader(np.arange(40), batch_size=4, shuffle=True, seed=2, num_workers=workers)
    assert dl.report(json=True)["first_batch"] == {"after_init_s": None, "after_iter_s": None,
                                                   "after_restore_s": None}
    assert "first batch:" not in dl.report()
    it = iter(dl)
    next(it)
    st = dl.state_dict()
    list(it)
    fb = dl.report(json=True)["first_batch"]
    assert 0 < fb["after_iter_s"] <= fb["after_init_s"] and fb["after_restore_s"] is None
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
