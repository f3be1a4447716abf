"""One rank of test_resume_dcp.py: a loader saved with the model and
optimizer in a torch.distributed.checkpoint (gloo, CPU), or loaded from
one. Usage: dcp_rank.py save|load RANK WORLD CKPT_DIR OUT_JSON KIND K
Writes what it loaded (and, for save, the model's weights) to OUT_JSON;
prints which checkpoint API it used."""
import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import pinloader

def _checkpoint_api():
    """(save, load) of torch.distributed.checkpoint, or None where it does
    not import: torch 1.13 has it as torch.distributed._shard.checkpoint,
    which fails to import under Python 3.11 (a dataclass default that 3.11
    refuses). Then: the same flat state dict, written by the coordinator
    with torch.save and read by every rank (what DCP does with values that
    are not sharded tensors)."""
    try:
        from torch.distributed.checkpoint import (FileSystemReader, FileSystemWriter,
                                                  load_state_dict, save_state_dict)
    except Exception:
        try:
            from torch.distributed._shard.checkpoint import (FileSystemReader, FileSystemWriter,
                                                             load_state_dict, save_state_dict)
        except Exception:
            return None
    return (lambda sd, d: save_state_dict(sd, FileSystemWriter(d)),
            lambda sd, d: load_state_dict(sd, FileSystemReader(d)))


def save(sd, d):
    api = _checkpoint_api()
    if api is not None:
        return api[0](sd, d)
    if dist.get_rank() == 0:
        torch.save(sd, os.path.join(d, "checkpoint.pt"))
    dist.barrier()


def load(sd, d):
    api = _checkpoint_api()
    if api is not None:
        return api[1](sd, d)
    got = torch.load(os.path.join(d, "checkpoint.pt"))
    for key, value in got.items():
        if isinstance(sd.get(key), torch.Tensor):
            sd[key].copy_(value)
        else:
            sd[key] = value


N = 60


def make_loader(kind, rank, world):
    if kind == "seed":
        return pinloader.DataLoader(np.arange(N), batch_size=3, shuffle=True, seed=5, rank=rank,
                                    world_size=world, num_workers=1)
    sampler = torch.utils.data.DistributedSampler(range(N), num_replicas=world, rank=rank, seed=5)
    return pinloader.DataLoader(np.arange(N), batch_size=3, sampler=sampler, num_workers=1)


def main():
    phase, rank, world, ckpt, out, kind, k = sys.argv[1:8]
    rank, world, k = int(rank), int(world), int(k)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(ckpt, "pg-%s-%d" % (phase, world)),
                            rank=rank, world_size=world)
    torch.manual_seed(0 if phase == "save" else 1)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = make_loader(kind, rank, world)
    result = {"api": "dcp" if _checkpoint_api() is not None else "torch.save"}
    if phase == "save":
        it = iter(loader)
        taken = []
        for _ in range(k):
            b = next(it)
            taken.append(b.tolist())
            loss = model(b.float().reshape(-1, 1).repeat(1, 4)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        dist.all_reduce(model.weight.data)  # the ranks' models agree (as DDP's would)
        dist.all_reduce(model.bias.data)
        state = {"model.weight": model.weight.data, "model.bias": model.bias.data,
                 "loader": pinloader.DCPState(loader).state_dict()}
        save(state, ckpt)
        result = {**result, "taken": taken, "rest": [b.tolist() for b in it],
                  "weight": model.weight.data.tolist()}
    else:
        state = {"model.weight": model.weight.data, "model.bias": model.bias.data,
                 "loader": pinloader.DCPState.placeholder()}
        load(state, ckpt)
        try:
            pinloader.DCPState(loader).load_state_dict(state["loader"])
            result.update(rest=[b.tolist() for b in loader], weight=model.weight.data.tolist())
        except pinloader.Error as e:
            result["error"] = str(e)
    loader.close()
    with open(out, "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
