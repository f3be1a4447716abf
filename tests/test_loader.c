/* The loader's core rules: every sample exactly once per epoch, batches in
 * order with the right sizes, the same order and bytes for any number of
 * workers, errors that name the sample and end the epoch, destroy at any
 * moment, held batches never overwritten. */
#include "loader_fixture.h"

#include <stdlib.h>

static pl_loader *make(pl_dataset *ds, uint32_t bs, int workers, int prefetch,
                       int shuffle, int drop_last, uint64_t seed) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = bs;
  cfg.num_workers = workers;
  cfg.prefetch = prefetch;
  cfg.shuffle = shuffle;
  cfg.drop_last = drop_last;
  cfg.seed = seed;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  return ld;
}

/* Loads one epoch; appends indices to order (if not NULL); returns the
 * number of samples, or -1 on a check failure. */
static long epoch(pl_loader *ld, uint32_t width, uint32_t bs, uint64_t n,
                  int drop_last, uint64_t *order) {
  long got = 0;
  uint64_t nb = 0, expect_nb = drop_last ? n / bs : (n + bs - 1) / bs;
  pl_batch *b;
  pl_error err;
  pl_status s;
  while ((s = pl_loader_next(ld, &b, &err)) == PL_OK) {
    uint32_t want = (uint32_t)PL_TEST_MIN(bs, n - nb * bs);
    CHECK_EQ_U64(pl_batch_size(b), want);
    CHECK_EQ_U64(pl_batch_index(b), nb);
    CHECK(fixture_check_batch(b, width) == 0);
    for (uint32_t i = 0; order && i < pl_batch_size(b); i++)
      order[got + i] = pl_batch_sample_index(b, i);
    got += pl_batch_size(b);
    nb++;
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(s, PL_END_OF_EPOCH, &err);
  CHECK_EQ_U64(nb, expect_nb);
  return got;
}

static void exactly_once(void) {
  static const uint64_t lens[] = {1, 7, 64, 100, 1000};
  static const uint32_t bss[] = {1, 3, 64, 128};
  static const int workers[] = {0, 1, 3, 8};
  static const int prefetch[] = {1, 2, 5};
  fixture fx = {0};
  for (size_t a = 0; a < 5; a++) {
    pl_dataset *ds = fixture_dataset(&fx, lens[a], 5);
    uint64_t n = lens[a];
    uint64_t *order = malloc(n * sizeof *order);
    char *seen = malloc(n);
    for (size_t b = 0; b < 4; b++)
      for (size_t w = 0; w < 4; w++)
        for (int dl = 0; dl < 2; dl++) {
          pl_loader *ld = make(ds, bss[b], workers[w], prefetch[(a + b + w) % 3],
                               1, dl, 42);
          for (int e = 0; e < 2; e++) {
            long got = epoch(ld, 5, bss[b], n, dl, order);
            uint64_t want = dl ? n / bss[b] * bss[b] : n;
            CHECK_EQ_U64(got, want);
            memset(seen, 0, n);
            for (long i = 0; i < got; i++) {
              CHECK(order[i] < n);
              if (order[i] < n) {
                CHECK(!seen[order[i]]);
                seen[order[i]] = 1;
              }
            }
          }
          pl_loader_destroy(ld);
        }
    free(order);
    free(seen);
    pl_dataset_destroy(ds);
  }
}

/* Same (seed, epoch) -> same order and bytes whatever the workers; a new
 * epoch -> a new order; sequential -> 0, 1, 2, ... */
static void order_independent_of_workers(void) {
  enum { N = 2000, BS = 32 };
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, N, 16);
  uint64_t *ref = malloc(2 * N * sizeof *ref), *o = malloc(2 * N * sizeof *o);
  static const int workers[] = {0, 1, 8};
  for (int w = 0; w < 3; w++) {
    pl_loader *ld = make(ds, BS, workers[w], 0, 1, 0, 7);
    uint64_t *dst = w == 0 ? ref : o;
    CHECK_EQ_U64(epoch(ld, 16, BS, N, 0, dst), N);
    CHECK_EQ_U64(epoch(ld, 16, BS, N, 0, dst + N), N);
    if (w > 0)
      CHECK(memcmp(ref, o, 2 * N * sizeof *o) == 0);
    pl_loader_destroy(ld);
  }
  CHECK(memcmp(ref, ref + N, N * sizeof *ref) != 0); /* epochs differ */
  pl_loader *ld = make(ds, BS, 2, 0, 0, 0, 7);
  CHECK_EQ_U64(epoch(ld, 16, BS, N, 0, o), N);
  for (uint64_t i = 0; i < N; i++)
    CHECK_EQ_U64(o[i], i);
  pl_loader_destroy(ld);
  /* another seed, another order */
  ld = make(ds, BS, 2, 0, 1, 0, 8);
  CHECK_EQ_U64(epoch(ld, 16, BS, N, 0, o), N);
  CHECK(memcmp(ref, o, N * sizeof *o) != 0);
  pl_loader_destroy(ld);
  free(ref);
  free(o);
  pl_dataset_destroy(ds);
}

