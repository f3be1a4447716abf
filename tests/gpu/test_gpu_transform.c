/* The transform kernels (src/backend/cuda/transform.cu) against the host
 * reference (src/data/transform.c), byte for byte, for every combination:
 * output dtype (uint8, float32, bfloat16, float16) x input layout (CHW,
 * HWC) x output layout (CHW, HWC) x crop (none; pad 4 to the same size;
 * pad 3 to an odd size) x flip (none, p = 0.5, p = 1) on 3- and 1-channel
 * images, shapes whose rows are and are not multiples of 8 elements;
 * labels of every integer dtype widened to int64. Then the loader: a CUDA
 * loader with the CIFAR recipe delivers exactly the CPU loader's bytes,
 * with whole-batch and chunked copies, 0 and 3 workers, and in direct mode. Exits 77 without CUDA or a GPU. */
#include "testutil.h"

#ifndef PL_HAVE_CUDA
int main(void) {
  printf("test_gpu_transform: built without CUDA, skipped\n");
  return 77;
}
#else

#include "backend/cuda/transform_cuda.h"

#include <cuda_runtime.h>
#include <stdlib.h>

static pl_transform xf(pl_transform_kind k) {
  pl_transform t;
  pl_transform_init(&t, k);
  return t;
}

static pl_field image_field(int hwc, int c, int h, int w) {
  pl_field f;
  memset(&f, 0, sizeof f);
  snprintf(f.name, sizeof f.name, "image");
  f.dtype = PL_UINT8;
  f.ndim = 3;
  int64_t chw[3] = {c, h, w}, hw_c[3] = {h, w, c};
  memcpy(f.shape, hwc ? hw_c : chw, sizeof chw);
  return f;
}

/* Runs field 0 of plan p over n samples on both sides; 0: equal. */
static int compare(const pl_xform_plan *p, uint32_t n, const char *what) {
  const pl_xform_field *f = &p->f[0];
  uint64_t in_bytes = n * f->in_bytes, out_bytes = n * f->out_bytes;
  uint8_t *in = malloc(in_bytes), *want = malloc(out_bytes), *got = malloc(out_bytes);
  pl_xform_params *pr = calloc(n * (size_t)(p->nparams + 1), sizeof *pr);
  for (uint64_t j = 0; j < in_bytes; j++)
    in[j] = pl_test_byte(j / 977, j);
  for (uint32_t i = 0; i < n; i++) {
    pl_xform_draw(p, 5, 1, i, pr + (size_t)i * p->nparams);
    pl_xform_apply(p, f, pr + (size_t)i * p->nparams, in + i * f->in_bytes,
                   want + i * f->out_bytes);
  }
  void *d_in = NULL, *d_out = NULL, *d_tab = NULL, *d_pr = NULL;
  cudaMalloc(&d_in, in_bytes);
  cudaMalloc(&d_out, out_bytes);
  cudaMalloc(&d_tab, p->table_bytes ? p->table_bytes : 1);
  cudaMalloc(&d_pr, n * sizeof *pr * (p->nparams + 1));
  cudaMemcpy(d_in, in, in_bytes, cudaMemcpyHostToDevice);
  if (p->table_bytes)
    cudaMemcpy(d_tab, p->table, p->table_bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(d_pr, pr, n * sizeof *pr * (p->nparams + 1), cudaMemcpyHostToDevice);
  cudaMemset(d_out, 0xAB, out_bytes);
  cudaError_t rc = pl_cuda_xform_field(f, d_tab, d_in, d_out, d_pr, p->nparams,
                                       n, NULL);
  if (rc == cudaSuccess)
    rc = cudaDeviceSynchronize();
  if (rc == cudaSuccess)
    rc = cudaMemcpy(got, d_out, out_bytes, cudaMemcpyDeviceToHost);
  int bad = rc != cudaSuccess || memcmp(got, want, out_bytes) != 0;
  if (rc != cudaSuccess)
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
  for (uint64_t j = 0; rc == cudaSuccess && bad && j < out_bytes; j++)
    if (got[j] != want[j]) {
      fprintf(stderr, "%s: first difference at byte %llu of %llu: %u != %u\n",
              what, (unsigned long long)j, (unsigned long long)out_bytes,
              got[j], want[j]);
      break;
    }
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_tab);
  cudaFree(d_pr);
  free(in);
  free(want);
  free(got);
  free(pr);
  return bad;
}

