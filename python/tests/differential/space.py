"""The seeded enumerator: configuration `i` is drawn from
random.Random("pinloader-diff:<i>") alone, so a case id reproduces its
configuration whatever the budget (PINLOADER_DIFF_N) or the machine.
Deterministic, no dependency (hypothesis is not installed)."""
import random

PY_KINDS = ("tuple", "list", "dict", "namedtuple", "nested", "reordered", "zerodim", "bare")
NATIVE = ("IDX", "CIFAR10", "Records", "Tokens", "NPY", "ImageFolder", "Shards")
ORDERS_MAP = ("seq", "seed", "shuffle_gen", "shuffle_global", "sampler_random", "sampler_subset",
              "sampler_weighted", "sampler_list", "batch_sampler", "batch_sampler_uneven")
# Orders pinloader draws itself (resumable with state_dict into any
# num_workers); the others are explicit (a torch sampler or torch's
# RandomSampler: resumed by drawing the epoch again; a list of indices:
# refused, it has no state).
RESUMABLE = ("seq", "seed")


def _weighted(r, table):
    total = sum(w for _, w in table)
    x = r.random() * total
    for v, w in table:
        x -= w
        if x < 0:
            return v
    return table[-1][0]


def _native_params(r, kind):
    p = {"data_seed": r.randrange(1 << 30), "n": r.randrange(1, 41)}
    if kind == "IDX":
        p.update(hw=(r.randint(1, 7), r.randint(1, 7)), gz=r.random() < 0.3,
                 label_dtype=r.choice(("int64", "uint8")))
    elif kind == "CIFAR10":
        p.update(n=r.randrange(1, 25), files=r.randint(1, 3), label_dtype=r.choice(("int64", "uint8")))
    elif kind == "Records":
        h, w = r.randint(1, 6), r.randint(1, 6)
        p.update(image_shape=r.choice([(h, w, 3), (3, h, w), (h, w), (h, w, 1), (4, h, 4)]),
                 label_np=r.choice(("uint8", "int16", "int32", "int64")), header=r.choice((0, 3, 16)),
                 files=r.randint(1, 3))
    elif kind == "Tokens":
        T = r.randint(1, 9)
        shards = [r.randint(T + 1, 60) for _ in range(r.randint(1, 3))]
        samples = r.choice((None, None, r.randint(1, 40)))
        p.update(context=T, shards=shards, format=r.choice(("raw16", "llmc16", "raw32", "llmc32")),
                 dtype=r.choice(("int64", "int32")), samples=samples,
                 stride=None if samples is not None else r.choice((None, 1, r.randint(1, T + 2))))
    elif kind == "NPY":
        h, w = r.randint(1, 6), r.randint(1, 6)
        p.update(image_shape=r.choice([(h, w, 3), (3, h, w), (h, w)]), npz=r.random() < 0.4,
                 label_np=r.choice(("uint8", "int16", "int32", "int64")),
                 extra=r.choice(("bool", "f16", "c64", "u64", "be_i32")))
    elif kind == "ImageFolder":
        p.update(size=r.randint(2, 9), classes=r.randint(1, 3))
        p["n"] = r.randint(p["classes"], 16)
        p["corrupt"] = r.randrange(1 << 20) if r.random() < 0.25 else None
    elif kind == "Shards":
        # tar shards of PNG + cls + npy + txt members (an empty shard at
        # times); the loader's own order reads them in blocks of
        # shuffle_buffer positions
        shards = [r.choice((0, 1, 2, 5, 9)) if r.random() < 0.15 else r.randint(1, 12)
                  for _ in range(r.randint(1, 4))]
        if not sum(shards):
            shards[0] = 1
        p.update(size=r.randint(2, 7), shards=shards, shuffle_buffer=r.choice((0, 1, 3, 7, 1000)),
                 aux=r.choice(("int16", "float32", "uint8")), max_bytes=r.choice((8, 16, 64)),
                 tar_format=r.choice(("ustar", "gnu", "pax")))
        p["n"] = sum(shards)
        p["corrupt"] = r.randrange(1 << 20) if r.random() < 0.2 else None
    return p


def _channels(kind, p):
    if kind == "IDX":
        return 1, p["hw"]
    if kind == "CIFAR10":
        return 3, (32, 32)
    if kind in ("ImageFolder", "Shards"):
        return 3, (p["size"], p["size"])
    s = p["image_shape"]
    if len(s) == 2:
        return 1, s
    hwc = s[-1] in (1, 3, 4) and s[0] not in (1, 3, 4)
    return (s[2], s[:2]) if hwc else (s[0], s[1:])


