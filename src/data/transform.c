/* Transforms: the plan (one description per transformed field), the random
 * draws and the host reference. Read transform.h first. */
#include "data/transform.h"
#include "core/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pl_transform_init(pl_transform *t, pl_transform_kind kind) {
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->p = 0.5f;
  t->dtype = PL_FLOAT32;
  t->layout = PL_LAYOUT_CHW;
}

const char *pl_transform_kind_name(pl_transform_kind k) {
  static const char *const names[PL_TRANSFORM_KIND_COUNT_] = {
      "NONE",      "RANDOM_CROP", "RANDOM_HFLIP", "CONVERT",
      "NORMALIZE", "LAYOUT",      "TO_INT64"};
  return (unsigned)k < PL_TRANSFORM_KIND_COUNT_ ? names[k] : "invalid";
}

/* ------------------------------------------------------------ rounding */

uint16_t pl_f32_to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* Round to nearest even with subnormals and overflow to infinity (after
 * F. Giesen's float_to_half_fast3_rtne). */
uint16_t pl_f32_to_f16(float x) {
  union { uint32_t u; float f; } v = {.f = x};
  const uint32_t f32_inf = 255u << 23, f16_big = (127u + 16) << 23;
  const union { uint32_t u; float f; } denorm_magic = {.u = ((127u - 15) +
                                                            (23 - 10) + 1)
                                                           << 23};
  uint32_t sign = v.u & 0x80000000u;
  uint16_t o;
  v.u ^= sign;
  if (v.u >= f16_big) {
    o = v.u > f32_inf ? 0x7e00 : 0x7c00;
  } else if (v.u < (113u << 23)) { /* a subnormal half, or zero */
    v.f += denorm_magic.f;
    o = (uint16_t)(v.u - denorm_magic.u);
  } else {
    uint32_t odd = (v.u >> 13) & 1u;
    v.u += ((uint32_t)(15 - 127) << 23) + 0xfffu;
    v.u += odd;
    o = (uint16_t)(v.u >> 13);
  }
  return (uint16_t)(o | (sign >> 16));
}

/* ------------------------------------------------------------ the plan */

/* What the list asks of one field, before it is checked. */
typedef struct field_spec {
  const pl_transform *by_kind[PL_TRANSFORM_KIND_COUNT_];
  pl_layout in_layout;
} field_spec;

static pl_status bad(pl_error *err, int i, const pl_transform *t,
                     const char *field, const char *why) {
  return pl_errorf(err, PL_INVALID_ARGUMENT, "transform %d (%s) on field '%s': %s",
                   i, pl_transform_kind_name(t->kind), field, why);
}

static const char *field_name_of(const pl_transform *t) {
  if (t->field)
    return t->field;
  return t->kind == PL_TRANSFORM_TO_INT64 ? "label" : "image";
}

static int find_field(const pl_field *fields, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(fields[i].name, name))
      return i;
  return -1;
}

/* Sorts the list by field; rejects unknown kinds and fields, repeats. */
static pl_status collect(const pl_field *fields, int nfields,
                         const pl_transform *t, int n, field_spec *spec,
                         pl_error *err) {
  for (int i = 0; i < n; i++) {
    const char *name = field_name_of(&t[i]);
    if (t[i].kind <= PL_TRANSFORM_NONE || t[i].kind >= PL_TRANSFORM_KIND_COUNT_)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "transform %d: unknown kind %d", i, (int)t[i].kind);
    int f = find_field(fields, nfields, name);
    if (f < 0)
      return bad(err, i, &t[i], name, "the dataset has no such field");
    field_spec *s = &spec[f];
    if (s->by_kind[t[i].kind])
      return bad(err, i, &t[i], name, "given twice for this field");
    s->by_kind[t[i].kind] = &t[i];
    if (t[i].input_layout != PL_LAYOUT_AUTO) {
      if (t[i].input_layout != PL_LAYOUT_CHW && t[i].input_layout != PL_LAYOUT_HWC)
        return bad(err, i, &t[i], name, "input_layout is not AUTO, CHW or HWC");
      if (s->in_layout && s->in_layout != t[i].input_layout)
        return bad(err, i, &t[i], name,
                   "input_layout differs from an earlier transform's");
      s->in_layout = t[i].input_layout;
    }
  }
  return PL_OK;
}

static int is_integer(pl_dtype d) {
  return d == PL_UINT8 || d == PL_INT8 || d == PL_INT16 || d == PL_UINT16 ||
         d == PL_INT32 || d == PL_UINT32 || d == PL_INT64;
}

