/* Direct mode (direct_copy): fields of 64 KiB or more per sample are
 * copied straight from the page-locked data files (no gather) and the
 * small fields are gathered beside them. Checks every byte that reaches
 * device memory, shuffled and sequential, 0 and 3 workers, batches kept
 * past later copies and past the loader's destroy, a consumer that orders
 * everything by streams while buffers are recycled under it; for mapped
 * IDX files, decompressed .gz ones, interleaved records and records of one
 * large field (no staging at all); and that direct mode stays off, with
 * the log saying why, when not asked for, when the budget is too small,
 * the samples are small, the pages cannot be locked, or another loader
 * holds them. Exits 77 without a GPU. */
#include "testutil.h"

#ifndef PL_HAVE_CUDA
int main(void) {
  printf("test_gpu_direct: built without CUDA, skipped\n");
  return 77;
}
#else

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 1000, ROWS = 64, COLS = 1024, IMG = ROWS * COLS, BS = 64 };

/* Info lines about direct mode, for the checks on why it is on or off. */
typedef struct {
  pthread_mutex_t mu;
  char on[512], off[512];
} direct_log;
static direct_log g_log = {PTHREAD_MUTEX_INITIALIZER, "", ""};

static void capture(void *user, pl_log_level level, const char *msg) {
  direct_log *l = user;
  (void)level;
  pthread_mutex_lock(&l->mu);
  if (strstr(msg, "page-locked in place"))
    snprintf(l->on, sizeof l->on, "%s", msg);
  if (strstr(msg, "straight from the dataset's memory are off"))
    snprintf(l->off, sizeof l->off, "%s", msg);
  pthread_mutex_unlock(&l->mu);
}

static void log_reset(void) {
  g_log.on[0] = g_log.off[0] = '\0';
}

static pl_dataset *open_idx(int gz, uint32_t rows, uint32_t cols) {
  const char *img = pl_test_path(gz ? "img.gz" : "img"),
             *lbl = pl_test_path(gz ? "lbl.gz" : "lbl");
  if (pl_test_write_idx(img, lbl, N, rows, cols, gz) != 0) {
    fprintf(stderr, "cannot write the IDX files\n");
    exit(2);
  }
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_idx(img, lbl, &ds, &err), &err);
  return ds;
}

/* Records over two files. labels: a 1-byte label, 3 bytes of padding,
 * then the image (both fields interleaved: one copy per image plus one for
 * the gathered labels); else the image alone, back to back (no staging at
 * all, and sequential batches are one copy per file). */
static pl_dataset *open_records(int labels) {
  const uint64_t rec = labels ? 4 + IMG : IMG, skip = labels ? 4 : 0;
  uint8_t *buf = malloc((size_t)(N / 2) * rec);
  const char *paths[2] = {pl_test_path("rec0"), pl_test_path("rec1")};
  for (int f = 0; f < 2; f++) {
    for (uint64_t i = 0; i < N / 2; i++) {
      uint64_t s = (uint64_t)f * (N / 2) + i;
      uint8_t *r = buf + i * rec;
      if (labels) {
        memset(r, 0xEE, 4);
        r[0] = pl_test_byte(s, 1u << 20) % 10;
      }
      for (uint64_t j = 0; j < IMG; j++)
        r[skip + j] = pl_test_byte(s, j);
    }
    if (pl_test_write_file(paths[f], buf, (size_t)(N / 2) * rec) != 0)
      exit(2);
  }
  free(buf);
  pl_field fields[2] = {{.name = "image", .dtype = PL_UINT8, .ndim = 2,
                         .shape = {ROWS, COLS}},
                        {.name = "label", .dtype = PL_UINT8, .ndim = 0}};
  uint64_t offsets[2] = {skip, 0};
  pl_record_format fmt = {0, rec, labels ? 2 : 1, fields, offsets};
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_records(&fmt, paths, 2, &ds, &err), &err);
  return ds;
}

/* Reads the batch back from device memory and compares every byte. */
static int check_batch(pl_batch *b, uint32_t img, uint8_t *host) {
  pl_error err;
  uint32_t n = pl_batch_size(b);
  int labels = pl_batch_field(b, 1) != NULL, bad = 0;
  CHECK_OK(pl_batch_copy_to_host(b, 0, 0, host, (uint64_t)n * img, &err), &err);
  if (labels)
    CHECK_OK(pl_batch_copy_to_host(b, 1, 0, host + (size_t)n * img, n, &err),
             &err);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t idx = pl_batch_sample_index(b, i);
    for (uint32_t j = 0; j < img; j++)
      bad += host[(size_t)i * img + j] != pl_test_byte(idx, j);
    if (labels)
      bad += host[(size_t)n * img + i] != pl_test_byte(idx, 1u << 20) % 10;
  }
  return bad;
}

