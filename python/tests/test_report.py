"""loader.report(): the bottleneck named in two constructed cases (a slow
__getitem__, a slow step), and num_workers / prefetch_factor "auto". The
cases are extreme (20 ms against nothing) and the checks name the stage,
never a time."""
import time

import numpy as np

import pinloader


class Slow:
    """Sample i: uint8 [4] filled with i; each read sleeps `delay` s."""

    def __init__(self, n=64, delay=0.0):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        return np.full(4, i % 256, dtype=np.uint8)


def _run(loader, batches, step=0.0):
    it = iter(loader)
    for _ in range(batches):
        x = next(it)
        if step:
            time.sleep(step)
        del x


def test_report_names_a_slow_dataset():
    loader = pinloader.DataLoader(Slow(delay=0.02), batch_size=1, num_workers=1, output="numpy")
    _run(loader, 8)
    rep = loader.report(json=True)
    assert rep["bound"] == "workers", rep
    assert rep["timings"]["batches"] == 7
    text = loader.report()
    assert "bound: workers\n" in text and "add workers or lighten transforms" in text
    loader.close()


def test_report_names_a_slow_step():
    loader = pinloader.DataLoader(Slow(), batch_size=4, num_workers=2, output="numpy")
    _run(loader, 8, step=0.02)
    rep = loader.report(json=True)
    assert rep["bound"] == "consumer", rep
    assert any("your training step is the bottleneck" in f["text"] for f in rep["findings"])
    loader.close()


def test_auto_workers_keep_order():
    loader = pinloader.DataLoader(Slow(n=50), batch_size=4, num_workers="auto",
                                  prefetch_factor="auto", output="numpy")
    for _ in range(2):
        got = np.concatenate([np.array(x)[:, 0] for x in loader])
        np.testing.assert_array_equal(got, np.arange(50, dtype=np.uint8))
    t = loader.report(json=True)["timings"]
    assert 1 <= t["workers"] <= t["worker_threads"] <= t["cpus"]
    loader.close()


class Spin:
    """Sample i: uint8 [4] filled with i, after `work` s of CPU (a busy
    loop: the worker processes' CPU clock must see it)."""

    def __init__(self, n=64, work=0.004):
        self.n, self.work = n, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        t = time.process_time()
        while time.process_time() - t < self.work:
            pass
        return np.full(4, i % 256, dtype=np.uint8)


def test_report_counts_worker_process_cpu():
    loader = pinloader.DataLoader(Spin(), batch_size=4, num_workers=2, output="numpy")
    _run(loader, 12)
    t = loader.report(json=True)["timings"]
    # 11 batches after the first, 4 samples of 4 ms of CPU each: about
    # 0.18 s in the workers, against almost none in this process.
    assert t["worker_process_cpu_s"] >= 0.09, t
    assert "the process and its worker processes used" in loader.report()
    loader.close()
    threads = pinloader.DataLoader(Spin(), batch_size=4, num_workers=2, output="numpy",
                                   worker_mode="thread")
    _run(threads, 4)
    assert threads.report(json=True)["timings"]["worker_process_cpu_s"] == 0
    assert "worker processes used" not in threads.report()
    threads.close()
