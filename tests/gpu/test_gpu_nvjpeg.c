/* The GPU decode path on a GPU (nvJPEG through backend/cuda/): crops of
 * ImageNet-like JPEGs decoded by nvJPEG and resized on the device agree
 * with the CPU path's for the same (seed, epoch, index) draws to PSNR >= 35
 * dB each (the two IDCTs and resizes differ in rounding; the figure is
 * printed), in train (RandomResizedCrop + flip) and eval (Resize +
 * CenterCrop) mode; the images the GPU path does not take (progressive,
 * CMYK, PNG, a cut file) come back byte for byte the CPU's and are
 * counted; decode=auto through the loader's own setup opens nvJPEG and
 * splits; a CUDA loader's GPU crops are written in the batch's device
 * memory (counted, and the bytes copied are exactly the rest); odd
 * baseline-like JPEGs (no tables, SOF1, a scan per component) go to the
 * CPU; with nvJPEG's refusals made on purpose (the fault-injection build)
 * a refused batch is split until the image refused alone is found, and
 * only that one goes to the CPU, in a call and in a loader; the
 * warm-up of nvJPEG in the background (decode=auto's start): held, auto decodes every image on the CPU, exactly, and counts them;
 * let go, a call that waits is served and the loader's GPU path joins.
 * Exits 77 (skip) without CUDA, a usable GPU, the codecs, or
 * nvJPEG (the message says which; scripts/gpu/66-nvjpeg.sh installs the
 * nvidia-nvjpeg wheel and fails on a skip). */
#include "testutil.h"

#if !defined(PL_HAVE_CUDA) || !defined(PL_HAVE_JPEG)
#include <stdio.h>
int main(void) {
  printf("test_gpu_nvjpeg: built without CUDA or the codecs, skipped\n");
  return 77;
}
#else
#include "backend/nvjpeg.h"
#include "data/dataset.h"
#include "data/jpeg_probe.h"
#include "data/sources/images_gpu.h"
#include "image_fixture.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SIZE 224
#define IMG (3 * SIZE * SIZE)
#define NBASE 40 /* baseline JPEGs: the GPU's */
#define NALL (NBASE + 4)
#define MIN_PSNR 35.0

/* Files 0..NBASE-1 baseline (400-640 x 300-480, q90, 4:2:0), then one
 * progressive, one CMYK, one PNG and one baseline cut short. */
static const char *make_folder(void) {
  static char root[512];
  char dir[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("nvj"));
  CHECK(mkdir(root, 0755) == 0);
  snprintf(dir, sizeof dir, "%s/c0", root);
  CHECK(mkdir(dir, 0755) == 0);
  for (uint32_t i = 0; i < NALL; i++) {
    uint32_t w = 400 + (i * 53) % 241, h = 300 + (i * 37) % 181;
    int png = i == NBASE + 2;
    snprintf(p, sizeof p, "%s/i%02u.%s", dir, i, png ? "png" : "jpg");
    if (png)
      fx_write_png(p, i, w, h);
    else
      fx_write_jpeg(p, i, w, h,
                    i == NBASE       ? FX_JPEG_PROGRESSIVE
                    : i == NBASE + 1 ? FX_JPEG_CMYK
                                     : FX_JPEG_BASELINE);
    if (i == NBASE + 3) { /* cut: libjpeg fills the rest, nvJPEG must not
                             be given it */
      size_t n = 0;
      uint8_t *b = fx_read_file(p, &n);
      CHECK(b && pl_test_write_file(p, b, n * 2 / 3) == 0);
      free(b);
    }
  }
  return root;
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n) {
  double se = 0;
  for (size_t k = 0; k < n; k++) {
    double d = (double)a[k] - b[k];
    se += d * d;
  }
  return se == 0 ? INFINITY : 10 * log10(255.0 * 255.0 / (se / (double)n));
}

static pl_dataset *open_folder(const char *root, int train) {
  char spec[700];
  snprintf(spec, sizeof spec,
           "images:%s?size=%d&train=%d&crop_field=1&on_error=skip", root,
           SIZE, train);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  return ds;
}

/* One epoch (seed 7, epoch 1) of `ds` on `dev` with `workers` workers,
 * every sample compared with the CPU path's read of `plain`: exactly for
 * those of exact[] (NULL: index NBASE and on), else PSNR >= MIN_PSNR.
 * Returns the lowest PSNR; *t the loader's timings, *st its stats (NULL:
 * not wanted). */
