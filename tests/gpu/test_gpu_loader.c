/* The loader on a CUDA device, through the public API only: device bytes
 * equal the dataset's for every pin / non_blocking / workers / prefetch
 * combination; batches held for long are never overwritten; a consumer
 * that orders everything by streams (no host waits) reads every batch
 * right while buffers are recycled under it; the pinned budget holds and a
 * pinning failure falls back with correct data. The checks run twice:
 * with whole-batch staging, and with batches gathered and copied in chunks
 * of 2 or 3 samples (copy_chunk_bytes small), so that a batch arrives as
 * many copies, the last one partial. Exits 77 (skip) without CUDA or a
 * usable GPU. */
#include "testutil.h"

#ifndef PL_HAVE_CUDA
int main(void) {
  printf("test_gpu_loader: built without CUDA, skipped\n");
  return 77;
}
#else

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- dataset */

enum { X_BYTES = 37 * 29, Y_BYTES = 5 * 4 };

typedef struct ds_user {
  int delay_us; /* per sample, to make workers overlap */
} ds_user;

/* Field 0 byte j of sample i = pl_test_byte(i, j); field 1 byte j =
 * pl_test_byte(i, X_BYTES + j). */
static int get_item(void *user, uint64_t index, void *const *dst, char *msg,
                    size_t msg_len) {
  const ds_user *u = user;
  if (u->delay_us) {
    struct timespec ts = {0, u->delay_us * 1000L};
    nanosleep(&ts, NULL);
  }
  uint8_t *x = dst[0], *y = dst[1];
  for (uint64_t j = 0; j < X_BYTES; j++)
    x[j] = pl_test_byte(index, j);
  for (uint64_t j = 0; j < Y_BYTES; j++)
    y[j] = pl_test_byte(index, X_BYTES + j);
  return 0;
}

static pl_dataset *make_dataset(uint64_t n, ds_user *u) {
  pl_field f[2];
  memset(f, 0, sizeof f);
  snprintf(f[0].name, sizeof f[0].name, "x");
  f[0].dtype = PL_UINT8;
  f[0].ndim = 2;
  f[0].shape[0] = 37;
  f[0].shape[1] = 29;
  snprintf(f[1].name, sizeof f[1].name, "y");
  f[1].dtype = PL_FLOAT32;
  f[1].ndim = 1;
  f[1].shape[0] = 5;
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_from_callback(f, 2, n, get_item, u, NULL, &ds, &err),
           &err);
  return ds;
}

/* ---------------------------------------------------------------- log */


static pl_test_log g_log = PL_TEST_LOG_INIT;

/* copy_chunk_bytes for every loader the checks make (0: whole batches, as
 * these batches are small). */
static uint64_t g_chunk;

/* ---------------------------------------------------------------- helpers */

static pl_loader_config config(uint32_t bs, int workers, int prefetch,
                               int pin, int nb) {
  pl_loader_config c;
  pl_loader_config_init(&c);
  c.batch_size = bs;
  c.num_workers = workers;
  c.prefetch = prefetch;
  c.device = PL_DEVICE_CUDA;
  c.device_index = 0;
  c.pin_memory = pin;
  c.non_blocking = nb;
  c.log = pl_test_capture_log;
  c.log_user = &g_log;
  c.copy_chunk_bytes = g_chunk;
  return c;
}

static pl_loader *make(pl_dataset *ds, const pl_loader_config *c) {
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, c, &ld, &err), &err);
  return ld;
}

/* Reads the batch back from the device and compares every byte with the
 * dataset's; returns 0 when equal. */
