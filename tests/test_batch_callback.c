/* Whole-batch datasets (pl_dataset_from_batch_callback) and explicit orders
 * (pl_loader_set_order): one call per batch with the batch's indices in
 * order, shared batch memory another mapping of the memfd can write,
 * PL_READ_INTERRUPTED giving the batch back, explicit epochs delivered
 * exactly as listed (also one queued after another, filled before the
 * first ends), and a batch's callback told when it is abandoned. */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Fields: `x` uint32 [2] = {i, i * 3}, `y` int64 [] = -i. */
static const pl_field fields[2] = {
    {"x", PL_UINT32, 1, {2}},
    {"y", PL_INT64, 0, {0}},
};

typedef struct cb_state {
  atomic_int calls;
  atomic_int shared_writes; /* batches written through a second mapping */
  atomic_int interrupt_next;
  int fail_index; /* -1: none */
  uint32_t batch_size;
  atomic_int cpu_reads; /* calls of fake_worker_cpu */
  atomic_int block_once;  /* the next call waits until its batch is abandoned */
  atomic_int blocked;     /* 1 while it waits, 2 once it saw abandoned() */
  atomic_int abandoned_at_entry;
  atomic_int reads_of[64]; /* times each sample index (below 64) was read */
} cb_state;

static int write_batch(void *user, const uint64_t *idx, uint32_t n,
                       const pl_batch_info *info, const pl_batch_dst *dst,
                       char *msg, size_t cap) {
  cb_state *st = user;
  atomic_fetch_add(&st->calls, 1);
  if (atomic_exchange(&st->interrupt_next, 0))
    return PL_READ_INTERRUPTED;
  if (atomic_exchange(&st->block_once, 0)) {
    atomic_store(&st->abandoned_at_entry, dst->abandoned(dst));
    atomic_store(&st->blocked, 1);
    for (int i = 0; i < 5000 && !dst->abandoned(dst); i++)
      usleep(1000);
    if (dst->abandoned(dst))
      atomic_store(&st->blocked, 2);
    snprintf(msg, cap, "abandoned");
    return 6;
  }
  for (uint32_t i = 0; i < n; i++)
    if (idx[i] < 64)
      atomic_fetch_add(&st->reads_of[idx[i]], 1);
  for (uint32_t i = 0; i < n; i++)
    if ((int64_t)idx[i] == st->fail_index) {
      snprintf(msg, cap, "sample %llu is bad (epoch %llu)",
               (unsigned long long)idx[i], (unsigned long long)info->epoch);
      return 3;
    }
  uint8_t *buf = dst->buffer;
  uint8_t *map = NULL;
  if (dst->fd >= 0) { /* as a worker process would: its own mapping */
    map = mmap(NULL, dst->buffer_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
               dst->fd, 0);
    if (map == MAP_FAILED) {
      snprintf(msg, cap, "mmap of the batch memfd failed");
      return 4;
    }
    buf = map;
    atomic_fetch_add(&st->shared_writes, 1);
  }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t *x = (uint32_t *)(buf + dst->offset[0]) + 2 * i;
    int64_t *y = (int64_t *)(buf + dst->offset[1]) + i;
    x[0] = (uint32_t)idx[i];
    x[1] = (uint32_t)idx[i] * 3;
    *y = -(int64_t)idx[i];
  }
  if (dst->base[0] != (uint8_t *)dst->buffer + dst->offset[0])
    return 5;
  if (map)
    munmap(map, dst->buffer_bytes);
  return 0;
}

static pl_dataset *make_ds(cb_state *st, uint64_t n, int flags) {
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_from_batch_callback(fields, 2, n, write_batch, NULL,
                                          flags, st, NULL, &ds, &err),
           &err);
  return ds;
}

/* explicit_order: nothing of the loader's own order is read (its first
 * batches would race with a test's set_order); epoch: the first. */
static pl_loader *make_loader_of(pl_dataset *ds, uint32_t bs, int workers,
                                 int explicit_order, uint64_t epoch) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = bs;
  cfg.num_workers = workers;
  cfg.device = PL_DEVICE_CPU;
  cfg.explicit_order = explicit_order;
  cfg.epoch = epoch;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  return ld;
}

static pl_loader *make_loader(pl_dataset *ds, uint32_t bs, int workers) {
  return make_loader_of(ds, bs, workers, 0, 0);
}

/* Checks batch b holds `want[0..n)`, in order. */
static void check_batch(pl_batch *b, const uint64_t *want, uint32_t n) {
  CHECK_EQ_U64(pl_batch_size(b), n);
  const uint32_t *x = pl_batch_data(b, 0);
  const int64_t *y = pl_batch_data(b, 1);
  for (uint32_t i = 0; i < n && i < pl_batch_size(b); i++) {
    CHECK_EQ_U64(pl_batch_sample_index(b, i), want[i]);
    CHECK_EQ_U64(x[2 * i], want[i]);
    CHECK_EQ_U64(x[2 * i + 1], want[i] * 3);
    CHECK(y[i] == -(int64_t)want[i]);
  }
}