static double run_ex(pl_dataset *plain, pl_dataset *ds, pl_device_kind dev,
                     int decode, int workers, const uint8_t *exact,
                     pl_loader_timings *t, pl_loader_stats *st) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 16;
  cfg.num_workers = workers;
  cfg.seed = 7, cfg.epoch = 1;
  cfg.device = dev;
  cfg.decode = decode;
  /* One explicit epoch in index order: the stream ends with it, so the
   * decode counters read after it count this epoch only (the loader's own
   * order goes on into the next epoch, as far as the prefetch depth). */
  cfg.explicit_order = 1;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  uint64_t n_all = pl_dataset_length(ds), nb = (n_all + 15) / 16;
  uint64_t order[NALL], starts[NALL / 16 + 2];
  CHECK(n_all <= NALL);
  for (uint64_t k = 0; k < n_all; k++)
    order[k] = k;
  for (uint64_t k = 0; k <= nb; k++)
    starts[k] = k * 16 < n_all ? k * 16 : n_all;
  if (ld)
    CHECK_OK(pl_loader_set_order(ld, 1, order, starts, nb, &err), &err);
  double worst = INFINITY;
  static uint8_t got[16 * IMG], want[IMG];
  pl_batch *b;
  while (ld && pl_loader_next(ld, &b, &err) == PL_OK) {
    uint32_t n = pl_batch_size(b);
    CHECK_OK(pl_batch_copy_to_host(b, 0, 0, got, (uint64_t)n * IMG, &err),
             &err);
    for (uint32_t i = 0; i < n; i++) {
      uint64_t idx = pl_batch_sample_index(b, i);
      int64_t label;
      int32_t crop[5];
      void *dst[3] = {want, &label, crop};
      pl_sample_ctx ctx = {7, 1, NULL};
      CHECK_OK(pl_dataset_read_sample(plain, idx, &ctx, dst, &err), &err);
      const uint8_t *g = got + (size_t)i * IMG;
      if (exact ? exact[idx] : idx >= NBASE) {
        CHECK(memcmp(g, want, IMG) == 0); /* the CPU path's own bytes */
        continue;
      }
      double p = psnr(g, want, IMG);
      if (p < MIN_PSNR)
        fprintf(stderr, "sample %llu: PSNR %.2f dB < %.0f\n",
                (unsigned long long)idx, p, MIN_PSNR);
      CHECK(p >= MIN_PSNR);
      worst = p < worst ? p : worst;
    }
    pl_batch_release(b, NULL);
  }
  pl_loader_timings_get(ld, t, sizeof *t);
  if (st)
    pl_loader_stats_get(ld, st);
  pl_loader_destroy(ld);
  return worst;
}

static double run(pl_dataset *plain, pl_dataset *ds, pl_device_kind dev,
                  int decode, pl_loader_timings *t) {
  return run_ex(plain, ds, dev, decode, 2, NULL, t, NULL);
}

static void gpu_mode(const char *root, int train, pl_device_kind dev,
                     const char *what) {
  pl_dataset *plain = open_folder(root, train);
  pl_gpu_decoder *dec = NULL;
  pl_error err;
  CHECK_OK(pl_nvjpeg_decoder_open(0, NULL, &dec, &err), &err);
  pl_dataset *view = NULL;
  CHECK_OK(pl_images_gpu_view(plain, dec, PL_DECODE_GPU, &view, &err), &err);
  pl_loader_timings t;
  pl_loader_stats st;
  double worst = run_ex(plain, view, dev, PL_DECODE_CPU, 2, NULL, &t, &st);
  printf("test_gpu_nvjpeg: %s on %s: lowest PSNR %.2f dB over %d GPU crops "
         "(%s), %llu of them written in the batch's device memory, %llu "
         "bytes copied\n",
         what, dev == PL_DEVICE_CUDA ? "cuda" : "cpu", worst, NBASE,
         dec->name, (unsigned long long)t.decode_gpu_in_place,
         (unsigned long long)st.bytes_copied);
  CHECK_EQ_U64(t.decode_gpu, 1);
  /* On the GPU's device, its crops are written in place: the copies are
   * every sample's label and crop field and the CPU's 4 images, exactly
   * (every batch held a GPU crop, so none was one whole span). */
  CHECK_EQ_U64(t.decode_gpu_in_place, dev == PL_DEVICE_CUDA ? NBASE : 0);
  if (dev == PL_DEVICE_CUDA)
    CHECK_EQ_U64(st.bytes_copied,
                 NALL * pl_dataset_sample_bytes(plain) - (uint64_t)NBASE * IMG);
  CHECK_EQ_U64(t.decode_gpu_images, NBASE);
  CHECK_EQ_U64(t.decode_not_gpu, 4); /* progressive, CMYK, PNG, cut */
  CHECK_EQ_U64(t.decode_gpu_failed, 0);
  CHECK_EQ_U64(t.decode_cpu_images, 4);
  pl_dataset_destroy(view);
  pl_dataset_destroy(plain);
}