static pl_status plan_widen(const pl_field *fd, const field_spec *s, int idx,
                            pl_xform_field *x, pl_error *err) {
  const pl_transform *t = s->by_kind[PL_TRANSFORM_TO_INT64];
  for (int k = 1; k < PL_TRANSFORM_KIND_COUNT_; k++)
    if (s->by_kind[k] && k != PL_TRANSFORM_TO_INT64)
      return bad(err, idx, t, fd->name,
                 "TO_INT64 cannot be combined with image transforms");
  if (!is_integer(fd->dtype))
    return bad(err, idx, t, fd->name, "the field is not of an integer dtype");
  x->op = PL_XF_WIDEN;
  x->out_dtype = PL_INT64;
  x->C = x->H = 1;
  x->W = (int32_t)pl_field_numel(fd);
  x->out_size = 8;
  return PL_OK;
}

/* C, H, W and the memory order of a uint8 image field. */
static pl_status image_dims(const pl_field *fd, const field_spec *s,
                            pl_xform_field *x, const pl_transform *t, int idx,
                            pl_error *err) {
  if (fd->dtype != PL_UINT8)
    return bad(err, idx, t, fd->name, "image transforms need a uint8 field");
  if (fd->ndim == 2) {
    x->C = 1, x->H = (int32_t)fd->shape[0], x->W = (int32_t)fd->shape[1];
    return PL_OK;
  }
  if (fd->ndim != 3)
    return bad(err, idx, t, fd->name,
               "image transforms need a [C,H,W], [H,W,C] or [H,W] field");
  const int64_t *d = fd->shape;
  int small_last = d[2] == 1 || d[2] == 3 || d[2] == 4;
  int small_first = d[0] == 1 || d[0] == 3 || d[0] == 4;
  x->in_hwc = s->in_layout ? s->in_layout == PL_LAYOUT_HWC
                           : small_last && !small_first;
  x->C = (int32_t)(x->in_hwc ? d[2] : d[0]);
  x->H = (int32_t)(x->in_hwc ? d[0] : d[1]);
  x->W = (int32_t)(x->in_hwc ? d[1] : d[2]);
  if (x->C > PL_TRANSFORM_MAX_CHANNELS)
    return bad(err, idx, t, fd->name, "more than 16 channels");
  if (x->H > (1 << 20) || x->W > (1 << 20))
    return bad(err, idx, t, fd->name, "the image is too large");
  return PL_OK;
}

static pl_status plan_crop(const pl_transform *t, int idx, const char *name,
                           pl_xform_field *x, pl_error *err) {
  x->OH = x->H, x->OW = x->W;
  if (!t)
    return PL_OK;
  if (t->padding < 0 || t->padding > 4096 || t->size[0] < 0 || t->size[1] < 0)
    return bad(err, idx, t, name, "negative size or padding, or padding over 4096");
  x->crop = 1;
  x->pad = t->padding;
  x->fill = t->fill;
  x->OH = t->size[0] ? t->size[0] : x->H;
  x->OW = t->size[1] ? t->size[1] : x->W;
  if (x->OH > x->H + 2 * x->pad || x->OW > x->W + 2 * x->pad)
    return bad(err, idx, t, name, "the crop is larger than the padded image");
  return PL_OK;
}

