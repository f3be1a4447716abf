"""One configuration (space.draw) through pinloader and through its oracle,
every batch compared: structure, dtype, shape, memory format, device, bytes.

Oracles, independent of pinloader:
- Python datasets (map-style, IterableDataset): torch's DataLoader over the
  same dataset, the same sampler / batch_sampler / generator (fresh objects
  seeded alike), the same actions (epochs, break, a failing sample). torch
  runs with the configuration's num_workers, prefetch_factor and
  persistent_workers where they change what it draws (random orders:
  RandomSampler draws lazily, its trailing randperm only when an epoch ends;
  iterable datasets: each worker iterates its copy); otherwise with 0.
- Native datasets: a numpy reading of the files (native.py) and
  docs/transforms.md's definitions in numpy (oracle.py), in the order torch's
  DataLoader over range(n) draws with the same sampler and generator.
- seed= (the loader's own permutation of (seed, epoch), docs/distributed.md):
  no outside oracle exists for the permutation itself; its order is read from
  a fresh num_workers=0 pinloader loader at set_epoch(e) (checked to be a
  permutation; for drop_last, distinct), and everything else (values,
  transforms, workers, resume) is compared against the oracles above.
- Tokens with samples=N: the window starts are pinloader's draws (not
  documented to the bit): each x must be a window of one shard and y the
  same shifted by one (docs/sources.md, "Token shards").
"""
import os
import random

import numpy as np
import torch
from torch.utils.data import (BatchSampler, DataLoader as TorchLoader, RandomSampler,
                              SubsetRandomSampler, WeightedRandomSampler)

import pinloader
from pinloader import transforms as T

from . import native as N
from . import oracle as O
from . import pysources as P
from .space import RESUMABLE

RANDOM_ORDERS = ("shuffle_gen", "shuffle_global", "sampler_random", "sampler_subset",
                 "sampler_weighted", "batch_sampler")


class Mismatch(AssertionError):
    pass


# ---------------------------------------------------------------- snapshots

def _memfmt(t):
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return "channels_last"
    return "contiguous" if t.is_contiguous() else "strided %r" % (t.stride(),)


