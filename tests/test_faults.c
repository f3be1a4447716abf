/* Fault injection: every failure the loader can meet outside the device
 * (a file that will not open or map, a corrupt .gz stream, a batch buffer
 * that cannot be allocated at create or when the pool grows, a worker
 * thread that cannot start, a sample callback that fails, a sample that
 * stalls) ends with the documented status and a message naming the cause,
 * never a crash or a hang, and the loader stays usable or destroyable.
 * Leaks are caught by running this under ASan/LSan (CI: -DPL_SANITIZE=
 * address -DPL_FAULT_INJECTION=ON). Every wait is bounded.
 *
 * Needs a library built with -DPL_FAULT_INJECTION=ON; skips (77) without. */
#ifndef PL_FAULT_INJECTION
#include <stdio.h>

int main(void) {
  printf("test_faults: library built without PL_FAULT_INJECTION: skipped\n");
  return 77;
}
#else
#include "loader_fixture.h"

#include "core/common.h"
#include "core/fault.h"

enum { WAIT_S = 20 };

static pl_loader *make(pl_dataset *ds, uint32_t bs, int workers, int prefetch,
                       uint64_t max_buffers, double timeout_s,
                       pl_error *err, pl_status *st) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  cfg.batch_size = bs;
  cfg.num_workers = workers;
  cfg.prefetch = prefetch;
  cfg.max_batch_buffers = max_buffers;
  cfg.timeout_s = timeout_s;
  pl_loader *ld = (pl_loader *)(uintptr_t)1; /* must come back NULL on error */
  *st = pl_loader_create(ds, &cfg, &ld, err);
  if (*st != PL_OK)
    CHECK(ld == NULL);
  return *st == PL_OK ? ld : NULL;
}

/* ------------------------------------------------------------ files */

typedef pl_status (*open_fn)(const char *a, const char *b, pl_dataset **out,
                             pl_error *err);

static pl_status open_idx(const char *a, const char *b, pl_dataset **out,
                          pl_error *err) {
  return pl_dataset_open_idx(a, b, out, err);
}

static pl_status open_cifar(const char *a, const char *b, pl_dataset **out,
                            pl_error *err) {
  const char *p[2] = {a, b};
  return pl_dataset_open_cifar10(p, 2, out, err);
}

/* Fails the k-th hit of `point` for k = 0, 1, ... until the open no longer
 * meets the fault. Every failure must be `want` and name one of the files;
 * each file must be named by some failure. Returns the number of hits. */
static int sweep_open(pl_fault_point point, open_fn fn, const char *a,
                      const char *b, pl_status want, const char *what) {
  int named_a = 0, named_b = 0, k;
  for (k = 0; k < 64; k++) {
    pl_dataset *ds = (pl_dataset *)(uintptr_t)1;
    pl_error err;
    pl_fault_arm(point, k, 1);
    pl_status s = fn(a, b, &ds, &err);
    pl_fault_reset();
    if (s == PL_OK) {
      pl_dataset_destroy(ds);
      break;
    }
    CHECK(ds == NULL);
    if (s != want) {
      fprintf(stderr, "%s: hit %d: %s, want %s: %s\n", what, k,
              pl_status_name(s), pl_status_name(want), err.message);
      pl_test_failures++;
    }
    named_a |= strstr(err.message, a) != NULL;
    named_b |= strstr(err.message, b) != NULL;
    if (!strstr(err.message, a) && !strstr(err.message, b)) {
      fprintf(stderr, "%s: hit %d: message names neither file: %s\n", what,
              k, err.message);
      pl_test_failures++;
    }
  }
  if (!(named_a && named_b))
    fprintf(stderr, "%s: files named: first %d, second %d\n", what, named_a,
            named_b);
  CHECK(named_a && named_b);
  CHECK(k < 64);
  return k;
}

