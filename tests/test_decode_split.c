/* The GPU decode path's logic, with no GPU: the split rule
 * (data/decode_split.h), the JPEG header probe (data/jpeg_probe.h), the
 * image folder's GPU view (data/sources/images_gpu.h) driven through a
 * loader by a stand-in decoder that "decodes" every image to one byte
 * value, the report's decode line, and decode=gpu / auto where the GPU
 * path cannot open (this machine: no CUDA device, or a build without
 * CUDA). The nvJPEG decoder itself is tested in tests/gpu/test_gpu_nvjpeg.c. */
#include "testutil.h"

#include "backend/backend.h"
#include "data/dataset.h"
#include "data/decode_split.h"
#include "data/jpeg_probe.h"
#include "data/sources/images_gpu.h"
#include "loader/report.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- rule */

static void test_split_rule(void) {
  pl_decode_split s;
  pl_split_init(&s, PL_DECODE_CPU);
  CHECK_EQ_U64(pl_split_gpu_count(&s, 10), 0);
  pl_split_init(&s, PL_DECODE_GPU);
  CHECK_EQ_U64(pl_split_gpu_count(&s, 10), 10);
  pl_split_observe(&s, 0, 0, 10, 1000000, 0, 0);
  CHECK_EQ_U64(pl_split_gpu_count(&s, 10), 10); /* gpu: pinned at 1 */

  pl_split_init(&s, PL_DECODE_AUTO);
  CHECK_EQ_U64(pl_split_gpu_count(&s, 10), 5); /* starts even */
  CHECK_EQ_U64(pl_split_gpu_count(&s, 7), 4);  /* 3.5 rounds up */
  /* CPU 1 ms an image, GPU 0.25 ms: the rule's share is 1 / 1.25 = 0.8
   * (52428 of 65536); a quarter of the way from 32768 is 37683. */
  pl_split_observe(&s, 5, 5000000, 5, 1250000, 0, 0);
  CHECK_EQ_U64(atomic_load(&s.share), 37683);
  /* A GPU far faster: the share climbs to its cap, 31/32. */
  for (int i = 0; i < 100; i++)
    pl_split_observe(&s, 1, 1000000000, 100, 1000, 0, 0);
  CHECK_EQ_U64(atomic_load(&s.share), 65536 - 2048);
  /* Then far slower: down to 1/32, never 0 (the GPU stays measured). */
  for (int i = 0; i < 100; i++)
    pl_split_observe(&s, 100, 1000, 1, 1000000000, 0, 0);
  CHECK_EQ_U64(atomic_load(&s.share), 2048);
  CHECK_EQ_U64(pl_split_gpu_count(&s, 64), 2);
  pl_split_count_not_gpu(&s, 3);
  pl_split_count_failed(&s, 2);
  pl_split_turn_off(&s, "cudaStreamSynchronize: an illegal memory access");
  pl_split_turn_off(&s, "second"); /* the first message is kept */
  CHECK_EQ_U64(pl_split_gpu_count(&s, 64), 0);
  pl_decode_counts c;
  pl_split_counts(&s, &c);
  CHECK(c.gpu_off == 1);
  CHECK(!strcmp(c.off_why, "cudaStreamSynchronize: an illegal memory access"));
  CHECK_EQ_U64(c.not_gpu, 3);
  CHECK_EQ_U64(c.gpu_failed, 2);
  CHECK_EQ_U64(c.cpu_images, 5 + 100 + 100 * 100);
  CHECK_EQ_U64(c.gpu_images, 5 + 100 * 100 + 100);
}

/* The rule against a model of the two paths: a worker's n images, the CPU
 * c s an image, the GPU's call L + k p s for k images (a fixed part: the
 * call, its queue behind other workers). Fed the GPU path's own time, the
 * share settles where both halves end together, (n - k) c = L + k p,
 * k / n = (n c - L) / (n (c + p)). */
static void test_split_settles(void) {
  const uint32_t n = 256;
  const double c = 2e-3, L = 20e-3, p = 0.5e-3;
  const double want = (n * c - L) / (n * (c + p)); /* 0.76875 */
  pl_decode_split s;
  pl_split_init(&s, PL_DECODE_AUTO);
  for (int i = 0; i < 200; i++) {
    uint32_t k = pl_split_gpu_count(&s, n);
    pl_split_observe(&s, n - k, (uint64_t)((n - k) * c * 1e9), k,
                     (uint64_t)((L + k * p) * 1e9), 0, 0);
  }
  double got = atomic_load(&s.share) / (double)PL_SPLIT_ONE;
  CHECK(fabs(got - want) < 0.01);
  uint32_t k = pl_split_gpu_count(&s, n);
  CHECK(fabs((n - k) * c - (L + k * p)) < 4 * (c + p)); /* within 4 images */
}

/* The same with part of the GPU's time inside begin, q s an image, while
 * the worker's own share waits (nvJPEG's host part): the worker's time is
 * k q + max((n - k) c, L + k (p - q)), least where the two halves after
 * begin end together, k / n = (n c - L) / (n (c + p - q)). The rule that
 * ignored q settled at 0.77 (0.88 here), each batch 0.13 s where 0.11
 * would do. Then a begin dearer than the CPU's own decode (q > c): the
 * CPU alone is fastest, the share goes to its floor. */