static void auto_mode(const char *root) {
  pl_dataset *plain = open_folder(root, 1);
  pl_loader_timings t;
  double worst = run(plain, plain, PL_DEVICE_CUDA, PL_DECODE_AUTO, &t);
  printf("test_gpu_nvjpeg: decode=auto: %llu GPU, %llu CPU images (%llu "
         "while nvJPEG started), share %.2f, lowest GPU PSNR %.2f dB\n",
         (unsigned long long)t.decode_gpu_images,
         (unsigned long long)t.decode_cpu_images,
         (unsigned long long)t.decode_gpu_warming, t.decode_gpu_share, worst);
  CHECK_EQ_U64(t.decode_gpu, 1);
  CHECK_EQ_U64(t.decode_gpu_images + t.decode_cpu_images, NALL);
  /* The GPU took its share, or was offered it while nvJPEG started in
   * the background (the epoch may end first; warm_up shows it joining). */
  CHECK(t.decode_gpu_images + t.decode_gpu_warming > 0);
  CHECK_EQ_U64(t.decode_not_gpu, 4);
  pl_dataset_destroy(plain);
}

/* The warm-up thread waits here until the test lets it go. */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
} gate;

static void gate_pass(void *arg) {
  gate *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->open)
    pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* One whole image of the folder decoded through dec, waiting for it. */
static void decode_waiting(pl_gpu_decoder *dec, const char *root) {
  char p[700];
  snprintf(p, sizeof p, "%s/c0/i00.jpg", root);
  size_t len = 0;
  uint8_t *data = fx_read_file(p, &len);
  CHECK(data != NULL);
  pl_jpeg_info info;
  pl_jpeg_probe(data, len, &info);
  uint8_t *dst = calloc(1, IMG);
  double w = info.width, h = info.height;
  pl_gpu_job job = {data, len, info.width, info.height, 0, 0, info.width,
                    info.height, 0, 0, w, h, 0, dst, NULL, 0};
  void *ticket = NULL;
  double done_at = 0;
  pl_error err;
  CHECK_OK(dec->begin(dec, &job, 1, SIZE, 1, NULL, &ticket, &err), &err);
  CHECK(ticket != NULL);
  if (ticket)
    CHECK_OK(dec->finish(dec, ticket, &done_at, &err), &err);
  CHECK(!job.failed);
  size_t lit = 0; /* a synthetic image, resized whole: not black */
  for (size_t k = 0; k < IMG; k++)
    lit += dst[k] > 16;
  CHECK(lit > IMG / 4);
  free(dst), free(data);
}

static void warm_up(const char *root) {
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  pl_nvjpeg_open_opts o = {0};
  o.contexts = 3;
  o.background = 1;
  o.before_warm = gate_pass;
  o.before_warm_arg = &g;
  pl_gpu_decoder *dec = NULL;
  pl_error err;
  CHECK_OK(pl_nvjpeg_decoder_open(0, &o, &dec, &err), &err);
  if (!dec)
    return;
  CHECK(strstr(dec->name, "starting") != NULL);
  pl_dataset *plain = open_folder(root, 1), *view = NULL;
  CHECK_OK(pl_images_gpu_view(plain, dec, PL_DECODE_AUTO, &view, &err), &err);
  /* Held: every batch to the CPU, its exact bytes (run compares). */
  pl_loader_timings t;
  run(plain, view, PL_DEVICE_CUDA, PL_DECODE_CPU, &t);
  printf("test_gpu_nvjpeg: nvJPEG held at its start: %llu GPU, %llu CPU "
         "images, %llu of them the GPU's share\n",
         (unsigned long long)t.decode_gpu_images,
         (unsigned long long)t.decode_cpu_images,
         (unsigned long long)t.decode_gpu_warming);
  CHECK_EQ_U64(t.decode_gpu, 1);
  CHECK_EQ_U64(t.decode_gpu_images, 0);
  CHECK_EQ_U64(t.decode_cpu_images, NALL);
  CHECK(t.decode_gpu_warming > 0);
  CHECK_EQ_U64(t.decode_gpu_failed, 0);
  /* Let go: a call that waits is served once a context is made, and a
   * free one is then there for the loader's next epoch. */
  gate_open(&g);
  decode_waiting(dec, root);
  double worst = run(plain, view, PL_DEVICE_CUDA, PL_DECODE_CPU, &t);
  printf("test_gpu_nvjpeg: nvJPEG up: %llu GPU, %llu CPU images in all, "
         "lowest GPU PSNR %.2f dB\n",
         (unsigned long long)t.decode_gpu_images,
         (unsigned long long)t.decode_cpu_images, worst);
  CHECK(t.decode_gpu_images > 0);
  CHECK_EQ_U64(t.decode_gpu_failed, 0);
  pl_dataset_destroy(view); /* the decoder with it, warm-up or not */
  pl_dataset_destroy(plain);
}

