/* Copies straight from the dataset's file pages (no gather): with a pinned
 * budget that holds the files, sequential batches of an IDX data set are
 * copied from the registered mapping; the device bytes equal the files'
 * bytes; shuffled batches (too many short runs) and the default budget fall
 * back to the gather and are just as exact. Exits 77 without a GPU. */
#include "testutil.h"

#include <stdlib.h>

enum { N = 2000, ROWS = 64, COLS = 1024, IMG = ROWS * COLS, BS = 64 };

static pl_dataset *open_idx(int gz) {
  const char *img = pl_test_path(gz ? "img.gz" : "img"),
             *lbl = pl_test_path(gz ? "lbl.gz" : "lbl");
  if (pl_test_write_idx(img, lbl, N, ROWS, COLS, gz) != 0) {
    fprintf(stderr, "cannot write the IDX files\n");
    exit(2);
  }
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_idx(img, lbl, &ds, &err), &err);
  return ds;
}

/* Reads the batch back from device memory and compares every byte. */
static int check_batch(pl_batch *b, uint8_t *host) {
  pl_error err;
  uint32_t n = pl_batch_size(b);
  int bad = 0;
  CHECK_OK(pl_batch_copy_to_host(b, 0, 0, host, (uint64_t)n * IMG, &err), &err);
  CHECK_OK(pl_batch_copy_to_host(b, 1, 0, host + (size_t)n * IMG, n, &err),
           &err);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t idx = pl_batch_sample_index(b, i);
    for (uint32_t j = 0; j < IMG; j += 97)
      bad += host[(size_t)i * IMG + j] != pl_test_byte(idx, j);
    bad += host[(size_t)n * IMG + i] != pl_test_byte(idx, 1u << 20) % 10;
  }
  return bad;
}

/* One epoch; returns batches copied without a gather. */
static uint64_t run(pl_dataset *ds, int shuffle, uint64_t budget,
                    int keep) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = BS;
  cfg.num_workers = 3;
  cfg.shuffle = shuffle;
  cfg.device = PL_DEVICE_CUDA;
  cfg.pinned_budget = budget;
  cfg.max_batch_buffers = 16;
  pl_loader *ld;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  uint8_t *host = malloc((size_t)BS * (IMG + 1));
  pl_batch *b, *kept[4];
  int nkept = 0;
  uint64_t seen = 0;
  pl_status s;
  while ((s = pl_loader_next(ld, &b, &err)) == PL_OK) {
    seen += pl_batch_size(b);
    if (nkept < keep) { /* checked at the end, after later copies ran */
      kept[nkept++] = b;
      continue;
    }
    CHECK(check_batch(b, host) == 0);
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(s, PL_END_OF_EPOCH, &err);
  CHECK_EQ_U64(seen, N);
  for (int i = 0; i < nkept; i++) {
    CHECK(check_batch(kept[i], host) == 0);
    pl_batch_release(kept[i], NULL);
  }
  pl_loader_stats st;
  pl_loader_stats_get(ld, &st);
  pl_loader_destroy(ld);
  free(host);
  return st.batches_direct;
}

int main(void) {
  if (pl_cuda_device_count() == 0) {
    printf("test_gpu_direct: no usable CUDA device: skipped\n");
    return 77;
  }
  const uint64_t nb = (N + BS - 1) / BS;
  for (int gz = 0; gz < 2; gz++) { /* mapped, and decompressed into memory */
    pl_dataset *ds = open_idx(gz);
    CHECK_EQ_U64(run(ds, 0, 1ull << 30, 3), nb); /* every batch direct */
    CHECK_EQ_U64(run(ds, 1, 1ull << 30, 0), 0);  /* shuffled: gathered */
    CHECK_EQ_U64(run(ds, 0, 0, 0), 0);           /* default budget */
    CHECK_EQ_U64(run(ds, 0, 4u << 20, 0), 0);    /* files do not fit */
    pl_dataset_destroy(ds);
  }
  return pl_test_finish("test_gpu_direct");
}