static void test_split_settles_with_a_blocking_begin(void) {
  const uint32_t n = 256;
  const double c = 2e-3, L = 20e-3, p = 1e-3, q = 0.6e-3;
  const double want = (n * c - L) / (n * (c + p - q)); /* 0.80078 */
  pl_decode_split s;
  pl_split_init(&s, PL_DECODE_AUTO);
  for (int i = 0; i < 200; i++) {
    uint32_t k = pl_split_gpu_count(&s, n);
    pl_split_observe(&s, n - k, (uint64_t)((n - k) * c * 1e9), k,
                     (uint64_t)((L + k * p) * 1e9), (uint64_t)(k * q * 1e9),
                     0);
  }
  double got = atomic_load(&s.share) / (double)PL_SPLIT_ONE;
  CHECK(fabs(got - want) < 0.01);
  pl_decode_counts cs;
  pl_split_counts(&s, &cs);
  CHECK(cs.gpu_begin_s > 0 && cs.gpu_begin_s < cs.gpu_s);
  CHECK(fabs(cs.gpu_begin_s / cs.gpu_s - q / (p + L / (want * n))) < 0.02);
  CHECK_EQ_U64(cs.ahead, 0);

  pl_split_init(&s, PL_DECODE_AUTO);
  for (int i = 0; i < 60; i++) {
    uint32_t k = pl_split_gpu_count(&s, n);
    pl_split_observe(&s, n - k, (uint64_t)((n - k) * c * 1e9), k,
                     (uint64_t)(k * 2.5e-3 * 1e9), (uint64_t)(k * 2.2e-3 * 1e9),
                     0);
  }
  CHECK_EQ_U64(atomic_load(&s.share), 2048);
}

/* A loader ahead of its consumer needs no speed: auto's share goes to its
 * floor (the GPU kept for the consumer), and comes back to the rule's once
 * the consumer waits again. */
static void test_split_leans_to_the_cpu_when_ahead(void) {
  const uint32_t never = UINT32_MAX; /* the consumer has not waited */
  CHECK(!pl_split_ahead(0, 0, never) && !pl_split_ahead(0, 4, never));
  /* One batch ready is what a starving consumer leaves behind a worker
   * that just published (one worker, depth 4): never ahead. */
  CHECK(!pl_split_ahead(1, 1, never) && !pl_split_ahead(1, 4, never) &&
        !pl_split_ahead(1, 2, never));
  CHECK(pl_split_ahead(2, 4, never) && pl_split_ahead(2, 1, never) &&
        !pl_split_ahead(2, 5, never));
  /* Depth 32: more than 8 ready is ahead. */
  CHECK(!pl_split_ahead(8, 32, never) && pl_split_ahead(9, 32, never));
  /* But not while the consumer waited in its last `depth` batches: a
   * burst after one slow batch, not a lead. */
  CHECK(!pl_split_ahead(20, 32, 0) && !pl_split_ahead(20, 32, 32));
  CHECK(pl_split_ahead(20, 32, 33) && !pl_split_ahead(4, 4, 4) &&
        pl_split_ahead(4, 4, 5));
  pl_decode_split s;
  pl_split_init(&s, PL_DECODE_AUTO);
  /* A GPU 4x faster (the rule's share 0.8) while the loader is ahead. */
  for (int i = 0; i < 60; i++)
    pl_split_observe(&s, 10, 10000000, 10, 2500000, 0, 1);
  CHECK_EQ_U64(atomic_load(&s.share), 2048); /* 1/32: the floor */
  for (int i = 0; i < 60; i++)
    pl_split_observe(&s, 10, 10000000, 10, 2500000, 0, 0);
  CHECK(fabs(atomic_load(&s.share) / (double)PL_SPLIT_ONE - 0.8) < 0.01);
  pl_decode_counts cs;
  pl_split_counts(&s, &cs);
  CHECK_EQ_U64(cs.ahead, 60); /* the batches that leaned, counted */
  /* Ahead before any GPU rate is known: the floor too. */
  pl_split_init(&s, PL_DECODE_AUTO);
  pl_split_observe(&s, 10, 10000000, 0, 0, 0, 1);
  CHECK(atomic_load(&s.share) < PL_SPLIT_ONE / 2);
  /* gpu stays pinned. */
  pl_split_init(&s, PL_DECODE_GPU);
  pl_split_observe(&s, 10, 10000000, 10, 2500000, 0, 1);
  CHECK_EQ_U64(atomic_load(&s.share), PL_SPLIT_ONE);
}

#ifndef PL_HAVE_JPEG
int main(void) {
  test_split_rule();
  test_split_settles();
  test_split_settles_with_a_blocking_begin();
  test_split_leans_to_the_cpu_when_ahead();
  printf("test_decode_split: built without the image codecs: only the split "
         "rule checked\n");
  return pl_test_finish("test_decode_split");
}
#else
#include "image_fixture.h"

/* ---------------------------------------------------------------- probe */

static void probe_file(const char *path, pl_jpeg_info *info) {
  size_t n = 0;
  uint8_t *b = fx_read_file(path, &n);
  CHECK(b != NULL);
  pl_jpeg_probe(b, n, info);
  free(b);
}

