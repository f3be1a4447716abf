"""Loader behaviour: order, epochs, sharding, batches kept alive, state_dict,
Ctrl-C. Runs with numpy alone (output='numpy')."""
import _thread
import threading
import time

import numpy as np
import pytest

import pinloader


def order(loader):
    return np.concatenate([np.array(b[0]) for b in loader]).tolist()


def test_same_seed_same_order_and_epochs_differ(indexed_records):
    ds, _ = indexed_records
    a = pinloader.DataLoader(ds, batch_size=7, shuffle=True, seed=5, output="numpy")
    b = pinloader.DataLoader(ds, batch_size=7, shuffle=True, seed=5, num_workers=2, output="numpy")
    a0, a1 = order(a), order(a)  # iterating again starts the next epoch
    assert sorted(a0) == list(range(100)) and sorted(a1) == list(range(100))
    assert a0 != list(range(100))
    assert a0 != a1
    assert order(b) == a0 and order(b) == a1
    b.set_epoch(1)
    assert order(b) == a1
    c = pinloader.DataLoader(ds, batch_size=7, shuffle=True, seed=6, output="numpy")
    assert order(c) != a0


def test_no_shuffle_is_index_order_every_epoch(indexed_records):
    ds, _ = indexed_records
    loader = pinloader.DataLoader(ds, batch_size=9, num_workers=2, output="numpy")
    assert order(loader) == list(range(100))
    assert order(loader) == list(range(100))


def test_break_then_iterate_starts_next_epoch(indexed_records):
    ds, _ = indexed_records
    ref = pinloader.DataLoader(ds, batch_size=10, shuffle=True, seed=3, output="numpy")
    e0, e1 = order(ref), order(ref)
    loader = pinloader.DataLoader(ds, batch_size=10, shuffle=True, seed=3, output="numpy")
    it = iter(loader)
    assert np.array(next(it)[0]).tolist() == e0[:10]
    # A second iterator while `it` is alive is independent, as torch's: it
    # loads the next epoch, and `it` goes on with its own.
    assert order(loader) == e1
    assert np.array(next(it)[0]).tolist() == e0[10:20]
    del it
    loader2 = pinloader.DataLoader(ds, batch_size=10, shuffle=True, seed=3, output="numpy")
    for _ in loader2:
        break  # abandoned mid-epoch (the iterator is gone): the next iter() starts epoch 1
    assert order(loader2) == e1


def test_len_and_sharding(indexed_records):
    ds, _ = indexed_records
    assert len(pinloader.DataLoader(ds, batch_size=8)) == 13
    assert len(pinloader.DataLoader(ds, batch_size=8, drop_last=True)) == 12
    r0 = pinloader.DataLoader(ds, batch_size=8, rank=0, world_size=3, output="numpy")
    r1 = pinloader.DataLoader(ds, batch_size=8, rank=1, world_size=3, output="numpy")
    r2 = pinloader.DataLoader(ds, batch_size=8, rank=2, world_size=3, output="numpy")
    assert len(r0) == 5  # ceil(100 / 3) = 34 samples each, padded as DistributedSampler
    seen = order(r0) + order(r1) + order(r2)
    assert len(seen) == 102 and set(seen) == set(range(100))


def test_batches_kept_alive_stay_correct(indexed_records):
    ds, rec = indexed_records
    loader = pinloader.DataLoader(ds, batch_size=5, shuffle=True, num_workers=2, max_batch_buffers=32,
                                  output="numpy")
    for _ in range(2):  # the second epoch reuses buffers released late
        kept = list(loader)
        assert len(kept) == 20
        idx = np.concatenate([k[0] for k in kept])
        assert sorted(idx.tolist()) == list(range(100))
        np.testing.assert_array_equal(np.concatenate([k[1] for k in kept]), rec["payload"][idx])
        del kept


