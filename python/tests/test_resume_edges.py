"""Resume edges, each compared with the uninterrupted run: load_state_dict()
after iter() has begun; one state resumed twice; a state at the last batch
of an epoch and at the first of the next; shuffle=True with generator=;
persistent_workers=True; state_dict() while batches are prefetched (the
workers are seen to have read ahead before the state is taken: a pipe
they write to, no sleeps)."""
import os
import select

import numpy as np
import pytest

import pinloader

torch = pytest.importorskip("torch")

from resume_data import Piped, Shards, StatefulPerm  # noqa: E402

N = 23
KINDS = ["seed", "generator", "sampler", "iterable"]


def _flat(b):
    return [int(v) for v in b.reshape(-1)]


def _maker(kind, workers, persistent=False, pipe=None):
    extra = dict(num_workers=workers, persistent_workers=persistent)

    def make():
        ds = np.arange(N) if pipe is None else Piped(N, pipe)
        if kind == "seed":
            return pinloader.DataLoader(ds, batch_size=3, shuffle=True, seed=4, **extra)
        if kind == "generator":
            return pinloader.DataLoader(ds, batch_size=3, shuffle=True,
                                        generator=torch.Generator().manual_seed(9), **extra)
        if kind == "sampler":
            return pinloader.DataLoader(ds, batch_size=3, sampler=StatefulPerm(N, 1), **extra)
        return pinloader.DataLoader(Shards(N, pipe), batch_size=2, **extra)

    return make


def _epochs(loader, n):
    return [[_flat(b) for b in loader] for _ in range(n)]


def _want(make, n=3):
    a = make()
    out = _epochs(a, n)
    a.close()
    return out


def _params():
    out = []
    for kind in KINDS:
        for workers in (0, 2):
            out.append((kind, workers, False))
        out.append((kind, 2, True))
    return out


PARAMS = pytest.mark.parametrize("kind,workers,persistent", _params())


def _state_at(make, k):
    a = make()
    it = iter(a)
    taken = [_flat(next(it)) for _ in range(k)]
    st = a.state_dict()
    a.close()
    return taken, st


@PARAMS
def test_load_after_iter_began(kind, workers, persistent):
    make = _maker(kind, workers, persistent)
    want = _want(make, 2)
    taken, st = _state_at(make, 3)
    b = make()
    it = iter(b)
    next(it), next(it)  # an iteration under way, then the restore
    b.load_state_dict(st)
    rest = _epochs(b, 2)
    b.close()
    assert taken + rest[0] == want[0]
    assert rest[1] == want[1]


@PARAMS
def test_resume_twice_from_one_state(kind, workers, persistent):
    make = _maker(kind, workers, persistent)
    want = _want(make, 1)
    taken, st = _state_at(make, 2)
    b = make()
    b.load_state_dict(st)
    first = _epochs(b, 1)[0]
    b.load_state_dict(st)  # the same loader, again
    second = _epochs(b, 1)[0]
    b.close()
    c = make()
    c.load_state_dict(st)  # and another loader
    third = _epochs(c, 1)[0]
    c.close()
    assert taken + first == want[0]
    assert first == second == third


@PARAMS
def test_state_at_last_batch_of_epoch(kind, workers, persistent):
    make = _maker(kind, workers, persistent)
    want = _want(make, 2)
    taken, st = _state_at(make, len(want[0]))
    assert taken == want[0]
    b = make()
    b.load_state_dict(st)
    rest = _epochs(b, 2)
    b.close()
    if kind == "iterable":
        # The loader cannot know a batch was its dataset's last before the
        # workers say they ran out: the rest of that epoch is empty.
        assert rest == [[], want[1]]
    else:
        assert rest[0] == want[1]


