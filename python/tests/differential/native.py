"""Native sources of the differential suite: small files written with numpy
(and PIL for PNGs) in a temporary folder, and what a numpy reading of those
files says each sample is (docs/sources.md, python/pinloader/datasets.py).

make(kind, params, folder) -> Native: the pinloader dataset and, per field,
the [n, ...] numpy array of every sample's value as the source delivers it
(before transforms and the consumer's label cast)."""
import gzip
import io
import os
import struct
import tarfile

import numpy as np

import pinloader
from pinloader import datasets

KINDS = ("IDX", "CIFAR10", "Records", "Tokens", "NPY", "ImageFolder", "Shards")


class Native:
    def __init__(self, ds, names, arrays, image=None, image_layout=None, label=None,
                 label_cast=None, windows=None):
        self.ds = ds
        self.n = len(arrays[0]) if arrays else 0
        self.names = names
        self.arrays = arrays
        self.image = image  # index of the "image" field (transforms' default)
        self.image_layout = image_layout  # "chw" | "hwc" | "hw"
        self.label = label  # index of the field ToInt64 widens
        self.label_cast = label_cast  # the consumer's cast of the label field ("int64")
        self.windows = windows  # Tokens samples=N: {shard index: token array}, x/y unknown
        self.bad = None  # the index of an unreadable sample (its batch raises pinloader.Error)
        # The loader's own (seed, epoch) order when it is the source's
        # (tar shards: read in blocks): a dataset of the same samples to
        # draw it from; None: the sampler's permutation of n (seed_orders).
        self.order_ds = None
        self.order_check = None  # order_ds's epochs: flat indices -> None or why not


def _idx(path, array):
    array = np.ascontiguousarray(array, dtype=np.uint8)
    head = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(">%dI" % array.ndim, *array.shape)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(head + array.tobytes())
    return path


def _layout(shape):
    """docs/transforms.md: a 3-d shape is [H,W,C] when its last dimension
    is 1, 3 or 4 and its first is not, else [C,H,W]."""
    if len(shape) == 2:
        return "hw"
    return "hwc" if shape[-1] in (1, 3, 4) and shape[0] not in (1, 3, 4) else "chw"