def test_exhausted_pool_raises_clear_error(indexed_records):
    ds, _ = indexed_records
    loader = pinloader.DataLoader(ds, batch_size=5, max_batch_buffers=3, output="numpy")
    kept = []
    with pytest.raises(pinloader.Error) as e:
        for b in loader:
            kept.append(b)
    assert e.value.status == "PL_EXHAUSTED"
    assert "max_batch_buffers" in str(e.value) and "release" in str(e.value).lower()
    assert len(kept) == 3
    kept.clear()
    # Nothing was lost: iterating again resumes the same epoch where it
    # stopped (issue 17, item 7), then the next epoch is whole.
    assert order(loader) == list(range(15, 100))
    assert loader.epoch == 1
    assert order(loader) == list(range(100))


def test_state_dict_round_trip(indexed_records):
    ds, _ = indexed_records
    a = pinloader.DataLoader(ds, batch_size=8, shuffle=True, seed=11, output="numpy")
    order(a)  # epoch 0
    it = iter(a)
    head = [np.array(next(it)[0]).tolist() for _ in range(3)]
    state = a.state_dict()
    assert isinstance(state["state"], bytes)
    rest = [np.array(b[0]).tolist() for b in it]
    b = pinloader.DataLoader(ds, batch_size=8, shuffle=True, seed=11, num_workers=2, output="numpy")
    b.load_state_dict(state)
    assert [np.array(x[0]).tolist() for x in b] == rest
    assert sorted(sum(head + rest, [])) == list(range(100))
    with pytest.raises(ValueError):
        b.load_state_dict({"state": b"junk"})
    with pytest.raises(pinloader.Error):
        b.load_state_dict({"format": pinloader.STATE_FORMAT, "state": b"junk"})


class Slow:
    """Each sample takes 0.3 s; with `gate`, every worker's read waits for it
    to open instead, so that no batch can be complete until the test says so."""

    def __init__(self, gate=None):
        self.gate = gate
        self.reads = 0

    def __len__(self):
        return 100

    def __getitem__(self, i):
        self.reads += 1
        if self.gate is not None and threading.current_thread() is not threading.main_thread():
            self.gate.wait()  # the loader's probe of dataset[0] (main thread) passes
        else:
            time.sleep(0.3)
        return np.full(4, i, dtype=np.int32)


def test_ctrl_c_interrupts_a_wait():
    # No batch can arrive before the gate opens, so the interrupt can only
    # end a wait that is still going on (a wait blind to signals hangs).
    gate = threading.Event()
    loader = pinloader.DataLoader(Slow(gate), batch_size=50, num_workers=2, output="numpy")
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    got = 0
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in loader:
                got += 1
    finally:
        gate.set()
    assert got == 0
    loader.close()


def test_close_does_not_wait_for_whole_batches():
    # pl_loader_destroy: "never hangs on a worker stuck in a callback for
    # longer than that callback runs": workers stop between samples, so
    # close() leaves the batches unfinished (counted in reads, not timed).
    ds = Slow()
    loader = pinloader.DataLoader(ds, batch_size=50, num_workers=2, output="numpy")
    time.sleep(0.5)
    loader.close()
    reads = ds.reads
    assert reads < 50, reads  # a whole batch is 50 reads
    time.sleep(0.4)
    assert ds.reads == reads  # and no reads after it


def test_close_keeps_tensors_valid(indexed_records):
    ds, rec = indexed_records
    loader = pinloader.DataLoader(ds, batch_size=100, output="numpy")
    (idx, payload), = list(loader)
    loader.close()
    np.testing.assert_array_equal(payload, rec["payload"])
    with pytest.raises(pinloader.Error):
        len(loader)


def test_stats_count_deliveries(indexed_records):
    ds, _ = indexed_records
    loader = pinloader.DataLoader(ds, batch_size=10, output="numpy")
    order(loader)
    st = loader.stats()
    assert st["batches_delivered"] == 10 and st["samples_delivered"] == 100