@PARAMS
def test_state_at_first_batch_of_next_epoch(kind, workers, persistent):
    make = _maker(kind, workers, persistent)
    want = _want(make, 3)
    a = make()
    assert _epochs(a, 1) == want[:1]
    after_end = a.state_dict()  # between the epochs
    it = iter(a)
    first = _flat(next(it))
    st = a.state_dict()
    a.close()
    assert first == want[1][0]
    b = make()
    b.load_state_dict(st)
    rest = _epochs(b, 2)
    b.close()
    assert rest == [want[1][1:], want[2]]
    c = make()
    c.load_state_dict(after_end)
    assert _epochs(c, 2) == want[1:]
    c.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_generator_order_restored(workers):
    """shuffle=True with generator=: the resumed epoch's order, and the
    generator's state after it (the next epochs' orders), are the
    uninterrupted run's, which are torch's."""
    def torch_make():
        return torch.utils.data.DataLoader(np.arange(N), batch_size=3, shuffle=True,
                                           generator=torch.Generator().manual_seed(9))

    make = _maker("generator", workers)
    want = _want(make, 3)
    assert _epochs(torch_make(), 3) == want
    for k in (1, 4, 7):
        taken, st = _state_at(make, k)
        b = make()
        b.load_state_dict(st)
        rest = _epochs(b, 3)
        b.close()
        assert taken + rest[0] == want[0]
        assert rest[1:] == want[1:]


def _read_until(fd, count):
    """Blocks until `count` bytes came through the pipe (the workers' reads)."""
    got = 0
    while got < count:
        if not select.select([fd], [], [], 120)[0]:
            raise AssertionError("the workers read %d samples, not %d" % (got, count))
        got += len(os.read(fd, 4096))
    return got


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_while_prefetched(kind):
    """Two batches taken, the workers seen to have read at least three
    more: the state is at the second batch, and the prefetched ones are
    not lost (they are loaded after a restore)."""
    r, w = os.pipe()
    try:
        want = _want(_maker(kind, 2, pipe=w), 1)
        _drain(r)
        a = _maker(kind, 2, pipe=w)()
        it = iter(a)
        taken = [_flat(next(it)) for _ in range(2)]
        per = 2 if kind == "iterable" else 3
        _read_until(r, (2 + 3) * per)
        st = a.state_dict()
        on = [_flat(b) for b in it]  # the same loader goes on as if nothing was asked
        a.close()
        b = _maker(kind, 2, pipe=w)()
        b.load_state_dict(st)
        rest = _epochs(b, 1)[0]
        b.close()
        assert taken + on == want[0]
        assert taken + rest == want[0]
    finally:
        os.close(r)
        os.close(w)


def _drain(fd):
    while select.select([fd], [], [], 0)[0]:
        os.read(fd, 1 << 16)


def _big_maker(kind):
    """As _maker, over 120 samples (40 batches): a worker killed after the
    third batch still has batches to read, whatever was prefetched."""
    def make():
        ds = np.arange(120)
        if kind == "seed":
            return pinloader.DataLoader(ds, batch_size=3, shuffle=True, seed=4, num_workers=2)
        if kind == "generator":
            return pinloader.DataLoader(ds, batch_size=3, shuffle=True, num_workers=2,
                                        generator=torch.Generator().manual_seed(9))
        if kind == "sampler":
            return pinloader.DataLoader(ds, batch_size=3, sampler=StatefulPerm(120, 1), num_workers=2)
        return pinloader.DataLoader(Shards(120), batch_size=2, num_workers=2)

    return make


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_while_a_worker_restarts(kind):
    """A worker killed mid-epoch: the iteration raises (as torch's), the
    loader will start new workers at its next iter(). state_dict() then is
    the state after the last batch delivered: restored into a new loader,
    and into this one, it gives the rest of the epoch and the next epoch
    of the uninterrupted run; nothing lost, nothing twice."""
    import signal

    make = _big_maker(kind)
    want = _want(make, 2)
    a = make()
    it = iter(a)
    got = [_flat(next(it)) for _ in range(3)]
    os.kill(a.worker_pids[1], signal.SIGKILL)
    with pytest.raises(pinloader.Error, match="SIGKILL"):
        for b in it:
            got.append(_flat(b))  # batches read before the death
    assert got == want[0][:len(got)]
    st = a.state_dict()
    b = make()
    b.load_state_dict(st)
    assert _epochs(b, 2) == [want[0][len(got):], want[1]]
    b.close()
    a.load_state_dict(st)  # the loader whose worker died
    assert _epochs(a, 2) == [want[0][len(got):], want[1]]
    a.close()