/* The first segment of `marker` in JPEG b[0..n) before its scan: the
 * offset of its marker's FF. */
static size_t segment_at(const uint8_t *b, size_t n, uint8_t marker) {
  size_t i = 2;
  while (i + 4 < n && b[i + 1] != marker && b[i + 1] != 0xDA)
    i += 2 + ((size_t)b[i + 2] << 8 | b[i + 3]);
  CHECK(i + 4 < n && b[i + 1] == marker);
  return i;
}

/* A table id past 3 (a DQT's Tq, a DHT's Th, the frame's or the scan's),
 * a DQT precision or a DHT class past 1 is a broken file: never read as
 * the id it masks to (id 4 as 0), which would send a file whose table 0
 * is undefined to nvJPEG. Each byte is set, probed and put back. */
static void probe_bad_ids(uint8_t *b, size_t n) {
  size_t dqt = segment_at(b, n, 0xDB) + 4, dht = segment_at(b, n, 0xC4) + 4;
  size_t sof = segment_at(b, n, 0xC0) + 4, sos = segment_at(b, n, 0xDA) + 4;
  CHECK(b[dqt] == 0x00 && b[dht] == 0x00); /* 8-bit table 0; DC table 0 */
  const struct {
    size_t at;
    uint8_t value;
  } cases[] = {{dqt, 0x04},         /* DQT Tq 4 (table 0 then undefined) */
               {dqt, 0x20},         /* DQT precision 2 */
               {dht, 0x04},         /* DHT Th 4 */
               {dht, 0x20},         /* DHT class 2 */
               {sof + 6 + 2, 0x04}, /* Y names quantization table 4 */
               {sos + 2, 0x40},     /* Y's scan names DC table 4 */
               {sos + 2, 0x04}};    /* and AC table 4 */
  pl_jpeg_info in;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    uint8_t was = b[cases[k].at];
    b[cases[k].at] = cases[k].value;
    pl_jpeg_probe(b, n, &in);
    CHECK(in.kind == PL_JPEG_BASELINE && !in.tables && !pl_jpeg_gpu_ok(&in));
    b[cases[k].at] = was;
  }
  pl_jpeg_probe(b, n, &in);
  CHECK(in.tables && pl_jpeg_gpu_ok(&in));
}

static void test_probe(void) {
  static const struct {
    fx_jpeg_kind kind;
    pl_jpeg_kind want;
    int comps, gpu_ok;
  } cases[] = {{FX_JPEG_BASELINE, PL_JPEG_BASELINE, 3, 1},
               {FX_JPEG_PROGRESSIVE, PL_JPEG_PROGRESSIVE, 3, 0},
               {FX_JPEG_GRAY, PL_JPEG_BASELINE, 1, 0},
               {FX_JPEG_CMYK, PL_JPEG_BASELINE, 4, 0},
               /* SOF1, and a scan per component: the CPU's */
               {FX_JPEG_EXTENDED, PL_JPEG_BASELINE, 3, 0},
               {FX_JPEG_SCANS, PL_JPEG_BASELINE, 3, 0}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const char *p = pl_test_path("probe.jpg");
    fx_write_jpeg(p, 1, 123, 45, cases[k].kind);
    pl_jpeg_info in;
    probe_file(p, &in);
    CHECK_EQ_U64(in.kind, cases[k].want);
    CHECK_EQ_U64(in.width, 123);
    CHECK_EQ_U64(in.height, 45);
    CHECK_EQ_U64(in.components, cases[k].comps);
    CHECK_EQ_U64(pl_jpeg_gpu_ok(&in), cases[k].gpu_ok);
    CHECK_EQ_U64(in.extended, cases[k].kind == FX_JPEG_EXTENDED);
    CHECK_EQ_U64(in.scan_components,
                 cases[k].kind == FX_JPEG_SCANS ? 1 : cases[k].comps);
    /* (a progressive file's first scan, of DC only, names AC tables it
     * has not defined yet) */
    CHECK_EQ_U64(in.tables, cases[k].kind != FX_JPEG_PROGRESSIVE);
  }
  /* libjpeg's default for RGB is 4:2:0: luma 2x2, chroma 1x1. */
  const char *p = pl_test_path("probe.jpg");
  fx_write_jpeg(p, 1, 64, 64, FX_JPEG_BASELINE);
  size_t n = 0;
  uint8_t *b = fx_read_file(p, &n);
  pl_jpeg_info in;
  pl_jpeg_probe(b, n, &in);
  CHECK(in.h[0] == 2 && in.v[0] == 2 && in.h[1] == 1 && in.v[2] == 1);
  CHECK(in.has_end && pl_jpeg_gpu_ok(&in));
  pl_jpeg_probe(b, n - 100, &in); /* cut in its scan: not the GPU's */
  CHECK(in.kind == PL_JPEG_BASELINE && !in.has_end && !pl_jpeg_gpu_ok(&in));
  pl_jpeg_probe(b, 20, &in); /* cut before its frame header */
  CHECK(in.kind == PL_JPEG_NOT && in.tables == 0);
  /* A table missing, or named and not defined: baseline, not the GPU's
   * (nvJPEG in a batch may decode it with another image's tables). */
  pl_jpeg_probe(b, n, &in);
  CHECK(in.tables == 1);
  static const uint8_t markers[2] = {0xDB, 0xC4};
  for (int k = 0; k < 2; k++) {
    size_t m = 0;
    uint8_t *w = fx_jpeg_without(b, n, markers[k], &m);
    pl_jpeg_probe(w, m, &in);
    CHECK(in.kind == PL_JPEG_BASELINE && in.has_end && !in.tables &&
          !pl_jpeg_gpu_ok(&in));
    free(w);
  }
  /* the frame's and the scan's headers */
  size_t sof = segment_at(b, n, 0xC0), sos = segment_at(b, n, 0xDA);
  b[sof + 4 + 6 + 2] = 3; /* Y names quantization table 3 */
  pl_jpeg_probe(b, n, &in);
  CHECK(!in.tables && !pl_jpeg_gpu_ok(&in));
  b[sof + 4 + 6 + 2] = 0;
  b[sos + 4 + 2] = 0x30; /* Y's scan names DC table 3 */
  pl_jpeg_probe(b, n, &in);
  CHECK(!in.tables && !pl_jpeg_gpu_ok(&in));
  b[sos + 4 + 2] = 0x03; /* and AC table 3 */
  pl_jpeg_probe(b, n, &in);
  CHECK(!in.tables);
  b[sos + 4 + 2] = 0x00;
  pl_jpeg_probe(b, n, &in);
  CHECK(in.tables && pl_jpeg_gpu_ok(&in));
  probe_bad_ids(b, n);
  b[0] = 0x89; /* not SOI */
  pl_jpeg_probe(b, n, &in);
  CHECK_EQ_U64(in.kind, PL_JPEG_NOT);
  free(b);
  const char *q = pl_test_path("probe.png");
  fx_write_png(q, 1, 20, 10);
  probe_file(q, &in);
  CHECK_EQ_U64(in.kind, PL_JPEG_NOT);
}

