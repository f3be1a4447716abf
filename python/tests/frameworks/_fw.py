"""Shared pieces of the framework scripts (not collected by pytest): a small
regression task, the same with torch's loader and pinloader's, and the
PASS/FAIL lines. Each script runs standalone and exits 1 on a mismatch."""
import sys

import torch

import pinloader

FAILED = []


class Data(torch.utils.data.Dataset):
    """64 samples (x float32 [8], y float32 [1]), the same for every run."""

    def __init__(self, n=64):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(n, 8, generator=g)
        self.y = self.x @ torch.linspace(-1, 1, 8).unsqueeze(1) + 0.1 * torch.randn(n, 1, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class DictData(Data):
    """The same samples as {"x", "labels"} (the HF Trainer's batches)."""

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


def model():
    torch.manual_seed(0)
    return torch.nn.Linear(8, 1)


def loader(kind, dataset, batch_size=8, shuffle=True, seed=7, **kw):
    """torch's or pinloader's DataLoader, same arguments (a seeded generator)."""
    cls = pinloader.DataLoader if kind == "pinloader" else torch.utils.data.DataLoader
    g = torch.Generator().manual_seed(seed) if shuffle else None
    return cls(dataset, batch_size=batch_size, shuffle=shuffle, generator=g, **kw)


def check(name, ok, detail=""):
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
    if not ok:
        FAILED.append(name)


def compare(name, torch_losses, pl_losses):
    check(name, len(torch_losses) > 0 and torch_losses == pl_losses,
          "torch %s | pinloader %s" % (_fmt(torch_losses), _fmt(pl_losses)))


def _fmt(xs):
    return "[%s] (%d steps)" % (", ".join("%.6f" % x for x in xs), len(xs))


def note(text):
    print("NOTE " + text, flush=True)


def finish():
    print("%d FAIL" % len(FAILED) if FAILED else "ALL PASS", flush=True)
    sys.exit(1 if FAILED else 0)
