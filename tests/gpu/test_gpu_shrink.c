/* Direct mode with data files that shrink (issue 17): the images (64 KiB
 * each, copied by the copy engine straight from the page-locked file
 * pages) and labels (gathered by the CPU through the mapping) of an IDX
 * data set; the images file is truncated after the first batch, later the
 * labels file to 0 bytes. Never a signal; every batch delivered is
 * exactly the data as opened (the pinned pages keep the images); once the
 * gathered file is cut, batches fail with PL_IO naming it. Exits 77
 * without a GPU. */
#include "testutil.h"

#ifndef PL_HAVE_CUDA
int main(void) {
  printf("test_gpu_shrink: built without CUDA, skipped\n");
  return 77;
}
#else

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 400, ROWS = 64, COLS = 1024, IMG = ROWS * COLS, BS = 16 };

static int check_batch(pl_batch *b, uint8_t *host) {
  pl_error err;
  uint32_t n = pl_batch_size(b);
  int bad = 0;
  CHECK_OK(pl_batch_copy_to_host(b, 0, 0, host, (uint64_t)n * IMG, &err),
           &err);
  CHECK_OK(pl_batch_copy_to_host(b, 1, 0, host + (size_t)n * IMG, n, &err),
           &err);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t idx = pl_batch_sample_index(b, i);
    for (uint32_t j = 0; j < IMG; j++)
      bad += host[(size_t)i * IMG + j] != pl_test_byte(idx, j);
    bad += host[(size_t)n * IMG + i] != pl_test_byte(idx, 1u << 20) % 10;
  }
  return bad;
}

static void shrink_direct(int workers) {
  char img[512], lbl[512];
  snprintf(img, sizeof img, "%s", pl_test_path("img"));
  snprintf(lbl, sizeof lbl, "%s", pl_test_path("lbl"));
  CHECK(pl_test_write_idx(img, lbl, N, ROWS, COLS, 0) == 0);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_idx(img, lbl, &ds, &err), &err);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = BS;
  cfg.num_workers = workers;
  cfg.device = PL_DEVICE_CUDA;
  cfg.direct_copy = 1;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  pl_dataset_destroy(ds);
  if (!ld)
    return;
  uint8_t *host = malloc((size_t)BS * (IMG + 1));
  pl_batch *b;
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  CHECK(check_batch(b, host) == 0);
  pl_batch_release(b, NULL);
  CHECK(truncate(img, 4096) == 0); /* the direct field's file */
  int ok = 0, io = 0;
  pl_status s;
  for (int k = 0; k < 3 * N / BS; k++) {
    if (k == N / BS)
      CHECK(truncate(lbl, 0) == 0); /* the gathered field's (one page) */
    s = pl_loader_next(ld, &b, &err);
    if (s == PL_OK) {
      CHECK(check_batch(b, host) == 0);
      pl_batch_release(b, NULL);
      ok++;
    } else if (s == PL_IO) {
      CHECK_MSG(&err, "the file changed while it was being read");
      CHECK_MSG(&err, lbl); /* the images are not read by the CPU */
      io++;
    } else {
      CHECK(s == PL_END_OF_EPOCH);
    }
  }
  printf("workers %d: %d batches exact, %d failed with PL_IO\n", workers, ok,
         io);
  CHECK(ok > 0 && io > 0); /* the labels are read by the CPU: they fail */
  pl_loader_stats st;
  pl_loader_stats_get(ld, &st);
  CHECK(st.batches_direct > 0);
  pl_loader_destroy(ld);
  free(host);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (pl_cuda_device_count() == 0) {
    printf("test_gpu_shrink: no usable CUDA device: skipped\n");
    return 77;
  }
  shrink_direct(0);
  shrink_direct(2);
  return pl_test_finish("test_gpu_shrink");
}
#endif