static void test_kernels(void) {
  const pl_dtype outs[4] = {PL_UINT8, PL_FLOAT32, PL_BFLOAT16, PL_FLOAT16};
  const int dims[3][3] = {{3, 32, 32}, {3, 13, 21}, {1, 9, 7}};
  int cases = 0;
  for (int d = 0; d < 3; d++)
    for (int o = 0; o < 4; o++)
      for (int ih = 0; ih < 2; ih++)
        for (int oh = 0; oh < 2; oh++)
          for (int crop = 0; crop < 3; crop++)
            for (int flip = 0; flip < 3; flip++) {
              pl_field f = image_field(ih, dims[d][0], dims[d][1], dims[d][2]);
              pl_transform t[5];
              int n = 0;
              if (crop) {
                t[n] = xf(PL_TRANSFORM_RANDOM_CROP);
                t[n].padding = crop == 1 ? 4 : 3;
                if (crop == 2)
                  t[n].size[0] = dims[d][1] - 1, t[n].size[1] = dims[d][2] + 3;
                t[n++].fill = 9;
              }
              if (flip) {
                t[n] = xf(PL_TRANSFORM_RANDOM_HFLIP);
                t[n++].p = flip == 1 ? 0.5f : 1.0f;
              }
              if (outs[o] != PL_UINT8) {
                t[n] = xf(PL_TRANSFORM_CONVERT);
                t[n++].dtype = outs[o];
                t[n] = xf(PL_TRANSFORM_NORMALIZE);
                t[n].num_channels = dims[d][0];
                for (int c = 0; c < dims[d][0]; c++)
                  t[n].mean[c] = 0.1f * (float)(c + 4), t[n].std[c] = 0.2f + 0.03f * (float)c;
                n++;
              }
              t[n] = xf(PL_TRANSFORM_LAYOUT);
              t[n].input_layout = ih ? PL_LAYOUT_HWC : PL_LAYOUT_CHW;
              t[n++].layout = oh ? PL_LAYOUT_HWC : PL_LAYOUT_CHW;
              pl_xform_plan *p;
              pl_error err;
              CHECK_OK(pl_xform_plan_new(&f, 1, t, n, &p, &err), &err);
              if (!p)
                continue;
              char what[160];
              snprintf(what, sizeof what,
                       "%dx%dx%d %s in %s out %s crop %d flip %d",
                       dims[d][0], dims[d][1], dims[d][2],
                       pl_dtype_name(outs[o]), ih ? "HWC" : "CHW",
                       oh ? "HWC" : "CHW", crop, flip);
              CHECK(compare(p, 37, what) == 0);
              pl_xform_plan_free(p);
              cases++;
            }
  CHECK_EQ_U64(cases, 3 * 4 * 2 * 2 * 3 * 3);
}

static void test_widen(void) {
  const pl_dtype ints[7] = {PL_UINT8, PL_INT8, PL_UINT16, PL_INT16,
                            PL_UINT32, PL_INT32, PL_INT64};
  for (int i = 0; i < 7; i++) {
    pl_field f;
    memset(&f, 0, sizeof f);
    snprintf(f.name, sizeof f.name, "label");
    f.dtype = ints[i];
    f.ndim = 1;
    f.shape[0] = 3;
    pl_transform t = xf(PL_TRANSFORM_TO_INT64);
    pl_xform_plan *p;
    pl_error err;
    CHECK_OK(pl_xform_plan_new(&f, 1, &t, 1, &p, &err), &err);
    if (!p)
      continue;
    CHECK(compare(p, 1000, pl_dtype_name(ints[i])) == 0);
    pl_xform_plan_free(p);
  }
}

