/* The GPU path's resize arithmetic (backend/cuda/image_crop.cu), run on the
 * host (pl_crop_host: the kernel's per-pixel code), against the CPU path's
 * crops of the same draws: the region decoded as nvJPEG hands it (ROI: the
 * crop alone; or the whole image with the crop's offset, the fallback),
 * then resized and flipped, agrees to PSNR >= 40 dB with the CPU path's
 * (same decoder here, so what differs is the filter's rounding: float in
 * one pass against 14-bit fixed point in two). Then the same through the
 * image folder's GPU view with a host stand-in for nvJPEG (libjpeg's whole
 * image, the jobs laid out as nvjpeg_decode.c lays them out for a whole
 * decode): the jobs' boxes and windows, train and eval, give the CPU
 * path's crops. No GPU needed; a build without CUDA skips. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if !defined(PL_HAVE_CUDA) || !defined(PL_HAVE_JPEG)
int main(void) {
  printf("test_crop_math: built without CUDA or the codecs, skipped\n");
  return 77;
}
#else
#include "backend/cuda/image_crop_cuda.h"
#include "data/dataset.h"
#include "data/image_decode.h"
#include "data/sources/images_gpu.h"
#include "image_fixture.h"

#define SIZE 64
#define IMG (3 * SIZE * SIZE)
#define N 12

static void whole(void *user, uint32_t w, uint32_t h, uint32_t min_eighths,
                  pl_decode_plan *p) {
  (void)user, (void)min_eighths;
  *p = (pl_decode_plan){0, 0, w, h, 8};
}

/* The whole image as interleaved RGB (nvJPEG's RGBI), malloc'd. */
static uint8_t *decode_rgb(const char *path, uint32_t *w, uint32_t *h) {
  size_t n = 0;
  uint8_t *file = fx_read_file(path, &n);
  pl_scratch sc;
  memset(&sc, 0, sizeof sc);
  pl_decoded d;
  pl_error err;
  uint8_t *rgb = NULL;
  CHECK_OK(pl_image_decode(file, n, path, whole, NULL, &sc, &d, &err), &err);
  if (file && d.bx == 0 && d.by == 0) {
    *w = d.bw, *h = d.bh;
    rgb = malloc((size_t)d.bw * d.bh * 3);
    for (size_t k = 0; k < (size_t)d.bw * d.bh; k++)
      memcpy(rgb + 3 * k, d.rgbx + 4 * k, 3);
  }
  pl_scratch_release_all(&sc);
  free(file);
  return rgb;
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n) {
  double se = 0;
  for (size_t k = 0; k < n; k++)
    se += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
  return se == 0 ? INFINITY : 10 * log10(255.0 * 255.0 / (se / (double)n));
}

/* nvJPEG's part done by libjpeg, the rest as nvjpeg_decode.c's crop_all. */
static pl_status host_begin(pl_gpu_decoder *d, pl_gpu_job *jobs, uint32_t n,
                            uint32_t size, int wait, void *const *events,
                            void **ticket, pl_error *err) {
  (void)d, (void)err;
  CHECK(events == NULL); /* a CPU loader: no device memory */
  CHECK(wait); /* mode gpu */
  for (uint32_t k = 0; k < n; k++) {
    pl_gpu_job *j = &jobs[k];
    pl_scratch sc;
    memset(&sc, 0, sizeof sc);
    pl_decoded dec;
    pl_error e;
    j->failed = 1;
    if (pl_image_decode(j->data, j->len, "job", whole, NULL, &sc, &dec, &e) ==
            PL_OK &&
        dec.bw == j->width && dec.bh == j->height) {
      uint8_t *rgb = malloc((size_t)dec.bw * dec.bh * 3);
      for (size_t q = 0; rgb && q < (size_t)dec.bw * dec.bh; q++)
        memcpy(rgb + 3 * q, dec.rgbx + 4 * q, 3);
      pl_crop_job cj = {rgb, j->width * 3, (int32_t)j->rx, (int32_t)j->ry,
                        (int32_t)j->rw, (int32_t)j->rh,
                        (float)(j->x0 - j->rx), (float)(j->y0 - j->ry),
                        (float)(j->x1 - j->rx), (float)(j->y1 - j->ry),
                        j->flip, j->dst};
      if (rgb)
        pl_crop_host(&cj, 1, size);
      j->failed = !rgb;
      free(rgb);
    }
    pl_scratch_release_all(&sc);
  }
  *ticket = jobs;
  return PL_OK;
}

static pl_status host_finish(pl_gpu_decoder *d, void *t, double *done_at,
                             pl_error *err) {
  (void)d, (void)t, (void)err;
  *done_at = 0; /* unknown: the view times it to this return */
  return PL_OK; /* begin set failed */
}

