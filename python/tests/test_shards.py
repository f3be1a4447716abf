"""pinloader.datasets.Shards: WebDataset tar shards, local and over HTTP.

Oracles: ImageFolder over the same JPEG files (the images must be the same
bytes out, crops included), Python's tarfile and webdataset.WebDataset
under torch's DataLoader (the members' contents and the sample order)."""
import io
import os
import tarfile

import numpy as np
import pytest

import pinloader
from pinloader.datasets import ImageFolder, Shards

from shard_servers import NGINX, FaultServer, Nginx

PER_SHARD = 6
NSHARDS = 3


def _jpeg(rng, h, w):
    from PIL import Image

    b = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(b, format="JPEG", quality=90)
    return b.getvalue()


def _members(i, rng):
    return [("jpg", _jpeg(rng, 40 + i % 7, 52 + i % 5)), ("cls", b"%d\n" % (i * 7 % 10)),
            ("txt", b"caption of sample %d" % i)]


def write_shards(folder, fmt=tarfile.PAX_FORMAT, long_names=False, writer="tarfile"):
    """NSHARDS shards of PER_SHARD samples; also each JPEG as a file and a
    list file "PATH LABEL" in sample order (ImageFolder's input)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(1)
    lines, paths = [], []
    for s in range(NSHARDS):
        path = os.path.join(folder, "part-%03d.tar" % s)
        paths.append(path)
        if writer == "webdataset":
            import webdataset as wds

            sink = wds.TarWriter(path)
        else:
            sink = tarfile.open(path, "w", format=fmt)
        for j in range(PER_SHARD):
            i = s * PER_SHARD + j
            key = ("sub/" + "k" * 110 if long_names else "") + "%06d" % i
            members = _members(i, rng)
            jpg = os.path.join(folder, "img-%06d.jpg" % i)
            with open(jpg, "wb") as f:
                f.write(members[0][1])
            lines.append("%s %d" % (jpg, int(members[1][1])))
            if writer == "webdataset":
                sink.write({"__key__": key, **{e: d for e, d in members}})
                continue
            for ext, data in members:
                ti = tarfile.TarInfo(key + "." + ext)
                ti.size = len(data)
                sink.addfile(ti, io.BytesIO(data))
        sink.close()
    lst = os.path.join(folder, "list.txt")
    with open(lst, "w") as f:
        f.write("\n".join(lines) + "\n")
    return paths, lst


FIELDS = {"image": "jpg", "label": "cls", "text": "txt"}


def _tar_oracle(paths):
    """[(key, {ext: bytes})] in order, grouped as WebDataset does."""
    out = []
    for p in paths:
        with tarfile.open(p) as t:
            for m in t.getmembers():
                if not m.isfile():
                    continue
                base = os.path.basename(m.name)
                if "." not in base:
                    continue
                dot = len(m.name) - len(base) + base.index(".")
                key, ext = m.name[:dot], m.name[dot + 1:]
                if not out or out[-1][0] != key:
                    out.append((key, {}))
                out[-1][1][ext] = t.extractfile(m).read()
    return out


def _check_against_tar(ds, paths):
    oracle = _tar_oracle(paths)
    assert len(ds) == len(oracle)
    for i, (key, members) in enumerate(oracle):
        _, label, text, n = ds[i]
        assert int(label) == int(members["cls"])
        assert bytes(text[:n]) == members["txt"]


@pytest.mark.parametrize("fmt,long_names", [(tarfile.PAX_FORMAT, True), (tarfile.GNU_FORMAT, True),
                                            (tarfile.USTAR_FORMAT, False), (tarfile.PAX_FORMAT, False)])
def test_formats_match_tarfile(tmp_path, fmt, long_names):
    paths, _ = write_shards(str(tmp_path), fmt, long_names)
    ds = Shards(paths, fields=FIELDS, size=16)
    assert [f.name for f in ds.fields] == ["image", "label", "text", "text_len"]
    _check_against_tar(ds, paths)


def test_brace_pattern_and_index_cache(tmp_path):
    paths, _ = write_shards(str(tmp_path))
    ds = Shards(str(tmp_path / "part-{000..002}.tar"), fields=FIELDS, size=16)
    assert len(ds) == NSHARDS * PER_SHARD
    for p in paths:
        assert os.path.exists(p + ".plidx")
    first = [ds[i][1] for i in range(len(ds))]
    # A damaged cache is rebuilt, not trusted.
    with open(paths[1] + ".plidx", "r+b") as f:
        f.seek(40)
        f.write(b"\xff" * 16)
    again = Shards(paths, fields=FIELDS, size=16)
    assert [again[i][1] for i in range(len(again))] == first


def test_brace_alternatives_expand_as_braceexpand(tmp_path):
    """{x,y} lists beside {A..B} ranges, several braces multiplying: the
    shards and their order are braceexpand's (webdataset's own expansion)."""
    braceexpand = pytest.importorskip("braceexpand").braceexpand
    import shutil

    paths, _ = write_shards(str(tmp_path))
    for p in paths[:2]:
        shutil.copy(p, p.replace("part-", "copy-"))
    for pattern in ("part-{002,000,001}.tar", "{copy,part}-{000..001}.tar",
                    "{part-002,copy-001}.tar"):
        full = str(tmp_path / pattern)
        want = Shards(list(braceexpand(full)), fields={"label": "cls"})
        got = Shards(full, fields={"label": "cls"})
        assert len(got) == len(want) == PER_SHARD * len(list(braceexpand(full)))
        assert [int(got[i][0]) for i in range(len(got))] == [int(want[i][0]) for i in range(len(want))]
    with pytest.raises(pinloader.Error, match="brace"):
        Shards(str(tmp_path / "part-{0{0,1}}.tar"))


def test_stale_index_cache_is_rebuilt(tmp_path):
    paths, _ = write_shards(str(tmp_path))
    Shards(paths, fields=FIELDS, size=16)
    # shard 0 rewritten with one sample: its cached index (6 samples) is stale
    with tarfile.open(paths[0], "w") as t:
        ti = tarfile.TarInfo("only.cls")
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"3"))
    ds = Shards(paths, fields={"label": "cls"})
    assert len(ds) == 1 + (NSHARDS - 1) * PER_SHARD
    assert int(ds[0][0]) == 3


def test_webdataset_tarwriter_shards(tmp_path):
    pytest.importorskip("webdataset")
    paths, _ = write_shards(str(tmp_path), writer="webdataset")
    _check_against_tar(Shards(paths, fields=FIELDS, size=16), paths)


@pytest.mark.parametrize("train", [True, False])
def test_images_are_image_folders(tmp_path, train):
    """The same JPEG bytes give the same pixels as ImageFolder (its decode,
    crop and resize, the crop drawn from the same (seed, epoch, index))."""
    paths, lst = write_shards(str(tmp_path))
    kw = dict(size=24, train=train)
    # shuffle_buffer=0: the loader's permutation of all samples, as ImageFolder's
    ds, ref = Shards(paths, fields=FIELDS, shuffle_buffer=0, **kw), ImageFolder(lst, **kw)
    for i in range(len(ds)):
        assert np.array_equal(ds[i][0], ref[i][0])
        assert int(ds[i][1]) == int(ref[i][1])
    # Through the loader: shuffled, workers, two epochs.
    a = pinloader.DataLoader(ds, batch_size=4, shuffle=True, seed=5, num_workers=2, output="numpy")
    b = pinloader.DataLoader(ref, batch_size=4, shuffle=True, seed=5, num_workers=2, output="numpy")
    for _ in range(2):
        for x, y in zip(a, b):
            assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])


def test_loader_exactly_once_any_workers(tmp_path):
    paths, _ = write_shards(str(tmp_path))
    ds = Shards(paths, fields={"label": "cls", "text": "txt"})
    runs = []
    for workers in (0, 1, 3):
        dl = pinloader.DataLoader(ds, batch_size=5, shuffle=True, seed=9, num_workers=workers,
                                  output="numpy")
        runs.append([bytes(t[k][:n[k]]) for l, t, n in dl for k in range(len(l))])
    assert runs[0] == runs[1] == runs[2]
    want = sorted(m["txt"] for _, m in _tar_oracle(paths))
    assert sorted(runs[0]) == want


def _labels_order(ds, **kw):
    """Epoch orders as sample numbers (the text member names the sample)."""
    dl = pinloader.DataLoader(ds, output="numpy", **kw)
    return [int(bytes(t[k][:n[k]]).split()[-1]) for t, n in dl for k in range(len(n))]


def write_many(folder, nshards=8, per=5):
    os.makedirs(folder, exist_ok=True)
    paths = []
    for s in range(nshards):
        paths.append(os.path.join(folder, "o-%02d.tar" % s))
        with tarfile.open(paths[-1], "w") as t:
            for j in range(per):
                data = b"sample %d" % (s * per + j)
                ti = tarfile.TarInfo("%06d.txt" % (s * per + j))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    return paths


@pytest.mark.parametrize("window", [1, 3, 5, 7])
def test_shard_order_is_bounded_and_exactly_once(tmp_path, window):
    paths = write_many(str(tmp_path))
    ds = Shards(paths, fields={"t": "txt"}, shuffle_buffer=window)
    kw = dict(batch_size=4, shuffle=True, seed=11)
    e0 = _labels_order(ds, num_workers=2, **kw)
    assert sorted(e0) == list(range(40))
    # some order of the shards, each read whole in tar order, whose every
    # window of positions holds exactly the samples of e0's same window
    import itertools

    windows = [set(e0[w:w + window]) for w in range(0, 40, window)]
    found = []
    for perm in itertools.permutations(range(8)):
        cat = [s * 5 + j for s in perm for j in range(5)]
        if all(set(cat[k * window:(k + 1) * window]) == windows[k] for k in range(len(windows))):
            found.append(perm)
            break
    assert found
    if window == 1:
        assert [v % 5 for v in e0] == [0, 1, 2, 3, 4] * 8  # tar order in a shard
    # a function of (seed, epoch): any worker count, the same order
    assert _labels_order(ds, num_workers=0, **kw) == e0
    assert _labels_order(ds, num_workers=3, **kw) == e0


def test_shard_order_epochs_ranks_and_resume(tmp_path):
    paths = write_many(str(tmp_path))
    ds = Shards(paths, fields={"t": "txt"}, shuffle_buffer=4)
    dl = pinloader.DataLoader(ds, batch_size=4, shuffle=True, seed=2, num_workers=2, output="numpy")
    e0 = [int(bytes(t[k][:n[k]]).split()[-1]) for t, n in dl for k in range(len(n))]
    e1 = [int(bytes(t[k][:n[k]]).split()[-1]) for t, n in dl for k in range(len(n))]
    assert sorted(e0) == sorted(e1) == list(range(40)) and e0 != e1
    # resume from a saved position, with another worker count
    a = pinloader.DataLoader(ds, batch_size=4, shuffle=True, seed=2, num_workers=1, output="numpy")
    it = iter(a)
    head = [next(it) for _ in range(3)]
    state = a.state_dict()
    a.close()
    b = pinloader.DataLoader(ds, batch_size=4, shuffle=True, seed=2, num_workers=3, output="numpy")
    b.load_state_dict(state)
    got = [int(bytes(t[k][:n[k]]).split()[-1]) for t, n in head + list(b) for k in range(len(n))]
    assert got == e0


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("world", [2, 4])
def test_each_rank_reads_whole_shards(tmp_path, world, shuffle):
    """W ranks over 8 shards of 5: each rank reads 8/W whole shards, no
    shard is read by two ranks, every sample once; the split is a function
    of (seed, epoch, W), not of the workers; each rank's samples come in its
    shards' tar order (no shuffle) or within windows of them."""
    paths = write_many(str(tmp_path))
    ds = Shards(paths, fields={"t": "txt"}, shuffle_buffer=5)
    kw = dict(batch_size=4, shuffle=shuffle, seed=3, world_size=world)
    ranks = [_labels_order(ds, rank=r, num_workers=r % 3, **kw) for r in range(world)]
    assert sorted(sum(ranks, [])) == list(range(40))
    shards = [sorted(set(v // 5 for v in got)) for got in ranks]
    assert all(len(sh) == 8 // world for sh in shards), shards
    assert sorted(sum(shards, [])) == list(range(8))
    for got in ranks:  # a window of 5 is one shard here: read one at a time
        assert all(len(set(v // 5 for v in got[w:w + 5])) == 1 for w in range(0, len(got), 5))
        if not shuffle:
            assert got == sorted(got)
    assert [_labels_order(ds, rank=r, num_workers=2, **kw) for r in range(world)] == ranks


@pytest.mark.parametrize("world2", [1, 2, 3])
def test_shard_order_resumes_on_another_world_size(tmp_path, world2):
    """Two ranks read 2 batches each; rank 0's state resumes on world2
    ranks: every sample of the epoch exactly once, and on two ranks each
    rank's epoch is the uninterrupted one (the epoch keeps its split)."""
    paths = write_many(str(tmp_path))
    ds = Shards(paths, fields={"t": "txt"}, shuffle_buffer=6)
    kw = dict(batch_size=4, shuffle=True, seed=4, output="numpy")

    def labels(batches):
        return [int(bytes(t[k][:n[k]]).split()[-1]) for t, n in batches for k in range(len(n))]
    heads, state = [], None
    for r in range(2):
        dl = pinloader.DataLoader(ds, rank=r, world_size=2, num_workers=2, **kw)
        it = iter(dl)
        heads.append(labels([next(it) for _ in range(2)]))
        state = state or dl.state_dict()
        dl.close()
    rests = []
    for r in range(world2):
        dl = pinloader.DataLoader(ds, rank=r, world_size=world2, num_workers=1 + r % 2, **kw)
        dl.load_state_dict(state)
        rests.append(labels(dl))
        dl.close()
    assert sorted(sum(heads + rests, [])) == list(range(40))
    if world2 == 2:
        kw.pop("output")
        whole = [_labels_order(ds, rank=r, world_size=2, num_workers=0, **kw) for r in range(2)]
        assert [h + t for h, t in zip(heads, rests)] == whole


def test_webdataset_order_and_contents(tmp_path):
    """torch's DataLoader over webdataset.WebDataset reads the same samples
    in the same order as index order here."""
    wds = pytest.importorskip("webdataset")
    import torch

    paths, _ = write_shards(str(tmp_path), long_names=True)
    ref = wds.WebDataset(paths, shardshuffle=False)
    got = [(s["__key__"], int(s["cls"]), bytes(s["txt"]), bytes(s["jpg"]))
           for s in torch.utils.data.DataLoader(ref, batch_size=None, num_workers=0)]
    ds = Shards(paths, fields={"label": "cls", "text": "txt", "raw": ("jpg", "bytes")},
                max_bytes=1 << 16)
    ours = []
    for i in range(len(ds)):
        label, text, tn, raw, rn = ds[i]
        ours.append((int(label), bytes(text[:tn]), bytes(raw[:rn])))
    assert [g[1:] for g in got] == ours


def test_missing_member_names_shard_and_key(tmp_path):
    paths, _ = write_shards(str(tmp_path))
    ds = Shards(paths, fields={"label": "cls", "seg": "png"})
    with pytest.raises(pinloader.Error) as e:
        ds[7]
    msg = str(e.value)
    assert paths[1] in msg and "'000007'" in msg and "'seg'" in msg and "png" in msg
    assert "jpg, cls, txt" in msg


def test_not_an_integer_and_too_long(tmp_path):
    paths, _ = write_shards(str(tmp_path))
    with pytest.raises(pinloader.Error, match=r"000000\.txt: not an integer"):
        Shards(paths, fields={"label": ("txt", "int")})[0]
    with pytest.raises(pinloader.Error, match=r"000000\.txt: 19 bytes, over max_bytes 8"):
        Shards(paths, fields={"t": "txt"}, max_bytes=8)[0]


def test_truncated_and_foreign_files(tmp_path):
    paths, _ = write_shards(str(tmp_path))
    with open(paths[2], "r+b") as f:
        f.truncate(os.path.getsize(paths[2]) // 2 + 100)
    with pytest.raises(pinloader.Error, match=r"part-002\.tar: .*(runs past the end|cut short)"):
        Shards(paths, fields=FIELDS)
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"x" * 1024)
    with pytest.raises(pinloader.Error, match=r"bad\.tar: not a tar file: bad header checksum at offset 0"):
        Shards([str(bad)], fields=FIELDS)


def test_bad_arguments(tmp_path):
    paths, _ = write_shards(str(tmp_path))
    with pytest.raises(ValueError):
        Shards(paths, readahead="some")
    with pytest.raises(pinloader.Error, match="kind 'float'"):
        Shards(paths, fields={"x": ("txt", "float")})
    with pytest.raises(pinloader.Error, match="brace"):
        Shards(str(tmp_path / "part-{002..000}.tar"))


def test_cli_spec(tmp_path):
    import subprocess
    import sys

    paths, _ = write_shards(str(tmp_path))
    spec = "shards:%s?fields=label:cls&size=8" % str(tmp_path / "part-{000..002}.tar")
    out = subprocess.run([sys.executable, "-m", "pinloader._cli", "run", "--dataset", spec,
                          "--batch-size", "4", "--epochs", "1"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------ HTTP

needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx not installed (scripts/setup.sh)")


@pytest.fixture
def served(tmp_path):
    paths, lst = write_shards(str(tmp_path / "www"))
    server = Nginx(str(tmp_path / "www"), str(tmp_path / "nginx"))
    yield server, paths, lst
    server.close()


@needs_nginx
@pytest.mark.parametrize("readahead", ["whole", "ranges"])
def test_url_gives_local_samples(served, tmp_path, readahead):
    server, paths, lst = served
    urls = server.url + "/part-{000..002}.tar"
    cache = tmp_path / "cache"
    remote = Shards(urls, fields=FIELDS, size=20, cache_dir=cache, readahead=readahead)
    local = Shards(paths, fields=FIELDS, size=20)
    assert len(remote) == len(local)
    for i in range(len(local)):
        for a, b in zip(remote[i], local[i]):
            assert np.array_equal(a, b)
    kept = sorted(p.suffix for p in cache.iterdir())
    assert kept == [".plidx"] * 3 + ([".tar"] * 3 if readahead == "whole" else [])
    # A second open finds the indexes in the cache: one 1-byte probe a shard.
    reads = 0 if readahead == "whole" else 3 * len(local)  # a request a member
    before = len(server.log(at_least=3 + 3 + reads))
    again = Shards(urls, fields=FIELDS, size=20, cache_dir=cache, readahead=readahead)
    assert len(again) == len(local)
    probes = server.log(before, at_least=3)
    assert sorted(probes) == ['"GET /part-%03d.tar HTTP/1.1" 206 1 "bytes=0-0"' % i for i in range(3)]


@needs_nginx
def test_loader_over_urls_matches_local(served, tmp_path):
    server, paths, _ = served
    remote = Shards(server.url + "/part-{000..002}.tar", fields=FIELDS, size=16,
                    cache_dir=tmp_path / "c", cache_bytes=1)  # one shard resident at a time
    local = Shards(paths, fields=FIELDS, size=16)
    a = pinloader.DataLoader(remote, batch_size=4, shuffle=True, seed=3, num_workers=2, output="numpy")
    b = pinloader.DataLoader(local, batch_size=4, shuffle=True, seed=3, num_workers=2, output="numpy")
    for _ in range(2):
        for x, y in zip(a, b):
            for u, v in zip(x, y):
                assert np.array_equal(u, v)


def _indexed_not_fetched(server, tmp_path, **kw):
    """The served shards opened with their indexes cached and the shards
    not (a first open indexes them, then the cached shards are deleted):
    the dataset, and the access log's length after its open (a probe and an
    index fetch per shard, then a probe per shard)."""
    urls = server.url + "/part-{000..002}.tar"
    cache = tmp_path / "c"
    Shards(urls, fields=FIELDS, size=16, cache_dir=cache)
    for p in cache.glob("*.tar"):
        p.unlink()
    ds = Shards(urls, fields=FIELDS, size=16, cache_dir=cache, **kw)
    return ds, len(server.log(at_least=3 + 3 + 3))


@needs_nginx
@pytest.mark.parametrize("prefetch", [0, 2])
def test_each_shard_fetched_once_an_epoch(served, tmp_path, prefetch):
    """Indexes cached, shards not: a shuffled epoch fetches each shard once
    (by the read-ahead thread or by the first reader; never twice)."""
    server, paths, _ = served
    ds, before = _indexed_not_fetched(server, tmp_path, prefetch=prefetch, shuffle_buffer=4)
    local = Shards(paths, fields=FIELDS, size=16, shuffle_buffer=4)
    kw = dict(batch_size=4, shuffle=True, seed=1, num_workers=2, output="numpy")
    for x, y in zip(pinloader.DataLoader(ds, **kw), pinloader.DataLoader(local, **kw)):
        for u, v in zip(x, y):
            assert np.array_equal(u, v)
    log = server.log(before, at_least=3)
    assert sorted(line.split('"')[1] for line in log) == \
        ["GET /part-%03d.tar HTTP/1.1" % i for i in range(3)], log
    del ds  # joins the read-ahead thread


@needs_nginx
def test_unshuffled_epoch_reads_ahead(served, tmp_path):
    """In index order too (an eval epoch), the read-ahead thread fetches the
    next shards before a reader reaches them: while the consumer holds its
    first batch (2 samples of part-000; num_workers=0, so nothing else is
    read), part-001 and part-002 are fetched. (Before, only a shuffled epoch
    read ahead: an unshuffled one fetched each shard when a reader got to it,
    and this log held part-000 alone.) The epoch is then local's."""
    server, paths, _ = served
    ds, before = _indexed_not_fetched(server, tmp_path, prefetch=2)
    it = iter(pinloader.DataLoader(ds, batch_size=2, num_workers=0, output="numpy"))
    got = [next(it)]
    log = server.log(before, at_least=3)  # waits for the three fetches
    assert sorted(line.split('"')[1] for line in log) == \
        ["GET /part-%03d.tar HTTP/1.1" % i for i in range(3)], log
    got += list(it)
    want = list(pinloader.DataLoader(Shards(paths, fields=FIELDS, size=16), batch_size=2,
                                     output="numpy"))
    assert len(got) == len(want)
    for x, y in zip(got, want):
        for u, v in zip(x, y):
            assert np.array_equal(u, v)
    assert len(server.log(before)) == 3  # each shard once
    del it, ds  # joins the read-ahead thread


@needs_nginx
def test_ranks_fetch_disjoint_shards(served, tmp_path):
    """Three ranks over three URLs read whole: each shard is fetched once in
    all, by the rank that owns it, and every sample comes once. In index
    order, so that the next epochs the loader reads ahead (timing) are the
    same shards per rank, already cached; test_each_rank_reads_whole_shards
    checks shuffled epochs' split."""
    server, paths, _ = served
    urls = server.url + "/part-{000..002}.tar"
    caches = [tmp_path / ("rank%d" % r) for r in range(3)]  # a machine each
    for c in caches:  # indexes cached, shards not
        Shards(urls, fields=FIELDS, size=16, cache_dir=c)
        for p in c.glob("*.tar"):
            p.unlink()
    dss = [Shards(urls, fields=FIELDS, size=16, cache_dir=c, shuffle_buffer=4) for c in caches]
    before = len(server.log(at_least=3 * (3 + 3) + 3 * 3))  # probe, index; probe
    got = []
    for r in range(3):
        dl = pinloader.DataLoader(dss[r], batch_size=4, rank=r, world_size=3, num_workers=2,
                                  output="numpy")
        got += [bytes(t[k][:n[k]]) for _, _, t, n in dl for k in range(len(n))]
        del dl
    del dss  # joins the read-ahead threads
    log = server.log(before, at_least=3)
    assert sorted(line.split('"')[1] for line in log) == \
        ["GET /part-%03d.tar HTTP/1.1" % i for i in range(3)], log
    assert sorted(got) == sorted(m["txt"] for _, m in _tar_oracle(paths))


@needs_nginx
def test_http_errors_name_url_and_status(served, tmp_path):
    server, _, _ = served
    url = server.url + "/unavailable/part-000.tar"
    with pytest.raises(pinloader.Error) as e:
        Shards(url, fields=FIELDS, cache_dir=tmp_path / "c", retries=2, backoff_ms=1)
    assert str(e.value).endswith("%s: HTTP status 503, after 3 attempts" % url) or \
        "%s: HTTP status 503, after 3 attempts" % url in str(e.value)
    url = server.url + "/missing/part-000.tar"
    with pytest.raises(pinloader.Error, match="%s: HTTP status 404$" % url):
        Shards(url, fields=FIELDS, cache_dir=tmp_path / "c", retries=2, backoff_ms=1)


@needs_nginx
def test_shard_changed_after_indexing_is_refused(served, tmp_path):
    server, paths, _ = served
    ds = Shards(server.url + "/part-000.tar", fields=FIELDS, cache_dir=tmp_path / "c",
                readahead="ranges")
    ds[0]
    with open(paths[0], "ab") as f:  # another length, another mtime: another ETag
        f.write(b"\0" * 1024)
    with pytest.raises(pinloader.Error, match="changed since it was indexed"):
        ds[1]


def test_retries_after_503_and_dropped_connections(tmp_path):
    paths, _ = write_shards(str(tmp_path / "www"))
    name = os.path.basename(paths[0])
    # open: probe, then the whole shard (503, dropped half-way: resumed from
    # where it stopped, with a range); then reads are local
    server = FaultServer(str(tmp_path / "www"), plan=["ok", "503", "drop", "ok"])
    try:
        ds = Shards(server.url + "/" + name, fields=FIELDS, size=16, cache_dir=tmp_path / "c",
                    retries=3, backoff_ms=1)
        assert [r[1] for r in server.requests[:3]] == ["bytes=0-0", None, None]
        assert server.requests[3][1].startswith("bytes=") and server.requests[3][1].endswith("-")
        assert int(server.requests[3][1][6:-1]) > 0
        local = Shards(paths[0], fields=FIELDS, size=16)
        for i in range(len(local)):
            for a, b in zip(ds[i], local[i]):
                assert np.array_equal(a, b)
    finally:
        server.close()


def test_ranges_refuse_a_changed_etag(tmp_path):
    paths, _ = write_shards(str(tmp_path / "www"))
    name = os.path.basename(paths[0])
    server = FaultServer(str(tmp_path / "www"), plan=["ok", "ok", "ok", "etag"])
    try:
        ds = Shards(server.url + "/" + name, fields={"label": "cls"}, cache_dir=tmp_path / "c",
                    readahead="ranges", retries=3, backoff_ms=1)
        assert int(ds[0][0]) == 0
        with pytest.raises(pinloader.Error,
                           match=r'changed since it was indexed \(ETag "v1", \d+ bytes when indexed; '
                                 r'now ETag "v2"'):
            ds[1]
        assert len(server.requests) == 4  # refused at once, never retried
    finally:
        server.close()


def test_ranges_empty_member(tmp_path):
    (tmp_path / "www").mkdir()
    path = str(tmp_path / "www" / "e.tar")
    with tarfile.open(path, "w") as t:
        for name, data in (("0.cls", b"5"), ("0.txt", b""), ("1.cls", b"6"), ("1.txt", b"x")):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    server = FaultServer(str(tmp_path / "www"))
    try:
        ds = Shards(server.url + "/e.tar", fields={"label": "cls", "t": "txt"},
                    cache_dir=tmp_path / "c", readahead="ranges")
        label, text, n = ds[0]
        assert int(label) == 5 and int(n) == 0 and not text.any()
        label, text, n = ds[1]
        assert int(label) == 6 and bytes(text[:n]) == b"x"
        # probe, index; then one request a non-empty member
        assert [r[1] for r in server.requests[2:]] == [
            "bytes=%d-%d" % (o, o) for o in (512, 2048, 3072)]
    finally:
        server.close()


def test_no_server_is_a_clear_error(tmp_path):
    from shard_servers import free_port

    url = "http://127.0.0.1:%d/x.tar" % free_port()
    with pytest.raises(pinloader.Error, match=r"%s: .*after 2 attempts" % url):
        Shards(url, cache_dir=tmp_path / "c", retries=1, backoff_ms=1)


# ------------------------------------------------------------------ fetcher

class _FileFetcher:
    """fetcher(url, offset, length) over local files behind "mem://"."""

    def __init__(self):
        self.calls = []

    def __call__(self, url, offset, length):
        self.calls.append((url, offset, length))
        with open(url[len("mem://"):], "rb") as f:
            f.seek(offset)
            return f.read() if length is None else f.read(length)


@pytest.mark.parametrize("readahead", ["whole", "ranges"])
def test_fetcher_gives_local_samples(tmp_path, readahead):
    paths, _ = write_shards(str(tmp_path))
    fetch = _FileFetcher()
    ds = Shards(["mem://" + p for p in paths], fields=FIELDS, size=16, fetcher=fetch,
                cache_dir=tmp_path / "c", readahead=readahead)
    assert fetch.calls == [("mem://" + p, 0, None) for p in paths]  # indexed at open
    local = Shards(paths, fields=FIELDS, size=16)
    kw = dict(batch_size=4, shuffle=True, seed=3, num_workers=2, output="numpy")
    for x, y in zip(pinloader.DataLoader(ds, **kw), pinloader.DataLoader(local, **kw)):
        for u, v in zip(x, y):
            assert np.array_equal(u, v)
    if readahead == "ranges":  # one call a member read (the loader may read ahead
        # into the next epoch too): at least 3 fields of 18 samples, all ranges
        assert len(fetch.calls) >= 3 + 3 * len(local)
        assert all(n is not None for _, _, n in fetch.calls[3:])


def test_fetcher_errors(tmp_path):
    paths, _ = write_shards(str(tmp_path))

    def boom(url, offset, length):
        raise OSError("no such bucket")
    with pytest.raises(pinloader.Error, match=r"mem://x\.tar: the fetcher failed: OSError: no such bucket"):
        Shards("mem://x.tar", fetcher=boom, cache_dir=tmp_path / "c")
    with pytest.raises(pinloader.Error, match="the fetcher failed: returned int, not bytes"):
        Shards("mem://x.tar", fetcher=lambda u, o, n: 3, cache_dir=tmp_path / "c")
    with pytest.raises(TypeError):
        Shards("mem://x.tar", fetcher=3)
    class Short(_FileFetcher):  # a range one byte short
        def __call__(self, url, offset, length):
            data = super().__call__(url, offset, length)
            return data if length is None else data[:-1]
    ds = Shards("mem://" + paths[0], fields={"t": "txt"}, fetcher=Short(),
                cache_dir=tmp_path / "c", readahead="ranges")
    with pytest.raises(pinloader.Error, match=r"000000\.txt: 18 of its 19 bytes came"):
        ds[0]


# ------------------------------------------------------------------ npy

def _npy(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def _npy_shard(path, arrays):
    with tarfile.open(path, "w") as t:
        for i, (x, m) in enumerate(arrays):
            for ext, data in (("x.npy", _npy(x)), ("mask.npy", _npy(m)), ("cls", b"%d" % i)):
                ti = tarfile.TarInfo("%04d.%s" % (i, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))


@pytest.mark.parametrize("fetched", [False, True])
def test_npy_members(tmp_path, fetched):
    rng = np.random.default_rng(0)
    arrays = [(rng.normal(size=(2, 3)).astype(">f4" if i % 2 else "<f4"), rng.random(4) > 0.5)
              for i in range(5)]
    path = str(tmp_path / "a.tar")
    _npy_shard(path, arrays)
    kw = dict(fields={"x": "x.npy", "mask": "mask.npy", "label": "cls"})
    if fetched:
        kw.update(fetcher=_FileFetcher(), readahead="ranges", cache_dir=tmp_path / "c")
    ds = Shards(("mem://" if fetched else "") + path, **kw)
    assert [tuple(f) for f in ds.fields] == [("x", "float32", (2, 3)), ("mask", "uint8", (4,)),
                                            ("label", "int64", ())]
    for i, (x, m) in enumerate(arrays):
        gx, gm, gl = ds[i]
        assert np.array_equal(gx, x.astype("=f4")) and np.array_equal(gm, m.astype(np.uint8))
        assert int(gl) == i


def test_npy_member_of_another_shape_is_refused(tmp_path):
    path = str(tmp_path / "a.tar")
    _npy_shard(path, [(np.zeros((2, 3), np.float32), np.zeros(4, bool)),
                      (np.zeros((2, 4), np.float32), np.zeros(4, bool))])
    ds = Shards(path, fields={"x": "x.npy"})
    ds[0]
    with pytest.raises(pinloader.Error, match=r"a\.tar: 0001\.x\.npy: float32 \(2, 4\), but field 'x' "
                                              r"is float32 \(2, 3\) \(its first sample's\)"):
        ds[1]