typedef struct {
  int shuffle, workers, keep, direct;
  uint64_t budget;
  uint32_t img; /* bytes of one image */
} run_cfg;

static pl_loader_config loader_config(run_cfg rc) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = BS;
  cfg.num_workers = rc.workers;
  cfg.shuffle = rc.shuffle;
  cfg.seed = 11;
  cfg.device = PL_DEVICE_CUDA;
  cfg.direct_copy = rc.direct;
  cfg.pinned_budget = rc.budget;
  cfg.max_batch_buffers = 16;
  cfg.log = capture;
  cfg.log_user = &g_log;
  return cfg;
}

/* One epoch, every byte checked; `keep` batches are held to the end and
 * checked after the loader is destroyed. Returns the loader's stats. */
static pl_loader_stats run(pl_dataset *ds, run_cfg rc) {
  pl_loader_config cfg = loader_config(rc);
  pl_loader *ld;
  pl_error err;
  pl_loader_stats st;
  memset(&st, 0, sizeof st);
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  if (!ld)
    return st;
  uint8_t *host = malloc((size_t)BS * (rc.img + 1));
  pl_batch *b, *kept[4];
  int nkept = 0;
  uint64_t seen = 0;
  pl_status s;
  while ((s = pl_loader_next(ld, &b, &err)) == PL_OK) {
    seen += pl_batch_size(b);
    if (nkept < rc.keep) { /* checked at the end, after later copies ran */
      kept[nkept++] = b;
      continue;
    }
    CHECK(check_batch(b, rc.img, host) == 0);
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(s, PL_END_OF_EPOCH, &err);
  CHECK_EQ_U64(seen, N);
  CHECK_OK(pl_loader_sync(ld, &err), &err);
  pl_loader_stats_get(ld, &st);
  CHECK(st.pinned_bytes <= (rc.budget ? rc.budget : UINT64_MAX));
  pl_loader_destroy(ld); /* the kept batches keep the files registered */
  for (int i = 0; i < nkept; i++) {
    CHECK(check_batch(kept[i], rc.img, host) == 0);
    pl_batch_release(kept[i], NULL);
  }
  free(host);
  return st;
}

static const uint64_t NB = (N + BS - 1) / BS;

static void test_direct(pl_dataset *ds, const char *what) {
  for (int shuffle = 0; shuffle < 2; shuffle++)
    for (int w = 0; w <= 3; w += 3) {
      log_reset();
      /* pinned_budget 0: the default budget grows to hold the files. */
      pl_loader_stats st = run(ds, (run_cfg){shuffle, w, 3, 1, 0, IMG});
      printf("%s shuffle %d workers %d: %llu of %llu batches direct, "
             "pinned %llu\n", what, shuffle, w,
             (unsigned long long)st.batches_direct, (unsigned long long)NB,
             (unsigned long long)st.pinned_bytes);
      /* Workers run ahead into the next epoch: NB or a few more, and a
       * batch is counted copied just before it is counted direct. */
      CHECK(st.batches_direct >= NB);
      CHECK(st.batches_direct <= st.batches_copied);
      CHECK(st.batches_copied <= st.batches_direct + (uint64_t)w);
      CHECK(st.pinned_bytes >= (uint64_t)N * IMG); /* the files count */
      CHECK(strstr(g_log.on, "page-locked in place") != NULL);
      CHECK(g_log.off[0] == '\0');
    }
}

static void CUDART_CB sleep_fn(void *ms) {
  struct timespec ts = {0, (long)(intptr_t)ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* A consumer that orders everything by streams (no host waits): each
 * batch is copied on its own stream, behind a stall now and then, into one
 * device array, and released at once naming that stream, so that buffers
 * are recycled while the stream may not have read them yet. Every byte of
 * the array must be right. */
static void test_stream_consumer(pl_dataset *ds, const char *what) {
  run_cfg rc = {1, 3, 0, 1, 0, IMG};
  pl_loader_config cfg = loader_config(rc);
  cfg.max_batch_buffers = 4;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  cudaStream_t s;
  uint8_t *dst = NULL;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaMalloc((void **)&dst, (size_t)N * IMG) == cudaSuccess);
  uint64_t *order = calloc(N, sizeof *order), k = 0;
  pl_batch *b;
  while (ld && pl_loader_next(ld, &b, &err) == PL_OK) {
    uint32_t n = pl_batch_size(b);
    for (uint32_t i = 0; i < n; i++)
      order[k + i] = pl_batch_sample_index(b, i);
    CHECK_OK(pl_batch_wait_stream(b, s, &err), &err);
    if (k % (3 * BS) == 0)
      CHECK(cudaLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)5) ==
            cudaSuccess);
    CHECK(cudaMemcpyAsync(dst + k * IMG, pl_batch_data(b, 0),
                          (size_t)n * IMG, cudaMemcpyDeviceToDevice,
                          s) == cudaSuccess);
    pl_batch_release(b, s);
    k += n;
  }
  CHECK_EQ_U64(k, N);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  pl_loader_stats st;
  if (ld) {
    pl_loader_stats_get(ld, &st);
    CHECK(st.batches_direct >= NB);
  }
  uint8_t *h = malloc((size_t)N * IMG);
  CHECK(cudaMemcpy(h, dst, (size_t)N * IMG, cudaMemcpyDeviceToHost) ==
        cudaSuccess);
  uint64_t bad = 0;
  for (uint64_t t = 0; t < k; t++)
    for (uint64_t j = 0; j < IMG; j++)
      bad += h[t * IMG + j] != pl_test_byte(order[t], j);
  printf("%s, stream consumer: %llu bad bytes\n", what,
         (unsigned long long)bad);
  CHECK_EQ_U64(bad, 0);
  free(h);
  free(order);
  cudaFree(dst);
  cudaStreamDestroy(s);
  pl_loader_destroy(ld);
}