static pl_status plan_image(const pl_field *fd, const field_spec *s, int idx,
                            pl_xform_field *x, pl_error *err) {
  const pl_transform *first = NULL;
  for (int k = 1; !first && k < PL_TRANSFORM_KIND_COUNT_; k++)
    first = s->by_kind[k];
  PL_TRY(image_dims(fd, s, x, first, idx, err));
  PL_TRY(plan_crop(s->by_kind[PL_TRANSFORM_RANDOM_CROP], idx, fd->name, x, err));
  const pl_transform *fl = s->by_kind[PL_TRANSFORM_RANDOM_HFLIP];
  if (fl) {
    if (!(fl->p >= 0 && fl->p <= 1))
      return bad(err, idx, fl, fd->name, "p is not in [0, 1]");
    x->flip = 1;
    x->flip_below = (uint32_t)floor((double)fl->p * 16777216.0);
  }
  const pl_transform *cv = s->by_kind[PL_TRANSFORM_CONVERT];
  const pl_transform *nm = s->by_kind[PL_TRANSFORM_NORMALIZE];
  x->out_dtype = cv ? cv->dtype : nm ? PL_FLOAT32 : PL_UINT8;
  if (cv && cv->dtype != PL_FLOAT32 && cv->dtype != PL_BFLOAT16 &&
      cv->dtype != PL_FLOAT16)
    return bad(err, idx, cv, fd->name, "dtype is not float32, bfloat16 or float16");
  if (nm) {
    if (nm->num_channels != 1 && nm->num_channels != x->C)
      return bad(err, idx, nm, fd->name,
                 "num_channels is neither 1 nor the image's channel count");
    for (int c = 0; c < nm->num_channels; c++)
      if (!(nm->std[c] != 0) || !isfinite(nm->std[c]) || !isfinite(nm->mean[c]))
        return bad(err, idx, nm, fd->name, "a std is 0 or a value is not finite");
  }
  const pl_transform *ly = s->by_kind[PL_TRANSFORM_LAYOUT];
  if (ly && ly->layout != PL_LAYOUT_CHW && ly->layout != PL_LAYOUT_HWC)
    return bad(err, idx, ly, fd->name, "layout is not CHW or HWC");
  x->out_hwc = ly ? ly->layout == PL_LAYOUT_HWC : 0;
  if (fd->ndim == 2 && !ly) /* [H,W] stays [H,W]: both orders are one */
    x->out_hwc = x->in_hwc;
  if ((uint64_t)x->C * (uint64_t)x->OH * (uint64_t)x->OW >= (1ull << 31) ||
      (uint64_t)x->C * (uint64_t)x->H * (uint64_t)x->W >= (1ull << 31))
    return bad(err, idx, first, fd->name, "over 2^31 elements per sample");
  x->op = PL_XF_IMAGE;
  x->out_size = (uint32_t)pl_dtype_size(x->out_dtype);
  return PL_OK;
}

/* The delivered field: dtype and shape after the transforms. */
static void out_field(const pl_field *in, const pl_xform_field *x,
                      int explicit_layout, pl_field *o) {
  *o = *in;
  o->dtype = x->out_dtype;
  if (x->op != PL_XF_IMAGE)
    return;
  if (in->ndim == 2 && !explicit_layout) {
    o->shape[0] = x->OH, o->shape[1] = x->OW;
    return;
  }
  o->ndim = 3;
  int64_t chw[3] = {x->C, x->OH, x->OW}, hwc[3] = {x->OH, x->OW, x->C};
  memcpy(o->shape, x->out_hwc ? hwc : chw, sizeof chw);
}

static void store_bits(uint8_t *dst, pl_dtype t, float v) {
  uint16_t h;
  switch (t) {
  case PL_FLOAT32:
    memcpy(dst, &v, 4);
    break;
  case PL_BFLOAT16:
    h = pl_f32_to_bf16(v);
    memcpy(dst, &h, 2);
    break;
  case PL_FLOAT16:
    h = pl_f32_to_f16(v);
    memcpy(dst, &h, 2);
    break;
  default:
    break;
  }
}

/* The table: entry (c, v) is the output element for channel c, value v.
 * The float formula is torch's ToTensor + Normalize in float32, each
 * operation correctly rounded, then one rounding to the output dtype. */
static void fill_table(const pl_xform_field *x, const pl_transform *nm,
                       uint8_t *tab) {
  for (int c = 0; c < x->C; c++)
    for (int v = 0; v < 256; v++) {
      uint8_t *e = tab + ((uint64_t)c * 256 + (uint64_t)v) * x->out_size;
      if (x->out_dtype == PL_UINT8) {
        *e = (uint8_t)v;
        continue;
      }
      volatile float f = (float)v / 255.0f; /* no fused or wider arithmetic */
      if (nm) {
        int k = nm->num_channels == 1 ? 0 : c;
        f = f - nm->mean[k];
        f = f / nm->std[k];
      }
      store_bits(e, x->out_dtype, f);
    }
}

