"""Regressions of the samples' layout (python/pinloader/_engine.py _learn,
_later_layout, relearn_epoch; _loader.py _start): a Python dataset's layout
is taken from the first sample read. Where that sample raised, and so did
every other sample the first batches hold (batch_size=1, or all workers'
first batches), the loader was laid out on a placeholder (one int64 field)
and every later batch of the iteration, and of every iteration after it,
failed with "field 'data' is dict but the first sample's was int64 ()";
torch's DataLoader raises at the failing batches and yields the others.
Likewise after an epoch with no sample (a sampler empty in its first
epoch). Found by the differential suite (case 1972). Torch's DataLoader is
the oracle: each iteration is read to its end, the exceptions caught and
iterating going on, as a training loop that skips a bad batch does."""
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader as TorchLoader
from torch.utils.data import Dataset

import pinloader


class Failing(Dataset):
    """dataset[i] raises for i in bad, else a dict of an array and a float."""

    def __init__(self, bad, n=8):
        self.bad, self.n = set(bad), n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i in self.bad:
            raise ValueError("bad sample %d" % i)
        return {"x": np.full(2, i, np.int16), "y": float(i)}


class EpochSampler:
    """Epoch e's indices are orders[e % len(orders)] (a new list each
    iter(), as a curriculum or a filtered sampler gives)."""

    def __init__(self, orders):
        self.orders, self.epoch = orders, 0

    def __iter__(self):
        order = self.orders[self.epoch % len(self.orders)]
        self.epoch += 1
        return iter(order)

    def __len__(self):
        return len(self.orders[self.epoch % len(self.orders)])


ORDERS = {
    "seq": None,
    # epoch 0's every sample raises (with bad={0, 1}), epoch 1 reads
    "all_fail_then_read": [[0, 1], [4, 5, 6], [0, 7]],
    # epoch 0 has no sample at all
    "empty_then_read": [[], [4, 5, 6], [1, 2, 3, 4]],
}


def _epochs(make, epochs=3):
    """Per iteration: each batch's x[:, 0] as a list, or "E<i>" for a batch
    that raised dataset[i]'s ValueError (iterating goes on after it)."""
    loader = make()
    out = []
    try:
        for _ in range(epochs):
            got, it = [], iter(loader)
            while True:
                try:
                    b = next(it)
                except StopIteration:
                    break
                except ValueError as e:
                    assert "bad sample" in str(e), e  # not a layout mismatch
                    got.append("E" + str(e).rsplit("bad sample ", 1)[1].split()[0])
                    continue
                got.append(b["x"][:, 0].tolist())
            out.append(got)
    finally:
        if hasattr(loader, "close"):
            loader.close()
    return out


CASES = [(0, "process", False)] + [(2, "process", False), (2, "process", True),
                                   (2, "thread", False)]


@pytest.mark.parametrize("workers,mode,persistent", CASES,
                         ids=["w%d-%s%s" % (w, m, "-persistent" if p else "") for w, m, p in CASES])
@pytest.mark.parametrize("order", list(ORDERS))
def test_first_batches_raising_or_empty_epoch_lay_out_later_samples_as_torch(
        workers, mode, persistent, order):
    bad = {0, 1}  # batch_size 1: the first batch (and with 2 workers, both first ones)

    def kw():
        out = {"batch_size": 1, "num_workers": workers}
        if workers:
            out["persistent_workers"] = persistent
        if ORDERS[order] is not None:
            out["sampler"] = EpochSampler(ORDERS[order])
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: more workers than cores
        want = _epochs(lambda: TorchLoader(Failing(bad), **kw()))
        got = _epochs(lambda: pinloader.DataLoader(
            Failing(bad), **kw(), **({"worker_mode": mode} if workers else {})))
    assert got == want
    assert any(isinstance(b, list) for epoch in got for b in epoch)  # data came


def test_later_layout_reads_nothing_more_than_needed():
    """The layout after a raising first batch is read from the next sample
    that reads (read once for it, its random states put back), not from
    every sample: a dataset that counts its reads sees one more read."""
    class Counting(Failing):
        def __init__(self):
            super().__init__({0})
            self.reads = []

        def __getitem__(self, i):
            self.reads.append(i)
            return super().__getitem__(i)

    ds = Counting()
    loader = pinloader.DataLoader(ds, batch_size=1)
    it = iter(loader)
    with pytest.raises(ValueError, match="bad sample 0"):
        next(it)
    assert ds.reads == [0, 1]  # dataset[0] raised; dataset[1] gave the layout
    x = next(it)["x"]
    assert x.tolist() == [[1, 1]] and x.dtype == torch.int16
    loader.close()
