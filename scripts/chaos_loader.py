"""The loader side of scripts/chaos.sh: loads CIFAR-10-format files for a
given time while scripts/chaos.sh truncates, rewrites and replaces them,
sends SIGINT, and while this process forks children. Every sample carries
its own index in its first 8 bytes and the rest is a known function of the
index, so each delivered batch is checked byte for byte.

Outcome classes, counted: batches exactly right; batches wrong (must stay
0); reported failures by cause (pinloader.Error at open or at next: the
file changed, bad size, ...); SIGINTs taken; fork children (each must exit
0: inherited loader refused with the fork message, a loader of its own
works or reports a failure). Exit 0 if nothing was wrong, 1 otherwise.
Usage: python3 chaos_loader.py DIR SECONDS SEED STATUS_FILE"""
import collections
import json
import os
import random
import signal
import sys
import time

import numpy as np

import pinloader

try:  # imported now, not lazily inside the first DataLoader(): a SIGINT
    import torch  # noqa: F401  # landing in torch's import is torch's RuntimeError
except ImportError:
    pass

RECORD = 3073
PER_FILE = 1200
NFILES = 4


def sample_bytes(index):
    """Record `index`: label byte, then 8 bytes of index, then 3064 bytes."""
    rng = np.random.default_rng(index)
    rec = np.empty(RECORD, np.uint8)
    rec[0] = index % 10
    rec[1:9] = np.frombuffer(np.uint64(index).tobytes(), np.uint8)
    rec[9:] = rng.integers(0, 256, RECORD - 9, dtype=np.uint8)
    return rec


def write_files(d):
    paths = []
    for f in range(NFILES):
        recs = np.stack([sample_bytes(f * PER_FILE + i) for i in range(PER_FILE)])
        p = os.path.join(d, "data_%d.bin" % f)
        recs.tofile(p)
        recs.tofile(p + ".pristine")
        paths.append(p)
    return paths


EXPECT = {}


def expected(index):
    e = EXPECT.get(index)
    if e is None:
        e = EXPECT[index] = sample_bytes(index)
    return e


def batch_ok(images, labels):
    """images: [B, 3, 32, 32] uint8, labels [B]."""
    flat = images.reshape(len(images), -1)
    for img, lab in zip(flat, labels):
        index = int(np.frombuffer(img[:8].tobytes(), np.uint64)[0])
        if index >= NFILES * PER_FILE:
            return False
        e = expected(index)
        if int(lab) != int(e[0]) or not np.array_equal(img, e[1:]):
            return False
    return True


def cause(e):
    m = str(e)
    for key in ("the file changed while it was being read", "not a whole number of", "truncated",
                "cannot open", "a forked child", "all ", "still loading"):
        if key in m:
            return key
    return m[-80:]


def child(loader, ds_paths):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.alarm(60)  # a hang dies of SIGALRM, and the parent counts it
    # A new iterator over the inherited DataLoader either refuses with the
    # fork error or works (a loader of the child's own): issue 17 allows
    # both; a wrong batch is the failure.
    try:
        img, lab = next(iter(loader))
        if not batch_ok(img, lab):
            os._exit(3)
    except pinloader.Error as e:
        if "a forked child" not in str(e) and "the file changed" not in str(e) \
                and "not a whole number" not in str(e):
            os._exit(4)
    try:
        ds = pinloader.datasets.CIFAR10(ds_paths)
        mine = pinloader.DataLoader(ds, batch_size=32, num_workers=1, output="numpy")
        for img, lab in mine:
            if not batch_ok(img, lab):
                os._exit(5)
            break
        mine.close()
    except pinloader.Error:
        pass  # a file was being changed: reported, fine
    os._exit(0)


def main():
    d, seconds, seed, status_path = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    paths = [os.path.join(d, "data_%d.bin" % f) for f in range(NFILES)]
    # A background job of a script starts with SIGINT ignored: take it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rnd = random.Random(seed)
    stats = collections.Counter()
    causes = collections.Counter()
    end = time.time() + seconds
    last_status = 0
    while time.time() < end:
        loader = None
        try:
            try:
                ds = pinloader.datasets.CIFAR10(paths)
                loader = pinloader.DataLoader(ds, batch_size=rnd.choice([1, 7, 64, 256]),
                                              shuffle=rnd.random() < 0.5, seed=rnd.randrange(1000),
                                              num_workers=rnd.choice([0, 1, 2, 3]), output="numpy")
            except pinloader.Error as e:
                stats["open_failed_reported"] += 1
                causes["open: " + cause(e)] += 1
                time.sleep(0.01)
                continue
            for _ in range(rnd.randint(1, 4)):  # epochs on this loader
                try:
                    for img, lab in loader:
                        if batch_ok(img, lab):
                            stats["batches_ok"] += 1
                            stats["samples_ok"] += len(lab)
                        else:
                            stats["batches_wrong"] += 1
                        if rnd.random() < 0.002:
                            pid = os.fork()
                            if pid == 0:
                                child(loader, paths)
                            _, st = os.waitpid(pid, 0)
                            ok = os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
                            stats["forks_ok" if ok else "forks_bad"] += 1
                        if time.time() - last_status > 1:
                            last_status = time.time()
                            with open(status_path, "w") as f:
                                json.dump({"stats": stats, "causes": causes, "t": last_status}, f)
                        if time.time() > end:
                            break
                except pinloader.Error as e:
                    stats["batch_failed_reported"] += 1
                    causes["next: " + cause(e)] += 1
        except KeyboardInterrupt:
            stats["sigint"] += 1
        finally:
            if loader is not None:
                try:
                    loader.close()
                except KeyboardInterrupt:
                    stats["sigint"] += 1
                    loader.close()
    summary = {"stats": dict(stats), "causes": dict(causes), "t": time.time(), "done": True}
    with open(status_path, "w") as f:
        json.dump(summary, f)
    print(json.dumps(summary, indent=1, sort_keys=True))
    bad = stats["batches_wrong"] + stats["forks_bad"]
    sys.exit(1 if bad or not stats["batches_ok"] else 0)


if __name__ == "__main__":
    if sys.argv[1] == "--write":
        write_files(sys.argv[2])
    else:
        main()