static pl_status plan_fields(pl_xform_plan *p, const pl_field *fields,
                             const field_spec *spec, const pl_transform *t,
                             pl_error *err) {
  for (int f = 0; f < p->nfields; f++) {
    const field_spec *s = &spec[f];
    int any = 0;
    for (int k = 1; k < PL_TRANSFORM_KIND_COUNT_; k++)
      any |= s->by_kind[k] != NULL;
    p->out_fields[f] = fields[f];
    pl_xform_field *x = &p->f[p->n];
    memset(x, 0, sizeof *x);
    x->field = f;
    x->in_dtype = x->out_dtype = fields[f].dtype;
    x->slot = -1;
    if (!any) { /* delivered as read: copied into the delivered arrays */
      x->op = PL_XF_COPY;
      x->in_bytes = x->out_bytes = pl_field_bytes(&fields[f]);
      x->out_size = (uint32_t)pl_dtype_size(fields[f].dtype);
      p->xf_of[f] = p->n++;
      continue;
    }
    const pl_transform *w = s->by_kind[PL_TRANSFORM_TO_INT64];
    int idx = -1; /* the first of its transforms, for messages */
    for (int k = 1; k < PL_TRANSFORM_KIND_COUNT_; k++)
      if (s->by_kind[k] && (idx < 0 || s->by_kind[k] - t < idx))
        idx = (int)(s->by_kind[k] - t);
    if (w)
      idx = (int)(w - t);
    PL_TRY(w ? plan_widen(&fields[f], s, idx, x, err)
             : plan_image(&fields[f], s, idx, x, err));
    x->in_bytes = pl_field_bytes(&fields[f]);
    out_field(&fields[f], x, s->by_kind[PL_TRANSFORM_LAYOUT] != NULL,
              &p->out_fields[f]);
    x->out_bytes = pl_field_bytes(&p->out_fields[f]);
    if (x->crop || x->flip)
      x->slot = p->nparams++;
    if (x->op == PL_XF_IMAGE) {
      x->table_off = p->table_bytes;
      p->table_bytes += 256ull * (uint64_t)x->C * x->out_size;
    }
    p->xf_of[f] = p->n++;
  }
  return PL_OK;
}

static pl_status build_tables(pl_xform_plan *p, const field_spec *spec) {
  p->table = pl_calloc(1, (size_t)PL_MAX(p->table_bytes, 1));
  if (!p->table)
    return PL_NO_MEMORY;
  for (int i = 0; i < p->n; i++)
    if (p->f[i].op == PL_XF_IMAGE)
      fill_table(&p->f[i], spec[p->f[i].field].by_kind[PL_TRANSFORM_NORMALIZE],
                 p->table + p->f[i].table_off);
  return PL_OK;
}

pl_status pl_xform_plan_new(const pl_field *fields, int nfields,
                            const pl_transform *t, int n,
                            pl_xform_plan **out, pl_error *err) {
  *out = NULL;
  if (n <= 0)
    return n == 0 ? PL_OK
                  : pl_errorf(err, PL_INVALID_ARGUMENT, "num_transforms < 0");
  if (!t)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "num_transforms is %d but transforms is NULL", n);
  pl_xform_plan *p = pl_calloc(1, sizeof *p);
  field_spec *spec = pl_calloc((size_t)PL_MAX(nfields, 1), sizeof *spec);
  if (p) {
    p->nfields = nfields;
    p->f = pl_calloc((size_t)PL_MAX(nfields, 1), sizeof *p->f);
    p->out_fields = pl_calloc((size_t)PL_MAX(nfields, 1), sizeof *p->out_fields);
    p->xf_of = pl_malloc((size_t)PL_MAX(nfields, 1) * sizeof *p->xf_of);
  }
  pl_status s = PL_NO_MEMORY;
  if (p && spec && p->f && p->out_fields && p->xf_of) {
    for (int f = 0; f < nfields; f++)
      p->xf_of[f] = -1;
    s = collect(fields, nfields, t, n, spec, err);
    if (s == PL_OK)
      s = plan_fields(p, fields, spec, t, err);
    if (s == PL_OK && (s = build_tables(p, spec)) != PL_OK)
      pl_errorf(err, s, "out of memory for transform tables");
  } else {
    pl_errorf(err, s, "out of memory");
  }
  free(spec);
  if (s != PL_OK) {
    pl_xform_plan_free(p);
    return s;
  }
  *out = p;
  return PL_OK;
}

void pl_xform_plan_free(pl_xform_plan *p) {
  if (!p)
    return;
  free(p->f);
  free(p->out_fields);
  free(p->xf_of);
  free(p->table);
  free(p);
}

/* ------------------------------------------------------------ draws */

/* splitmix64's finaliser: a bijection that mixes every input bit. */
static uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A uniform integer in [0, n) from the top 32 bits of r (n <= 2^31). */
static int32_t below(uint64_t r, uint32_t n) {
  return (int32_t)(((r >> 32) * (uint64_t)n) >> 32);
}

