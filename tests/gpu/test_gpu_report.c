/* The report's copy-bound case on a real GPU: samples of 8 MiB that cost
 * nothing to read (the callback writes nothing), so the host-to-device
 * copy is all the work there is; the report must name the copy, and give
 * the link's measured rate. The consumer orders its stream by the batch's
 * event (no host wait), as a training step does. Exits 77 (skip) without
 * CUDA or a usable GPU. No time is asserted: the stage named is. */
#include "testutil.h"

#include <stdlib.h>

#ifndef PL_HAVE_CUDA
int main(void) {
  printf("test_gpu_report: built without CUDA, skipped\n");
  return 77;
}
#else

enum { SAMPLE_BYTES = 8 << 20 };

static int get_nothing(void *user, uint64_t index, void *const *dst,
                       char *msg, size_t msg_len) {
  return 0;
}

static char *report_of(pl_loader *ld, int flags) {
  size_t len = 0;
  pl_error err;
  CHECK_OK(pl_loader_report(ld, NULL, &len, flags, &err), &err);
  size_t cap = len + 1024;
  char *buf = malloc(cap);
  CHECK_OK(pl_loader_report(ld, buf, &cap, flags, &err), &err);
  return buf;
}

int main(void) {
  if (pl_cuda_device_count() < 1) {
    printf("test_gpu_report: no usable CUDA device, skipped\n");
    return 77;
  }
  pl_field f = {.name = "x", .dtype = PL_UINT8, .ndim = 1};
  f.shape[0] = SAMPLE_BYTES;
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_from_callback(&f, 1, 4096, get_nothing, NULL, NULL,
                                    &ds, &err),
           &err);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 8; /* 64 MiB batches */
  cfg.num_workers = 4;
  cfg.device = PL_DEVICE_CUDA;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  for (int i = 0; ld && i < 200; i++) {
    pl_batch *b;
    CHECK_OK(pl_loader_next(ld, &b, &err), &err);
    if (!b)
      break;
    CHECK_OK(pl_batch_wait_stream(b, NULL, &err), &err);
    pl_batch_release(b, NULL);
  }
  CHECK_OK(pl_loader_sync(ld, &err), &err);
  char *json = report_of(ld, PL_REPORT_JSON);
  CHECK(strncmp(json, "{\"bound\": \"copy\"", 16) == 0);
  char *text = report_of(ld, 0);
  printf("%s", text);
  CHECK(strstr(text, "of this link's measured") != NULL);
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK(t.link_bytes_per_s > 1e9 && t.copy_s > 0 && t.bytes_copied > 0);
  if (strncmp(json, "{\"bound\": \"copy\"", 16) != 0)
    printf("%s\n", json);
  free(json);
  free(text);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
  return pl_test_finish("test_gpu_report");
}
#endif
