/* A callback dataset with known bytes for loader tests: field `x` uint8
 * [width] = pl_test_byte(i, j), field `y` int64 [] = i. Optionally fails at
 * one index, or sleeps per sample. Header-only so each test binary has its
 * own copy. */
#ifndef PL_LOADER_FIXTURE_H
#define PL_LOADER_FIXTURE_H

#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

typedef struct fixture {
  uint32_t width;
  uint64_t fail_at;   /* UINT64_MAX: never */
  double sleep_s;     /* per sample */
  uint64_t sleep_at;  /* sleep only at this index (UINT64_MAX: all) */
  atomic_ulong reads;
  atomic_int hold;     /* while 1, the read of sample sleep_at waits */
  atomic_int held_done; /* reads that waited on hold and have returned */
} fixture;

static int fixture_get(void *user, uint64_t i, void *const *dst, char *msg,
                       size_t len) {
  fixture *fx = user;
  atomic_fetch_add(&fx->reads, 1);
  if (i == fx->fail_at) {
    snprintf(msg, len, "planted failure");
    return -7;
  }
  if (fx->sleep_s > 0 && (fx->sleep_at == UINT64_MAX || fx->sleep_at == i)) {
    struct timespec ts = {(time_t)fx->sleep_s,
                          (long)((fx->sleep_s - (time_t)fx->sleep_s) * 1e9)};
    nanosleep(&ts, NULL);
  }
  if (i == fx->sleep_at && atomic_load(&fx->hold)) {
    /* A stall that ends when the test says, not after a time. */
    struct timespec ms = {0, 1000000};
    while (atomic_load(&fx->hold))
      nanosleep(&ms, NULL);
    atomic_fetch_add(&fx->held_done, 1);
  }
  uint8_t *x = dst[0];
  for (uint32_t j = 0; j < fx->width; j++)
    x[j] = pl_test_byte(i, j);
  int64_t y = (int64_t)i;
  memcpy(dst[1], &y, sizeof y);
  return 0;
}

static pl_dataset *fixture_dataset(fixture *fx, uint64_t n, uint32_t width) {
  fx->width = width;
  if (!fx->fail_at)
    fx->fail_at = UINT64_MAX;
  if (!fx->sleep_at)
    fx->sleep_at = UINT64_MAX;
  pl_field f[2] = {{.name = "x", .dtype = PL_UINT8, .ndim = 1},
                   {.name = "y", .dtype = PL_INT64, .ndim = 0}};
  f[0].shape[0] = width;
  pl_dataset *ds = NULL;
  pl_error err;
  if (pl_dataset_from_callback(f, 2, n, fixture_get, fx, NULL, &ds, &err)) {
    fprintf(stderr, "fixture: %s\n", err.message);
    exit(2);
  }
  return ds;
}

/* Checks batch b's bytes against the fixture's rule; returns mismatches. */
static int fixture_check_batch(pl_batch *b, uint32_t width) {
  int bad = 0;
  uint32_t n = pl_batch_size(b);
  const uint8_t *x = pl_batch_data(b, 0);
  const int64_t *y = pl_batch_data(b, 1);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t idx = pl_batch_sample_index(b, i);
    if (y[i] != (int64_t)idx)
      bad++;
    for (uint32_t j = 0; j < width; j++)
      if (x[(size_t)i * width + j] != pl_test_byte(idx, j)) {
        bad++;
        break;
      }
  }
  return bad;
}

#endif