void pl_xform_draw(const pl_xform_plan *p, uint64_t seed, uint64_t epoch,
                   uint64_t index, pl_xform_params *out) {
  for (int i = 0; i < p->n; i++) {
    const pl_xform_field *x = &p->f[i];
    if (x->slot < 0)
      continue;
    uint64_t key = mix64(seed ^ mix64(epoch ^ mix64(index ^
                                                    mix64((uint64_t)x->field))));
    pl_xform_params *o = &out[x->slot];
    memset(o, 0, sizeof *o);
    if (x->crop) {
      o->oy = below(mix64(key + 1), (uint32_t)(x->H + 2 * x->pad - x->OH + 1));
      o->ox = below(mix64(key + 2), (uint32_t)(x->W + 2 * x->pad - x->OW + 1));
    }
    if (x->flip)
      o->flip = (uint32_t)(mix64(key + 3) >> 40) < x->flip_below;
  }
}

/* ------------------------------------------------------------ host reference */

static void widen(const pl_xform_field *x, const void *src, int64_t *dst) {
  for (int32_t i = 0; i < x->W; i++) {
    const uint8_t *s = (const uint8_t *)src;
    switch (x->in_dtype) {
    case PL_UINT8: dst[i] = s[i]; break;
    case PL_INT8: dst[i] = ((const int8_t *)src)[i]; break;
    case PL_UINT16: { uint16_t v; memcpy(&v, s + 2 * i, 2); dst[i] = v; } break;
    case PL_INT16: { int16_t v; memcpy(&v, s + 2 * i, 2); dst[i] = v; } break;
    case PL_UINT32: { uint32_t v; memcpy(&v, s + 4 * i, 4); dst[i] = v; } break;
    case PL_INT32: { int32_t v; memcpy(&v, s + 4 * i, 4); dst[i] = v; } break;
    default: memcpy(&dst[i], s + 8 * i, 8); break;
    }
  }
}

/* Element strides of an image: channel, row, pixel. */
typedef struct strides {
  int64_t c, y, x;
} strides;

static strides strides_of(int hwc, int32_t C, int32_t H, int32_t W) {
  strides s = {(int64_t)H * W, W, 1};
  if (hwc)
    s = (strides){1, (int64_t)W * C, C};
  return s;
}

/* One image with T-sized output elements: output (c, y, x) is the table
 * entry of input (c, y + oy - pad, xs + ox - pad), xs = x or OW - 1 - x,
 * or of the fill value outside the image. */
#define DEFINE_IMAGE_APPLY(NAME, T)                                          \
  static void NAME(const pl_xform_field *f, const pl_xform_params *pr,      \
                   const T *tab, const uint8_t *in, T *out) {               \
    strides is = strides_of(f->in_hwc, f->C, f->H, f->W);                   \
    strides os = strides_of(f->out_hwc, f->C, f->OH, f->OW);                \
    for (int32_t c = 0; c < f->C; c++) {                                    \
      const T *tc = tab + (size_t)c * 256;                                  \
      for (int32_t y = 0; y < f->OH; y++) {                                 \
        int32_t sy = y + pr->oy - f->pad;                                   \
        int row_in = sy >= 0 && sy < f->H;                                  \
        const uint8_t *row = in + c * is.c + (row_in ? sy : 0) * is.y;      \
        T *o = out + c * os.c + y * os.y;                                   \
        for (int32_t x = 0; x < f->OW; x++) {                               \
          int32_t sx = (pr->flip ? f->OW - 1 - x : x) + pr->ox - f->pad;    \
          uint8_t v = row_in && sx >= 0 && sx < f->W ? row[sx * is.x]       \
                                                     : f->fill;             \
          o[x * os.x] = tc[v];                                              \
        }                                                                   \
      }                                                                     \
    }                                                                       \
  }

DEFINE_IMAGE_APPLY(image_u8, uint8_t)
DEFINE_IMAGE_APPLY(image_u16, uint16_t)
DEFINE_IMAGE_APPLY(image_u32, uint32_t)

void pl_xform_apply(const pl_xform_plan *p, const pl_xform_field *f,
                    const pl_xform_params *params, const void *src,
                    void *dst) {
  if (f->op == PL_XF_COPY) {
    memcpy(dst, src, (size_t)f->in_bytes);
    return;
  }
  if (f->op == PL_XF_WIDEN) {
    widen(f, src, dst);
    return;
  }
  pl_xform_params none = {0, 0, 0, 0};
  const pl_xform_params *pr = f->slot >= 0 && params ? &params[f->slot] : &none;
  const uint8_t *tab = p->table + f->table_off;
  switch (f->out_size) {
  case 1:
    image_u8(f, pr, tab, src, dst);
    break;
  case 2:
    image_u16(f, pr, (const uint16_t *)(const void *)tab, src, dst);
    break;
  default:
    image_u32(f, pr, (const uint32_t *)(const void *)tab, src, dst);
    break;
  }
}