/* ---------------------------------------------------------------- view */

#define SIZE 24
#define IMG (3 * SIZE * SIZE)
#define NIMG 12
#define FAKE_BYTE 0xAB

/* Image i of the folder: 0..7 baseline, 8 progressive, 9 gray, 10 CMYK,
 * 11 PNG. Baseline ones are the GPU's. */
static const char *make_folder(void) {
  static char root[512];
  char dir[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("split_imgs"));
  CHECK(mkdir(root, 0755) == 0);
  snprintf(dir, sizeof dir, "%s/c0", root);
  CHECK(mkdir(dir, 0755) == 0);
  for (uint32_t i = 0; i < NIMG; i++) {
    uint32_t w = 40 + (i * 37) % 90, h = 30 + (i * 53) % 70;
    snprintf(p, sizeof p, "%s/i%02u.%s", dir, i, i == 11 ? "png" : "jpg");
    if (i == 11)
      fx_write_png(p, i, w, h);
    else
      fx_write_jpeg(p, i, w, h,
                    i < 8 ? FX_JPEG_BASELINE
                    : i == 8 ? FX_JPEG_PROGRESSIVE
                    : i == 9 ? FX_JPEG_GRAY
                             : FX_JPEG_CMYK);
  }
  return root;
}

/* A stand-in decoder: every job's crop becomes FAKE_BYTE, except job
 * `fail_job` of the whole run (refused: CPU), and begin fails when
 * fail_begin is set. It keeps each job's box, flip and destination. */
typedef struct fake_gpu {
  pl_gpu_decoder pub;
  int fail_begin, fail_job, destroyed;
  int starting; /* begin without wait finds it starting: no ticket */
  int waits, no_waits; /* begin calls with and without wait */
  int done_at_begin; /* finish says the work was done when begin returned */
  double began;
  void *events[PL_DEVICE_WAITS]; /* the last begin's (NULL: none given) */
  int jobs_seen, call_first, call_n; /* jobs begun; the last call's */
  int njobs;             /* kept below: the first 64 jobs */
  pl_gpu_job jobs[64];
} fake_gpu;

static pl_status fake_begin(pl_gpu_decoder *d, pl_gpu_job *jobs, uint32_t n,
                            uint32_t size, int wait, void *const *events,
                            void **ticket, pl_error *err) {
  fake_gpu *f = (fake_gpu *)d;
  CHECK_EQ_U64(size, SIZE);
  *ticket = NULL;
  f->waits += wait, f->no_waits += !wait;
  for (int w = 0; w < PL_DEVICE_WAITS; w++)
    f->events[w] = events ? events[w] : NULL;
  if (f->fail_begin)
    return pl_errorf(err, PL_CUDA, "cudaMalloc: out of memory (fake)");
  if (f->starting && !wait) {
    for (uint32_t j = 0; j < n; j++)
      memset(jobs[j].dst, FAKE_BYTE, IMG); /* not the GPU's yet: dropped */
    return PL_OK;
  }
  for (uint32_t j = 0; j < n && f->njobs < 64; j++)
    f->jobs[f->njobs++] = jobs[j];
  f->call_first = f->jobs_seen, f->call_n = n;
  f->jobs_seen += n;
  *ticket = jobs;
  f->began = pl_now();
  return PL_OK;
}