static void test_whole_batches(int flags, int workers) {
  cb_state st = {.fail_index = -1};
  pl_dataset *ds = make_ds(&st, 50, flags);
  pl_loader *ld = make_loader(ds, 8, workers);
  pl_dataset_destroy(ds);
  pl_batch *b;
  pl_error err;
  uint64_t want[8];
  for (uint64_t k = 0; k < 7; k++) {
    CHECK_OK(pl_loader_next(ld, &b, &err), &err);
    uint32_t n = k < 6 ? 8 : 2;
    for (uint32_t i = 0; i < n; i++)
      want[i] = k * 8 + i;
    check_batch(b, want, n);
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_END_OF_EPOCH, &err);
  pl_loader_destroy(ld);
  CHECK(atomic_load(&st.calls) >= 7); /* one call per batch (+ prefetch) */
  CHECK(atomic_load(&st.calls) <= 7 + 16);
  if (flags & PL_BATCH_SHARED_MEMORY)
    CHECK(atomic_load(&st.shared_writes) == atomic_load(&st.calls));
  else
    CHECK(atomic_load(&st.shared_writes) == 0);
}

/* A worker-process CPU clock: 0.25 s more at every reading. */
static double fake_worker_cpu(void *user) {
  cb_state *st = user;
  return 0.25 * (atomic_fetch_add(&st->cpu_reads, 1) + 1);
}

static int no_item(void *user, uint64_t index, void *const *dst,
                   char *msg, size_t cap) {
  (void)user, (void)index, (void)dst, (void)msg, (void)cap;
  return 1;
}

/* The worker processes' CPU reaches the timings and the report's CPU line;
 * only a batch-callback dataset takes the clock. */
static void test_worker_cpu_clock(void) {
  cb_state st = {.fail_index = -1};
  pl_dataset *ds = make_ds(&st, 64, PL_BATCH_SHARED_MEMORY);
  pl_error err;
  CHECK_OK(pl_dataset_set_worker_cpu(ds, fake_worker_cpu, &err), &err);
  pl_loader *ld = make_loader(ds, 8, 2);
  pl_batch *b;
  for (int k = 0; k < 8; k++) {
    CHECK_OK(pl_loader_next(ld, &b, &err), &err);
    pl_batch_release(b, NULL);
  }
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  /* Read at the first batch and now: at least one 0.25 s step between. */
  CHECK(t.worker_process_cpu_s >= 0.25);
  CHECK(atomic_load(&st.cpu_reads) >= 2);
  char buf[8192];
  size_t len = sizeof buf;
  CHECK_OK(pl_loader_report(ld, buf, &len, 0, &err), &err);
  CHECK(strstr(buf, "the process and its worker processes used") != NULL);
  CHECK(strstr(buf, "of it in worker processes") != NULL);
  len = sizeof buf;
  CHECK_OK(pl_loader_report(ld, buf, &len, PL_REPORT_JSON, &err), &err);
  CHECK(strstr(buf, "\"worker_process_cpu_s\": ") != NULL);
  pl_loader_destroy(ld);
  /* Without the clock: 0, and the line speaks of the process alone. */
  CHECK_OK(pl_dataset_set_worker_cpu(ds, NULL, &err), &err);
  ld = make_loader(ds, 8, 2);
  for (int k = 0; k < 8; k++) {
    CHECK_OK(pl_loader_next(ld, &b, &err), &err);
    pl_batch_release(b, NULL);
  }
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK(t.worker_process_cpu_s == 0);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);

  pl_dataset *other = NULL;
  CHECK_OK(pl_dataset_from_callback(fields, 2, 4, no_item, NULL, NULL, &other,
                                    &err),
           &err);
  CHECK_STATUS(pl_dataset_set_worker_cpu(other, fake_worker_cpu, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "a callback dataset has no worker processes");
  pl_dataset_destroy(other);
  CHECK_STATUS(pl_dataset_set_worker_cpu(NULL, fake_worker_cpu, &err),
               PL_INVALID_ARGUMENT, &err);
}

