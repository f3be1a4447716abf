/* Direct mode with data files that shrink (issue 17): the images (64 KiB
 * each, copied by the copy engine straight from the page-locked file
 * pages) and labels (gathered by the CPU through the mapping) of an IDX
 * data set; after the first batch one of the two files is truncated. Never
 * a signal, never a wrong byte: every batch delivered is exactly the data
 * as opened, and the batches made after the cut fail with PL_IO naming the
 * file that was cut, the direct field's as well (the kernel zeroes the
 * pinned pages past the new end inside a large folio: the loader reads
 * each direct span's last byte before its copy). Exits 77 without a GPU. */
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
    int wrong = 0;
    for (uint32_t j = 0; j < IMG; j++)
      wrong += host[(size_t)i * IMG + j] != pl_test_byte(idx, j);
    wrong += host[(size_t)n * IMG + i] != pl_test_byte(idx, 1u << 20) % 10;
    if (wrong)
      printf("  sample %llu (row %u): %d wrong bytes\n",
             (unsigned long long)idx, i, wrong);
    bad += wrong;
  }
  return bad;
}

/* Truncates one of the two files to `to` bytes after the first batch. */
static void shrink_direct(int workers, int cut_images, long to) {
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
  const char *cut = cut_images ? img : lbl;
  CHECK(truncate(cut, to) == 0);
  int ok = 0, io = 0;
  for (int k = 0; k < 2 * N / BS; k++) {
    pl_status s = pl_loader_next(ld, &b, &err);
    if (s == PL_OK) {
      CHECK(check_batch(b, host) == 0);
      pl_batch_release(b, NULL);
      ok++;
    } else if (s == PL_IO) {
      CHECK_MSG(&err, "the file changed while it was being read");
      CHECK_MSG(&err, cut);
      io++;
    } else {
      CHECK(s == PL_END_OF_EPOCH);
    }
  }
  printf("workers %d, %s cut to %ld bytes: %d batches exact, %d failed "
         "with PL_IO\n",
         workers, cut_images ? "images" : "labels", to, ok, io);
  CHECK(io > 0); /* every sample past the cut is in some later batch */
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
  for (int w = 0; w <= 2; w += 2) {
    shrink_direct(w, 1, 4096);    /* the direct field's file */
    shrink_direct(w, 1, 1 << 20); /* inside a large folio, if any */
    shrink_direct(w, 0, 0);       /* the gathered field's (one page) */
  }
  return pl_test_finish("test_gpu_shrink");
}
#endif