static void file_faults(void) {
  const char *img = pl_test_path("f-images-idx3-ubyte");
  const char *lab = pl_test_path("f-labels-idx1-ubyte");
  const char *imgz = pl_test_path("f-images-idx3-ubyte.gz");
  const char *labz = pl_test_path("f-labels-idx1-ubyte.gz");
  const char *c1 = pl_test_path("data_batch_1.bin");
  const char *c2 = pl_test_path("data_batch_2.bin");
  CHECK(pl_test_write_idx(img, lab, 20, 28, 28, 0) == 0);
  CHECK(pl_test_write_idx(imgz, labz, 20, 28, 28, 1) == 0);
  CHECK(pl_test_write_cifar(c1, 0, 3) == 0);
  CHECK(pl_test_write_cifar(c2, 3, 2) == 0);

  CHECK(sweep_open(PL_FAULT_FILE_OPEN, open_idx, img, lab, PL_IO,
                   "idx open") >= 2);
  /* The injected mmap failure is ENOMEM, which reads as PL_NO_MEMORY. */
  CHECK(sweep_open(PL_FAULT_FILE_MAP, open_idx, img, lab, PL_NO_MEMORY,
                   "idx mmap") >= 2);
  CHECK(sweep_open(PL_FAULT_FILE_OPEN, open_idx, imgz, labz, PL_IO,
                   "idx.gz open") >= 2);
  CHECK(sweep_open(PL_FAULT_GZ_READ, open_idx, imgz, labz, PL_FORMAT,
                   "idx.gz inflate") >= 2);
  CHECK(sweep_open(PL_FAULT_FILE_OPEN, open_cifar, c1, c2, PL_IO,
                   "cifar open") >= 2);
  CHECK(sweep_open(PL_FAULT_FILE_MAP, open_cifar, c1, c2, PL_NO_MEMORY,
                   "cifar mmap") >= 2);

  /* The message carries the OS's reason too (the injected EIO). */
  pl_dataset *ds = NULL;
  pl_error err;
  pl_fault_arm(PL_FAULT_FILE_OPEN, 0, 1);
  CHECK_STATUS(pl_dataset_open_idx(img, lab, &ds, &err), PL_IO, &err);
  CHECK_MSG(&err, img);
  CHECK_MSG(&err, "Input/output error");
  pl_fault_reset();
  /* Nothing stuck: the same files open fine afterwards. */
  CHECK_OK(pl_dataset_open_idx(img, lab, &ds, &err), &err);
  CHECK_EQ_U64(pl_dataset_length(ds), 20);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ memory */

/* Every one of the initial batch buffers failing in turn fails create. */
static void alloc_at_create(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 100, 8);
  int failed = 0;
  for (int k = 0; k < 16; k++) {
    pl_error err;
    pl_status s;
    pl_fault_arm(PL_FAULT_HOST_ALLOC, k, 1);
    pl_loader *ld = make(ds, 10, 3, 4, 0, 0, &err, &s);
    pl_fault_reset();
    if (s == PL_OK) {
      pl_loader_destroy(ld);
      break;
    }
    failed++;
    CHECK_STATUS(s, PL_NO_MEMORY, &err);
    CHECK_MSG(&err, "batch buffer");
  }
  CHECK(failed >= 2); /* prefetch 4: several buffers at create */
  CHECK(failed < 16);
  pl_dataset_destroy(ds);
}

/* Every bookkeeping allocation of create (the handle, the core, the slot
 * table, the copy plan, the backend, each batch's state, indices and span
 * array, the worker table), failed in turn: PL_NO_MEMORY, no handle, and
 * nothing leaked (ASan); with none failed, exact batches. */
static void bookkeeping_at_create(int workers) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 100, 8);
  int failed = 0;
  for (int k = 0; k < 64; k++) {
    pl_error err;
    pl_status s;
    pl_fault_arm(PL_FAULT_ALLOC, k, 1);
    pl_loader *ld = make(ds, 10, workers, 4, 0, 0, &err, &s);
    pl_fault_reset();
    if (s == PL_OK) {
      pl_batch *b = NULL;
      CHECK_OK(pl_loader_next_timed(ld, WAIT_S, &b, &err), &err);
      CHECK(b && fixture_check_batch(b, 8) == 0);
      pl_batch_release(b, NULL);
      pl_loader_destroy(ld);
      break;
    }
    failed++;
    CHECK_STATUS(s, PL_NO_MEMORY, &err);
    CHECK_MSG(&err, "out of memory");
  }
  /* 5 buffers (prefetch 4 + 1) of 3 allocations each, and 6 more. */
  CHECK(failed >= 5 * 3 + 5);
  CHECK(failed < 64);
  pl_dataset_destroy(ds);
}

/* The pool grows when the consumer holds batches; a failed growth returns
 * PL_NO_MEMORY from next and loses nothing: the next call (with memory
 * back) delivers the very batch that was due. */
