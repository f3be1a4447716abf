"""HF accelerate with pinloader: prepare() on one process and with two CPU
processes (debug_launcher, gloo), two epochs, losses against torch's loader
under the same seeds.

What prepare() does to a DataLoader (accelerate/data_loader.py,
prepare_data_loader): it always builds a new torch.utils.data.DataLoader
from the loader's attributes (DataLoaderShard.base_dataloader), for any
subclass: a prepared pinloader loader is torch's loader. This script says
so (NOTE lines) and checks what iterates. The way to keep pinloader: do not
prepare the loader (prepare the model and optimizer), shard it with
sampler=DistributedSampler(rank, world) (or pinloader's seed= with rank=,
world_size=), and move batches with accelerator.device."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import _fw  # noqa: E402
import pinloader  # noqa: E402
from accelerate import Accelerator, debug_launcher  # noqa: E402
from accelerate.utils import set_seed  # noqa: E402


def train(acc, kind, prepare_loader, epochs=2):
    set_seed(0)
    net = _fw.model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    ds = _fw.Data()
    if prepare_loader:
        dl = own = _fw.loader(kind, ds, batch_size=8, shuffle=True)
        net, opt, dl = acc.prepare(net, opt, dl)
        base = getattr(dl, "base_dataloader", dl)
    else:
        sampler = torch.utils.data.DistributedSampler(ds, num_replicas=acc.num_processes,
                                                      rank=acc.process_index, shuffle=True, seed=7)
        cls = pinloader.DataLoader if kind == "pinloader" else torch.utils.data.DataLoader
        dl = base = own = cls(ds, batch_size=8, sampler=sampler)
        net, opt = acc.prepare(net, opt)
    losses = []
    for epoch in range(epochs):
        if not prepare_loader:
            dl.sampler.set_epoch(epoch)
        for x, y in dl:
            x, y = x.to(acc.device), y.to(acc.device)
            loss = torch.nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            acc.backward(loss)
            opt.step()
            losses.append(loss.item())
    delivered = base.stats()["batches_delivered"] if isinstance(base, pinloader.DataLoader) else 0
    for d in (base, own):
        if isinstance(d, pinloader.DataLoader):
            d.close()  # no loader threads left when debug_launcher forks
    return {"losses": losses, "iterated": type(base).__module__ + "." + type(base).__qualname__,
            "delivered": delivered, "outer": type(dl).__name__}


def run_all(acc):
    out = {}
    for prep in (True, False):
        for kind in ("torch", "pinloader"):
            out["%s-%s" % ("prepared" if prep else "unprepared", kind)] = train(acc, kind, prep)
    return out


def report(tag, results):
    t, p = results["prepared-torch"], results["prepared-pinloader"]
    _fw.compare("%s prepare(loader): losses" % tag, t["losses"], p["losses"])
    if p["iterated"] != "pinloader.DataLoader":
        _fw.note("%s: prepare() replaced pinloader's loader: what iterates is %s (in %s)"
                 % (tag, p["iterated"], p["outer"]))
    t, p = results["unprepared-torch"], results["unprepared-pinloader"]
    _fw.compare("%s loader not prepared, DistributedSampler: losses" % tag, t["losses"], p["losses"])
    _fw.check("%s loader not prepared: pinloader iterates" % tag,
              p["iterated"] == "pinloader.DataLoader" and p["delivered"] > 0, p["iterated"])


def _worker(outdir):
    acc = Accelerator(cpu=True)
    res = run_all(acc)
    with open(os.path.join(outdir, "rank%d.json" % acc.process_index), "w") as f:
        json.dump(res, f)


def main():
    if sys.argv[1:2] == ["--two"]:  # a fresh process: accelerate's state is per process
        debug_launcher(_worker, args=(sys.argv[2],), num_processes=2)
        return
    acc = Accelerator(cpu=True)
    report("1 process:", run_all(acc))
    outdir = tempfile.mkdtemp(prefix="acc-fw-")
    rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--two", outdir]).returncode
    _fw.check("2 processes: debug_launcher exit status 0", rc == 0, str(rc))
    for r in range(2):
        path = os.path.join(outdir, "rank%d.json" % r)
        _fw.check("2 processes: rank %d finished" % r, os.path.exists(path))
        if os.path.exists(path):
            with open(path) as f:
                report("2 processes, rank %d:" % r, json.load(f))
    _fw.finish()


if __name__ == "__main__":
    main()
