/* pl_dataset_to_float32: exact float values through every path (the base's
 * views, the base's read into the destination's tail, and scratch for
 * 8-byte integers), other fields untouched, reference counting, errors. */
#include "data/dataset.h"
#include "testutil.h"

#include <stdlib.h>

/* Over IDX (which has views): image bytes b become (float)b * scale. */
static void test_over_idx(void) {
  char im[512], lb[512];
  snprintf(im, sizeof im, "%s", pl_test_path("images"));
  snprintf(lb, sizeof lb, "%s", pl_test_path("labels"));
  CHECK(pl_test_write_idx(im, lb, 40, 6, 5, 0) == 0);
  pl_error err;
  pl_dataset *base = NULL, *ds = NULL;
  CHECK_OK(pl_dataset_open_idx(im, lb, &base, &err), &err);
  if (!base)
    return;
  const float scale = 1.0f / 255.0f;
  CHECK_OK(pl_dataset_to_float32(base, "image", scale, &ds, &err), &err);
  pl_dataset_destroy(base); /* the wrapper keeps it alive */
  if (!ds)
    return;
  const pl_field *f = pl_dataset_field(ds, 0);
  CHECK(f->dtype == PL_FLOAT32 && f->ndim == 2 && f->shape[0] == 6 &&
        f->shape[1] == 5);
  CHECK(pl_dataset_field(ds, 1)->dtype == PL_UINT8);
  CHECK_EQ_U64(pl_dataset_sample_bytes(ds), 30 * 4 + 1);
  float img[30];
  uint8_t label;
  void *dst[2] = {img, &label};
  int bad = 0;
  for (uint64_t i = 0; i < 40; i++) {
    CHECK_OK(pl_dataset_read(ds, i, dst, &err), &err);
    for (int j = 0; j < 30; j++)
      bad += img[j] != (float)pl_test_byte(i, (uint64_t)j) * scale;
    CHECK_EQ_U64(label, pl_test_byte(i, 1u << 20) % 10);
  }
  CHECK(bad == 0);
  CHECK(ds->vt->view(ds, 0, 0) == NULL);
  CHECK(ds->vt->view(ds, 3, 1) != NULL);

  /* Stacked: `label` converted too, now without a view of `image`. */
  pl_dataset *both = NULL;
  CHECK_OK(pl_dataset_to_float32(ds, "label", 2.0f, &both, &err), &err);
  pl_dataset_destroy(ds);
  if (!both)
    return;
  float flabel;
  void *dst2[2] = {img, &flabel};
  CHECK_OK(pl_dataset_read(both, 7, dst2, &err), &err);
  CHECK(flabel == (float)(pl_test_byte(7, 1u << 20) % 10) * 2.0f);
  for (int j = 0; j < 30; j++)
    bad += img[j] != (float)pl_test_byte(7, (uint64_t)j) * scale;
  CHECK(bad == 0);
  CHECK_STATUS(pl_dataset_to_float32(both, "image", 1.0f, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "field 'image' is float32, not an integer dtype");
  pl_dataset_destroy(both);
}

/* A callback dataset (no view) with every integer dtype's extremes. */
#define NBIG 10000 /* int64 x 10000 = 80000 bytes: more than the stack */

typedef struct typed {
  pl_dtype t;
  uint64_t n;
} typed;

static void fill(pl_dtype t, uint64_t n, uint64_t index, void *p) {
  for (uint64_t j = 0; j < n; j++) {
    uint64_t k = index * 7 + j;
    switch (t) {
    case PL_UINT8: ((uint8_t *)p)[j] = (uint8_t)(255 - k % 256); break;
    case PL_INT8: ((int8_t *)p)[j] = (int8_t)(k % 2 ? -128 : 127 - (int)(k % 100)); break;
    case PL_INT16: ((int16_t *)p)[j] = (int16_t)(k % 2 ? -32768 : 32767); break;
    case PL_UINT16: ((uint16_t *)p)[j] = (uint16_t)(65535 - k); break;
    case PL_INT32: ((int32_t *)p)[j] = (int32_t)(k % 2 ? INT32_MIN : 16777217); break;
    case PL_UINT32: ((uint32_t *)p)[j] = UINT32_MAX - (uint32_t)k; break;
    case PL_INT64: ((int64_t *)p)[j] = (k % 2 ? INT64_MIN : (int64_t)k << 40); break;
    default: break;
    }
  }
}

static float expect(pl_dtype t, const void *p, uint64_t j, float s) {
  switch (t) {
  case PL_UINT8: return (float)((const uint8_t *)p)[j] * s;
  case PL_INT8: return (float)((const int8_t *)p)[j] * s;
  case PL_INT16: return (float)((const int16_t *)p)[j] * s;
  case PL_UINT16: return (float)((const uint16_t *)p)[j] * s;
  case PL_INT32: return (float)((const int32_t *)p)[j] * s;
  case PL_UINT32: return (float)((const uint32_t *)p)[j] * s;
  case PL_INT64: return (float)((const int64_t *)p)[j] * s;
  default: return 0;
  }
}

static int get_typed(void *user, uint64_t index, void *const *dst, char *msg,
                     size_t len) {
  const typed *t = user;
  if (index == 3) {
    snprintf(msg, len, "sample three is unreadable");
    return -3;
  }
  *(uint32_t *)dst[0] = (uint32_t)index * 1000u;
  fill(t->t, t->n, index, dst[1]);
  return 0;
}

static void test_dtype(pl_dtype t, uint64_t n) {
  typed user = {t, n};
  pl_field fields[2] = {
      {.name = "id", .dtype = PL_UINT32, .ndim = 0},
      {.name = "x", .dtype = t, .ndim = 1, .shape = {(int64_t)n}},
  };
  pl_error err;
  pl_dataset *base = NULL, *ds = NULL;
  CHECK_OK(pl_dataset_from_callback(fields, 2, 5, get_typed, &user, NULL,
                                    &base, &err), &err);
  const float s = 0.5f;
  CHECK_OK(pl_dataset_to_float32(base, "x", s, &ds, &err), &err);
  pl_dataset_destroy(base);
  if (!ds)
    return;
  float *out = malloc(n * sizeof *out);
  void *raw = malloc(n * 8);
  uint32_t id = 0;
  void *dst[2] = {&id, out};
  for (uint64_t i = 0; i < 5; i++) {
    if (i == 3) {
      CHECK_STATUS(pl_dataset_read(ds, i, dst, &err), PL_CALLBACK, &err);
      CHECK_MSG(&err, "sample 3: callback returned -3: sample three is "
                      "unreadable");
      continue;
    }
    CHECK_OK(pl_dataset_read(ds, i, dst, &err), &err);
    CHECK_EQ_U64(id, i * 1000);
    fill(t, n, i, raw);
    int bad = 0;
    for (uint64_t j = 0; j < n; j++)
      bad += out[j] != expect(t, raw, j, s);
    if (bad)
      fprintf(stderr, "dtype %s: %d wrong values\n", pl_dtype_name(t), bad);
    CHECK(bad == 0);
  }
  free(out);
  free(raw);
  pl_dataset_destroy(ds);
}

static void test_exact_values(void) {
  /* The ToTensor scale: 255 maps to what C computes, 0 to 0. */
  uint8_t v[3] = {255, 0, 128};
  pl_field f = {.name = "v", .dtype = PL_UINT8, .ndim = 1, .shape = {3}};
  char dir[512];
  snprintf(dir, sizeof dir, "%s", pl_test_path("three.bin"));
  CHECK(pl_test_write_file(dir, v, 3) == 0);
  const uint64_t off[1] = {0};
  pl_record_format fmt = {0, 3, 1, &f, off};
  const char *const paths[1] = {dir};
  pl_error err;
  pl_dataset *base = NULL, *ds = NULL;
  CHECK_OK(pl_dataset_open_records(&fmt, paths, 1, &base, &err), &err);
  CHECK_OK(pl_dataset_to_float32(base, "v", 1 / 255.f, &ds, &err), &err);
  pl_dataset_destroy(base);
  float out[3] = {-1, -1, -1};
  void *dst[1] = {out};
  CHECK_OK(pl_dataset_read(ds, 0, dst, &err), &err);
  CHECK(out[0] == 255 * (1 / 255.f));
  CHECK(out[1] == 0.0f);
  CHECK(out[2] == 128 * (1 / 255.f));
  pl_dataset_destroy(ds);
}

static void test_errors(void) {
  pl_field fields[2] = {
      {.name = "f", .dtype = PL_FLOAT64, .ndim = 0},
      {.name = "h", .dtype = PL_FLOAT16, .ndim = 0},
  };
  typed user = {PL_UINT8, 1};
  pl_error err;
  pl_dataset *base = NULL, *ds = (pl_dataset *)1;
  CHECK_OK(pl_dataset_from_callback(fields, 2, 1, get_typed, &user, NULL,
                                    &base, &err), &err);
  CHECK_STATUS(pl_dataset_to_float32(base, "f", 1.0f, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK(ds == NULL);
  CHECK_MSG(&err, "field 'f' is float64, not an integer dtype");
  CHECK_STATUS(pl_dataset_to_float32(base, "h", 1.0f, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "field 'h' is float16");
  CHECK_STATUS(pl_dataset_to_float32(base, "image", 1.0f, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "the dataset has no field 'image'");
  CHECK_STATUS(pl_dataset_to_float32(NULL, "f", 1.0f, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_STATUS(pl_dataset_to_float32(base, NULL, 1.0f, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_STATUS(pl_dataset_to_float32(base, "f", 1.0f, NULL, &err),
               PL_INVALID_ARGUMENT, &err);
  pl_dataset_destroy(base);
}

int main(void) {
  test_over_idx();
  const pl_dtype ints[7] = {PL_UINT8, PL_INT8,   PL_INT16, PL_UINT16,
                            PL_INT32, PL_UINT32, PL_INT64};
  for (int k = 0; k < 7; k++) {
    test_dtype(ints[k], 7);    /* small */
    test_dtype(ints[k], NBIG); /* int64: more than the stack scratch */
  }
  test_dtype(PL_INT64, 100); /* int64 on the stack scratch */
  test_exact_values();
  test_errors();
  return pl_test_finish("test_convert");
}