static pl_status fake_finish(pl_gpu_decoder *d, void *ticket, double *done_at,
                             pl_error *err) {
  fake_gpu *f = (fake_gpu *)d;
  (void)err;
  *done_at = f->done_at_begin ? f->began : 0;
  pl_gpu_job *jobs = ticket; /* this call's: job numbers call_first.. */
  for (int j = 0; j < f->call_n; j++) {
    jobs[j].failed = f->call_first + j == f->fail_job;
    if (!jobs[j].failed) /* "device" memory is host memory here */
      memset(jobs[j].ddst ? jobs[j].ddst : jobs[j].dst, FAKE_BYTE, IMG);
  }
  return PL_OK;
}

static void fake_destroy(pl_gpu_decoder *d) { ((fake_gpu *)d)->destroyed = 1; }

static void fake_init(fake_gpu *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->pub.name, sizeof f->pub.name, "fake");
  f->pub.begin = fake_begin;
  f->pub.finish = fake_finish;
  f->pub.destroy = fake_destroy;
  f->fail_job = -1;
}

static pl_dataset *open_folder(const char *root, int train) {
  char spec[700];
  snprintf(spec, sizeof spec, "images:%s?size=%d&crop_field=1&train=%d", root,
           SIZE, train);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  return ds;
}

/* The CPU path's sample i (seed 0, epoch 0: the loader's below). */
static void cpu_sample(pl_dataset *ds, uint64_t i, uint8_t *img,
                       int32_t *crop) {
  int64_t label;
  void *dst[3] = {img, &label, crop};
  pl_sample_ctx ctx = {0, 0, NULL};
  pl_error err;
  CHECK_OK(pl_dataset_read_sample(ds, i, &ctx, dst, &err), &err);
}

typedef struct run_result {
  int gpu[NIMG]; /* sample came back FAKE_BYTE */
  pl_loader_timings t;
  char warn[512]; /* the last WARN the loader logged */
} run_result;

static void keep_warn(void *user, pl_log_level level, const char *msg) {
  run_result *r = user; /* num_workers 0: the consumer's thread alone */
  if (level == PL_LOG_WARN)
    snprintf(r->warn, sizeof r->warn, "%s", msg);
}

/* One epoch of one batch of all NIMG samples through the view. */
static void run_view(pl_dataset *plain, fake_gpu *f, int mode,
                     run_result *r) {
  pl_dataset *view = NULL;
  pl_error err;
  memset(r, 0, sizeof *r);
  CHECK_OK(pl_images_gpu_view(plain, &f->pub, mode, &view, &err), &err);
  if (!view)
    return;
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = NIMG;
  cfg.device = PL_DEVICE_CPU;
  cfg.log = keep_warn;
  cfg.log_user = r;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(view, &cfg, &ld, &err), &err);
  pl_batch *b = NULL;
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  const uint8_t *img = b ? pl_batch_data(b, 0) : NULL;
  const int32_t *crop = b ? pl_batch_data(b, 2) : NULL;
  for (uint32_t i = 0; b && i < NIMG; i++) {
    uint8_t want[IMG];
    int32_t want_crop[5];
    cpu_sample(plain, i, want, want_crop);
    const uint8_t *got = img + (size_t)i * IMG;
    int all_fake = 1;
    for (int k = 0; k < IMG; k++)
      all_fake &= got[k] == FAKE_BYTE;
    r->gpu[i] = all_fake;
    if (!all_fake)
      CHECK(memcmp(got, want, IMG) == 0); /* CPU path: its exact bytes */
    CHECK(memcmp(crop + 5 * i, want_crop, sizeof want_crop) == 0);
  }
  /* Each job's box and flip are the CPU path's draws (the crop field:
   * top, left, height, width, flip), and it wrote its own sample. */
  for (int j = 0; b && j < f->njobs; j++) {
    const pl_gpu_job *job = &f->jobs[j];
    uint64_t i = (uint64_t)(job->dst - img) / IMG;
    CHECK(i < NIMG && job->dst == img + i * IMG);
    const int32_t *c = crop + 5 * i;
    if (i < NIMG) {
      /* eval: the box is fractional, the field its rounding */
      CHECK(rint(job->x0) == c[1] && rint(job->y0) == c[0]);
      CHECK(rint(job->x1 - job->x0) == c[3] && rint(job->y1 - job->y0) == c[2]);
      CHECK(job->flip == c[4]);
    }
  }
  if (b)
    pl_batch_release(b, NULL);
  pl_loader_timings_get(ld, &r->t, sizeof r->t);
  pl_loader_destroy(ld);
  CHECK(!f->destroyed); /* the view holds it */
  pl_dataset_destroy(view);
  CHECK(f->destroyed);
}

static int count(const int *v) {
  int n = 0;
  for (int i = 0; i < NIMG; i++)
    n += v[i];
  return n;
}