static void test_failure_names_the_cause(void) {
  cb_state st = {.fail_index = 19};
  pl_dataset *ds = make_ds(&st, 40, 0);
  pl_loader *ld = make_loader(ds, 10, 2);
  pl_dataset_destroy(ds);
  pl_batch *b;
  pl_error err;
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  pl_batch_release(b, NULL);
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_CALLBACK, &err);
  CHECK_MSG(&err, "sample 19 is bad (epoch 0)");
  pl_loader_destroy(ld);
  /* pl_dataset_read without get_item */
  ds = make_ds(&st, 4, 0);
  uint32_t x[2];
  int64_t y;
  void *dst[2] = {x, &y};
  CHECK_STATUS(pl_dataset_read(ds, 0, dst, &err), PL_UNSUPPORTED, &err);
  pl_dataset_destroy(ds);
  CHECK_STATUS(pl_dataset_from_batch_callback(fields, 2, 4, NULL, NULL, 0,
                                              NULL, NULL, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_STATUS(pl_dataset_from_batch_callback(fields, 2, 4, write_batch, NULL,
                                              0x10, NULL, NULL, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
}

static void test_interrupted_read_is_retried(void) {
  cb_state st = {.fail_index = -1};
  pl_dataset *ds = make_ds(&st, 12, 0);
  pl_loader *ld = make_loader(ds, 4, 0); /* filled in the consumer's thread */
  pl_dataset_destroy(ds);
  pl_batch *b;
  pl_error err;
  uint64_t want[4] = {0, 1, 2, 3};
  atomic_store(&st.interrupt_next, 1);
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_NOT_READY, &err);
  CHECK(b == NULL);
  CHECK_OK(pl_loader_next(ld, &b, &err), &err); /* the same batch, again */
  check_batch(b, want, 4);
  pl_batch_release(b, NULL);
  CHECK_EQ_U64(pl_loader_epoch(ld), 0);
  pl_loader_destroy(ld);
}

static void test_explicit_order(int workers) {
  cb_state st = {.fail_index = -1};
  pl_dataset *ds = make_ds(&st, 30, PL_BATCH_SHARED_MEMORY);
  pl_loader *ld = make_loader(ds, 5, workers);
  pl_dataset_destroy(ds);
  const uint64_t idx[] = {29, 3, 3, 7, 0, 11, 12, 13, 14, 15, 2};
  const uint64_t starts[] = {0, 1, 4, 9, 11}; /* batches of 1, 3, 5, 2 */
  pl_error err;
  CHECK_OK(pl_loader_set_order(ld, 7, idx, starts, 4, &err), &err);
  pl_batch *b;
  for (int k = 0; k < 4; k++) {
    CHECK_OK(pl_loader_next(ld, &b, &err), &err);
    CHECK_EQ_U64(pl_batch_epoch(b), 7);
    CHECK_EQ_U64(pl_batch_index(b), (uint64_t)k);
    check_batch(b, idx + starts[k], (uint32_t)(starts[k + 1] - starts[k]));
    if (k == 1) { /* state blobs cannot describe an explicit epoch */
      uint8_t buf[256];
      size_t len = sizeof buf;
      CHECK_STATUS(pl_loader_save_state(ld, buf, &len, &err), PL_BAD_STATE,
                   &err);
    }
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_END_OF_EPOCH, &err);
  /* Another explicit epoch replaces the stream; the first is never seen
   * again. */
  const uint64_t idx2[] = {5, 6};
  const uint64_t starts2[] = {0, 2};
  CHECK_OK(pl_loader_set_order(ld, 8, idx2, starts2, 1, &err), &err);
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  check_batch(b, idx2, 2);
  CHECK_EQ_U64(pl_batch_epoch(b), 8);
  pl_batch_release(b, NULL);
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_END_OF_EPOCH, &err);
  /* set_epoch goes back to the loader's own order */
  CHECK_OK(pl_loader_set_epoch(ld, 0, &err), &err);
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  const uint64_t first[] = {0, 1, 2, 3, 4};
  check_batch(b, first, 5);
  pl_batch_release(b, NULL);
  /* bad orders are refused with nothing changed */
  const uint64_t big[] = {0, 6};
  const uint64_t out_of_range[] = {30};
  const uint64_t one[] = {0, 1};
  const uint64_t bad_first[] = {1, 2};
  CHECK_STATUS(pl_loader_set_order(ld, 1, idx, big, 1, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "batch 0 has 6 samples (1 to batch_size 5)");
  CHECK_STATUS(pl_loader_set_order(ld, 1, out_of_range, one, 1, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "sample index 30 (position 0) is out of range for 30");
  CHECK_STATUS(pl_loader_set_order(ld, 1, idx, bad_first, 1, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_OK(pl_loader_next(ld, &b, &err), &err); /* still epoch 0's */
  const uint64_t second[] = {5, 6, 7, 8, 9};
  check_batch(b, second, 5);
  pl_batch_release(b, NULL);
  /* an empty explicit epoch ends at once */
  CHECK_OK(pl_loader_set_order(ld, 9, NULL, starts, 0, &err), &err);
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_END_OF_EPOCH, &err);
  pl_loader_destroy(ld);
}

/* Takes the next batch and checks it is batch k of `epoch`, holding
 * idx[starts[k] .. starts[k + 1]). */
static void next_is(pl_loader *ld, uint64_t epoch, uint64_t k,
                    const uint64_t *idx, const uint64_t *starts) {
  pl_batch *b;
  pl_error err;
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  if (!b)
    return;
  CHECK_EQ_U64(pl_batch_epoch(b), epoch);
  CHECK_EQ_U64(pl_batch_index(b), k);
  check_batch(b, idx + starts[k], (uint32_t)(starts[k + 1] - starts[k]));
  pl_batch_release(b, NULL);
}

static void end_is(pl_loader *ld, uint64_t next_epoch) {
  pl_batch *b;
  pl_error err;
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_END_OF_EPOCH, &err);
  CHECK_EQ_U64(pl_loader_epoch(ld), next_epoch);
}

/* pl_loader_queue_order: the explicit epoch after the current one follows
 * it in the same stream, its batches filled by workers before the current
 * epoch's end is taken; bad queues are refused with nothing changed. */
static void test_queued_order(int workers) {
  cb_state st = {.fail_index = -1};
  pl_dataset *ds = make_ds(&st, 30, 0);
  pl_loader *ld = make_loader_of(ds, 5, workers, 1, 0);
  pl_dataset_destroy(ds);
  const uint64_t a[] = {29, 3, 3, 7, 0, 11, 12, 13, 14, 15, 2};
  const uint64_t a_starts[] = {0, 1, 4, 9, 11}; /* batches of 1, 3, 5, 2 */
  const uint64_t b[] = {20, 21, 22, 23, 24, 25, 26};
  const uint64_t b_starts[] = {0, 5, 7};
  const uint64_t c[] = {9, 8};
  const uint64_t c_starts[] = {0, 2};
  const uint64_t none[] = {0};
  pl_error err;
  CHECK_STATUS(pl_loader_queue_order(ld, 8, b, b_starts, 2, &err),
               PL_INVALID_ARGUMENT, &err); /* explicit_order's empty epoch */
  CHECK_MSG(&err, "epoch 0 is empty: an empty epoch is given by "
                  "pl_loader_set_order, never queued or followed");
  CHECK_OK(pl_loader_set_order(ld, 7, a, a_starts, 4, &err), &err);
  CHECK_STATUS(pl_loader_queue_order(ld, 9, b, b_starts, 2, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "epoch 9 does not follow the explicit epoch 7");
  CHECK_STATUS(pl_loader_queue_order(ld, 8, b, none, 0, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "epoch 8 is empty: an empty epoch is given by "
                  "pl_loader_set_order, never queued or followed");
  CHECK_OK(pl_loader_queue_order(ld, 8, b, b_starts, 2, &err), &err);
  CHECK_STATUS(pl_loader_queue_order(ld, 9, c, c_starts, 1, &err),
               PL_BAD_STATE, &err);
  CHECK_MSG(&err, "epoch 8 is queued already, and the consumer has not "
                  "reached it");
  for (uint64_t k = 0; k < 3; k++)
    next_is(ld, 7, k, a, a_starts);
  CHECK_STATUS(pl_loader_queue_order(ld, 9, c, c_starts, 1, &err),
               PL_BAD_STATE, &err); /* batch 3 of epoch 7 is still to come */
  next_is(ld, 7, 3, a, a_starts);
  if (workers > 0) { /* the workers went on into epoch 8 by themselves */
    for (int i = 0; i < 5000 && atomic_load(&st.reads_of[20]) == 0; i++)
      usleep(1000);
    CHECK_EQ_U64(atomic_load(&st.reads_of[20]), 1);
  }
  /* Every batch before epoch 8 taken: epoch 7 is dropped, 9 follows 8. */
  CHECK_OK(pl_loader_queue_order(ld, 9, c, c_starts, 1, &err), &err);
  end_is(ld, 8);
  next_is(ld, 8, 0, b, b_starts);
  next_is(ld, 8, 1, b, b_starts);
  end_is(ld, 9);
  next_is(ld, 9, 0, c, c_starts);
  end_is(ld, 10);
  end_is(ld, 11); /* the stream ends with the last explicit epoch */
  CHECK_EQ_U64(atomic_load(&st.reads_of[20]), 1); /* each batch read once */
  CHECK_EQ_U64(atomic_load(&st.reads_of[9]), 1);
  /* An unwanted queued epoch: set_order restarts the stream without it. */
  CHECK_OK(pl_loader_set_order(ld, 20, c, c_starts, 1, &err), &err);
  CHECK_OK(pl_loader_queue_order(ld, 21, b, b_starts, 2, &err), &err);
  CHECK_OK(pl_loader_set_order(ld, 21, a, a_starts, 4, &err), &err);
  for (uint64_t k = 0; k < 4; k++)
    next_is(ld, 21, k, a, a_starts);
  end_is(ld, 22);
  end_is(ld, 23);
  /* Nor is an empty explicit epoch followed. */
  CHECK_OK(pl_loader_set_order(ld, 30, NULL, none, 0, &err), &err);
  CHECK_STATUS(pl_loader_queue_order(ld, 31, c, c_starts, 1, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "epoch 30 is empty: an empty epoch is given by "
                  "pl_loader_set_order, never queued or followed");
  end_is(ld, 31);
  pl_loader_destroy(ld);
  /* A stream of the loader's own order has no explicit epoch to follow. */
  ds = make_ds(&st, 30, 0);
  ld = make_loader(ds, 5, workers);
  pl_dataset_destroy(ds);
  CHECK_STATUS(pl_loader_queue_order(ld, 1, c, c_starts, 1, &err),
               PL_BAD_STATE, &err);
  CHECK_MSG(&err, "no explicit epoch to queue epoch 1 after "
                  "(pl_loader_set_order begins one)");
  pl_loader_destroy(ld);
}

/* A batch of an explicit epoch fails with the next epoch queued: the error
 * takes the place of the epoch's end (as in the loader's own order), and
 * the next batch is the queued epoch's first. */
static void test_failure_before_a_queued_epoch(int workers) {
  cb_state st = {.fail_index = 7};
  pl_dataset *ds = make_ds(&st, 30, 0);
  pl_loader *ld = make_loader_of(ds, 5, workers, 1, 0);
  pl_dataset_destroy(ds);
  const uint64_t a[] = {1, 2, 7, 4};
  const uint64_t a_starts[] = {0, 2, 4}; /* sample 7 in batch 1 */
  const uint64_t b[] = {20, 21, 22};
  const uint64_t b_starts[] = {0, 2, 3};
  pl_error err;
  pl_batch *got;
  CHECK_OK(pl_loader_set_order(ld, 3, a, a_starts, 2, &err), &err);
  CHECK_OK(pl_loader_queue_order(ld, 4, b, b_starts, 2, &err), &err);
  next_is(ld, 3, 0, a, a_starts);
  CHECK_STATUS(pl_loader_next(ld, &got, &err), PL_CALLBACK, &err);
  CHECK_EQ_U64(pl_loader_epoch(ld), 4);
  next_is(ld, 4, 0, b, b_starts);
  next_is(ld, 4, 1, b, b_starts);
  end_is(ld, 5);
  pl_loader_destroy(ld);
}

/* config.explicit_order: nothing is read before the first set_order (no
 * batch of the loader's own order), which then delivers as usual. */
static void test_explicit_order_only(void) {
  cb_state st = {.fail_index = -1};
  pl_dataset *ds = make_ds(&st, 30, 0);
  pl_loader *ld = make_loader_of(ds, 5, 2, 1, 4);
  pl_dataset_destroy(ds);
  pl_error err;
  usleep(50000); /* workers of the loader's own order would read by now */
  CHECK_EQ_U64(atomic_load(&st.calls), 0);
  CHECK_EQ_U64(pl_loader_epoch(ld), 4);
  end_is(ld, 5); /* the empty epoch 4 */
  const uint64_t a[] = {8, 1, 2};
  const uint64_t a_starts[] = {0, 1, 3};
  CHECK_OK(pl_loader_set_order(ld, 5, a, a_starts, 2, &err), &err);
  next_is(ld, 5, 0, a, a_starts);
  next_is(ld, 5, 1, a, a_starts);
  end_is(ld, 6);
  CHECK_EQ_U64(atomic_load(&st.calls), 2);
  /* set_epoch: an empty explicit epoch again, not the loader's own order */
  CHECK_OK(pl_loader_set_epoch(ld, 9, &err), &err);
  usleep(50000);
  CHECK_EQ_U64(atomic_load(&st.calls), 2);
  end_is(ld, 10);
  /* a state blob (of a loader of the same shape) cannot place it */
  pl_dataset *ds2 = make_ds(&st, 30, 0);
  pl_loader *own = make_loader_of(ds2, 5, 2, 0, 4);
  pl_dataset_destroy(ds2);
  uint8_t blob[256];
  size_t len = sizeof blob;
  CHECK_OK(pl_loader_save_state(own, blob, &len, &err), &err);
  pl_loader_destroy(own);
  CHECK_STATUS(pl_loader_load_state(ld, blob, len, &err), PL_BAD_STATE, &err);
  CHECK_MSG(&err, "the loader's epochs come from pl_loader_set_order "
                  "(explicit_order): a state blob cannot place it");
  CHECK_STATUS(pl_loader_save_state(ld, blob, &len, &err), PL_BAD_STATE,
               &err);
  pl_loader_destroy(ld);
}

/* dst->abandoned: 0 while the batch is wanted, nonzero once set_epoch
 * has begun another stream (a callback reading in parts stops early). */
static void test_abandoned_batch_is_told(void) {
  cb_state st = {.fail_index = -1};
  atomic_store(&st.block_once, 1);
  pl_dataset *ds = make_ds(&st, 40, 0);
  pl_loader *ld = make_loader(ds, 4, 1);
  pl_dataset_destroy(ds);
  for (int i = 0; i < 5000 && atomic_load(&st.blocked) == 0; i++)
    usleep(1000);
  CHECK(atomic_load(&st.blocked) == 1);
  CHECK(atomic_load(&st.abandoned_at_entry) == 0);
  pl_error err;
  CHECK_OK(pl_loader_set_epoch(ld, 1, &err), &err);
  pl_batch *b;
  CHECK_OK(pl_loader_next(ld, &b, &err), &err); /* epoch 1, whole */
  uint64_t want[4] = {0, 1, 2, 3};
  check_batch(b, want, 4);
  CHECK_EQ_U64(pl_batch_epoch(b), 1);
  pl_batch_release(b, NULL);
  CHECK(atomic_load(&st.blocked) == 2);
  pl_loader_destroy(ld);
}

/* Transforms on a whole-batch dataset: the same bytes as the same data
 * read sample by sample (the draws are a function of (seed, epoch,
 * index)); before, the delivered arrays of a batch read whole were never
 * written. Fields: `image` uint8 [1, 2, 4] = index * 8 + pixel, `label`
 * uint8 = index + 100; transforms: flip, ToInt64. */
static const pl_field xf_fields[2] = {
    {"image", PL_UINT8, 3, {1, 2, 4}},
    {"label", PL_UINT8, 0, {0}},
};

static void xf_write(uint64_t index, uint8_t *image, uint8_t *label) {
  for (int p = 0; p < 8; p++)
    image[p] = (uint8_t)(index * 8 + (uint64_t)p);
  *label = (uint8_t)(index + 100);
}

static int xf_item(void *user, uint64_t index, void *const *dst, char *msg,
                   size_t cap) {
  xf_write(index, dst[0], dst[1]);
  return 0;
}

static int xf_batch(void *user, const uint64_t *idx, uint32_t n,
                    const pl_batch_info *info, const pl_batch_dst *dst,
                    char *msg, size_t cap) {
  for (uint32_t i = 0; i < n; i++)
    xf_write(idx[i], (uint8_t *)dst->base[0] + 8 * i,
             (uint8_t *)dst->base[1] + i);
  return 0;
}

static pl_loader *xf_loader(pl_dataset *ds, int workers) {
  pl_transform t[2];
  pl_transform_init(&t[0], PL_TRANSFORM_RANDOM_HFLIP);
  pl_transform_init(&t[1], PL_TRANSFORM_TO_INT64);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 8;
  cfg.num_workers = workers;
  cfg.device = PL_DEVICE_CPU;
  cfg.shuffle = 1;
  cfg.seed = 11;
  cfg.transforms = t;
  cfg.num_transforms = 2;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  return ld;
}

static void test_transforms_on_whole_batches(int workers) {
  const uint64_t n = 20;
  pl_dataset *per = NULL, *whole = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_from_callback(xf_fields, 2, n, xf_item, NULL, NULL,
                                    &per, &err), &err);
  CHECK_OK(pl_dataset_from_batch_callback(xf_fields, 2, n, xf_batch, NULL, 0,
                                          NULL, NULL, &whole, &err), &err);
  pl_loader *a = xf_loader(per, workers), *b = xf_loader(whole, workers);
  int flipped = 0;
  for (int k = 0; k < 3; k++) { /* 20 samples in 8s: 8, 8, 4 */
    pl_batch *ba = NULL, *bb = NULL;
    CHECK_OK(pl_loader_next(a, &ba, &err), &err);
    CHECK_OK(pl_loader_next(b, &bb, &err), &err);
    uint32_t m = pl_batch_size(ba);
    CHECK_EQ_U64(pl_batch_size(bb), m);
    const uint8_t *ia = pl_batch_data(ba, 0), *ib = pl_batch_data(bb, 0);
    const int64_t *la = pl_batch_data(ba, 1), *lb = pl_batch_data(bb, 1);
    for (uint32_t i = 0; i < m; i++) {
      uint64_t idx = pl_batch_sample_index(bb, i);
      CHECK_EQ_U64(pl_batch_sample_index(ba, i), idx);
      CHECK(lb[i] == (int64_t)idx + 100 && la[i] == lb[i]);
      CHECK(memcmp(ia + 8 * i, ib + 8 * i, 8) == 0);
      uint8_t raw[8], lab;
      xf_write(idx, raw, &lab);
      int same = memcmp(ib + 8 * i, raw, 8) == 0;
      /* flipped rows: pixel p of a row of 4 becomes 3 - p */
      CHECK(same || (ib[8 * i] == raw[3] && ib[8 * i + 4] == raw[7]));
      flipped += !same;
    }
    pl_batch_release(ba, NULL);
    pl_batch_release(bb, NULL);
  }
  CHECK(flipped > 0 && flipped < 20); /* p = 0.5 over 20 draws */
  pl_loader_destroy(a);
  pl_loader_destroy(b);
  pl_dataset_destroy(per);
  pl_dataset_destroy(whole);
}

/* PL_BATCH_IN_ORDER: the calls begin in claim order (job order within a
 * stream), across epochs and past a failure that ends an epoch, whether
 * a call takes its place with dst->queued or only returns. 4 threads,
 * 1-sample batches: without the turns, a thread that claimed later
 * often reaches the callback first. */
typedef struct turn_state {
  pthread_mutex_t mu;
  uint64_t stream[400], job[400];
  int n;
  int out_of_order;
} turn_state;

static int record_turn(void *user, const uint64_t *idx, uint32_t n,
                       const pl_batch_info *info, const pl_batch_dst *dst,
                       char *msg, size_t cap) {
  turn_state *st = user;
  pthread_mutex_lock(&st->mu);
  int k = st->n++;
  if (k < 400) {
    st->stream[k] = info->stream;
    st->job[k] = info->job;
    if (k > 0 && (info->stream < st->stream[k - 1] ||
                  (info->stream == st->stream[k - 1] &&
                   info->job <= st->job[k - 1])))
      st->out_of_order++;
  }
  pthread_mutex_unlock(&st->mu);
  if (info->job % 7) /* the others pass the turn by returning */
    dst->queued(dst);
  for (int i = 0; i < 3; i++)
    sched_yield(); /* room for a later claim to overtake */
  (void)n;
  if (info->epoch == 1 && idx[0] == 50) {
    snprintf(msg, cap, "sample 50 is bad");
    return 3;
  }
  return 0;
}

/* pl_batch_info.ready_ahead and depth: with one worker and a consumer that
 * takes nothing, jobs 0..3 (prefetch 4) are claimed one after another,
 * each after the one before was loaded: 0, 1, 2, 3 batches ready. */
typedef struct ahead_state {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint32_t ready[8], depth[8], since[8];
  int seen; /* jobs recorded */
  int open; /* record_ahead_hold_first: job 0 may end */
} ahead_state;

static int record_ahead(void *user, const uint64_t *idx, uint32_t n,
                        const pl_batch_info *info, const pl_batch_dst *dst,
                        char *msg, size_t cap) {
  ahead_state *st = user;
  (void)idx, (void)n, (void)dst, (void)msg, (void)cap;
  pthread_mutex_lock(&st->mu);
  if (info->job < 8) {
    st->ready[info->job] = info->ready_ahead;
    st->depth[info->job] = info->depth;
    st->since[info->job] = info->since_wait;
    st->seen++;
  }
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
  return 0;
}

/* A loader of batches of 1 over 32 samples read by fill (its state st),
 * with `workers` workers and prefetch 4, on the CPU; *ds its dataset. */
static pl_loader *ahead_loader(pl_read_batch_fn fill, ahead_state *st,
                               int workers, pl_dataset **ds) {
  pl_error err;
  CHECK_OK(pl_dataset_from_batch_callback(fields, 2, 32, fill, NULL, 0, st,
                                          NULL, ds, &err),
           &err);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 1;
  cfg.num_workers = workers;
  cfg.prefetch = 4;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(*ds, &cfg, &ld, &err), &err);
  return ld;
}

static void test_info_says_how_far_ahead(void) {
  ahead_state st = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                    {0}, {0}, {0}, 0, 0};
  pl_dataset *ds = NULL;
  pl_loader *ld = ahead_loader(record_ahead, &st, 1, &ds);
  pthread_mutex_lock(&st.mu);
  while (st.seen < 4)
    pthread_cond_wait(&st.cv, &st.mu);
  pthread_mutex_unlock(&st.mu);
  for (uint32_t j = 0; j < 4; j++) {
    CHECK_EQ_U64(st.ready[j], j);
    CHECK_EQ_U64(st.depth[j], 4);
    CHECK_EQ_U64(st.since[j], UINT32_MAX); /* the consumer never waited */
  }
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* record_ahead, with job 0 held until the test opens st. */
static int record_ahead_hold_first(void *user, const uint64_t *idx,
                                   uint32_t n, const pl_batch_info *info,
                                   const pl_batch_dst *dst, char *msg,
                                   size_t cap) {
  ahead_state *st = user;
  record_ahead(user, idx, n, info, dst, msg, cap);
  pthread_mutex_lock(&st->mu);
  while (info->job == 0 && !st->open)
    pthread_cond_wait(&st->cv, &st->mu);
  pthread_mutex_unlock(&st->mu);
  return 0;
}

static void open_gate(ahead_state *st) {
  pthread_mutex_lock(&st->mu);
  st->open = 1;
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

static void wait_job3(ahead_state *st) {
  pthread_mutex_lock(&st->mu);
  while (st->depth[3] == 0)
    pthread_cond_wait(&st->cv, &st->mu);
  pthread_mutex_unlock(&st->mu);
}

/* Batches loaded behind one still in work are not ahead: the consumer
 * waits for that one all the same. Two workers: job 0 is held until job 3
 * was claimed, so the other worker loads jobs 1, 2 and 3 meanwhile; each
 * is claimed with 0 batches the consumer could take (counting every
 * loaded batch said 1 and 2 for jobs 2 and 3). */
static void test_ahead_counts_only_batches_in_order(void) {
  ahead_state st = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                    {0}, {0}, {0}, 0, 0};
  pl_dataset *ds = NULL;
  pl_loader *ld = ahead_loader(record_ahead_hold_first, &st, 2, &ds);
  pl_error err;
  wait_job3(&st);
  for (uint32_t j = 0; j < 4; j++)
    CHECK_EQ_U64(st.ready[j], 0);
  open_gate(&st); /* job 0 loads: the consumer takes 0..3 */
  for (uint32_t j = 0; j < 4; j++) {
    pl_batch *b = NULL;
    CHECK_OK(pl_loader_next(ld, &b, &err), &err);
    if (b) {
      CHECK_EQ_U64(pl_batch_index(b), j);
      pl_batch_release(b, NULL);
    }
  }
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* since_wait: one worker, job 0 held until the consumer polled for it
 * (pl_loader_next_timed with no wait: NOT_READY, a wait all the same);
 * jobs 1..3, claimed after job 0 was loaded, find the consumer's wait 0
 * batches back. */
static void test_since_wait_counts_from_the_last_wait(void) {
  ahead_state st = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                    {0}, {0}, {0}, 0, 0};
  pl_dataset *ds = NULL;
  pl_loader *ld = ahead_loader(record_ahead_hold_first, &st, 1, &ds);
  pl_error err;
  pl_batch *b = NULL;
  CHECK(pl_loader_next_timed(ld, 0, &b, &err) == PL_NOT_READY);
  open_gate(&st);
  wait_job3(&st);
  for (uint32_t j = 1; j < 4; j++)
    CHECK_EQ_U64(st.since[j], 0);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

static void test_in_order_calls_take_turns(void) {
  turn_state st = {.n = 0};
  pthread_mutex_init(&st.mu, NULL);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_from_batch_callback(fields, 2, 100, record_turn, NULL,
                                          PL_BATCH_IN_ORDER, &st, NULL, &ds,
                                          &err),
           &err);
  pl_loader *ld = make_loader(ds, 1, 4);
  pl_dataset_destroy(ds);
  pl_batch *b;
  int ends = 0, ok = 0, failed = 0;
  while (ends < 2) {
    pl_status s = pl_loader_next(ld, &b, &err);
    if (s == PL_OK) {
      ok++;
      pl_batch_release(b, NULL);
    } else if (s == PL_END_OF_EPOCH) {
      ends++;
    } else {
      CHECK_STATUS(s, PL_CALLBACK, &err);
      CHECK_MSG(&err, "sample 50 is bad");
      failed++;
    }
  }
  pl_loader_destroy(ld);
  CHECK_EQ_U64(ok, 100 + 50 + 100); /* the failure ended epoch 1 */
  CHECK_EQ_U64(failed, 1);
  CHECK(st.n >= ok + failed && st.n <= 400);
  CHECK_EQ_U64(st.out_of_order, 0);
  pthread_mutex_destroy(&st.mu);
}

int main(void) {
  test_transforms_on_whole_batches(0);
  test_transforms_on_whole_batches(2);
  test_whole_batches(0, 0);
  test_whole_batches(0, 3);
  test_whole_batches(PL_BATCH_SHARED_MEMORY, 0);
  test_whole_batches(PL_BATCH_SHARED_MEMORY, 2);
  test_failure_names_the_cause();
  test_worker_cpu_clock();
  test_interrupted_read_is_retried();
  test_explicit_order(0);
  test_explicit_order(2);
  test_queued_order(0);
  test_queued_order(2);
  test_explicit_order_only();
  test_failure_before_a_queued_epoch(0);
  test_failure_before_a_queued_epoch(2);
  test_abandoned_batch_is_told();
  test_in_order_calls_take_turns();
  test_info_says_how_far_ahead();
  test_ahead_counts_only_batches_in_order();
  test_since_wait_counts_from_the_last_wait();
  return pl_test_finish("test_batch_callback");
}