def _transforms(r, kind, p):
    """A transform list as [(name, kwargs)], in list order (the order of a
    field's transforms is fixed whatever the list's: docs/transforms.md)."""
    if r.random() < 0.3:
        return None
    if r.random() < 0.05:
        return []
    if kind == "Tokens":
        return [("ToInt64", {"field": "x"})]
    c, (h, w) = _channels(kind, p)
    out = []
    if r.random() < 0.5:
        pad = r.choice((0, 0, 1, 2, 4))
        out.append(("RandomCrop", {"size": (r.randint(1, h + 2 * pad), r.randint(1, w + 2 * pad)),
                                   "padding": pad, "fill": r.choice((0, 0, 255, r.randrange(256)))}))
    if r.random() < 0.5:
        out.append(("RandomHorizontalFlip", {"p": r.choice((0.0, 0.5, 1.0, 0.3))}))
    if r.random() < 0.5:
        out.append(("ConvertImageDtype", {"dtype": r.choice(("float32", "bfloat16", "float16"))}))
    if r.random() < 0.5:
        k = 1 if r.random() < 0.4 else c
        out.append(("Normalize", {"mean": tuple(round(r.random(), 4) for _ in range(k)),
                                  "std": tuple(round(r.uniform(0.1, 1.0), 4) for _ in range(k))}))
    if r.random() < 0.3:
        out.append(("ChannelsLast", {}))
    if r.random() < 0.5:
        out.append(("ToInt64", {}))
    r.shuffle(out)
    return out


def draw(i, cuda=False):
    r = random.Random("pinloader-diff:%d" % i)
    cfg = {"id": i}
    source = _weighted(r, [("py", 45), ("iter", 10)] + [(k, 7.5) for k in NATIVE])
    native = source not in ("py", "iter")
    cfg["source"] = source
    big = False
    if source == "py":
        cfg["kind"] = _weighted(r, [(k, 1) for k in PY_KINDS[:5]] + [("reordered", 0.6), ("zerodim", 0.6),
                                                                  ("bare", 0.5)])
        cfg["n"] = 0 if r.random() < 0.04 else r.randrange(1, 45)
        big = r.random() < 0.15  # batches over 64 samples: split between idle workers
        cfg["label"] = r.choice(("int", "float", "bool", "np_int32", "np_uint8", "np_float16",
                                 "np_int64_0d", "torch_int16"))
    elif source == "iter":
        cfg["n"] = r.randrange(0 if r.random() < 0.1 else 1, 40)
        cfg["label"] = r.choice(("int", "float", "np_int32", "np_uint8"))
    else:
        cfg["params"] = _native_params(r, source)
        cfg["n"] = cfg["params"]["n"]
        cfg["transforms"] = _transforms(r, source, cfg["params"])
    if source == "iter":
        cfg["order"] = "seq"
    elif source == "py" and cfg["n"] == 0:
        cfg["order"] = r.choice(("seq", "seed", "shuffle_global"))
    else:
        cfg["order"] = _weighted(r, [(o, 1.5 if o in ("seq", "seed", "shuffle_gen") else 1)
                                     for o in ORDERS_MAP])
    n = max(cfg["n"], 1)
    unbatched = source == "py" and not cfg["order"].startswith("batch_sampler") and r.random() < 0.06
    if source == "py" and big and not cfg["order"].startswith("batch_sampler") and cfg["n"]:
        cfg["n"] = n = r.randrange(65, 320)
        cfg["batch_size"] = r.choice((n, n // 2, n // 3 + 1, 100, 150))
    elif cfg["order"].startswith("batch_sampler") or unbatched:
        cfg["batch_size"] = None
    else:
        cfg["batch_size"] = r.choice((1, 2, 3, 4, 5, 8, 16, n, n + 1, max(1, n // 2), max(1, n // 3)))
    cfg["drop_last"] = cfg["batch_size"] is not None and r.random() < 0.35
    cfg["workers"] = r.choice((0, 1, 3))
    cfg["mode"] = None
    cfg["ctx"] = None
    cfg["in_order"] = None
    if source in ("py", "iter") and cfg["workers"]:
        cfg["mode"] = _weighted(r, [("process", 4), ("thread", 1)])
        if cfg["mode"] == "process":
            cfg["ctx"] = _weighted(r, [("fork", 10), ("forkserver", 2), ("spawn", 0.7)])
            cfg["in_order"] = r.choice((None, True, False))
    cfg["persistent"] = bool(cfg["workers"]) and r.random() < 0.35
    cfg["prefetch"] = r.choice((None, 1, 2, 3)) if cfg["workers"] else None
    cfg["device"] = "cuda" if cuda and r.random() < 0.5 else "cpu"
    scen = _weighted(r, [("epochs", 3), ("break", 3), ("resume", 3), ("raise", 1)]
                     + ([("fail", 1)] if source == "py" else []))
    cfg["scenario"] = scen
    cfg["k"] = r.randint(0, 6)  # break / state_dict after k batches (clamped to the epoch)
    cfg["resume_workers"] = r.choice((0, 1, 3))
    cfg["torch_seed"] = r.randrange(1 << 20)
    cfg["seed"] = r.randrange(1, 1 << 31)
    if source in ("ImageFolder", "Shards") and scen == "resume":
        cfg["params"]["corrupt"] = None  # a failing batch before k would leave no state to take
    if source == "py" and cfg["n"] == 0:
        cfg["scenario"] = "epochs" if cfg["scenario"] == "fail" else cfg["scenario"]
    return cfg


def describe(cfg):
    keys = [k for k in ("source", "kind", "params", "n", "label", "transforms", "order", "batch_size",
                        "drop_last", "workers", "mode", "ctx", "in_order", "persistent", "prefetch",
                        "device", "scenario", "k", "resume_workers") if k in cfg]
    return " ".join("%s=%r" % (k, cfg[k]) for k in keys)