static void test_view(const char *root) {
  pl_dataset *plain = open_folder(root, 1);
  fake_gpu f;
  run_result r;
  /* gpu: every baseline JPEG (0..7) to the GPU but the refused one. */
  fake_init(&f);
  f.fail_job = 2;
  run_view(plain, &f, PL_DECODE_GPU, &r);
  CHECK_EQ_U64(f.njobs, 8);
  CHECK_EQ_U64(count(r.gpu), 7);
  for (int i = 8; i < NIMG; i++)
    CHECK(!r.gpu[i]); /* progressive, gray, CMYK, PNG: the CPU's */
  CHECK_EQ_U64(r.t.decode_gpu, 1);
  CHECK_EQ_U64(r.t.decode_gpu_images, 7);
  CHECK_EQ_U64(r.t.decode_cpu_images, 5); /* 4 not for the GPU + 1 refused */
  CHECK_EQ_U64(r.t.decode_not_gpu, 4);
  CHECK_EQ_U64(r.t.decode_gpu_failed, 1);
  CHECK(r.t.decode_gpu_share == 1.0);
  /* auto: half of the 8 at first, the first 4 of them. */
  fake_init(&f);
  run_view(plain, &f, PL_DECODE_AUTO, &r);
  CHECK_EQ_U64(f.njobs, 4);
  CHECK_EQ_U64(count(r.gpu), 4);
  for (int i = 0; i < 4; i++)
    CHECK(r.gpu[i]);
  CHECK_EQ_U64(r.t.decode_cpu_images, 8);
  CHECK_EQ_U64(r.t.decode_gpu_warming, 0);
  CHECK(r.warn[0] == '\0'); /* no GPU error: nothing to say */
  CHECK(f.no_waits == 1 && f.waits == 0); /* auto never waits */
  /* auto while the decoder starts: the 4 it would have taken decode on
   * the CPU, byte for byte the CPU path's (whatever begin wrote into
   * their slots), counted, and nothing is refused or off. */
  fake_init(&f);
  f.starting = 1;
  run_view(plain, &f, PL_DECODE_AUTO, &r);
  CHECK_EQ_U64(f.njobs, 0);
  CHECK_EQ_U64(count(r.gpu), 0);
  CHECK_EQ_U64(r.t.decode_gpu, 1);
  CHECK_EQ_U64(r.t.decode_gpu_images, 0);
  CHECK_EQ_U64(r.t.decode_cpu_images, NIMG);
  CHECK_EQ_U64(r.t.decode_gpu_warming, 4);
  CHECK_EQ_U64(r.t.decode_gpu_failed, 0);
  CHECK_EQ_U64(r.t.decode_not_gpu, 4);
  CHECK(r.warn[0] == '\0');
  /* gpu waits for it instead (the fake is ready when waited for). */
  fake_init(&f);
  f.starting = 1;
  run_view(plain, &f, PL_DECODE_GPU, &r);
  CHECK(f.waits == 1 && f.no_waits == 0);
  CHECK_EQ_U64(count(r.gpu), 8);
  CHECK_EQ_U64(r.t.decode_gpu_warming, 0);
  /* A decoder error: that batch on the CPU, the GPU path off after it. */
  fake_init(&f);
  f.fail_begin = 1;
  run_view(plain, &f, PL_DECODE_GPU, &r);
  CHECK_EQ_U64(count(r.gpu), 0);
  CHECK_EQ_U64(r.t.decode_gpu, 0);
  CHECK_EQ_U64(r.t.decode_gpu_failed, 8);
  CHECK(!strcmp(r.warn, "decode: the GPU path is off, decoding on the CPU "
                        "from now on: cudaMalloc: out of memory (fake)"));
  pl_dataset_destroy(plain);
  /* Eval mode: the box is the center crop's, the draws the CPU's. */
  plain = open_folder(root, 0);
  fake_init(&f);
  run_view(plain, &f, PL_DECODE_GPU, &r);
  CHECK_EQ_U64(count(r.gpu), 8);
  for (int j = 0; j < f.njobs; j++) {
    const pl_gpu_job *job = &f.jobs[j];
    /* The filter's window holds the box. */
    CHECK(job->rx <= job->x0 && job->x1 <= job->rx + job->rw);
    CHECK(job->ry <= job->y0 && job->y1 <= job->ry + job->rh);
    CHECK(job->rx + job->rw <= job->width && job->ry + job->rh <= job->height);
  }
  pl_dataset_destroy(plain);
}

static int no_abandon(const pl_batch_dst *dst) {
  (void)dst;
  return 0;
}

static void no_queue(const pl_batch_dst *dst) { (void)dst; }

/* One read_batch_device of all NIMG samples into stage (images), labels
 * and crops, with dev (NULL: none). */
static void read_into(pl_dataset *view, const pl_device_dst *dev,
                      uint8_t *stage, int64_t *labels, int32_t *crops) {
  void *base[3] = {stage, labels, crops};
  uint64_t off[3] = {0, 0, 0};
  pl_batch_dst dst = {3,    base, off,  NULL,       0,       -1, 0,
                      NULL, NULL, no_abandon, no_queue};
  pl_batch_info info = {0};
  info.depth = 2;
  uint64_t idx[NIMG];
  for (uint64_t i = 0; i < NIMG; i++)
    idx[i] = i;
  pl_error err;
  CHECK_OK(view->vt->read_batch_device(view, idx, NIMG, &info, &dst, dev,
                                       &err),
           &err);
}