static void alloc_at_growth(int workers) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 60, 8);
  pl_error err;
  pl_status s;
  pl_loader *ld = make(ds, 5, workers, 1, 8, 0, &err, &s);
  CHECK_OK(s, &err);
  if (!ld)
    goto out;
  pl_loader_stats st;
  pl_loader_stats_get(ld, &st);
  uint64_t initial = st.batch_buffers;
  pl_batch *held[8] = {0};
  int nheld = 0, nomem = 0;
  uint64_t want = 0;
  /* Hold every batch: each delivery beyond the initial buffers must grow
   * the pool, and the first attempt at each growth fails. */
  while (nheld < 8 && want < 12) {
    pl_batch *b = NULL;
    pl_fault_arm(PL_FAULT_HOST_ALLOC, 0, 1);
    s = pl_loader_next_timed(ld, WAIT_S, &b, &err);
    pl_fault_reset();
    if (s == PL_NO_MEMORY) {
      CHECK_MSG(&err, "batch buffer");
      nomem++;
      s = pl_loader_next_timed(ld, WAIT_S, &b, &err);
    }
    if (s == PL_EXHAUSTED)
      break;
    CHECK_OK(s, &err);
    if (!b)
      break;
    CHECK_EQ_U64(pl_batch_index(b), want);
    CHECK(fixture_check_batch(b, 8) == 0);
    want++;
    held[nheld++] = b;
  }
  CHECK(nomem >= 1);
  pl_loader_stats_get(ld, &st);
  CHECK(st.batch_buffers > initial);
  CHECK(st.batch_buffers <= 8);
  /* All 8 held: the pool may not grow further. */
  pl_batch *b = NULL;
  CHECK_STATUS(pl_loader_next_timed(ld, WAIT_S, &b, &err), PL_EXHAUSTED, &err);
  CHECK_MSG(&err, "max_batch_buffers");
  for (int i = 0; i < nheld; i++)
    pl_batch_release(held[i], NULL);
  /* And the epoch continues where it was. */
  CHECK_OK(pl_loader_next_timed(ld, WAIT_S, &b, &err), &err);
  CHECK_EQ_U64(pl_batch_index(b), want);
  pl_batch_release(b, NULL);
  pl_loader_destroy(ld);
out:
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ threads */

static void thread_create_fails(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 50, 4);
  for (int k = 0; k < 4; k++) {
    pl_error err;
    pl_status s;
    pl_fault_arm(PL_FAULT_THREAD_CREATE, k, 1);
    pl_loader *ld = make(ds, 5, 4, 2, 0, 0, &err, &s);
    pl_fault_reset();
    CHECK_STATUS(s, PL_NO_MEMORY, &err);
    char want[64];
    snprintf(want, sizeof want, "starting worker %d of 4", k + 1);
    CHECK_MSG(&err, want);
    pl_loader_destroy(ld); /* NULL */
  }
  /* The dataset is untouched: a loader made now works. */
  pl_error err;
  pl_status s;
  pl_loader *ld = make(ds, 5, 4, 2, 0, 0, &err, &s);
  CHECK_OK(s, &err);
  pl_batch *b = NULL;
  if (ld)
    CHECK_OK(pl_loader_next_timed(ld, WAIT_S, &b, &err), &err);
  if (b)
    CHECK(fixture_check_batch(b, 4) == 0);
  pl_batch_release(b, NULL);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ callbacks */

/* A sample failing at index `at` (no shuffle: batch at / bs): every batch
 * before it arrives intact, then PL_CALLBACK naming the sample and the
 * callback's text; the next call begins the next epoch. */