static void host_destroy(pl_gpu_decoder *d) { (void)d; }

static void through_view(const char *root, int train) {
  char spec[800];
  snprintf(spec, sizeof spec, "images:%s?size=%d&dct_scaling=0&train=%d",
           root, SIZE, train);
  pl_dataset *ds = NULL, *view = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  pl_gpu_decoder dec = {.name = "host",
                        .begin = host_begin,
                        .finish = host_finish,
                        .destroy = host_destroy};
  CHECK_OK(pl_images_gpu_view(ds, &dec, PL_DECODE_GPU, &view, &err), &err);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 5;
  cfg.device = PL_DEVICE_CPU;
  cfg.seed = 3;
  cfg.shuffle = 1;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(view, &cfg, &ld, &err), &err);
  pl_batch *b;
  double worst = INFINITY;
  while (ld && pl_loader_next(ld, &b, &err) == PL_OK) {
    for (uint32_t i = 0; i < pl_batch_size(b); i++) {
      static uint8_t want[IMG];
      int64_t label;
      void *dst[2] = {want, &label};
      pl_sample_ctx ctx = {3, 0, NULL};
      CHECK_OK(pl_dataset_read_sample(ds, pl_batch_sample_index(b, i), &ctx,
                                      dst, &err),
               &err);
      double q = psnr((uint8_t *)pl_batch_data(b, 0) + (size_t)i * IMG, want,
                      IMG);
      CHECK(q >= 40);
      worst = q < worst ? q : worst;
    }
    pl_batch_release(b, NULL);
  }
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK_EQ_U64(t.decode_gpu_images, N);
  printf("test_crop_math: through the GPU view, %s: lowest PSNR %.2f dB\n",
         train ? "train" : "eval", worst);
  pl_loader_destroy(ld);
  pl_dataset_destroy(view);
  pl_dataset_destroy(ds);
}

int main(void) {
  char root[512], dir[600], p[700], spec[800];
  snprintf(root, sizeof root, "%s", pl_test_path("crops"));
  CHECK(mkdir(root, 0755) == 0);
  snprintf(dir, sizeof dir, "%s/c0", root);
  CHECK(mkdir(dir, 0755) == 0);
  for (uint32_t i = 0; i < N; i++) {
    snprintf(p, sizeof p, "%s/i%02u.jpg", dir, i);
    fx_write_jpeg(p, i, 90 + (i * 37) % 200, 70 + (i * 53) % 150,
                  FX_JPEG_BASELINE);
  }
  /* dct_scaling=0: the CPU path decodes at full size, as nvJPEG does. */
  snprintf(spec, sizeof spec, "images:%s?size=%d&crop_field=1&dct_scaling=0",
           root, SIZE);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  double worst = INFINITY;
  for (uint32_t i = 0; ds && i < N; i++) {
    static uint8_t want[IMG], roi[IMG], full[IMG];
    int64_t label;
    int32_t c[5];
    void *dst[3] = {want, &label, c};
    pl_sample_ctx ctx = {11, 2, NULL};
    CHECK_OK(pl_dataset_read_sample(ds, i, &ctx, dst, &err), &err);
    snprintf(p, sizeof p, "%s/i%02u.jpg", dir, i);
    uint32_t w = 0, h = 0;
    uint8_t *rgb = decode_rgb(p, &w, &h);
    if (!rgb)
      continue;
    int32_t top = c[0], left = c[1], ch = c[2], cw = c[3];
    /* ROI: the crop's pixels at the buffer's start, pitch the image's. */
    pl_crop_job jr = {rgb + ((size_t)top * w + left) * 3, w * 3, 0, 0, cw, ch,
                      0, 0, (float)cw, (float)ch, c[4], roi};
    /* Whole image: the window at the crop's offset. */
    pl_crop_job jf = {rgb, w * 3, left, top, cw, ch,
                      0, 0, (float)cw, (float)ch, c[4], full};
    pl_crop_host(&jr, 1, SIZE);
    pl_crop_host(&jf, 1, SIZE);
    CHECK(memcmp(roi, full, IMG) == 0);
    double q = psnr(roi, want, IMG);
    if (q < 40)
      fprintf(stderr, "image %u: PSNR %.2f dB\n", i, q);
    CHECK(q >= 40);
    worst = q < worst ? q : worst;
    free(rgb);
  }
  printf("test_crop_math: lowest PSNR %.2f dB over %d crops\n", worst, N);
  pl_dataset_destroy(ds);
  through_view(root, 1);
  through_view(root, 0);
  return pl_test_finish("test_crop_math");
}
#endif