/* Direct mode off: every batch gathered, just as exact; `why` in the log
 * (NULL: nothing logged, as when it was not asked for). */
static void test_off(pl_dataset *ds, int direct, uint64_t budget,
                     uint32_t img, const char *why) {
  log_reset();
  pl_loader_stats st = run(ds, (run_cfg){1, 2, 1, direct, budget, img});
  CHECK_EQ_U64(st.batches_direct, 0);
  CHECK(st.batches_copied >= NB);
  CHECK(g_log.on[0] == '\0');
  if (why) {
    CHECK(strstr(g_log.off, why) != NULL);
    if (!strstr(g_log.off, why))
      printf("log: '%s', wanted '%s'\n", g_log.off, why);
  } else {
    CHECK(g_log.off[0] == '\0');
  }
}

/* A second loader over the same files while the first holds them locked:
 * it gathers, and both deliver exact bytes. */
static void test_two_loaders(pl_dataset *ds) {
  pl_loader_config cfg = loader_config((run_cfg){0, 0, 0, 1, 0, IMG});
  pl_loader *first;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &first, &err), &err);
  log_reset();
  pl_loader_stats st = run(ds, (run_cfg){0, 2, 0, 1, 0, IMG});
  CHECK_EQ_U64(st.batches_direct, 0);
  CHECK(strstr(g_log.off, "cudaHostRegister") != NULL);
  pl_batch *b;
  uint8_t *host = malloc((size_t)BS * (IMG + 1));
  CHECK_OK(pl_loader_next(first, &b, &err), &err);
  CHECK(check_batch(b, IMG, host) == 0);
  pl_batch_release(b, NULL);
  pl_loader_stats_get(first, &st);
  CHECK(st.batches_direct >= 1);
  free(host);
  pl_loader_destroy(first);
}

#ifdef PL_FAULT_INJECTION
#include "core/fault.h"
/* Page-locking the files fails: gathered instead, the cause in the log. */
static void test_pin_failure(pl_dataset *ds) {
  pl_fault_reset();
  pl_fault_arm(PL_FAULT_PIN_ALLOC, 0, 1);
  test_off(ds, 1, 0, IMG, "page-locking");
  pl_fault_reset();
}
#endif

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (pl_cuda_device_count() == 0) {
    printf("test_gpu_direct: no usable CUDA device: skipped\n");
    return 77;
  }
  for (int gz = 0; gz < 2; gz++) { /* mapped, and decompressed into memory */
    pl_dataset *ds = open_idx(gz, ROWS, COLS);
    const char *what = gz ? "idx.gz" : "idx";
    test_direct(ds, what);
    test_stream_consumer(ds, what);
    test_off(ds, 0, 1ull << 30, IMG, NULL);          /* not asked for */
    test_off(ds, 1, 4u << 20, IMG, "cannot hold");   /* files do not fit */
#ifdef PL_FAULT_INJECTION
    test_pin_failure(ds);
#endif
    if (!gz)
      test_two_loaders(ds);
    pl_dataset_destroy(ds);
  }
  pl_dataset *small = open_idx(0, 28, 28); /* 784-byte images: gathered */
  test_off(small, 1, 0, 784, "no field has samples of 64 KiB");
  pl_dataset_destroy(small);
  for (int labels = 1; labels >= 0; labels--) {
    pl_dataset *rec = open_records(labels);
    const char *what = labels ? "records" : "records, image only";
    test_direct(rec, what);
    test_stream_consumer(rec, what);
    pl_dataset_destroy(rec);
  }
  return pl_test_finish("test_gpu_direct");
}
#endif
