/* pl_dataset_to_float32: one integer field delivered as float32 value *
 * scale, the other fields passed through, written straight into the
 * destination buffers.
 *
 * The source bytes come from the base's view when it has one (no copy at
 * all). Otherwise the base reads the field into the tail of the float32
 * destination itself: an element of at most 4 bytes converted front to back
 * never overwrites one not yet read (output i ends at 4(i+1), input i+1
 * starts at n(4-s) + s(i+1), which is not smaller). Only 8-byte integers
 * need a scratch buffer: on the stack when small. */
#include "data/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STACK_SCRATCH_BYTES (64u << 10)
#define STACK_FIELDS 16

typedef struct convert_impl {
  pl_dataset *base;
  int field;
  pl_dtype src_dtype;
  uint64_t numel;
  float scale;
} convert_impl;

static bool is_integer(pl_dtype t) {
  switch (t) {
  case PL_UINT8: case PL_INT8: case PL_INT16: case PL_UINT16:
  case PL_INT32: case PL_UINT32: case PL_INT64:
    return true;
  default:
    return false;
  }
}

/* Loads by memcpy: views into a mapping need not be aligned. */
#define CONVERT_AS(T)                                                       \
  for (uint64_t i = 0; i < n; i++) {                                        \
    T v;                                                                    \
    memcpy(&v, src + i * sizeof(T), sizeof v);                              \
    float f = (float)v * scale;                                             \
    memcpy(dst + i * sizeof f, &f, sizeof f);                               \
  }                                                                         \
  break

static void convert(pl_dtype t, const uint8_t *src, uint8_t *dst, uint64_t n,
                    float scale) {
  switch (t) {
  case PL_UINT8: CONVERT_AS(uint8_t);
  case PL_INT8: CONVERT_AS(int8_t);
  case PL_INT16: CONVERT_AS(int16_t);
  case PL_UINT16: CONVERT_AS(uint16_t);
  case PL_INT32: CONVERT_AS(int32_t);
  case PL_UINT32: CONVERT_AS(uint32_t);
  case PL_INT64: CONVERT_AS(int64_t);
  default: break; /* excluded at creation */
  }
}

/* Every field through the base's views; false if any has none. */
static bool read_by_view(const convert_impl *c, uint64_t index,
                         void *const *dst) {
  const pl_dataset *b = c->base;
  if (!b->vt->view)
    return false;
  for (int j = 0; j < b->nfields; j++)
    if (!b->vt->view(b, index, j))
      return false;
  for (int j = 0; j < b->nfields; j++) {
    const uint8_t *v = b->vt->view(b, index, j);
    if (j == c->field)
      convert(c->src_dtype, v, dst[j], c->numel, c->scale);
    else
      memcpy(dst[j], v, b->field_bytes[j]);
  }
  return true;
}

/* The base reads into dst (our field into its tail, or into scratch), then
 * the field is converted. */
static pl_status read_by_base(const convert_impl *c, uint64_t index,
                              const pl_sample_ctx *ctx, void *const *dst,
                              void **bdst, pl_error *err) {
  const pl_dataset *b = c->base;
  uint64_t src_bytes = b->field_bytes[c->field];
  uint64_t out_bytes = c->numel * sizeof(float);
  unsigned char stack[STACK_SCRATCH_BYTES];
  uint8_t *scratch = NULL, *src;
  if (src_bytes <= out_bytes)
    src = (uint8_t *)dst[c->field] + (out_bytes - src_bytes);
  else if (src_bytes <= sizeof stack)
    src = stack;
  else if (!(src = scratch = malloc(src_bytes)))
    return pl_errorf(err, PL_NO_MEMORY,
                     "out of memory converting field '%s' (%llu bytes)",
                     b->fields[c->field].name, (unsigned long long)src_bytes);
  for (int j = 0; j < b->nfields; j++)
    bdst[j] = j == c->field ? (void *)src : dst[j];
  pl_status s = b->vt->read(b, index, ctx, bdst, err);
  if (s == PL_OK)
    convert(c->src_dtype, src, dst[c->field], c->numel, c->scale);
  free(scratch);
  return s;
}

static pl_status convert_read(const pl_dataset *ds, uint64_t index,
                              const pl_sample_ctx *ctx, void *const *dst,
                              pl_error *err) {
  const convert_impl *c = ds->impl;
  if (read_by_view(c, index, dst))
    return PL_OK;
  void *small[STACK_FIELDS];
  int n = c->base->nfields;
  void **bdst = n <= STACK_FIELDS ? small : malloc((size_t)n * sizeof *bdst);
  if (!bdst)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = read_by_base(c, index, ctx, dst, bdst, err);
  if (bdst != small)
    free(bdst);
  return s;
}

static const void *convert_view(const pl_dataset *ds, uint64_t index,
                                int field) {
  const convert_impl *c = ds->impl;
  const pl_dataset *b = c->base;
  if (field == c->field || !b->vt->view)
    return NULL;
  return b->vt->view(b, index, field);
}

static void convert_destroy(void *p) {
  convert_impl *c = p;
  pl_dataset_destroy(c->base);
  free(c);
}

static const pl_dataset_vt convert_vt = {
    .kind = "to_float32",
    .read = convert_read,
    .view = convert_view,
    .destroy_impl = convert_destroy,
};

static pl_status check_args(const pl_dataset *base, const char *field,
                            int *index, pl_error *err) {
  if (!base || !field)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "to_float32: a dataset and a field name are required");
  *index = pl_dataset_field_index(base, field);
  if (*index < 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "to_float32: the dataset has no field '%s'", field);
  pl_dtype t = base->fields[*index].dtype;
  if (!is_integer(t))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "to_float32: field '%s' is %s, not an integer dtype",
                     field, pl_dtype_name(t));
  return PL_OK;
}

static pl_status new_fields(const pl_dataset *base, int field,
                            pl_field **out, pl_error *err) {
  pl_field *f = malloc((size_t)base->nfields * sizeof *f);
  if (!f)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  memcpy(f, base->fields, (size_t)base->nfields * sizeof *f);
  f[field].dtype = PL_FLOAT32;
  *out = f;
  return PL_OK;
}

pl_status pl_dataset_to_float32(pl_dataset *base, const char *field,
                                float scale, pl_dataset **out,
                                pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  int fi = -1;
  PL_TRY(check_args(base, field, &fi, err));
  if (!isfinite(scale)) /* every value would come out inf or NaN */
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "to_float32: scale %g is not a finite number",
                     (double)scale);
  pl_field *fields = NULL;
  PL_TRY(new_fields(base, fi, &fields, err));
  convert_impl *c = malloc(sizeof *c);
  if (!c) {
    free(fields);
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  }
  *c = (convert_impl){.base = base,
                      .field = fi,
                      .src_dtype = base->fields[fi].dtype,
                      .numel = pl_field_numel(&base->fields[fi]),
                      .scale = scale};
  pl_status s = pl_dataset_new(&convert_vt, c, base->length, fields,
                               base->nfields, out, err);
  free(fields);
  if (s == PL_OK)
    pl_dataset_retain(base);
  else
    free(c);
  return s;
}