static int check_batch(pl_batch *b) {
  uint32_t n = pl_batch_size(b);
  uint8_t *h = malloc((size_t)n * X_BYTES + 1);
  static const uint64_t fb[2] = {X_BYTES, Y_BYTES}, base[2] = {0, X_BYTES};
  int bad = 0;
  for (int f = 0; f < 2 && !bad; f++) {
    pl_error err;
    CHECK_EQ_U64(pl_batch_bytes(b, f), n * fb[f]);
    pl_status s = pl_batch_copy_to_host(b, f, 0, h, n * fb[f], &err);
    CHECK_OK(s, &err);
    if (s != PL_OK) {
      bad = 1;
      break;
    }
    for (uint32_t i = 0; i < n && !bad; i++) {
      uint64_t idx = pl_batch_sample_index(b, i);
      for (uint64_t j = 0; j < fb[f]; j++)
        if (h[i * fb[f] + j] != pl_test_byte(idx, base[f] + j)) {
          fprintf(stderr,
                  "batch %llu field %d sample %u (index %llu) byte %llu "
                  "differs\n",
                  (unsigned long long)pl_batch_index(b), f, i,
                  (unsigned long long)idx, (unsigned long long)j);
          bad = 1;
          break;
        }
    }
  }
  free(h);
  CHECK(bad == 0);
  return bad;
}

static pl_loader_stats stats(const pl_loader *ld) {
  pl_loader_stats s;
  pl_loader_stats_get(ld, &s);
  return s;
}

