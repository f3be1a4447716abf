/* Transforms on the host: the plan's checks and messages, the rounding to
 * bfloat16 / float16, the reference against values computed here by hand
 * (an independent implementation of the documented formulas), the random
 * draws, and the CPU loader delivering transformed batches that do not
 * depend on the number of workers. python/tests/test_transforms.py checks
 * the same against numpy; tests/gpu/test_gpu_transform.c the kernels
 * against this reference. */
#include "testutil.h"

#include "data/transform.h"

#include <math.h>
#include <stdlib.h>

static pl_field image_field(const char *name, int64_t a, int64_t b, int64_t c) {
  pl_field f;
  memset(&f, 0, sizeof f);
  snprintf(f.name, sizeof f.name, "%s", name);
  f.dtype = PL_UINT8;
  f.ndim = 3;
  f.shape[0] = a, f.shape[1] = b, f.shape[2] = c;
  return f;
}

static pl_field scalar_field(const char *name, pl_dtype t) {
  pl_field f;
  memset(&f, 0, sizeof f);
  snprintf(f.name, sizeof f.name, "%s", name);
  f.dtype = t;
  return f;
}

static uint32_t bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}

static float from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

static void test_rounding(void) {
  CHECK_EQ_U64(pl_f32_to_bf16(1.0f), 0x3f80);
  CHECK_EQ_U64(pl_f32_to_bf16(from_bits(0x3f808000)), 0x3f80); /* tie: even */
  CHECK_EQ_U64(pl_f32_to_bf16(from_bits(0x3f818000)), 0x3f82); /* tie: up */
  CHECK_EQ_U64(pl_f32_to_bf16(from_bits(0x3f808001)), 0x3f81);
  CHECK_EQ_U64(pl_f32_to_bf16(-2.0f), 0xc000);
  CHECK_EQ_U64(pl_f32_to_bf16(from_bits(0x7f7fffff)), 0x7f80); /* to inf */
  CHECK(pl_f32_to_bf16(NAN) & 0x7f && (pl_f32_to_bf16(NAN) & 0x7f80) == 0x7f80);
  CHECK_EQ_U64(pl_f32_to_f16(1.0f), 0x3c00);
  CHECK_EQ_U64(pl_f32_to_f16(-0.5f), 0xb800);
  CHECK_EQ_U64(pl_f32_to_f16(65504.0f), 0x7bff);
  CHECK_EQ_U64(pl_f32_to_f16(65519.0f), 0x7bff);
  CHECK_EQ_U64(pl_f32_to_f16(65520.0f), 0x7c00); /* rounds to infinity */
  CHECK_EQ_U64(pl_f32_to_f16(ldexpf(1, -24)), 0x0001); /* least subnormal */
  CHECK_EQ_U64(pl_f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie: even (0) */
  CHECK_EQ_U64(pl_f32_to_f16(ldexpf(3, -25)), 0x0002); /* tie: even (2) */
  CHECK_EQ_U64(pl_f32_to_f16(ldexpf(1, -14)), 0x0400); /* least normal */
  CHECK_EQ_U64(pl_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie: even */
  CHECK_EQ_U64(pl_f32_to_f16(1.0f + ldexpf(3, -11)), 0x3c02); /* tie: up */
  CHECK_EQ_U64(pl_f32_to_f16(INFINITY), 0x7c00);
  CHECK((pl_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (pl_f32_to_f16(NAN) & 0x3ff));
}

static pl_transform xf(pl_transform_kind k) {
  pl_transform t;
  pl_transform_init(&t, k);
  return t;
}

static void expect_plan_error(const pl_field *f, int nf, const pl_transform *t,
                              int n, const char *msg) {
  pl_xform_plan *p = (pl_xform_plan *)1;
  pl_error err;
  CHECK_STATUS(pl_xform_plan_new(f, nf, t, n, &p, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK(p == NULL);
  CHECK_MSG(&err, msg);
}

static void test_plan_errors(void) {
  pl_field f[3] = {image_field("image", 3, 8, 8), scalar_field("label", PL_UINT8),
                   scalar_field("w", PL_FLOAT32)};
  pl_transform t[2] = {xf(PL_TRANSFORM_RANDOM_CROP), xf(PL_TRANSFORM_RANDOM_CROP)};
  t[0].padding = 1;
  expect_plan_error(f, 3, t, 2, "transform 1 (RANDOM_CROP) on field 'image': given twice");
  t[0].size[0] = 11;
  expect_plan_error(f, 3, t, 1, "the crop is larger than the padded image");
  t[0] = xf(PL_TRANSFORM_RANDOM_HFLIP);
  t[0].field = "nope";
  expect_plan_error(f, 3, t, 1, "field 'nope': the dataset has no such field");
  t[0].field = "label";
  expect_plan_error(f, 3, t, 1, "image transforms need a [C,H,W], [H,W,C] or [H,W] field");
  t[0] = xf(PL_TRANSFORM_TO_INT64);
  t[0].field = "w";
  expect_plan_error(f, 3, t, 1, "not of an integer dtype");
  t[0] = xf(PL_TRANSFORM_NORMALIZE);
  t[0].num_channels = 2;
  t[0].std[0] = t[0].std[1] = 1;
  expect_plan_error(f, 3, t, 1, "num_channels is neither 1 nor the image's channel count");
  t[0].num_channels = 1;
  t[0].std[0] = 0;
  expect_plan_error(f, 3, t, 1, "a std is 0");
  t[0] = xf(PL_TRANSFORM_CONVERT);
  t[0].dtype = PL_INT32;
  expect_plan_error(f, 3, t, 1, "dtype is not float32, bfloat16 or float16");
  t[0] = xf(PL_TRANSFORM_RANDOM_HFLIP);
  t[0].p = 1.5f;
  expect_plan_error(f, 3, t, 1, "p is not in [0, 1]");
  t[0] = xf((pl_transform_kind)99);
  expect_plan_error(f, 3, t, 1, "transform 0: unknown kind 99");
  pl_xform_plan *p = (pl_xform_plan *)1;
  CHECK_OK(pl_xform_plan_new(f, 3, NULL, 0, &p, NULL), NULL);
  CHECK(p == NULL);
}

/* The documented float formula, written out again. */
static float expected_value(int v, float mean, float std) {
  volatile float x = (float)v / 255.0f;
  x = x - mean;
  return x / std;
}

/* A 2-channel 3x4 CHW image, pad 1, crop 3x4 at (oy, ox) = (2, 0), flipped:
 * the output's pixel (y, x) is input (y + 1, 3 - x - 1), 0 outside. */
static void test_reference_geometry(void) {
  pl_field f = image_field("image", 2, 3, 4);
  pl_transform t[2] = {xf(PL_TRANSFORM_RANDOM_CROP), xf(PL_TRANSFORM_RANDOM_HFLIP)};
  t[0].padding = 1;
  t[0].fill = 7;
  t[0].input_layout = PL_LAYOUT_CHW; /* AUTO would take [2,3,4] as HWC */
  pl_xform_plan *p;
  pl_error err;
  CHECK_OK(pl_xform_plan_new(&f, 1, t, 2, &p, &err), &err);
  if (!p)
    return;
  CHECK_EQ_U64(p->n, 1);
  CHECK_EQ_U64(p->nparams, 1);
  CHECK_EQ_U64(p->out_fields[0].dtype, PL_UINT8);
  CHECK_EQ_U64(p->out_fields[0].shape[0], 2);
  CHECK_EQ_U64(p->out_fields[0].shape[1], 3);
  CHECK_EQ_U64(p->out_fields[0].shape[2], 4);
  uint8_t in[24], out[24];
  for (int i = 0; i < 24; i++)
    in[i] = (uint8_t)(10 + i);
  pl_xform_params pr = {2, 0, 1, 0};
  pl_xform_apply(p, &p->f[0], &pr, in, out);
  for (int c = 0; c < 2; c++)
    for (int y = 0; y < 3; y++)
      for (int x = 0; x < 4; x++) {
        int sy = y + 2 - 1, sx = (4 - 1 - x) + 0 - 1;
        int want = sy < 0 || sy >= 3 || sx < 0 || sx >= 4 ? 7 : in[(c * 3 + sy) * 4 + sx];
        CHECK_EQ_U64(out[(c * 3 + y) * 4 + x], want);
      }
  pl_xform_plan_free(p);
}

/* HWC input, normalize, float32 and bfloat16, CHW and HWC outputs. */
static void test_reference_values(void) {
  pl_field f = image_field("image", 2, 2, 3); /* [H,W,C] by AUTO */
  const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, sd[3] = {0.247f, 0.243f, 0.261f};
  uint8_t in[12];
  for (int i = 0; i < 12; i++)
    in[i] = (uint8_t)(i * 23 + 1);
  for (int variant = 0; variant < 4; variant++) {
    pl_transform t[3] = {xf(PL_TRANSFORM_NORMALIZE), xf(PL_TRANSFORM_CONVERT),
                         xf(PL_TRANSFORM_LAYOUT)};
    t[0].num_channels = 3;
    memcpy(t[0].mean, mean, sizeof mean);
    memcpy(t[0].std, sd, sizeof sd);
    t[1].dtype = variant & 1 ? PL_BFLOAT16 : PL_FLOAT32;
    t[2].layout = variant & 2 ? PL_LAYOUT_HWC : PL_LAYOUT_CHW;
    pl_xform_plan *p;
    pl_error err;
    CHECK_OK(pl_xform_plan_new(&f, 1, t, 3, &p, &err), &err);
    if (!p)
      continue;
    CHECK_EQ_U64(p->nparams, 0);
    CHECK_EQ_U64(p->f[0].in_hwc, 1);
    CHECK_EQ_U64(p->out_fields[0].dtype, t[1].dtype);
    CHECK_EQ_U64(p->out_fields[0].shape[0], variant & 2 ? 2 : 3);
    uint8_t out[48];
    pl_xform_apply(p, &p->f[0], NULL, in, out);
    for (int y = 0; y < 2; y++)
      for (int x = 0; x < 2; x++)
        for (int c = 0; c < 3; c++) {
          float v = expected_value(in[(y * 2 + x) * 3 + c], mean[c], sd[c]);
          int e = variant & 2 ? (y * 2 + x) * 3 + c : (c * 2 + y) * 2 + x;
          if (variant & 1) {
            uint16_t h;
            memcpy(&h, out + 2 * e, 2);
            /* bfloat16: the float32 value's upper half, rounded */
            uint32_t u = bits(v), lo = u & 0xffff, hi = u >> 16;
            uint32_t want = lo > 0x8000 || (lo == 0x8000 && (hi & 1)) ? hi + 1 : hi;
            CHECK_EQ_U64(h, want);
          } else {
            uint32_t got;
            memcpy(&got, out + 4 * e, 4);
            CHECK_EQ_U64(got, bits(v));
          }
        }
    pl_xform_plan_free(p);
  }
}

static void test_widen(void) {
  pl_field f = scalar_field("label", PL_INT16);
  f.ndim = 1;
  f.shape[0] = 3;
  pl_transform t = xf(PL_TRANSFORM_TO_INT64);
  pl_xform_plan *p;
  pl_error err;
  CHECK_OK(pl_xform_plan_new(&f, 1, &t, 1, &p, &err), &err);
  if (!p)
    return;
  int16_t in[3] = {-5, 32767, 0};
  int64_t out[3];
  pl_xform_apply(p, &p->f[0], NULL, in, out);
  CHECK(out[0] == -5 && out[1] == 32767 && out[2] == 0);
  CHECK_EQ_U64(p->out_fields[0].dtype, PL_INT64);
  CHECK_EQ_U64(p->f[0].out_bytes, 24);
  pl_xform_plan_free(p);
}

/* Draws: in range, about half flipped, spread over every offset, and a
 * function of (seed, epoch, index) only. */
static void test_draws(void) {
  pl_field f = image_field("image", 3, 32, 32);
  pl_transform t[2] = {xf(PL_TRANSFORM_RANDOM_CROP), xf(PL_TRANSFORM_RANDOM_HFLIP)};
  t[0].padding = 4;
  pl_xform_plan *p;
  CHECK_OK(pl_xform_plan_new(&f, 1, t, 2, &p, NULL), NULL);
  if (!p)
    return;
  int flips = 0, seen[9][9] = {{0}};
  for (uint64_t i = 0; i < 20000; i++) {
    pl_xform_params a, b;
    pl_xform_draw(p, 7, 3, i, &a);
    pl_xform_draw(p, 7, 3, i, &b);
    CHECK(!memcmp(&a, &b, sizeof a));
    CHECK(a.oy >= 0 && a.oy <= 8 && a.ox >= 0 && a.ox <= 8);
    if (a.oy >= 0 && a.oy <= 8 && a.ox >= 0 && a.ox <= 8)
      seen[a.oy][a.ox]++;
    flips += a.flip;
  }
  CHECK(flips > 9500 && flips < 10500);
  for (int y = 0; y < 9; y++)
    for (int x = 0; x < 9; x++)
      CHECK(seen[y][x] > 150); /* 20000 / 81 = 247 expected */
  pl_xform_params a, b, c;
  pl_xform_draw(p, 7, 3, 5, &a);
  pl_xform_draw(p, 7, 4, 5, &b);
  pl_xform_draw(p, 8, 3, 5, &c);
  CHECK(memcmp(&a, &b, sizeof a) || memcmp(&a, &c, sizeof a));
  pl_xform_plan_free(p);
}

/* ---------------------------------------------------------------- loader */

enum { H = 6, W = 5, C = 3, N = 101 };

static int get_item(void *user, uint64_t index, void *const *dst, char *msg,
                    size_t msg_len) {
  uint8_t *img = dst[0], *label = dst[1];
  for (int j = 0; j < H * W * C; j++)
    img[j] = pl_test_byte(index, (uint64_t)j);
  *label = (uint8_t)(index % 10);
  return 0;
}

static pl_dataset *make_dataset(void) {
  pl_field f[2] = {image_field("image", H, W, C), scalar_field("label", PL_UINT8)};
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_from_callback(f, 2, N, get_item, NULL, NULL, &ds, &err), &err);
  return ds;
}

static void cifar_recipe(pl_transform *t) {
  t[0] = xf(PL_TRANSFORM_RANDOM_CROP);
  t[0].padding = 2;
  t[0].size[0] = 5, t[0].size[1] = 4;
  t[1] = xf(PL_TRANSFORM_RANDOM_HFLIP);
  t[2] = xf(PL_TRANSFORM_CONVERT);
  t[2].dtype = PL_FLOAT16;
  t[3] = xf(PL_TRANSFORM_NORMALIZE);
  t[3].num_channels = 1;
  t[3].mean[0] = 0.5f, t[3].std[0] = 0.25f;
  t[4] = xf(PL_TRANSFORM_TO_INT64);
}

/* Every batch of an epoch, as bytes, for a worker count. */
static uint8_t *load_epoch(pl_dataset *ds, int workers, uint64_t *len) {
  pl_transform t[5];
  cifar_recipe(t);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  cfg.batch_size = 16;
  cfg.shuffle = 1;
  cfg.seed = 11;
  cfg.epoch = 2;
  cfg.num_workers = workers;
  cfg.transforms = t;
  cfg.num_transforms = 5;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  memset(t, 0, sizeof t); /* the loader copied the list */
  if (!ld)
    return NULL;
  uint64_t per = 5 * 4 * 3 * 2 + 8, cap = N * per, off = 0;
  uint8_t *all = malloc(cap);
  pl_batch *b;
  while (pl_loader_next(ld, &b, &err) == PL_OK) {
    const pl_field *fi = pl_batch_field(b, 0), *fl = pl_batch_field(b, 1);
    CHECK_EQ_U64(fi->dtype, PL_FLOAT16);
    CHECK(fi->ndim == 3 && fi->shape[0] == 3 && fi->shape[1] == 5 && fi->shape[2] == 4);
    CHECK_EQ_U64(fl->dtype, PL_INT64);
    CHECK_EQ_U64(pl_batch_bytes(b, 0), (uint64_t)pl_batch_size(b) * 120);
    /* each sample against the reference on the sample read directly */
    pl_xform_plan *p;
    pl_transform r[5];
    cifar_recipe(r);
    pl_field fs[2] = {*pl_dataset_field(ds, 0), *pl_dataset_field(ds, 1)};
    CHECK_OK(pl_xform_plan_new(fs, 2, r, 5, &p, &err), &err);
    for (uint32_t i = 0; p && i < pl_batch_size(b); i++) {
      uint64_t idx = pl_batch_sample_index(b, i);
      uint8_t img[H * W * C], lab, want[120];
      void *dst[2] = {img, &lab};
      CHECK_OK(pl_dataset_read(ds, idx, dst, &err), &err);
      pl_xform_params pr;
      pl_xform_draw(p, 11, pl_batch_epoch(b), idx, &pr);
      pl_xform_apply(p, &p->f[0], &pr, img, want);
      CHECK(!memcmp(want, (uint8_t *)pl_batch_data(b, 0) + i * 120, 120));
      CHECK_EQ_U64(((int64_t *)pl_batch_data(b, 1))[i], idx % 10);
    }
    pl_xform_plan_free(p);
    memcpy(all + off, pl_batch_data(b, 0), pl_batch_bytes(b, 0));
    off += pl_batch_bytes(b, 0);
    memcpy(all + off, pl_batch_data(b, 1), pl_batch_bytes(b, 1));
    off += pl_batch_bytes(b, 1);
    pl_batch_release(b, NULL);
  }
  *len = off;
  CHECK_EQ_U64(off, cap);
  pl_loader_destroy(ld);
  return all;
}

static void test_loader(void) {
  pl_dataset *ds = make_dataset();
  if (!ds)
    return;
  uint64_t n0 = 0, n3 = 0;
  uint8_t *a = load_epoch(ds, 0, &n0), *b = load_epoch(ds, 3, &n3);
  CHECK(a && b && n0 == n3 && !memcmp(a, b, n0));
  free(a);
  free(b);
  /* a bad list fails the create with the plan's message */
  pl_transform t[2] = {xf(PL_TRANSFORM_TO_INT64), xf(PL_TRANSFORM_RANDOM_HFLIP)};
  t[0].field = "image";
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  cfg.transforms = t;
  cfg.num_transforms = 2;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "TO_INT64 cannot be combined");
  cfg.num_transforms = -1;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_INVALID_ARGUMENT, &err);
  pl_dataset_destroy(ds);
}

/* A field no transform names (the label, without TO_INT64) is delivered as
 * read: the plan copies it into the delivered arrays. It was left out, so
 * batches carried whatever the batch memory held (zeros, or the bytes of
 * an earlier epoch's batch). Two epochs, so buffers are recycled. */
static void test_untransformed_fields(void) {
  pl_field fs[2] = {image_field("image", H, W, C), scalar_field("label", PL_UINT8)};
  pl_transform one = xf(PL_TRANSFORM_RANDOM_HFLIP);
  pl_xform_plan *p;
  pl_error err;
  CHECK_OK(pl_xform_plan_new(fs, 2, &one, 1, &p, &err), &err);
  if (p) {
    CHECK_EQ_U64(p->n, 2);
    CHECK_EQ_U64(p->f[1].op, PL_XF_COPY);
    CHECK_EQ_U64(p->f[1].out_bytes, 1);
    CHECK_EQ_U64(p->xf_of[1], 1);
    uint8_t in = 9, out = 0;
    pl_xform_apply(p, &p->f[1], NULL, &in, &out);
    CHECK_EQ_U64(out, 9);
    pl_xform_plan_free(p);
  }
  pl_dataset *ds = make_dataset();
  if (!ds)
    return;
  for (int kind = 0; kind < 2; kind++) {
    pl_transform t = xf(kind ? PL_TRANSFORM_NORMALIZE : PL_TRANSFORM_RANDOM_HFLIP);
    t.num_channels = 1, t.mean[0] = 0.5f, t.std[0] = 0.5f;
    pl_loader_config cfg;
    pl_loader_config_init(&cfg);
    cfg.device = PL_DEVICE_CPU;
    cfg.batch_size = 7;
    cfg.shuffle = 1;
    cfg.num_workers = 2;
    cfg.transforms = &t;
    cfg.num_transforms = 1;
    pl_loader *ld = NULL;
    CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
    if (!ld)
      continue;
    uint64_t seen = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
      pl_batch *b;
      pl_status st;
      while ((st = pl_loader_next(ld, &b, &err)) == PL_OK) {
        CHECK_EQ_U64(pl_batch_field(b, 1)->dtype, PL_UINT8);
        const uint8_t *lab = pl_batch_data(b, 1);
        for (uint32_t i = 0; i < pl_batch_size(b); i++, seen++)
          CHECK_EQ_U64(lab[i], pl_batch_sample_index(b, i) % 10);
        pl_batch_release(b, NULL);
      }
      CHECK_EQ_U64(st, PL_END_OF_EPOCH);
    }
    CHECK_EQ_U64(seen, 2 * N);
    pl_loader_destroy(ld);
  }
  pl_dataset_destroy(ds);
}

int main(void) {
  test_rounding();
  test_plan_errors();
  test_reference_geometry();
  test_reference_values();
  test_widen();
  test_draws();
  test_loader();
  test_untransformed_fields();
  return pl_test_finish("test_transform");
}