def make(kind, p, folder):
    rng = np.random.default_rng(p["data_seed"])
    n = p["n"]
    f = os.path.join
    if kind == "IDX":
        h, w = p["hw"]
        images = rng.integers(0, 256, size=(n, h, w), dtype=np.uint8)
        labels = rng.integers(0, 256, size=n, dtype=np.uint8)
        ip = _idx(f(folder, "img-idx3-ubyte" + (".gz" if p["gz"] else "")), images)
        lp = _idx(f(folder, "lab-idx1-ubyte"), labels)
        ds = datasets.IDX(ip, lp, label_dtype=p["label_dtype"])
        return Native(ds, ["image", "label"], [images, labels], 0, "hw", 1,
                      "int64" if p["label_dtype"] == "int64" else None)
    if kind == "CIFAR10":
        images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        paths, cut = [], sorted({0, n} | set(int(c) for c in rng.integers(0, n + 1, p["files"] - 1)))
        for k, (a, b) in enumerate(zip(cut, cut[1:])):
            rec = np.concatenate([labels[a:b, None], images[a:b].reshape(b - a, -1)], axis=1)
            path = f(folder, "data_batch_%d.bin" % k)
            with open(path, "wb") as out:
                out.write(rec.astype(np.uint8).tobytes())
            paths.append(path)
        ds = datasets.CIFAR10(paths, label_dtype=p["label_dtype"])
        return Native(ds, ["image", "label"], [images, labels], 0, "chw", 1,
                      "int64" if p["label_dtype"] == "int64" else None)
    if kind == "Records":
        shape, ldt = tuple(p["image_shape"]), np.dtype(p["label_np"])
        hdr = p["header"]
        # record: 1 pad byte, image, label (unaligned offsets on purpose), 2 float64
        dt = np.dtype([("pad", "u1"), ("image", "u1", shape), ("label", ldt.newbyteorder("<")),
                       ("aux", "<f8", (2,))])
        rec = np.zeros(n, dtype=dt)
        rec["image"] = rng.integers(0, 256, size=(n,) + shape, dtype=np.uint8)
        rec["label"] = rng.integers(-50 if ldt.kind == "i" else 0, 100, size=n).astype(ldt)
        rec["aux"] = rng.standard_normal((n, 2))
        paths, per = [], -(-n // p["files"]) if n else 1
        for k in range(p["files"]):
            path = f(folder, "rec%d.bin" % k)
            with open(path, "wb") as out:
                out.write(bytes(range(hdr)))
                out.write(rec[k * per:(k + 1) * per].tobytes())
            paths.append(path)
        fields = [("image", "uint8", shape, dt.fields["image"][1]),
                  ("label", ldt.name, (), dt.fields["label"][1]),
                  ("aux", "float64", (2,), dt.fields["aux"][1])]
        ds = datasets.Records(paths, hdr, dt.itemsize, fields)
        arrays = [np.ascontiguousarray(rec["image"]), rec["label"].astype(ldt), rec["aux"].copy()]
        return Native(ds, ["image", "label", "aux"], arrays, 0, _layout(shape), 1, None)
    if kind == "Tokens":
        T, fmt, dtype = p["context"], p["format"], p["dtype"]
        big = fmt in ("raw32", "llmc32")
        src_dt = np.uint32 if big else np.uint16
        shards, paths = [], []
        for k, length in enumerate(p["shards"]):
            toks = rng.integers(0, 70000 if big else 65536, size=length).astype(src_dt)
            path = f(folder, "shard%d.bin" % k)
            with open(path, "wb") as out:
                if fmt.startswith("llmc"):
                    header = np.zeros(256, dtype=np.int32)
                    header[0], header[1] = (20240801, 7) if big else (20240520, 1)
                    header[2] = length
                    out.write(header.tobytes())
                out.write(toks.tobytes())
            shards.append(toks)
            paths.append(path)
        ds = datasets.Tokens(paths, context=T, samples=p["samples"], stride=p["stride"], dtype=dtype,
                             format="raw32" if fmt == "raw32" else "auto")
        if p["samples"] is not None:
            return Native(ds, ["x", "y"], [np.zeros((p["samples"], T), dtype)] * 2, label=0,
                          windows={k: s for k, s in enumerate(shards)})
        stride = p["stride"] or T
        xs, ys = [], []
        for s in shards:
            for start in range(0, len(s) - T, stride):  # a window needs T + 1 tokens
                xs.append(s[start:start + T])
                ys.append(s[start + 1:start + T + 1])
        xs = np.array(xs, dtype=dtype).reshape(-1, T)
        ys = np.array(ys, dtype=dtype).reshape(-1, T)
        return Native(ds, ["x", "y"], [xs, ys], label=0)
    if kind == "NPY":
        shape = tuple(p["image_shape"])
        images = rng.integers(0, 256, size=(n,) + shape, dtype=np.uint8)
        label = rng.integers(0, 120, size=n).astype(p["label_np"])
        extra = {
            "bool": (rng.integers(0, 2, size=(n, 3)) > 0, lambda a: a.astype(np.uint8)),
            "f16": (rng.standard_normal((n, 2)).astype(np.float16), lambda a: a),
            "c64": (rng.standard_normal((n, 2)).astype(np.complex64) * (1 + 2j),
                    lambda a: a.view(np.float32).reshape(n, 2, 2)),
            "u64": (rng.integers(0, 2 ** 40, size=n).astype(np.uint64), lambda a: a.view(np.int64)),
            "be_i32": (rng.integers(-999, 999, size=(n, 2)).astype(">i4"), lambda a: a.astype("<i4")),
        }[p["extra"]]
        arrs = {"image": images, "label": label, "extra": extra[0]}
        if p["npz"]:
            path = f(folder, "d.npz")
            np.savez(path, **arrs)
            ds = datasets.NPY(path)
        else:
            paths = []
            for name, a in arrs.items():
                np.save(f(folder, name + ".npy"), a)
                paths.append(f(folder, name + ".npy"))
            ds = datasets.NPY(*paths)
        return Native(ds, ["image", "label", "extra"], [images, label, extra[1](extra[0])], 0,
                      _layout(shape), 1, None)
    if kind == "ImageFolder":
        from PIL import Image

        S = p["size"]
        root = f(folder, "root")
        names = []
        arrays = []
        labels = []
        for c in range(p["classes"]):
            os.makedirs(f(root, "class%d" % c))
        for i in range(n):
            c = i if i < p["classes"] else int(rng.integers(0, p["classes"]))  # none empty
            gray = bool(rng.integers(0, 4) == 0)
            px = rng.integers(0, 256, size=(S, S) if gray else (S, S, 3), dtype=np.uint8)
            path = f(root, "class%d" % c, "im%03d.png" % i)
            Image.fromarray(px, "L" if gray else "RGB").save(path)
            names.append((c, path))
            arrays.append(np.repeat(px[None], 3, 0) if gray else px.transpose(2, 0, 1))
        # torchvision's order: classes sorted, files sorted within a class
        order = sorted(range(n), key=lambda i: (names[i][0], names[i][1]))
        images = np.array([arrays[i] for i in order], dtype=np.uint8).reshape(n, 3, S, S)
        labels = np.array([names[i][0] for i in order], dtype=np.int64)
        bad = None
        if p.get("corrupt") is not None:  # a truncated PNG: its batch fails, every epoch
            bad = p["corrupt"] % n
            with open(names[order[bad]][1], "r+b") as out:
                out.truncate(40)
        ds = datasets.ImageFolder(root, size=S, train=False, resize=S)
        nat = Native(ds, ["image", "label"], [images, labels], 0, "chw", 1, None)
        nat.bad = bad
        return nat
    if kind == "Shards":
        return _shards(p, rng, folder)
    raise ValueError(kind)


SHARD_FIELDS = {"image": "png", "label": "cls", "aux": "npy", "cap": ("txt", "bytes")}


def _shards(p, rng, folder):
    """WebDataset shards written with Python's tarfile: sample k is
    KEY.png (S x S, RGB or gray, exact through train=False, resize=S),
    KEY.cls, KEY.npy (aux [2]) and KEY.txt (a caption, bytes); samples are
    numbered shard after shard in tar order (docs/sources.md)."""
    from PIL import Image

    S, mb = p["size"], p["max_bytes"]
    fmt = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}
    images, labels, auxs, caps, lens, paths = [], [], [], [], [], []
    bad = None if p.get("corrupt") is None else p["corrupt"] % p["n"]
    k = 0
    for s, count in enumerate(p["shards"]):
        path = os.path.join(folder, "shard-%03d.tar" % s)
        with tarfile.open(path, "w", format=fmt[p["tar_format"]]) as tar:
            for _ in range(count):
                key = "d%d/s%05d" % (s % 2, k)
                gray = bool(rng.integers(0, 4) == 0)
                px = rng.integers(0, 256, size=(S, S) if gray else (S, S, 3), dtype=np.uint8)
                b = io.BytesIO()
                Image.fromarray(px, "L" if gray else "RGB").save(b, "PNG")
                png = b.getvalue()
                if k == bad:  # a cut PNG: its batch fails, every epoch
                    png = png[:40]
                label = int(rng.integers(-5, 1000))
                aux = rng.integers(0, 200, size=2).astype(p["aux"])
                b = io.BytesIO()
                np.save(b, aux)
                cap = bytes(rng.integers(32, 127, size=int(rng.integers(0, mb + 1)), dtype=np.uint8))
                for ext, data in (("png", png), ("cls", b" %d\n" % label), ("npy", b.getvalue()),
                                  ("txt", cap)):
                    info = tarfile.TarInfo("%s.%s" % (key, ext))
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                images.append(np.repeat(px[None], 3, 0) if gray else px.transpose(2, 0, 1))
                labels.append(label)
                auxs.append(aux)
                caps.append(np.frombuffer(cap + bytes(mb - len(cap)), np.uint8))
                lens.append(len(cap))
                k += 1
        paths.append(path)
    ds = datasets.Shards(paths, fields=SHARD_FIELDS, size=S, train=False, resize=S, max_bytes=mb,
                         shuffle_buffer=p["shuffle_buffer"])
    arrays = [np.array(images, np.uint8).reshape(-1, 3, S, S), np.array(labels, np.int64),
              np.array(auxs, p["aux"]).reshape(-1, 2), np.array(caps, np.uint8).reshape(-1, mb),
              np.array(lens, np.int64)]
    nat = Native(ds, ["image", "label", "aux", "cap", "cap_len"], arrays, 0, "chw", 1, None)
    nat.bad = bad
    nat.order_ds = lambda: datasets.Shards(paths, fields={"label": "cls"},
                                           shuffle_buffer=p["shuffle_buffer"])
    nat.order_check = lambda flat: _block_order_check(p["shards"], p["shuffle_buffer"], flat)
    return nat


def _block_order_check(sizes, window, flat):
    """docs/sources.md "Order", checked from outside: an epoch read in the
    loader's own order is, for some order of the shards, their samples
    shard by shard in tar order with positions shuffled only within
    consecutive windows of `window` (0: any permutation). Every order of
    the (at most 4) non-empty shards is tried. flat: the epoch's sample
    indices (a prefix of it with drop_last). None when it holds, else why."""
    import itertools

    if window == 0 or window >= len(flat):
        return None
    starts = np.cumsum([0] + list(sizes))
    shards = [s for s, n in enumerate(sizes) if n]
    for perm in itertools.permutations(shards):
        base = [i for s in perm for i in range(starts[s], starts[s + 1])]
        if all(sorted(flat[a:a + window]) == sorted(base[a:a + window]) if a + window <= len(flat)
               else set(flat[a:]) <= set(base[a:a + window]) for a in range(0, len(flat), window)):
            return None
    return ("not shard by shard within windows of %d for any order of the shards %r: %r"
            % (window, sizes, flat))