#define NODD 32    /* the folder of odd JPEGs: its files */
#define ODD_EXT 5    /* extended sequential (SOF1, 16-bit tables) */
#define ODD_SCANS 19 /* sequential in three scans, not interleaved */
#define NO_DQT 11    /* no quantization tables (libjpeg fails: replaced) */
#define NO_DHT 23    /* no Huffman tables (libjpeg takes the standard ones) */

/* JPEGs the probe sends to the CPU though they are baseline-like: no
 * tables (nvJPEG, alone, refused both; in a batch beside others, with
 * CUDA 13's libnvjpeg, it decoded one of them, with another image's
 * tables it seems), SOF1, a scan per component. They come back the CPU
 * path's bytes, counted as not for the GPU; the rest of their batches is
 * the GPU's. */
static void odd_files(void) {
  static char root[512];
  char dir[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("nvj_odd"));
  CHECK(mkdir(root, 0755) == 0);
  snprintf(dir, sizeof dir, "%s/c0", root);
  CHECK(mkdir(dir, 0755) == 0);
  uint8_t exact[NODD] = {0};
  for (uint32_t i = 0; i < NODD; i++) {
    uint32_t w = 400 + (i * 53) % 241, h = 300 + (i * 37) % 181;
    snprintf(p, sizeof p, "%s/i%02u.jpg", dir, i);
    fx_write_jpeg(p, i, w, h,
                  i == ODD_EXT     ? FX_JPEG_EXTENDED
                  : i == ODD_SCANS ? FX_JPEG_SCANS
                                   : FX_JPEG_BASELINE);
    exact[i] = i == ODD_EXT || i == ODD_SCANS || i == NO_DQT || i == NO_DHT;
    if (i == NO_DQT || i == NO_DHT) {
      size_t n = 0, m = 0;
      uint8_t *b = fx_read_file(p, &n);
      uint8_t *o = b ? fx_jpeg_without(b, n, i == NO_DQT ? 0xDB : 0xC4, &m)
                     : NULL;
      CHECK(o && m < n && pl_test_write_file(p, o, m) == 0);
      free(b), free(o);
    }
  }
  pl_gpu_decoder *dec = NULL;
  pl_error err;
  CHECK_OK(pl_nvjpeg_decoder_open(0, NULL, &dec, &err), &err);
  if (!dec)
    return;
  pl_dataset *plain = open_folder(root, 1), *view = NULL;
  CHECK_OK(pl_images_gpu_view(plain, dec, PL_DECODE_GPU, &view, &err), &err);
  pl_loader_timings t;
  double worst =
      run_ex(plain, view, PL_DEVICE_CUDA, PL_DECODE_CPU, 2, exact, &t, NULL);
  printf("test_gpu_nvjpeg: odd JPEGs: %llu GPU images, %llu not for the "
         "GPU, %llu refused, lowest PSNR %.2f dB\n",
         (unsigned long long)t.decode_gpu_images,
         (unsigned long long)t.decode_not_gpu,
         (unsigned long long)t.decode_gpu_failed, worst);
  CHECK_EQ_U64(t.decode_not_gpu, 4);
  CHECK_EQ_U64(t.decode_gpu_failed, 0);
  CHECK_EQ_U64(t.decode_gpu_images, NODD - 4);
  pl_dataset_destroy(view);
  pl_dataset_destroy(plain);
}

#ifdef PL_FAULT_INJECTION
/* The refusals a split needs, made on purpose (the fault-injection
 * build): with ROI decode a batch of 16 meets the ROI call, the whole
 * batch's, then those of the halves holding image 0 (8, 4, 2, 1): 6
 * refusals leave image 0 refused alone, and only it. Without ROI decode
 * one call less. */