/* A failing sample: its error names the sample and the cause, ends the
 * epoch, and the next call starts the next epoch. */
static void callback_error(void) {
  for (int w = 0; w <= 4; w += 4) {
    fixture fx = {.fail_at = 50};
    pl_dataset *ds = fixture_dataset(&fx, 100, 4);
    pl_loader *ld = make(ds, 10, w, 0, 0, 0, 0);
    pl_batch *b;
    pl_error err;
    for (int i = 0; i < 5; i++) {
      CHECK_OK(pl_loader_next(ld, &b, &err), &err);
      pl_batch_release(b, NULL);
    }
    CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_CALLBACK, &err);
    CHECK(b == NULL);
    CHECK_MSG(&err, "sample 50");
    CHECK_MSG(&err, "callback returned -7");
    CHECK_MSG(&err, "planted failure");
    CHECK_EQ_U64(pl_loader_epoch(ld), 1);
    CHECK_OK(pl_loader_next(ld, &b, &err), &err); /* epoch 1 begins */
    CHECK_EQ_U64(pl_batch_epoch(b), 1);
    CHECK_EQ_U64(pl_batch_index(b), 0);
    pl_batch_release(b, NULL);
    pl_loader_destroy(ld);
    pl_dataset_destroy(ds);
  }
}

/* error_ends_epoch 0 (torch's DataLoader): a failing sample loses only
 * its batch; the batches after it in the epoch still come, in order, and
 * the next epoch fails at the same batch again. */
static void callback_error_goes_on(void) {
  for (int w = 0; w <= 4; w += 4) {
    fixture fx = {.fail_at = 50};
    pl_dataset *ds = fixture_dataset(&fx, 100, 4);
    pl_loader_config cfg;
    pl_loader_config_init(&cfg);
    CHECK(cfg.error_ends_epoch == 1);
    cfg.batch_size = 10;
    cfg.num_workers = w;
    cfg.device = PL_DEVICE_CPU;
    cfg.error_ends_epoch = 0;
    pl_loader *ld = NULL;
    pl_error err;
    CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
    for (uint64_t e = 0; e < 2; e++) {
      pl_batch *b;
      for (uint64_t i = 0; i < 10; i++) {
        if (i == 5) {
          CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_CALLBACK, &err);
          CHECK(b == NULL);
          CHECK_MSG(&err, "sample 50");
          CHECK_EQ_U64(pl_loader_epoch(ld), e);
          continue;
        }
        CHECK_OK(pl_loader_next(ld, &b, &err), &err);
        CHECK_EQ_U64(pl_batch_epoch(b), e);
        CHECK_EQ_U64(pl_batch_index(b), i);
        CHECK(fixture_check_batch(b, 4) == 0);
        pl_batch_release(b, NULL);
      }
      CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_END_OF_EPOCH, &err);
    }
    pl_loader_destroy(ld);
    pl_dataset_destroy(ds);
  }
}

/* Held batches stay intact while the loader moves on; the pool says when
 * the consumer holds everything; destroy with batches held. */
static void held_batches(void) {
  enum { N = 400, W = 24 };
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, N, W);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 8;
  cfg.num_workers = 4;
  cfg.prefetch = 2;
  cfg.max_batch_buffers = 6;
  cfg.shuffle = 1;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  pl_batch *held[6];
  for (int i = 0; i < 6; i++)
    CHECK_OK(pl_loader_next(ld, &held[i], &err), &err);
  pl_batch *b;
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_EXHAUSTED, &err);
  CHECK(!strcmp(err.message, "all 6 batch buffers are held by the consumer: "
                             "release one (pl_batch_release) or raise "
                             "max_batch_buffers"));
  for (int i = 0; i < 6; i++)
    CHECK(fixture_check_batch(held[i], W) == 0);
  pl_batch_release(held[0], NULL);
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  CHECK_EQ_U64(pl_batch_index(b), 6);
  CHECK(fixture_check_batch(b, W) == 0);
  pl_loader_stats st;
  pl_loader_stats_get(ld, &st);
  CHECK_EQ_U64(st.batch_buffers, 6);
  CHECK_EQ_U64(st.batches_delivered, 7);
  pl_dataset_destroy(ds);
  pl_loader_destroy(ld); /* batches still held */
  for (int i = 1; i < 6; i++) {
    CHECK(fixture_check_batch(held[i], W) == 0);
    pl_batch_release(held[i], NULL);
  }
  CHECK(fixture_check_batch(b, W) == 0);
  pl_batch_release(b, NULL); /* the last reference frees the pool */
}

/* Destroy mid-epoch with busy workers, many times. */
static void destroy_mid_epoch(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 5000, 64);
  for (int round = 0; round < 40; round++) {
    pl_loader *ld = make(ds, 16, 1 + round % 6, 0, round & 1, 0, round);
    pl_batch *b;
    pl_error err;
    for (int i = 0; i < round % 5; i++) {
      CHECK_OK(pl_loader_next(ld, &b, &err), &err);
      pl_batch_release(b, NULL);
    }
    pl_loader_destroy(ld);
  }
  pl_dataset_destroy(ds);
}