static void callback_fails_at(uint64_t n, uint32_t bs, int workers,
                              uint64_t at) {
  fixture fx = {.fail_at = at};
  pl_dataset *ds = fixture_dataset(&fx, n, 3);
  pl_error err;
  pl_status s;
  pl_loader *ld = make(ds, bs, workers, 3, 0, 0, &err, &s);
  CHECK_OK(s, &err);
  if (!ld) {
    pl_dataset_destroy(ds);
    return;
  }
  for (int epoch = 0; epoch < 2; epoch++) {
    pl_batch *b = NULL;
    uint64_t got = 0;
    while ((s = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_OK) {
      CHECK_EQ_U64(pl_batch_index(b), got);
      CHECK_EQ_U64(pl_batch_epoch(b), epoch);
      CHECK(fixture_check_batch(b, 3) == 0);
      got++;
      pl_batch_release(b, NULL);
    }
    CHECK_STATUS(s, PL_CALLBACK, &err);
    CHECK_EQ_U64(got, at / bs);
    char want[64];
    snprintf(want, sizeof want, "sample %llu", (unsigned long long)at);
    CHECK_MSG(&err, want);
    CHECK_MSG(&err, "planted failure");
    CHECK_EQ_U64(pl_loader_epoch(ld), epoch + 1);
  }
  /* set_epoch after a failure is fine too. */
  pl_batch *b = NULL;
  CHECK_OK(pl_loader_set_epoch(ld, 7, &err), &err);
  if (at >= bs) {
    CHECK_OK(pl_loader_next_timed(ld, WAIT_S, &b, &err), &err);
    CHECK_EQ_U64(pl_batch_epoch(b), 7);
    pl_batch_release(b, NULL);
  }
  pl_loader_destroy(ld); /* mid-epoch, workers maybe busy */
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ stalls */

/* A stall in the last batch, with one worker: PL_TIMEOUT names it; the
 * next epoch's first batch then arrives (after the slow read ends), in
 * order, nothing lost or repeated. */
static void stall_last_batch(int workers) {
  fixture fx = {.sleep_at = 11, .hold = 1}; /* read 11 waits for us */
  pl_dataset *ds = fixture_dataset(&fx, 12, 2);
  pl_error err;
  pl_status s;
  pl_loader *ld = make(ds, 4, workers, 2, 0, 0.25, &err, &s);
  CHECK_OK(s, &err);
  if (!ld)
    goto out;
  pl_batch *b = NULL;
  int ok = 0;
  while ((s = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_OK) {
    CHECK_EQ_U64(pl_batch_index(b), ok);
    ok++;
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(s, PL_TIMEOUT, &err);
  CHECK_EQ_U64(ok, 2);
  CHECK_MSG(&err, "sample 11");
  CHECK_MSG(&err, "timeout 0.2 s"); /* %.1f of 0.25 */
  /* Reported while the read still stalls (it cannot end before we let
   * it): an order, not a time. */
  CHECK(atomic_load(&fx.held_done) == 0);
  atomic_store(&fx.hold, 0);
  /* Epoch 1 begins. Until the released read returns, a lone worker is
   * still in it: calls meanwhile say so (PL_TIMEOUT, never a hang); then
   * the batch comes. */
  int stuck_calls = 0;
  while ((s = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_TIMEOUT &&
         stuck_calls++ < 1000) {
    CHECK(workers == 1);
    CHECK_MSG(&err, "all 1 workers are stuck: sample 11 has been loading");
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK_OK(s, &err);
  if (b) {
    CHECK_EQ_U64(pl_batch_epoch(b), 1);
    CHECK_EQ_U64(pl_batch_index(b), 0);
    CHECK(fixture_check_batch(b, 2) == 0);
  }
  pl_batch_release(b, NULL);
  pl_loader_destroy(ld);
out:
  pl_dataset_destroy(ds);
}

/* next_timed returns PL_NOT_READY while a (not yet stalled) batch loads,
 * and the batch is not lost: a later call delivers it. */
static void not_ready_then_ready(void) {
  fixture fx = {.sleep_at = 1, .hold = 1}; /* batch 0 waits for us */
  pl_dataset *ds = fixture_dataset(&fx, 8, 2);
  pl_error err;
  pl_status s;
  pl_loader *ld = make(ds, 4, 1, 2, 0, 0, &err, &s);
  CHECK_OK(s, &err);
  pl_batch *b = (pl_batch *)(uintptr_t)1;
  if (ld) {
    CHECK_STATUS(pl_loader_next_timed(ld, 0.02, &b, &err), PL_NOT_READY,
                 &err);
    CHECK(b == NULL);
    atomic_store(&fx.hold, 0);
    CHECK_OK(pl_loader_next_timed(ld, WAIT_S, &b, &err), &err);
    CHECK_EQ_U64(pl_batch_index(b), 0);
    pl_batch_release(b, NULL);
  }
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

int main(void) {
  pl_fault_reset();
  file_faults();
  alloc_at_create();
  bookkeeping_at_create(0);
  bookkeeping_at_create(3);
  alloc_at_growth(0);
  alloc_at_growth(2);
  thread_create_fails();
  callback_fails_at(40, 4, 0, 13);
  callback_fails_at(40, 4, 1, 2); /* the first batch (0 means "never" to the fixture) */
  callback_fails_at(40, 4, 4, 39); /* the last sample */
  callback_fails_at(41, 8, 8, 40); /* the short last batch */
  stall_last_batch(1);
  stall_last_batch(3);
  not_ready_then_ready();
  pl_fault_reset();
  return pl_test_finish("test_faults");
}
#endif