static long refusals_for_image_0(const pl_gpu_decoder *dec) {
  return strstr(dec->name, "ROI") ? 6 : 5;
}

/* The split itself, with nvJPEG's refusals made on purpose: 16 images in
 * one call, its first batched decodes refused (the ROI one where the
 * decoder has ROI decode, the whole batch's, then the halves holding
 * image 0: at 6 with ROI, image 0 alone too). Every image is decoded and
 * agrees with the same call unrefused, but image 0 when it was refused
 * alone: that one only fails. */
static void split_on_purpose(const char *root) {
  enum { N = 16 };
  pl_gpu_decoder *dec = NULL;
  pl_error err;
  CHECK_OK(pl_nvjpeg_decoder_open(0, NULL, &dec, &err), &err);
  if (!dec)
    return;
  uint8_t *data[N], *want = calloc(N, IMG), *got = calloc(N, IMG);
  size_t len[N];
  pl_gpu_job jobs[N];
  char p[700];
  for (int i = 0; i < N; i++) {
    snprintf(p, sizeof p, "%s/c0/i%02d.jpg", root, i);
    data[i] = fx_read_file(p, &len[i]);
    CHECK(data[i] != NULL);
  }
  static const long counts[4] = {0, 2, 4, 6};
  const long no_roi = 6 - refusals_for_image_0(dec); /* one call less */
  for (int r = 0; r < 4; r++) {
    uint8_t *out = r ? got : want;
    for (int i = 0; i < N; i++) {
      pl_jpeg_info info;
      pl_jpeg_probe(data[i], len[i], &info);
      double w = info.width, h = info.height;
      jobs[i] = (pl_gpu_job){data[i], len[i], info.width, info.height, 0, 0,
                             info.width, info.height, 0, 0, w, h, 0,
                             out + (size_t)i * IMG, NULL, 0};
    }
    memset(out, 0, (size_t)N * IMG);
    pl_fault_arm(PL_FAULT_NVJPEG_REFUSE, 0, r ? counts[r] - no_roi : 0);
    void *ticket = NULL;
    double done_at = 0;
    CHECK_OK(dec->begin(dec, jobs, N, SIZE, 1, NULL, &ticket, &err), &err);
    if (ticket)
      CHECK_OK(dec->finish(dec, ticket, &done_at, &err), &err);
    pl_fault_reset();
    int failed = 0;
    double worst = INFINITY;
    for (int i = 0; i < N; i++) {
      failed += jobs[i].failed;
      if (r && !jobs[i].failed) {
        double q = psnr(got + (size_t)i * IMG, want + (size_t)i * IMG, IMG);
        CHECK(q >= MIN_PSNR);
        worst = q < worst ? q : worst;
      }
    }
    printf("test_gpu_nvjpeg: %ld batched decodes refused on purpose: %d of "
           "%d images refused, the rest %.2f dB or more from the call "
           "unrefused\n",
           counts[r], failed, N, worst);
    CHECK_EQ_U64(failed, counts[r] >= 6);
    CHECK(!jobs[0].failed || counts[r] >= 6);
  }
  for (int i = 0; i < N; i++)
    free(data[i]);
  free(want), free(got);
  dec->destroy(dec);
}

/* The folder's train crops (*plain, the CPU path) and a view of it with
 * nvJPEG in mode gpu (*view, which owns the decoder returned); NULL where
 * the decoder did not open (the check says why). */
static const pl_gpu_decoder *gpu_view_of(const char *root, pl_dataset **plain,
                                         pl_dataset **view) {
  pl_gpu_decoder *dec = NULL;
  pl_error err;
  *plain = open_folder(root, 1), *view = NULL;
  CHECK_OK(pl_nvjpeg_decoder_open(0, NULL, &dec, &err), &err);
  if (dec)
    CHECK_OK(pl_images_gpu_view(*plain, dec, PL_DECODE_GPU, view, &err),
             &err);
  if (!*view)
    pl_dataset_destroy(*plain);
  return *view ? dec : NULL;
}

/* The same through a loader (no workers: batches decoded in order): its
 * first batch's image 0 refused alone comes back the CPU path's bytes,
 * copied from staging where the GPU's crops beside it were written in
 * the batch's device memory; the counts say so, and so do the bytes
 * copied. */