/* ---------------------------------------------------------------- loader */

enum { N = 203 };

static int get_item(void *user, uint64_t index, void *const *dst, char *msg,
                    size_t msg_len) {
  uint8_t *img = dst[0], *label = dst[1];
  for (int j = 0; j < 3 * 32 * 32; j++)
    img[j] = pl_test_byte(index, (uint64_t)j);
  *label = (uint8_t)(index % 10);
  return 0;
}

static void recipe(pl_transform *t, pl_dtype out, int hwc) {
  t[0] = xf(PL_TRANSFORM_RANDOM_CROP);
  t[0].padding = 4;
  t[1] = xf(PL_TRANSFORM_RANDOM_HFLIP);
  t[2] = xf(PL_TRANSFORM_CONVERT);
  t[2].dtype = out;
  t[3] = xf(PL_TRANSFORM_NORMALIZE);
  t[3].num_channels = 3;
  const float m[3] = {0.4914f, 0.4822f, 0.4465f}, s[3] = {0.247f, 0.243f, 0.261f};
  memcpy(t[3].mean, m, sizeof m);
  memcpy(t[3].std, s, sizeof s);
  t[4] = xf(PL_TRANSFORM_LAYOUT);
  t[4].layout = hwc ? PL_LAYOUT_HWC : PL_LAYOUT_CHW;
  t[5] = xf(PL_TRANSFORM_TO_INT64);
}

/* An epoch's delivered bytes (both fields, every batch). */
static uint8_t *epoch_bytes(pl_dataset *ds, pl_device_kind dev, int workers,
                            uint64_t chunk, pl_dtype out, int hwc,
                            uint64_t *len) {
  pl_transform t[6];
  recipe(t, out, hwc);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = dev;
  cfg.batch_size = 64;
  cfg.shuffle = 1;
  cfg.seed = 3;
  cfg.num_workers = workers;
  cfg.copy_chunk_bytes = chunk;
  cfg.transforms = t;
  cfg.num_transforms = 6;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  if (!ld)
    return NULL;
  CHECK_EQ_U64(pl_loader_device(ld, NULL), dev);
  uint64_t cap = 0, off = 0;
  uint8_t *all = NULL;
  pl_batch *b;
  for (int e = 0; e < 2; e++) /* two epochs: buffers are reused */
    while (pl_loader_next(ld, &b, &err) == PL_OK) {
      uint64_t n0 = pl_batch_bytes(b, 0), n1 = pl_batch_bytes(b, 1);
      const pl_field *fi = pl_batch_field(b, 0);
      CHECK_EQ_U64(fi->dtype, out);
      CHECK_EQ_U64(fi->shape[hwc ? 2 : 0], 3);
      CHECK_EQ_U64(pl_batch_field(b, 1)->dtype, PL_INT64);
      if (off + n0 + n1 > cap) {
        cap = 2 * (off + n0 + n1);
        all = realloc(all, cap);
      }
      CHECK_OK(pl_batch_copy_to_host(b, 0, 0, all + off, n0, &err), &err);
      CHECK_OK(pl_batch_copy_to_host(b, 1, 0, all + off + n0, n1, &err), &err);
      off += n0 + n1;
      pl_batch_release(b, NULL);
    }
  pl_loader_destroy(ld);
  *len = off;
  return all;
}