/* Given the batch's device memory (pl_device_dst), the view has the GPU's
 * crops written there, marks them in written[] (field 0) and leaves
 * their staging alone; the CPU's samples (the refused one too) and every
 * label and crop field go to staging, the CPU path's bytes; the events
 * reach the decoder; the report counts them in place. A decoder on
 * another device gets staging, as without device memory. */
static void test_device_dst(const char *root) {
  pl_dataset *plain = open_folder(root, 1), *view = NULL;
  fake_gpu f;
  fake_init(&f);
  f.fail_job = 2;
  pl_error err;
  CHECK_OK(pl_images_gpu_view(plain, &f.pub, PL_DECODE_GPU, &view, &err),
           &err);
  static uint8_t stage[NIMG * IMG], device[NIMG * IMG];
  int64_t labels[NIMG];
  int32_t crops[NIMG * 5];
  uint8_t written[NIMG] = {0};
  void *dbase[3] = {device, NULL, NULL};
  int ev0, ev1;
  pl_device_dst dev = {0, dbase, {&ev0, &ev1}, written};
  memset(stage, 0xEE, sizeof stage);
  memset(device, 0xDD, sizeof device);
  read_into(view, &dev, stage, labels, crops);
  CHECK(f.events[0] == &ev0 && f.events[1] == &ev1);
  for (uint32_t i = 0; i < NIMG; i++) {
    uint8_t want[IMG];
    int32_t want_crop[5];
    cpu_sample(plain, i, want, want_crop);
    int gpu = i < 8 && i != 2; /* baseline, not the refused one */
    CHECK_EQ_U64(written[i], gpu);
    const uint8_t *d = device + (size_t)i * IMG, *st = stage + (size_t)i * IMG;
    int d_fake = 1, d_untouched = 1, st_untouched = 1;
    for (int k = 0; k < IMG; k++) {
      d_fake &= d[k] == FAKE_BYTE;
      d_untouched &= d[k] == 0xDD;
      st_untouched &= st[k] == 0xEE;
    }
    CHECK(gpu ? d_fake && st_untouched : d_untouched);
    if (!gpu)
      CHECK(memcmp(st, want, IMG) == 0);
    CHECK(memcmp(crops + 5 * i, want_crop, sizeof want_crop) == 0);
    CHECK_EQ_U64(labels[i], 0);
  }
  pl_decode_counts c;
  CHECK(pl_images_decode_counts(view, &c));
  CHECK_EQ_U64(c.gpu_images, 7);
  CHECK_EQ_U64(c.in_place, 7);
  CHECK_EQ_U64(c.gpu_failed, 1);
  /* The decoder on device 1, the batch on 0: staging. */
  f.pub.device = 1;
  memset(written, 0, sizeof written);
  memset(device, 0xDD, sizeof device);
  f.jobs_seen = f.njobs = 0;
  read_into(view, &dev, stage, labels, crops);
  for (uint32_t i = 0; i < NIMG; i++) {
    CHECK_EQ_U64(written[i], 0);
    CHECK(device[(size_t)i * IMG] == 0xDD && device[(size_t)(i + 1) * IMG - 1] == 0xDD);
    if (i < 8 && i != 2)
      CHECK(stage[(size_t)i * IMG] == FAKE_BYTE);
  }
  CHECK(pl_images_decode_counts(view, &c));
  CHECK_EQ_U64(c.in_place, 7); /* unchanged */
  pl_dataset_destroy(view);
  pl_dataset_destroy(plain);
}

/* auto with a GPU whose work is done when begin returns, while the worker
 * still decodes its share: the share climbs batch after batch to its cap.
 * (Timed to the return of finish, the GPU looked exactly as slow as the
 * CPU share, every share looked balanced, and auto stayed at its start.) */
static void test_auto_follows_a_fast_gpu(const char *root) {
  pl_dataset *plain = open_folder(root, 1), *view = NULL;
  fake_gpu f;
  fake_init(&f);
  f.done_at_begin = 1;
  pl_error err;
  CHECK_OK(pl_images_gpu_view(plain, &f.pub, PL_DECODE_AUTO, &view, &err),
           &err);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = NIMG;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(view, &cfg, &ld, &err), &err);
  pl_loader_timings t;
  double share[13];
  for (int e = 0; e < 12 && ld; e++) {
    pl_loader_timings_get(ld, &t, sizeof t);
    share[e] = t.decode_gpu_share;
    pl_batch *b = NULL;
    CHECK_OK(pl_loader_next(ld, &b, &err), &err); /* the epoch's one batch */
    if (b)
      pl_batch_release(b, NULL);
    CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_END_OF_EPOCH, &err);
  }
  pl_loader_timings_get(ld, &t, sizeof t);
  share[12] = t.decode_gpu_share;
  CHECK(share[0] == 0.5); /* auto starts even */
  for (int e = 1; e <= 12; e++)
    CHECK(share[e] > share[e - 1] || share[e] == 31.0 / 32);
  CHECK(share[12] == 31.0 / 32); /* its cap: the CPU stays measured */
  CHECK_EQ_U64(t.decode_gpu_images + t.decode_cpu_images, 12 * NIMG);
  pl_loader_destroy(ld);
  pl_dataset_destroy(view);
  pl_dataset_destroy(plain);
}