static void split_in_a_loader(const char *root) {
  pl_dataset *plain = NULL, *view = NULL;
  const pl_gpu_decoder *dec = gpu_view_of(root, &plain, &view);
  if (!dec)
    return;
  uint8_t exact[NALL] = {1}; /* image 0, and the 4 not for the GPU */
  for (int i = NBASE; i < NALL; i++)
    exact[i] = 1;
  pl_fault_arm(PL_FAULT_NVJPEG_REFUSE, 0, refusals_for_image_0(dec));
  pl_loader_timings t;
  pl_loader_stats st;
  double worst =
      run_ex(plain, view, PL_DEVICE_CUDA, PL_DECODE_CPU, 0, exact, &t, &st);
  pl_fault_reset();
  printf("test_gpu_nvjpeg: image 0 refused on purpose in a loader: %llu GPU "
         "images (%llu in place), %llu refused, lowest PSNR %.2f dB\n",
         (unsigned long long)t.decode_gpu_images,
         (unsigned long long)t.decode_gpu_in_place,
         (unsigned long long)t.decode_gpu_failed, worst);
  CHECK_EQ_U64(t.decode_gpu_failed, 1);
  CHECK_EQ_U64(t.decode_gpu_images, NBASE - 1);
  CHECK_EQ_U64(t.decode_gpu_in_place, NBASE - 1);
  CHECK_EQ_U64(t.decode_not_gpu, 4);
  CHECK_EQ_U64(st.bytes_copied, NALL * pl_dataset_sample_bytes(plain) -
                                    (uint64_t)(NBASE - 1) * IMG);
  pl_dataset_destroy(view);
  pl_dataset_destroy(plain);
}

/* nvJPEG failing its first batch, on purpose (EXECUTION_FAILED, as of a
 * kernel or memory; with ROI decode the ROI call and the whole-image one
 * after it), through a loader: no refusal, so no split. The GPU path is
 * turned off naming the cause, that batch's 16 GPU images are counted
 * failed, and every sample comes back the CPU path's bytes. */
static void failure_in_a_loader(const char *root) {
  pl_dataset *plain = NULL, *view = NULL;
  const pl_gpu_decoder *dec = gpu_view_of(root, &plain, &view);
  if (!dec)
    return;
  long calls = strstr(dec->name, "ROI") ? 2 : 1;
  uint8_t exact[NALL];
  memset(exact, 1, sizeof exact);
  pl_fault_arm(PL_FAULT_NVJPEG_FAIL, 0, calls);
  pl_loader_timings t;
  double worst =
      run_ex(plain, view, PL_DEVICE_CUDA, PL_DECODE_CPU, 0, exact, &t, NULL);
  pl_fault_reset();
  char why[256] = "";
  int off = pl_images_gpu_off(view, why, sizeof why);
  printf("test_gpu_nvjpeg: nvJPEG failing on purpose in a loader: %llu GPU "
         "images, %llu failed, the GPU path off (%s), lowest PSNR %.2f dB\n",
         (unsigned long long)t.decode_gpu_images,
         (unsigned long long)t.decode_gpu_failed, why, worst);
  CHECK(off);
  CHECK(strstr(why, "NVJPEG_STATUS_EXECUTION_FAILED") != NULL);
  CHECK_EQ_U64(t.decode_gpu_failed, 16);
  CHECK_EQ_U64(t.decode_gpu_images, 0);
  pl_dataset_destroy(view);
  pl_dataset_destroy(plain);
}
#endif

int main(void) {
  if (pl_cuda_device_count() < 1) {
    printf("test_gpu_nvjpeg: no usable GPU, skipped\n");
    return 77;
  }
  pl_gpu_decoder *dec = NULL;
  pl_error err;
  if (pl_nvjpeg_decoder_open(0, NULL, &dec, &err) != PL_OK) {
    printf("test_gpu_nvjpeg: skipped: %s\n", err.message);
    return 77;
  }
  printf("test_gpu_nvjpeg: %s (from %s)\n", dec->name,
         getenv("PL_NVJPEG_LIB") ? getenv("PL_NVJPEG_LIB") : "the library path");
  dec->destroy(dec);
  const char *root = make_folder();
  gpu_mode(root, 1, PL_DEVICE_CPU, "train crops + flips");
  gpu_mode(root, 1, PL_DEVICE_CUDA, "train crops + flips");
  gpu_mode(root, 0, PL_DEVICE_CUDA, "eval resize + center crop");
  auto_mode(root);
  odd_files();
#ifdef PL_FAULT_INJECTION
  split_on_purpose(root);
  split_in_a_loader(root);
  failure_in_a_loader(root);
#endif
  warm_up(root);
  return pl_test_finish("test_gpu_nvjpeg");
}
#endif