static void test_loader(void) {
  pl_field f[2];
  memset(f, 0, sizeof f);
  f[0] = image_field(0, 3, 32, 32);
  snprintf(f[1].name, sizeof f[1].name, "label");
  f[1].dtype = PL_UINT8;
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_from_callback(f, 2, N, get_item, NULL, NULL, &ds, &err), &err);
  if (!ds)
    return;
  const pl_dtype outs[3] = {PL_FLOAT32, PL_BFLOAT16, PL_FLOAT16};
  for (int o = 0; o < 3; o++)
    for (int hwc = 0; hwc < 2; hwc++) {
      uint64_t nref = 0;
      uint8_t *ref = epoch_bytes(ds, PL_DEVICE_CPU, 2, 0, outs[o], hwc, &nref);
      const uint64_t chunks[2] = {0, 3 * 3073};
      for (int ch = 0; ch < 2; ch++)
        for (int w = 0; w < 4; w += 3) {
          uint64_t n = 0;
          uint8_t *got = epoch_bytes(ds, PL_DEVICE_CUDA, w, chunks[ch], outs[o], hwc, &n);
          CHECK(ref && got && n == nref && !memcmp(ref, got, n));
          if (!(ref && got && n == nref && !memcmp(ref, got, n)))
            fprintf(stderr, "loader: %s hwc %d chunk %llu workers %d differs\n",
                    pl_dtype_name(outs[o]), hwc, (unsigned long long)chunks[ch], w);
          free(got);
        }
      free(ref);
    }
  pl_dataset_destroy(ds);
}

/* Direct mode (records, large images): the images copied in place, the
 * labels and the flip's draws gathered; normalize, layout and flip on the
 * device equal the CPU's bytes. */
static void test_direct(void) {
  enum { S = 160, REC = S * S * 3 + 1, M = 40 }; /* 75 KiB images: direct */
  const char *path = pl_test_path("images.rec");
  FILE *fp = fopen(path, "wb");
  for (int i = 0; fp && i < M; i++)
    for (int j = 0; j < REC; j++)
      fputc(pl_test_byte((uint64_t)i, (uint64_t)j), fp);
  if (fp)
    fclose(fp);
  pl_field f[2];
  memset(f, 0, sizeof f);
  f[0] = image_field(1, 3, S, S);
  snprintf(f[1].name, sizeof f[1].name, "label");
  f[1].dtype = PL_UINT8;
  const uint64_t offs[2] = {0, S * S * 3};
  pl_record_format fmt = {0, REC, 2, f, offs};
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_records(&fmt, &path, 1, &ds, &err), &err);
  if (!ds)
    return;
  pl_transform t[4] = {xf(PL_TRANSFORM_NORMALIZE), xf(PL_TRANSFORM_CONVERT),
                       xf(PL_TRANSFORM_LAYOUT), xf(PL_TRANSFORM_RANDOM_HFLIP)};
  t[0].num_channels = 1;
  t[0].mean[0] = 0.45f, t[0].std[0] = 0.225f;
  t[1].dtype = PL_BFLOAT16;
  uint8_t *res[2] = {NULL, NULL};
  uint64_t len[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    pl_loader_config cfg;
    pl_loader_config_init(&cfg);
    cfg.device = k ? PL_DEVICE_CUDA : PL_DEVICE_CPU;
    cfg.batch_size = 16;
    cfg.num_workers = 2;
    cfg.direct_copy = 1;
    cfg.transforms = t;
    cfg.num_transforms = 4; /* the flip's draws are gathered beside */
    pl_loader *ld = NULL;
    CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
    if (!ld)
      continue;
    res[k] = malloc((size_t)M * S * S * 3 * 2);
    pl_batch *b;
    while (pl_loader_next(ld, &b, &err) == PL_OK) {
      uint64_t n = pl_batch_bytes(b, 0);
      CHECK_OK(pl_batch_copy_to_host(b, 0, 0, res[k] + len[k], n, &err), &err);
      len[k] += n;
      pl_batch_release(b, NULL);
    }
    pl_loader_stats st;
    pl_loader_stats_get(ld, &st);
    if (k)
      CHECK(st.batches_direct > 0);
    pl_loader_destroy(ld);
  }
  CHECK(res[0] && res[1] && len[0] == len[1] && !memcmp(res[0], res[1], len[0]));
  free(res[0]);
  free(res[1]);
  pl_dataset_destroy(ds);
}

int main(void) {
  if (pl_cuda_device_count() < 1) {
    printf("test_gpu_transform: no usable CUDA device, skipped\n");
    return 77;
  }
  test_kernels();
  test_widen();
  test_loader();
  test_direct();
  return pl_test_finish("test_gpu_transform");
}
#endif