/* set_epoch restarts at batch 0 of the epoch asked for, with its order. */
static void set_epoch(void) {
  enum { N = 300, BS = 16 };
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, N, 3);
  uint64_t e3[N], again[N];
  pl_loader *ld = make(ds, BS, 3, 0, 1, 0, 99);
  pl_error err;
  CHECK_OK(pl_loader_set_epoch(ld, 3, &err), &err);
  CHECK_EQ_U64(epoch(ld, 3, BS, N, 0, e3), N);
  pl_batch *b;
  CHECK_OK(pl_loader_next(ld, &b, &err), &err); /* epoch 4 has begun */
  CHECK_EQ_U64(pl_batch_epoch(b), 4);
  pl_batch_release(b, NULL);
  CHECK_OK(pl_loader_set_epoch(ld, 3, &err), &err);
  CHECK_EQ_U64(epoch(ld, 3, BS, N, 0, again), N);
  CHECK(memcmp(e3, again, sizeof e3) == 0);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

static void bad_config(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 10, 3);
  pl_loader_config cfg;
  pl_loader *ld = NULL;
  pl_error err;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 0;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "batch_size");
  pl_loader_config_init(&cfg);
  cfg.rank = 2;
  cfg.world_size = 2;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "rank 2");
  pl_loader_config_init(&cfg);
  cfg.struct_size = 8;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "struct_size");
  CHECK(ld == NULL);
  pl_dataset_destroy(ds);
}

/* The CUDA-only knobs on the CPU backend: direct_copy and tiny copy
 * chunks change nothing: the batches are gathered in place, byte for byte,
 * and pl_loader_sync has nothing to wait for. */
static void cpu_ignores_copy_knobs(void) {
  enum { N = 40, ROWS = 64, COLS = 1024, IMG = ROWS * COLS, BS = 16 };
  const char *img = pl_test_path("big-img"), *lbl = pl_test_path("big-lbl");
  CHECK(pl_test_write_idx(img, lbl, N, ROWS, COLS, 0) == 0);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_idx(img, lbl, &ds, &err), &err);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = BS;
  cfg.num_workers = 2;
  cfg.shuffle = 1;
  cfg.device = PL_DEVICE_CPU;
  cfg.direct_copy = 1;
  cfg.copy_chunk_bytes = 4096;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  pl_batch *b;
  uint64_t seen = 0, bad = 0;
  while (ld && pl_loader_next(ld, &b, &err) == PL_OK) {
    const uint8_t *x = pl_batch_data(b, 0), *y = pl_batch_data(b, 1);
    for (uint32_t i = 0; i < pl_batch_size(b); i++, seen++) {
      uint64_t idx = pl_batch_sample_index(b, i);
      for (uint32_t j = 0; j < IMG; j++)
        bad += x[(size_t)i * IMG + j] != pl_test_byte(idx, j);
      bad += y[i] != pl_test_byte(idx, 1u << 20) % 10;
    }
    pl_batch_release(b, NULL);
  }
  CHECK_EQ_U64(seen, N);
  CHECK_EQ_U64(bad, 0);
  CHECK_OK(pl_loader_sync(ld, &err), &err);
  pl_loader_stats st;
  pl_loader_stats_get(ld, &st);
  CHECK_EQ_U64(st.batches_direct, 0);
  CHECK_EQ_U64(st.pinned_bytes, 0);
  CHECK_STATUS(pl_loader_sync(NULL, &err), PL_INVALID_ARGUMENT, &err);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* A stalled sample fails with PL_TIMEOUT naming it, instead of hanging. */
static void stall_timeout(void) {
  /* Static: destroy detaches the worker still in the slow sample, which
   * reads fx after this function has returned. */
  static fixture fx = {.sleep_s = 1.5, .sleep_at = 13};
  pl_dataset *ds = fixture_dataset(&fx, 40, 2);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 4;
  cfg.num_workers = 2;
  cfg.timeout_s = 0.3;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  pl_batch *b;
  pl_status s;
  int ok = 0;
  while ((s = pl_loader_next(ld, &b, &err)) == PL_OK) {
    ok++;
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(s, PL_TIMEOUT, &err);
  CHECK_MSG(&err, "sample 13");
  CHECK_MSG(&err, "timeout 0.3 s");
  CHECK_EQ_U64(ok, 3);
  pl_loader_destroy(ld); /* waits timeout_s, then detaches the slow worker */
  pl_dataset_destroy(ds);
}

int main(void) {
  exactly_once();
  order_independent_of_workers();
  callback_error();
  callback_error_goes_on();
  held_batches();
  destroy_mid_epoch();
  set_epoch();
  bad_config();
  stall_timeout();
  cpu_ignores_copy_knobs();
  return pl_test_finish("test_loader");
}
