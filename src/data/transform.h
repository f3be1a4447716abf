/* Per-sample transforms (pinloader.h, "transforms"): ONE description of each
 * transformed field (pl_xform_field, compiled from the user's pl_transform
 * list by pl_xform_plan_new) and two implementations of it: the host
 * reference here (transform.c, run by the workers of a CPU loader) and the
 * CUDA kernels (backend/cuda/transform.cu, run on the loader's stream after
 * a batch's copy). Both read one lookup table per image field, computed
 * here on the host, that maps (channel, uint8 value) to the output
 * element's bits: the arithmetic is done once, in C, so the two agree bit
 * for bit. Geometry (crop offsets, flips) is integer work on both.
 *
 * This header is included by C and by CUDA C++ (the .cu file): plain
 * structs only, no C11 atomics. */
#ifndef PL_TRANSFORM_H
#define PL_TRANSFORM_H

#include "pinloader.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* COPY: a field no transform names is delivered as read. With transforms
 * the delivered arrays lie apart from the staged ones (out_base), so every
 * field, transformed or not, must be written there by one of the ops: a
 * field left out of the plan was delivered as whatever the recycled batch
 * memory held (labels of zeros or stale bytes). */
typedef enum { PL_XF_IMAGE = 1, PL_XF_WIDEN = 2, PL_XF_COPY = 3 } pl_xf_op;

/* One sample's random draw for one field; 16 bytes so that a batch's
 * parameters are a plain array the copy engine moves with the batch. */
typedef struct pl_xform_params {
  int32_t oy, ox; /* crop offset in the padded image */
  int32_t flip;   /* 1: mirror the columns */
  int32_t unused;
} pl_xform_params;

/* One transformed field, everything both implementations need. */
typedef struct pl_xform_field {
  int field;              /* dataset field index */
  pl_xf_op op;
  pl_dtype in_dtype, out_dtype;
  int32_t C, H, W;        /* input image (WIDEN: numel in W, C = H = 1) */
  int32_t OH, OW;         /* output image size */
  int32_t in_hwc, out_hwc;/* memory order [H,W,C] (else [C,H,W]) */
  int32_t pad;            /* crop padding on every side */
  int32_t crop, flip;     /* random crop / random flip present */
  uint32_t flip_below;    /* flip when the 24-bit draw is below this */
  uint8_t fill;           /* padding value */
  int32_t slot;           /* index of its params in a sample's, -1 none */
  uint32_t out_size;      /* bytes per output element */
  uint64_t in_bytes, out_bytes; /* one sample, input and output */
  uint64_t table_off;     /* its table in pl_xform_plan.table (image) */
  /* Set by the user of the plan (the loader): where the field's arrays
   * lie in the staged (input) and delivered (output) batch layouts. */
  uint64_t in_off, out_off;
} pl_xform_field;

typedef struct pl_xform_plan {
  int n;                /* every field: transformed ones and COPY ones */
  pl_xform_field *f;
  int nparams;          /* random fields: params per sample */
  uint8_t *table;       /* 256 * C output elements per image field */
  uint64_t table_bytes;
  int nfields;          /* all dataset fields */
  pl_field *out_fields; /* every field as delivered (dtype, shape) */
  int *xf_of;           /* per dataset field: its index in f */
  /* Set by the loader: where the batch's params array lies in the staged
   * layout (device transforms). */
  uint64_t params_off;
} pl_xform_plan;

/* Compiles a transform list against a dataset's fields. Errors name the
 * transform (by position and kind) and the field. n == 0: *out = NULL. */
pl_status pl_xform_plan_new(const pl_field *fields, int nfields,
                            const pl_transform *t, int n,
                            pl_xform_plan **out, pl_error *err);
void pl_xform_plan_free(pl_xform_plan *p);

/* "RANDOM_CROP", ... */
const char *pl_transform_kind_name(pl_transform_kind k);

/* Sample `index`'s draws for every random field into out[0..nparams-1]:
 * a function of (seed, epoch, index) alone (docs/transforms.md has the
 * formula). */
void pl_xform_draw(const pl_xform_plan *p, uint64_t seed, uint64_t epoch,
                   uint64_t index, pl_xform_params *out);

/* The host reference: one sample of field f, src (f->in_bytes) to dst
 * (f->out_bytes); params: the sample's draws (may be NULL when
 * p->nparams == 0). */
void pl_xform_apply(const pl_xform_plan *p, const pl_xform_field *f,
                    const pl_xform_params *params, const void *src,
                    void *dst);

/* Round to nearest even, as the CUDA intrinsics do; NaN stays NaN. */
uint16_t pl_f32_to_bf16(float x);
uint16_t pl_f32_to_f16(float x);

#ifdef __cplusplus
}
#endif

#endif /* PL_TRANSFORM_H */