def snap(x):
    """A batch as plain data, taken at once (the batch memory goes back to
    the pool when its tensors are freed)."""
    if isinstance(x, torch.Tensor):
        data = x.detach().cpu().contiguous().reshape(-1)
        raw = data.view(torch.uint8).numpy().tobytes() if data.numel() else b""
        return ("T", str(x.dtype), tuple(x.shape), _memfmt(x), x.device.type, raw)
    if isinstance(x, dict):
        return ("D", type(x).__name__, [(k, snap(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return ("L", type(x).__name__, [snap(v) for v in x])
    return ("V", type(x).__name__, x)


def compare(got, want, where, device, dict_order=True):
    """Raises Mismatch naming the first difference (pinloader's `got`,
    the oracle's `want`)."""
    if got[0] != want[0] or got[1] != want[1]:
        raise Mismatch("%s: %s %s, oracle %s %s" % (where, got[0], got[1], want[0], want[1]))
    if got[0] == "T":
        _, dt, shape, fmt, dev, raw = got
        _, wdt, wshape, wfmt, _, wraw = want
        if (dt, shape) != (wdt, wshape):
            raise Mismatch("%s: %s%s, oracle %s%s" % (where, dt, list(shape), wdt, list(wshape)))
        if dev != device.split(":")[0]:
            raise Mismatch("%s: on %s, expected %s" % (where, dev, device))
        if fmt != wfmt:
            raise Mismatch("%s: memory %s, oracle %s" % (where, fmt, wfmt))
        if raw != wraw:
            g, w = np.frombuffer(raw, np.uint8), np.frombuffer(wraw, np.uint8)
            at = int(np.flatnonzero(g != w)[0])
            raise Mismatch("%s: %s%s bytes differ from byte %d of %d (got %s..., oracle %s...)"
                           % (where, dt, list(shape), at, len(w), g[at:at + 8].tolist(),
                              w[at:at + 8].tolist()))
    elif got[0] == "D":
        gk, wk = [k for k, _ in got[2]], [k for k, _ in want[2]]
        if (gk != wk) if dict_order else (sorted(map(str, gk)) != sorted(map(str, wk))):
            raise Mismatch("%s: keys %r, oracle %r" % (where, gk, wk))
        gd = dict(got[2])
        for k, v in want[2]:
            compare(gd[k], v, "%s[%r]" % (where, k), device, dict_order)
    elif got[0] == "L":
        if len(got[2]) != len(want[2]):
            raise Mismatch("%s: %d items, oracle %d" % (where, len(got[2]), len(want[2])))
        for i, (g, w) in enumerate(zip(got[2], want[2])):
            compare(g, w, "%s[%d]" % (where, i), device, dict_order)
    elif got[2] != want[2]:
        raise Mismatch("%s: %r, oracle %r" % (where, got[2], want[2]))


def compare_iteration(got, want, where, device, dict_order=True):
    """got/want: (list of snapshots, exception or None)."""
    (gb, ge), (wb, we) = got, want
    for j, (g, w) in enumerate(zip(gb, wb)):
        compare(g, w, "%s batch %d" % (where, j), device, dict_order)
    if len(gb) != len(wb):
        raise Mismatch("%s: %d batches, oracle %d%s" % (where, len(gb), len(wb),
                                                      "" if ge is None else " (pinloader raised %s: %s)"
                                                      % (type(ge).__name__, str(ge)[:200])))
    if (ge is None) != (we is None) or (ge is not None and type(ge) is not type(we)):
        raise Mismatch("%s: after %d batches pinloader raised %r, oracle %r"
                       % (where, len(gb), _short(ge), _short(we)))


def _short(e):
    return None if e is None else "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:160])


# ---------------------------------------------------------------- running

class ConsumerError(Exception):
    """Raised by the loop body (the consumer's code), not by the loader."""


HELD = []  # consumer exceptions kept alive (their tracebacks hold the iterator)


def iterate(loader, stop=None, at=None, on_batch=None, raise_in_body=False):
    """(snapshots, exception) of one iteration; stop: break after that
    many batches (raise_in_body: the loop body raises ConsumerError there
    instead, and the exception, whose traceback holds the iterator, is
    kept in HELD); on_batch(count) is called after batch `at` (a count)."""
    out, err = [], None
    it = None
    try:
        it = iter(loader)
        if on_batch is not None and at == 0:
            on_batch(0)
        if stop != 0:
            for b in it:
                out.append(snap(b))
                if on_batch is not None and at == len(out):
                    on_batch(len(out))
                if stop is not None and len(out) >= stop:
                    if raise_in_body:
                        raise ConsumerError("the consumer failed on batch %d" % (len(out) - 1))
                    break
    except ConsumerError as e:
        HELD.append(e)
    except Exception as e:  # compared with the oracle's
        err = e
    del it
    return out, err


def _gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def order_args(cfg, data_source, n):
    """Fresh order arguments (new sampler objects, generators seeded alike)
    for one loader; {} for seq. 'seed' is pinloader's own (see runner doc)."""
    o, s = cfg["order"], cfg["seed"]
    r = random.Random("order:%d" % cfg["id"])
    if o == "seq":
        return {}
    if o == "seed":
        return {"shuffle": True, "seed": s}
    if o == "shuffle_gen":
        return {"shuffle": True, "generator": _gen(s)}
    if o == "shuffle_global":
        return {"shuffle": True}
    if o == "sampler_random":
        rep = r.random() < 0.3
        ns = r.choice((None, None, r.randint(1, 2 * n)))
        return {"sampler": RandomSampler(data_source, replacement=rep, num_samples=ns, generator=_gen(s))}
    if o == "sampler_subset":
        idx = r.sample(range(n), r.randint(1, n))
        return {"sampler": SubsetRandomSampler(idx, generator=_gen(s))}
    if o == "sampler_weighted":
        w = [r.random() + 0.01 for _ in range(n)]
        return {"sampler": WeightedRandomSampler(w, r.randint(1, 2 * n), replacement=True,
                                                 generator=_gen(s))}
    if o == "sampler_list":
        idx = [r.randrange(n) for _ in range(r.randint(1, 2 * n))]
        return {"sampler": idx}
    if o == "batch_sampler":
        return {"batch_sampler": BatchSampler(RandomSampler(data_source, generator=_gen(s)),
                                              r.randint(1, n + 1), r.random() < 0.4)}
    if o == "batch_sampler_uneven":
        batches, left = [], list(range(n))
        r.shuffle(left)
        while left:
            k = r.randint(1, 6)
            batches.append(left[:k])
            left = left[k:]
        return {"batch_sampler": batches}
    raise ValueError(o)


def loader_args(cfg, workers, for_torch):
    kw = {"num_workers": workers}
    if not cfg["order"].startswith("batch_sampler"):
        kw["batch_size"] = cfg["batch_size"]
        kw["drop_last"] = cfg["drop_last"]
    if workers:
        kw["persistent_workers"] = cfg["persistent"]
        if cfg["prefetch"] is not None or for_torch:
            kw["prefetch_factor"] = cfg["prefetch"] or 2
        if for_torch:
            kw["multiprocessing_context"] = "fork"  # samples are functions of the index alone
    if not for_torch:
        kw["device"] = cfg["device"]
        if cfg["mode"] is not None:
            kw["worker_mode"] = cfg["mode"]
        if cfg["ctx"] is not None:
            kw["multiprocessing_context"] = cfg["ctx"]
        if cfg["in_order"] is not None:
            kw["in_order"] = cfg["in_order"]
    return kw


def torch_workers(cfg):
    """torch's num_workers for the oracle: the configuration's where it
    changes what torch draws or yields, else 0 (faster, the same batches)."""
    if cfg["source"] == "iter" and cfg["mode"] == "thread":
        # worker_mode="thread" reads an IterableDataset through one iterator
        # (pinloader/_engine.py, _Engine: "One iterator must be read in
        # order: one thread at most"): torch's single-process iteration.
        # Not in python/README.md (reported).
        return 0
    if cfg["source"] == "iter" or cfg["order"] in RANDOM_ORDERS:
        return cfg["workers"]
    return 0


def plan(cfg, nb):
    """The iterations of the scenario: a list of `stop` values (None: run
    to the end), and the batch count k of break / state_dict."""
    s = cfg["scenario"]
    if s in ("break", "raise"):
        k = min(cfg["k"], max(nb - 1, 0))
        if cfg["order"] in RESUMABLE and k == 0:
            # iter() dropped before its first batch: whether that consumed an
            # epoch of the loader's own order is not documented; torch's
            # orders (the others) keep k = 0, where torch is the oracle.
            if nb <= 1:
                return [None, None], None
            k = 1
        return [k, None], k
    if s == "resume":
        return [None, None, None], min(cfg["k"], nb)
    return [None, None], None


class Replay:
    """A batch_sampler (or sampler, flat) replaying given orders, one list
    per iteration: torch's oracle for pinloader's own seed= order."""

    def __init__(self, orders, flat):
        self.orders, self.flat, self.i = orders, flat, 0

    def __len__(self):
        o = self.orders[min(self.i, len(self.orders) - 1)]
        return len(o)

    def __iter__(self):
        o = self.orders[min(self.i, len(self.orders) - 1)]
        self.i += 1
        for b in o:
            if self.flat:
                yield b[0]
            else:
                yield list(b)


def seed_orders(n, cfg, epochs, bs, drop_last, folder, order_ds=None, order_check=None):
    """pinloader's own (seed, epoch) order of n samples, from a fresh
    num_workers=0 loader over a stand-in dataset of n one-byte records (the
    permutation is a function of (n, seed, epoch) alone: docs/distributed.md;
    nothing of the dataset under test is read, nor can fail), or over
    order_ds() where the source draws the order (tar shards: blocks, only
    their labels read); each epoch checked to be distinct indices in range
    (all of them without drop_last), and by order_check (the source's
    documented shape of its order) where given."""
    if order_ds is not None:
        ds = order_ds()
    else:
        path = os.path.join(folder, "order-%d.bin" % n)
        with open(path, "wb") as f:
            f.write(bytes(n))
        ds = pinloader.datasets.Records(path, 0, 1, [("b", "uint8", (), 0)])
    ref = pinloader.DataLoader(ds, batch_size=bs, shuffle=True, seed=cfg["seed"], drop_last=drop_last,
                               output="raw")
    out = []
    for e in range(epochs):
        ref.set_epoch(e)
        order = [[int(i) for i in b.sample_indices] for b in ref.batches()]
        flat = [i for b in order for i in b]
        if len(set(flat)) != len(flat) or not all(0 <= i < n for i in flat) or (
                not drop_last and len(flat) != n):
            raise Mismatch("seed=%d epoch %d: the loader's own order is not a permutation of "
                           "range(%d): %r" % (cfg["seed"], e, n, order))
        why = order_check(flat) if order_check is not None else None
        if why:
            raise Mismatch("seed=%d epoch %d: the loader's own order is %s" % (cfg["seed"], e, why))
        out.append(order)
    ref.close()
    return out


def run(cfg, folder):
    """Runs configuration `cfg`; raises Mismatch (an AssertionError) naming
    the first difference."""
    try:
        if cfg["source"] in ("py", "iter"):
            return _run_python(cfg, folder)
        return _run_native(cfg, folder)
    except AssertionError:
        raise
    except Exception as e:
        import traceback
        tb = traceback.extract_tb(e.__traceback__)
        where = ["%s:%d" % (os.path.basename(f.filename), f.lineno) for f in tb[-3:]]
        raise Mismatch("raised %s: %s (at %s)" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "",
                                                  " < ".join(reversed(where))))


# ---------------------------------------------------------------- Python datasets

def _python_ds(cfg, fail=False):
    if cfg["source"] == "iter":
        return P.IterDS(cfg["n"], cfg["label"])
    fail_at = None
    if fail and cfg["n"] > 1:
        r = random.Random("fail:%d" % cfg["id"])
        # half the time the last index (with the loader's own order, the
        # epoch's last batch, whose failure must not reach the next epoch);
        # dataset[0] too (with sequential orders, the first sample read,
        # whose layout pinloader cannot take: test_regressions_layout.py)
        fail_at = cfg["n"] - 1 if r.random() < 0.5 else r.randrange(0, cfg["n"])
    return P.MapDS(cfg["n"], cfg["kind"], cfg["label"], fail_at)


def _torch_run(cfg, make_ds, order_kw, stops):
    """torch's iterations, or the exception of its construction."""
    torch.manual_seed(cfg["torch_seed"])
    try:
        loader = TorchLoader(make_ds(), **loader_args(cfg, torch_workers(cfg), True), **order_kw())
    except Exception as e:
        return e, None
    n = None
    try:
        n = len(loader)
    except TypeError:
        pass
    return [iterate(loader, stop) for stop in stops], n


def _run_python(cfg, folder):
    fail = cfg["scenario"] == "fail"
    ds_pl = _python_ds(cfg, fail)
    ds_torch = ds_pl
    n = cfg["n"]
    unbatched = cfg["batch_size"] is None and not cfg["order"].startswith("batch_sampler")
    dict_order = cfg.get("kind") != "reordered"  # torch: batch[0]'s key order, per batch
    device = cfg["device"]
    iterable = cfg["source"] == "iter"

    # The oracle first: its first epoch's length sizes break / state_dict.
    if cfg["order"] == "seed":
        if n == 0:
            orders = [[], [], []]
        else:
            orders = seed_orders(n, cfg, 3, 1 if unbatched else cfg["batch_size"], cfg["drop_last"],
                                 folder)
        replay = Replay(orders, unbatched)

        def torch_order():
            if unbatched:
                return {"sampler": replay, "batch_size": None}
            return {"batch_sampler": replay, "batch_size": 1, "drop_last": False}
        nb = len(orders[0])
        stops, k = plan(cfg, nb)
        torch_cfg = dict(cfg, order="batch_sampler_uneven")  # no batch_size / drop_last of its own
        ref, ref_len = _torch_run(torch_cfg, lambda: ds_torch, torch_order, stops)
    else:
        probe = None
        stops = [None, None, None] if cfg["scenario"] == "resume" else [None, None]
        ref, ref_len = _torch_run(cfg, lambda: ds_torch, lambda: order_args(cfg, ds_torch, max(n, 1)),
                                  [None])
        if not isinstance(ref, BaseException):
            probe = len(ref[0][0])
            stops, k = plan(cfg, probe)
            ref, ref_len = _torch_run(cfg, lambda: ds_torch, lambda: order_args(cfg, ds_torch, max(n, 1)),
                                      stops)
    torch.manual_seed(cfg["torch_seed"])
    try:
        loader = pinloader.DataLoader(ds_pl, **loader_args(cfg, cfg["workers"], False),
                                      **order_args(cfg, ds_pl, max(n, 1)))
    except Exception as e:
        if isinstance(ref, BaseException) and type(e) is type(ref):
            return
        raise Mismatch("DataLoader(...) raised %r; torch's %s" % (_short(e), "raised %r" % _short(ref)
                                                                   if isinstance(ref, BaseException)
                                                                   else "works"))
    if isinstance(ref, BaseException):
        loader.close()
        raise Mismatch("torch's DataLoader(...) raised %r; pinloader's did not" % _short(ref))
    try:
        if ref_len is not None and not iterable:
            got_len = len(loader)
            if got_len != ref_len:
                raise Mismatch("len(loader) %d, torch's %d" % (got_len, ref_len))
        _scenario(cfg, loader, ref, stops, k, device, dict_order,
                  lambda workers: pinloader.DataLoader(ds_pl, **loader_args(dict(cfg, workers=workers,
                                                                                 persistent=False, prefetch=None,
                                                                                 mode=None if not workers else cfg["mode"] or "process",
                                                                                 ctx=cfg["ctx"] if workers else None,
                                                                                 in_order=cfg["in_order"] if workers else None),
                                                                            workers, False),
                                                       **order_args(cfg, ds_pl, max(n, 1))),
                  resumable=cfg["order"] in RESUMABLE and not iterable)
    finally:
        loader.close()


def _fresh_replay(orders, unbatched):
    replay = Replay(orders, unbatched)
    if unbatched:
        return lambda: {"sampler": replay, "batch_size": None}
    return lambda: {"batch_sampler": replay, "batch_size": 1, "drop_last": False}


# ---------------------------------------------------------------- scenarios

def _scenario(cfg, loader, ref, stops, k, device, dict_order, make_resumed, resumable, check=None):
    """Runs the scenario's iterations on `loader` and compares them with
    the oracle's `ref` (a list of (snapshots, exception) per iteration).
    check(iteration, got) replaces the comparison where given."""
    cmp = check or (lambda j, got, want, where: compare_iteration(got, want, where, device, dict_order))
    if cfg["scenario"] != "resume":
        raising = cfg["scenario"] == "raise"
        try:
            for j, stop in enumerate(stops):
                got = iterate(loader, stop, raise_in_body=raising)
                cmp(j, got, ref[j], "iteration %d%s" % (j, "" if stop is None else " (%s after %d)" % (
                    "the loop body raised" if raising else "break", stop)))
        finally:
            del HELD[:]
        return
    saved = {}

    def take(count):
        try:
            saved["state"] = loader.state_dict()
        except Exception as e:
            saved["error"] = e

    got = iterate(loader, None, at=k, on_batch=take)
    cmp(0, got, ref[0], "iteration 0 (state_dict after %d)" % k)
    if "state" not in saved and "error" not in saved:
        raise Mismatch("state_dict() was never taken (k=%d of %d batches)" % (k, len(got[0])))
    other = make_resumed(cfg["resume_workers"])
    try:
        if not resumable:
            # A sampler's order or an IterableDataset: refused where a piece
            # has no state (a sampler of the user's own, a dataset without
            # state_dict); accepted (torch's own samplers, replayed from
            # their generator's state), the rest of the epoch must be the
            # oracle's. (The epochs after it: python/tests/test_resume_*.py;
            # with torch's global generator they depend on what else drew
            # from it.)
            if "error" in saved:
                if not isinstance(saved["error"], pinloader.Error) or \
                        "has no state_dict()" not in str(saved["error"]):
                    raise Mismatch("state_dict() after %d batches raised %r" % (k, _short(saved["error"])))
                return
            try:
                other.load_state_dict(saved["state"])
            except pinloader.Error as e:
                # An IterableDataset's state into another worker count.
                if "workers' iterators" not in str(e):
                    raise
                return
            nb = len(ref[0][0])
            if k < nb:
                got = iterate(other)
                cmp(("resumed", 0, k, nb), got, (ref[0][0][k:], ref[0][1]),
                    "resumed (num_workers=%d) iteration 0" % cfg["resume_workers"])
            return
        if "error" in saved:
            raise Mismatch("state_dict() after %d batches raised %r" % (k, _short(saved["error"])))
        other.load_state_dict(saved["state"])
        nb = len(ref[0][0])
        if k < nb:
            want = [(ref[0][0][k:], ref[0][1]), ref[1]]
            first = 0
        else:  # saved after the epoch's last batch: the next epoch
            want = [ref[1], ref[2]]
            first = 1
        for j, w in enumerate(want):
            got = iterate(other)
            cmp(("resumed", j, k, nb), got, w,
                "resumed (num_workers=%d) iteration %d" % (cfg["resume_workers"], j))
    finally:
        other.close()


# ---------------------------------------------------------------- native datasets

def _transform_list(cfg):
    if cfg["transforms"] is None:
        return None, O.Spec()
    objs, spec = [], O.Spec()
    for name, kw in cfg["transforms"]:
        objs.append(getattr(T, name)(**kw))
        if name == "RandomCrop":
            spec.crop = (kw["size"][0], kw["size"][1], kw["padding"], kw["fill"])
        elif name == "RandomHorizontalFlip":
            spec.flip = kw["p"]
        elif name == "ConvertImageDtype":
            spec.convert = kw["dtype"]
        elif name == "Normalize":
            spec.normalize = (kw["mean"], kw["std"])
        elif name == "ChannelsLast":
            spec.channels_last = True
        elif name == "ToInt64":
            spec.to_int64 = kw.get("field", "label")
    return objs, spec


_TORCH = {"uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
          "int64": torch.int64, "float16": torch.float16, "float32": torch.float32,
          "float64": torch.float64, "bool": torch.bool}


def _tensor(arr, dtype):
    if dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
    if dtype == "float16":
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.float16))
    return torch.from_numpy(np.ascontiguousarray(arr))


def expected_batch(nat, spec, indices, seed, epoch):
    """The oracle's batch (a snapshot) of the given sample indices."""
    out = []
    for f, name in enumerate(nat.names):
        arr = nat.arrays[f]
        if f == nat.image and spec.touches_image:
            rows = [O.image(arr[i], nat.image_layout, spec, seed, epoch, i, f) for i in indices]
            dtype = spec.out_dtype()
            if rows:
                stacked = np.stack([r[1] for r in rows])
            else:
                stacked = np.zeros((0,), np.uint8)
            t = _tensor(stacked, dtype)
            if spec.channels_last:  # delivered [N,H,W,C] memory, handed out as the NCHW view
                t = t.permute(0, 3, 1, 2)
            out.append(t)
            continue
        vals = arr[list(indices)]
        widen = spec.to_int64 and spec.to_int64 == name
        if widen or (f == nat.label and nat.label_cast == "int64"):
            vals = vals.astype(np.int64)
        out.append(_tensor(vals, str(vals.dtype)))
    return snap(tuple(out))


def _native_orders(cfg, nat, stops, folder, fail=True):
    """Per iteration, the batches of sample indices the oracle expects
    (None for iterations the scenario does not read in full). fail: the
    corrupt sample's read raises in torch's iteration too (it ends there,
    its last batch [bad]); else every batch, for the epoch's length."""
    n = len(nat.ds)
    if cfg["order"] == "seed":
        return seed_orders(n, cfg, len(stops), cfg["batch_size"], cfg["drop_last"], folder,
                           nat.order_ds, nat.order_check)
    torch.manual_seed(cfg["torch_seed"])
    idx = P.Index(n, nat.bad if fail else None)
    loader = TorchLoader(idx, **loader_args(cfg, torch_workers(cfg), True), **order_args(cfg, idx, n))
    out = []
    for stop in stops:
        got, err = iterate(loader, stop)
        if err is not None and not (isinstance(err, KeyError) and nat.bad is not None):
            raise err
        batches = [[int(v) for v in np.frombuffer(b[5], np.int64)] for b in got]
        out.append(batches + ([[nat.bad]] if err is not None else []))
    return out


def _run_native(cfg, folder):
    nat = N.make(cfg["source"], cfg["params"], folder)
    n = len(nat.ds)
    objs, spec = _transform_list(cfg)
    draw_seed = cfg["seed"] if cfg["order"] == "seed" else 0  # the loader's seed (0 without seed=)
    device = cfg["device"]
    probe = _native_orders(cfg, nat, [None], folder, fail=False)
    stops, k = plan(cfg, len(probe[0]))
    orders = [o if stop is None else o[:stop] for o, stop in zip(_native_orders(cfg, nat, stops, folder), stops)]
    del HELD[:]
    ref = []
    for e, order in enumerate(orders):
        batches, err = [], None
        for b in order:
            if nat.bad is not None and nat.bad in b:  # the read fails naming the file (docs/sources.md)
                err = pinloader.Error("sample %d" % nat.bad)
                break
            batches.append(expected_batch(nat, spec, b, draw_seed, e))
        ref.append((batches, err))

    def make(workers):
        kw = loader_args(dict(cfg, persistent=False, prefetch=None), workers, False)
        if objs is not None:
            kw["transforms"] = objs
        return pinloader.DataLoader(nat.ds, **kw, **order_args(cfg, P.Index(n), n))

    torch.manual_seed(cfg["torch_seed"])
    kw = loader_args(cfg, cfg["workers"], False)
    if objs is not None:
        kw["transforms"] = objs
    loader = pinloader.DataLoader(nat.ds, **kw, **order_args(cfg, P.Index(n), n))
    check = None
    if nat.windows is not None:
        check = _window_check(nat, device, cfg)
    try:
        if len(loader) != len(probe[0]):
            raise Mismatch("len(loader) %d, oracle %d" % (len(loader), len(probe[0])))
        try:
            _scenario(cfg, loader, ref, stops, k, device, True, make, resumable=cfg["order"] in RESUMABLE,
                      check=check)
        except Mismatch as e:
            raise Mismatch(_field_hint(str(e), nat, spec)) from None
    finally:
        loader.close()


def _field_hint(msg, nat, spec):
    """Names the field of a 'batch j[i]' mismatch and whether a transform
    names it (the diagnosis of most native mismatches)."""
    import re
    m = re.search(r"batch \d+\[(\d+)\]", msg)
    if not m or int(m.group(1)) >= len(nat.names):
        return msg
    f = int(m.group(1))
    name = nat.names[f]
    named = (f == nat.image and spec.touches_image) or spec.to_int64 == name
    how = "transformed" if named else ("not named by any transform" if spec.touches_image or spec.to_int64
                                       else "no transforms")
    return "%s [field %r: %s]" % (msg, name, how)


def _window_check(nat, device, cfg):
    """Tokens samples=N: x a window of one shard, y the same shifted by one;
    dtype, shape, batch sizes as the oracle's; a resumed loader repeats the
    saved loader's windows."""
    T_ = cfg["params"]["context"]
    dtype = cfg["params"]["dtype"]
    wins = set()
    for s in nat.windows.values():
        s = s.astype(np.int64)
        for a in range(len(s) - T_):
            wins.add(s[a:a + T_ + 1].tobytes())
    seen = {}

    def check(j, got, want, where):
        gb, ge = got
        if ge is not None:
            raise Mismatch("%s: raised %r" % (where, _short(ge)))
        if len(gb) != len(want[0]):
            raise Mismatch("%s: %d batches, oracle %d" % (where, len(gb), len(want[0])))
        xdt = "int64" if nat.label == 0 and cfg["transforms"] else dtype
        for b, (g, w) in enumerate(zip(gb, want[0])):
            x, y = g[2]
            rows = w[2][0][2][0]
            for name, t, dt in (("x", x, xdt), ("y", y, dtype)):
                if t[1] != "torch." + dt or t[2] != (rows, T_) or t[4] != device.split(":")[0]:
                    raise Mismatch("%s batch %d %s: %s%s on %s, expected torch.%s%s on %s"
                                   % (where, b, name, t[1], list(t[2]), t[4], dt, [rows, T_], device))
            xa = np.frombuffer(x[5], xdt).reshape(rows, T_).astype(np.int64)
            ya = np.frombuffer(y[5], dtype).reshape(rows, T_).astype(np.int64)
            for r in range(rows):
                whole = np.concatenate([xa[r], ya[r][-1:]])
                if not np.array_equal(xa[r][1:], ya[r][:-1]) or whole.tobytes() not in wins:
                    raise Mismatch("%s batch %d row %d: x, y are not a window of one shard "
                                   "shifted by one: x=%s y=%s" % (where, b, r, xa[r].tolist(), ya[r].tolist()))
        key = j if not isinstance(j, tuple) else None
        if key is not None:
            seen[key] = gb
        else:  # resumed: the saved loader's windows (its epoch 0 rest, or its epoch 1)
            _, jj, k, nb = j
            if jj == 0 and k < nb and 0 in seen and [g[2] for g in gb] != [g[2] for g in seen[0][k:]]:
                raise Mismatch("%s: the windows differ from the saved loader's" % where)
    return check