static void CUDART_CB sleep_fn(void *ms) {
  struct timespec ts = {0, (long)(intptr_t)ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------- tests */

/* One epoch: order, sizes and bytes of every batch. */
static void run_epoch(pl_loader *ld, uint64_t n, uint32_t bs, int shuffled) {
  pl_batch *b;
  pl_error err;
  pl_status s;
  uint64_t nb = 0, seen = 0;
  char *hit = calloc(n, 1);
  while ((s = pl_loader_next(ld, &b, &err)) == PL_OK) {
    int dev = -1;
    CHECK(pl_batch_device(b, &dev) == PL_DEVICE_CUDA && dev == 0);
    CHECK_EQ_U64(pl_batch_index(b), nb);
    CHECK_EQ_U64(pl_batch_size(b), n - nb * bs < bs ? n - nb * bs : bs);
    for (uint32_t i = 0; i < pl_batch_size(b); i++) {
      uint64_t idx = pl_batch_sample_index(b, i);
      if (!shuffled)
        CHECK_EQ_U64(idx, nb * bs + i);
      CHECK(idx < n && !hit[idx]);
      if (idx < n)
        hit[idx] = 1;
    }
    check_batch(b);
    seen += pl_batch_size(b);
    nb++;
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(s, PL_END_OF_EPOCH, &err);
  CHECK_EQ_U64(seen, n);
  free(hit);
}

static void test_matrix(void) {
  static const int workers[] = {0, 1, 4}, prefetch[] = {1, 2, 8};
  const uint64_t n = 203;
  const uint32_t bs = 16;
  ds_user u = {0};
  pl_dataset *ds = make_dataset(n, &u);
  if (!ds)
    return;
  for (int pin = 0; pin < 2; pin++)
    for (int nbk = 0; nbk < 2; nbk++)
      for (int w = 0; w < 3; w++)
        for (int p = 0; p < 3; p++) {
          g_log.warnings = 0;
          pl_loader_config c = config(bs, workers[w], prefetch[p], pin, nbk);
          pl_loader *ld = make(ds, &c);
          if (!ld)
            continue;
          int dev = -1;
          CHECK(pl_loader_device(ld, &dev) == PL_DEVICE_CUDA && dev == 0);
          CHECK(strncmp(pl_loader_device_name(ld), "cuda:0 ", 7) == 0);
          run_epoch(ld, n, bs, 0);
          pl_loader_stats s = stats(ld);
          CHECK(s.batches_copied >= s.batches_delivered);
          CHECK_EQ_U64(s.batches_delivered, (n + bs - 1) / bs);
          CHECK_EQ_U64(s.pinned_fallbacks, 0);
          if (pin)
            CHECK(s.pinned_bytes > 0);
          else
            CHECK_EQ_U64(s.pinned_bytes, 0);
          CHECK(s.copy_s > 0);
          CHECK(g_log.warnings == 0);
          /* Chunks copy the samples' bytes (1093 each); whole batches the
           * buffer with its alignment padding (17728 bytes, 1093 prime):
           * chunking happened exactly when it was asked for. */
          CHECK((s.bytes_copied % (X_BYTES + Y_BYTES) == 0) == (g_chunk != 0));
          pl_loader_destroy(ld);
        }
  /* A shuffled second epoch, for good measure. */
  pl_loader_config c = config(bs, 4, 2, 1, 1);
  c.shuffle = 1;
  c.seed = 9;
  pl_loader *ld = make(ds, &c);
  if (ld) {
    run_epoch(ld, n, bs, 1);
    run_epoch(ld, n, bs, 1);
    pl_loader_destroy(ld);
  }
  pl_dataset_destroy(ds);
}

/* The consumer keeps every batch of the epoch and checks them at the end:
 * none was overwritten while held. */
static void test_hold_all(int nbk) {
  const uint64_t n = 160;
  const uint32_t bs = 8;
  const uint64_t nbatches = n / bs;
  ds_user u = {0};
  pl_dataset *ds = make_dataset(n, &u);
  pl_loader_config c = config(bs, 4, 4, 1, nbk);
  c.max_batch_buffers = nbatches + 8;
  pl_loader *ld = make(ds, &c);
  if (!ld) {
    pl_dataset_destroy(ds);
    return;
  }
  pl_batch **held = calloc(nbatches, sizeof *held);
  pl_error err;
  for (uint64_t i = 0; i < nbatches; i++)
    CHECK_OK(pl_loader_next(ld, &held[i], &err), &err);
  for (uint64_t i = 0; i < nbatches; i++)
    if (held[i]) {
      CHECK_EQ_U64(pl_batch_index(held[i]), i);
      check_batch(held[i]);
    }
  /* Release from the end, then a whole new epoch through the same pool. */
  for (uint64_t i = nbatches; i-- > 0;)
    pl_batch_release(held[i], NULL);
  pl_batch *b;
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_END_OF_EPOCH, &err);
  run_epoch(ld, n, bs, 0);
  /* Batches outlive the loader. */
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  pl_loader_destroy(ld);
  check_batch(b);
  pl_batch_release(b, NULL);
  free(held);
  pl_dataset_destroy(ds);
}

/* Everything ordered by streams, no host wait: each batch is copied on the
 * consumer's stream (after a stall now and then) into one big device array
 * and released at once, so the pool recycles buffers while the stream may
 * not yet have read them. The array must hold every batch intact. */
static void test_stream_consumer(void) {
  const uint64_t n = 640;
  const uint32_t bs = 16;
  const uint64_t nbatches = n / bs, xb = (uint64_t)bs * X_BYTES;
  ds_user u = {0};
  pl_dataset *ds = make_dataset(n, &u);
  pl_loader_config c = config(bs, 4, 4, 1, 1);
  c.max_batch_buffers = 6;
  pl_loader *ld = make(ds, &c);
  cudaStream_t s;
  uint8_t *dst = NULL;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaMalloc((void **)&dst, nbatches * xb) == cudaSuccess);
  uint64_t *order = calloc(n, sizeof *order);
  pl_batch *b;
  pl_error err;
  uint64_t k = 0;
  while (ld && pl_loader_next(ld, &b, &err) == PL_OK && k < nbatches) {
    for (uint32_t i = 0; i < bs; i++)
      order[k * bs + i] = pl_batch_sample_index(b, i);
    CHECK_OK(pl_batch_wait_stream(b, s, &err), &err);
    if (k % 3 == 0)
      CHECK(cudaLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)5) ==
            cudaSuccess);
    CHECK(cudaMemcpyAsync(dst + k * xb, pl_batch_data(b, 0), xb,
                          cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    pl_batch_release(b, s);
    k++;
  }
  CHECK_EQ_U64(k, nbatches);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  uint8_t *h = malloc(nbatches * xb);
  CHECK(cudaMemcpy(h, dst, nbatches * xb, cudaMemcpyDeviceToHost) ==
        cudaSuccess);
  uint64_t bad = 0;
  for (uint64_t t = 0; t < n; t++)
    for (uint64_t j = 0; j < X_BYTES; j++)
      bad += h[t * X_BYTES + j] != pl_test_byte(order[t], j);
  CHECK_EQ_U64(bad, 0);
  free(h);
  free(order);
  cudaFree(dst);
  cudaStreamDestroy(s);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* A small pinned budget: never exceeded, the rest falls back (counted, one
 * warning), the bytes are still right. */
static void test_budget(uint64_t budget) {
  const uint64_t n = 96;
  const uint32_t bs = 16;
  ds_user u = {200}; /* slow samples: the 4 workers fill at the same time */
  pl_dataset *ds = make_dataset(n, &u);
  g_log.warnings = 0;
  pl_loader_config c = config(bs, 4, 8, 1, 1);
  c.pinned_budget = budget;
  pl_loader *ld = make(ds, &c);
  if (!ld) {
    pl_dataset_destroy(ds);
    return;
  }
  pl_batch *b;
  pl_error err;
  while (pl_loader_next(ld, &b, &err) == PL_OK) {
    check_batch(b);
    pl_batch_release(b, NULL);
    CHECK(stats(ld).pinned_bytes <= budget);
  }
  pl_loader_stats s = stats(ld);
  printf("budget %llu: pinned %llu bytes, %llu fallbacks\n",
         (unsigned long long)budget, (unsigned long long)s.pinned_bytes,
         (unsigned long long)s.pinned_fallbacks);
  CHECK(s.pinned_fallbacks > 0);
  CHECK(s.pinned_bytes <= budget);
  CHECK(g_log.warnings == 1);
  CHECK(strstr(g_log.last, "pinned budget") != NULL);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* Not a check: how fast the engine moves big batches, pinned or not, for
 * docs/gpu-engine.md. Samples are memset (cheap to make) so that the copy
 * path, not the callback, dominates. */
enum { BIG_SAMPLE = 1 << 20 };

static int get_big(void *user, uint64_t index, void *const *dst, char *msg,
                   size_t msg_len) {
  memset(dst[0], (int)(index & 0xff), BIG_SAMPLE);
  return 0;
}

static void bench(int pin, int workers) {
  pl_field f;
  memset(&f, 0, sizeof f);
  snprintf(f.name, sizeof f.name, "x");
  f.dtype = PL_UINT8;
  f.ndim = 1;
  f.shape[0] = BIG_SAMPLE;
  pl_dataset *ds = NULL;
  pl_error err;
  const uint64_t n = 2048; /* 2 GiB per epoch, batches of 32 MiB */
  CHECK_OK(pl_dataset_from_callback(&f, 1, n, get_big, NULL, NULL, &ds, &err),
           &err);
  pl_loader_config c = config(32, workers, 2 * workers, pin, 1);
  pl_loader *ld = ds ? make(ds, &c) : NULL;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  for (int e = 0; ld && e < 2; e++) { /* epoch 0 warms the pool up */
    pl_batch *b;
    uint64_t bytes = 0;
    struct timespec a, z;
    clock_gettime(CLOCK_MONOTONIC, &a);
    while (pl_loader_next(ld, &b, &err) == PL_OK) {
      CHECK_OK(pl_batch_wait_stream(b, s, &err), &err);
      bytes += pl_batch_bytes(b, 0);
      pl_batch_release(b, s);
    }
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    clock_gettime(CLOCK_MONOTONIC, &z);
    double dt = (double)(z.tv_sec - a.tv_sec) + (z.tv_nsec - a.tv_nsec) * 1e-9;
    pl_loader_stats st = stats(ld);
    if (e == 1)
      printf("bench pin=%d workers=%d: %.2f GB/s end to end (%llu MiB in "
             "%.3f s); copies %.1f GB/s of device time; pinned %llu MiB, "
             "%llu fallbacks\n",
             pin, workers, (double)bytes / dt / 1e9,
             (unsigned long long)(bytes >> 20), dt,
             st.copy_s > 0 ? (double)st.bytes_copied / st.copy_s / 1e9 : 0.0,
             (unsigned long long)(st.pinned_bytes >> 20),
             (unsigned long long)st.pinned_fallbacks);
  }
  cudaStreamDestroy(s);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

#ifdef PL_FAULT_INJECTION
#include "core/fault.h"

static void test_pin_failure(void) {
  const uint64_t n = 100;
  ds_user u = {0};
  pl_dataset *ds = make_dataset(n, &u);
  g_log.warnings = 0;
  pl_fault_reset();
  pl_fault_arm(PL_FAULT_PIN_ALLOC, 0, -1);
  pl_loader_config c = config(10, 2, 2, 1, 1);
  pl_loader *ld = make(ds, &c);
  if (ld) {
    run_epoch(ld, n, 10, 0);
    pl_loader_stats s = stats(ld);
    CHECK(s.pinned_fallbacks > 0);
    CHECK_EQ_U64(s.pinned_bytes, 0);
    CHECK(g_log.warnings == 1);
    CHECK(strstr(g_log.last, "pinning a") != NULL);
    pl_loader_destroy(ld);
  }
  pl_fault_reset();
  /* A device allocation failure at creation or growth is an error, not a
   * crash. */
  pl_fault_arm(PL_FAULT_DEVICE_ALLOC, 0, -1);
  pl_error err;
  pl_batch *b = NULL;
  ld = NULL;
  pl_status st = pl_loader_create(ds, &c, &ld, &err);
  if (st == PL_OK) {
    st = pl_loader_next(ld, &b, &err);
    pl_batch_release(b, NULL);
  }
  CHECK(st == PL_NO_MEMORY);
  CHECK_MSG(&err, "cudaMalloc");
  pl_loader_destroy(ld);
  pl_fault_reset();
  pl_dataset_destroy(ds);
}
#endif

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0); /* progress survives a crash */
  if (pl_cuda_device_count() == 0) {
    ds_user u = {0};
    pl_dataset *ds = make_dataset(10, &u);
    pl_loader_config c = config(2, 0, 1, 1, 1);
    pl_loader *ld = NULL;
    pl_error err;
    pl_status s = pl_loader_create(ds, &c, &ld, &err);
    CHECK(s == PL_NO_DEVICE || s == PL_UNSUPPORTED);
    CHECK(ld == NULL);
    pl_dataset_destroy(ds);
    printf("test_gpu_loader: no usable GPU (%s), skipped\n", err.message);
    return pl_test_failures ? 1 : 77;
  }
  /* 1093-byte samples: chunks of 3000 bytes hold 2 of them, of 3300 3. */
  static const uint64_t chunks[] = {0, 3000, 3300};
  for (int k = 0; k < 3; k++) {
    g_chunk = chunks[k];
    printf("copy_chunk_bytes %llu: matrix\n", (unsigned long long)g_chunk);
    test_matrix();
    printf("hold all\n");
    test_hold_all(1);
    test_hold_all(0);
    printf("stream consumer\n");
    test_stream_consumer();
    printf("budget\n");
    test_budget(1);
    /* Room for 2 staging buffers: chunks are a page each. */
    test_budget(g_chunk ? 2 * (uint64_t)sysconf(_SC_PAGESIZE) : 2 * 20480);
  }
  g_chunk = 0;
#ifdef PL_FAULT_INJECTION
  printf("pin failure\n");
  test_pin_failure();
#endif
  bench(1, 4);
  bench(0, 4);
  bench(1, 8);
  return pl_test_finish("test_gpu_loader");
}
#endif