/* ---------------------------------------------------------------- absent */

typedef struct notes {
  pthread_mutex_t mu;
  char decode[512];
} notes;

static void keep_decode_note(void *user, pl_log_level level, const char *msg) {
  notes *n = user;
  (void)level;
  pthread_mutex_lock(&n->mu);
  if (!strncmp(msg, "decode=", 7))
    snprintf(n->decode, sizeof n->decode, "%s", msg);
  pthread_mutex_unlock(&n->mu);
}

static void test_absent(const char *root) {
  pl_dataset *ds = open_folder(root, 1);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 4;
  cfg.device = PL_DEVICE_CPU;
  notes n = {PTHREAD_MUTEX_INITIALIZER, ""};
  cfg.log = keep_decode_note;
  cfg.log_user = &n;
  pl_error err;
  pl_loader *ld = NULL;
  const char *gpu_err = pl_backend_cuda_built()
                            ? "decode=gpu: GPU decode: no CUDA device"
                            : "decode=gpu: GPU decode: this build of "
                              "pinloader has no CUDA support";
  cfg.decode = PL_DECODE_GPU;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_UNSUPPORTED, &err);
  CHECK(!strncmp(err.message, gpu_err, strlen(gpu_err)));
  CHECK(ld == NULL);
  /* auto: the CPU alone, with a one-line notice, and the CPU's bytes. */
  cfg.decode = PL_DECODE_AUTO;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  const char *note = "decode=auto: decoding on the CPU only: ";
  CHECK(!strncmp(n.decode, note, strlen(note)));
  CHECK(strchr(n.decode, '\n') == NULL);
  pl_batch *b = NULL;
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  for (uint32_t i = 0; b && i < 4; i++) {
    uint8_t want[IMG];
    int32_t crop[5];
    cpu_sample(ds, i, want, crop);
    CHECK(!memcmp((uint8_t *)pl_batch_data(b, 0) + i * IMG, want, IMG));
  }
  if (b)
    pl_batch_release(b, NULL);
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK(t.decode_gpu == 0 && t.decode_cpu_images == 0);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
  /* Only image folders decode. */
  CHECK(pl_test_write_cifar(pl_test_path("c.bin"), 0, 4) == 0);
  char spec[600];
  snprintf(spec, sizeof spec, "cifar10:%s", pl_test_path("c.bin"));
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  cfg.decode = PL_DECODE_GPU;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK(!strcmp(err.message, "decode=gpu: only image folders decode on the "
                             "GPU (this dataset is 'records')"));

  cfg.decode = PL_DECODE_AUTO; /* nothing to decode: no notice, no error */
  n.decode[0] = '\0';
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  CHECK(n.decode[0] == '\0');
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* ---------------------------------------------------------------- report */

static void test_report_line(void) {
  pl_report_in in;
  memset(&in, 0, sizeof in);
  in.device = "cpu";
  in.batch_size = 256;
  pl_loader_timings *t = &in.t;
  t->wall_s = 10, t->batches = 100, t->samples = 25600, t->workers = 4;
  t->consumer_wait_s = 5, t->read_s = 36;
  t->decode_gpu = 1;
  t->decode_gpu_images = 15000, t->decode_cpu_images = 10600;
  t->decode_not_gpu = 500, t->decode_gpu_failed = 100;
  t->decode_gpu_warming = 40, t->decode_gpu_in_place = 14000;
  t->decode_cpu_s = 21, t->decode_gpu_s = 7.5, t->decode_gpu_share = 0.6;
  t->decode_gpu_begin_s = 3, t->decode_ahead_batches = 12;
  pl_analysis a;
  pl_report_analyze(&in, &a);
  const pl_finding *d = NULL;
  for (int i = 0; i < a.nfindings; i++)
    if (!strcmp(a.findings[i].stage, "decode"))
      d = &a.findings[i];
  CHECK(d != NULL);
  if (d)
    CHECK(!strcmp(d->text,
                  "59% of images decoded on the GPU (15000 GPU, 14000 of "
                  "them written in the batch's device memory; 10600 CPU; "
                  "share of GPU-able JPEGs now 60%; 500 images/s per worker "
                  "on the CPU path, 2000 per call on the GPU path, 40% of "
                  "its time in the call that queues it, the worker held; 12 "
                  "batches leaned to the CPU, the loader ahead; to the CPU: "
                  "500 not for the GPU, 100 refused by nvJPEG, 40 while "
                  "nvJPEG started)"));
}

int main(void) {
  test_split_rule();
  test_split_settles();
  test_split_settles_with_a_blocking_begin();
  test_split_leans_to_the_cpu_when_ahead();
  test_probe();
  const char *root = make_folder();
  test_view(root);
  test_device_dst(root);
  test_auto_follows_a_fast_gpu(root);
  if (pl_cuda_device_count() > 0)
    printf("test_decode_split: a CUDA device is present: decode=gpu's "
           "absent path not checked (tests/gpu/test_gpu_nvjpeg.c covers "
           "it)\n");
  else
    test_absent(root);
  test_report_line();
  return pl_test_finish("test_decode_split");
}
#endif
