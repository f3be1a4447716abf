/* PIL-compatible antialiased bilinear resampling (see image_resize.h).
 *
 * Speed comes from the layout, not from intrinsics. Both passes are one
 * kernel, combine_rows: a weighted sum of a few whole rows, where channels
 * do not matter, in fixed-size chunks that GCC vectorizes even at -O2 (its
 * cheap cost model takes only loops whose trip count is a known multiple of
 * the vector length). The vertical pass combines source rows; the
 * horizontal pass combines rows of the vertical result transposed (RGBX
 * pixels are 4 bytes, one uint32 to move). Every output pixel reads the
 * same number of taps (padded with zero weights). Weights are 14-bit fixed
 * point in int16 (PIL uses 22 bits in int32): 16x16->32 multiplies are what
 * SSE2 has, and an output level moves by one, at times, against PIL's. */
#include "data/image_resize.h"

#include <math.h>
#include <string.h>

#define PRECISION_BITS 14
#define ROUND_HALF (1 << (PRECISION_BITS - 1))
/* Bytes combined at once: 8 SSE registers of int32 accumulators. */
#define CHUNK 32

/* Per output pixel: the first input pixel and `taps` weights from it. */
typedef struct coeffs {
  int taps;   /* the same for every output pixel */
  int *first; /* out */
  int16_t *k; /* out x taps */
  double *w;  /* max_taps: one pixel's weights while computing */
} coeffs;

static double triangle(double x) {
  x = fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

/* An upper bound on the taps PIL's filter gives one output pixel. */
static int coeffs_max_taps(double in0, double in1, int out) {
  double scale = (in1 - in0) / out;
  return (int)ceil(scale < 1.0 ? 1.0 : scale) * 2 + 1;
}

static size_t coeffs_bytes(int max_taps, int out) {
  return (size_t)pl_align_up((uint64_t)out * sizeof(int), 64) +
         (size_t)pl_align_up((uint64_t)out * max_taps * sizeof(int16_t), 64) +
         (size_t)pl_align_up((uint64_t)max_taps * sizeof(double), 64);
}

/* Points c's arrays into mem (coeffs_bytes of it); returns what follows. */
static uint8_t *coeffs_carve(coeffs *c, int max_taps, int out, uint8_t *mem) {
  c->first = (int *)mem;
  mem += pl_align_up((uint64_t)out * sizeof(int), 64);
  c->k = (int16_t *)mem;
  mem += pl_align_up((uint64_t)out * max_taps * sizeof(int16_t), 64);
  c->w = (double *)mem;
  return mem + pl_align_up((uint64_t)max_taps * sizeof(double), 64);
}

/* One output pixel's window [*xmin, *xmin + *n) and its normalized weights
 * (PIL's precompute_coeffs, the filter clipped to [lo, hi)). */
static void coeffs_one(double in0, double scale, int lo, int hi, int xx,
                       int max_taps, int *xmin_out, int *n_out, double *w) {
  double filterscale = scale < 1.0 ? 1.0 : scale, ss = 1.0 / filterscale;
  double support = filterscale, center = in0 + (xx + 0.5) * scale, ww = 0;
  int xmin = (int)(center - support + 0.5);
  int xmax = (int)(center + support + 0.5);
  xmin = xmin < lo ? lo : xmin;
  xmax = xmax > hi ? hi : xmax;
  int n = xmax - xmin;
  n = n < 0 ? 0 : n > max_taps ? max_taps : n;
  for (int x = 0; x < n; x++) {
    w[x] = triangle((x + xmin - center + 0.5) * ss);
    ww += w[x];
  }
  for (int x = 0; x < n; x++)
    w[x] = ww != 0.0 ? w[x] / ww : 0.0;
  *xmin_out = xmin;
  *n_out = n;
}

/* w[0..n) (normalized, >= 0) in fixed point, summing to exactly
 * 1 << PRECISION_BITS (the rounding residue goes to the largest): the
 * weighted sum of bytes then never passes 255.5 and needs no clipping. */
static void weights_fixed(const double *w, int n, int16_t *k) {
  int sum = 0, big = 0;
  for (int x = 0; x < n; x++) {
    k[x] = (int16_t)(w[x] * (1 << PRECISION_BITS) + 0.5);
    sum += k[x];
    big = k[x] > k[big] ? x : big;
  }
  if (n > 0 && sum > 0)
    k[big] = (int16_t)(k[big] + (1 << PRECISION_BITS) - sum);
}

/* The weights of every output pixel, each window widened to c->taps (the
 * most any pixel has) with zero weights, and shifted left where it would
 * pass hi, so that every pixel reads exactly c->taps inputs in [lo, hi). */
static void coeffs_make(double in0, double in1, int lo, int hi, int out,
                        int max_taps, coeffs *c) {
  double scale = (in1 - in0) / out, *w = c->w;
  int taps = 1;
  for (int pass = 0; pass < 2; pass++) { /* count, then fill */
    for (int xx = 0; xx < out; xx++) {
      int xmin, n;
      coeffs_one(in0, scale, lo, hi, xx, max_taps, &xmin, &n, w);
      if (pass == 0) {
        taps = n > taps ? n : taps;
        continue;
      }
      int start = xmin + taps > hi ? hi - taps : xmin;
      int16_t *k = c->k + (size_t)xx * taps;
      memset(k, 0, (size_t)taps * sizeof *k);
      weights_fixed(w, n, k + (xmin - start));
      c->first[xx] = start;
    }
  }
  c->taps = taps;
}

/* No clipping: weights are >= 0 and sum to one (weights_fixed), so the
 * sum is in [0, 255.5). */
static uint8_t to8(int32_t v) { return (uint8_t)(v >> PRECISION_BITS); }

/* out[0..n) = the `taps` rows from `rows` (`stride` bytes apart) weighted
 * by k: the one kernel of both passes. Channels do not matter here, so
 * whole chunks go through the vector unit; their accumulators stay in
 * registers. */
static void combine_rows(const uint8_t *rows, size_t stride, const int16_t *k,
                         int taps, size_t n, uint8_t *restrict out) {
  size_t i = 0;
  for (; i + CHUNK <= n; i += CHUNK) {
    int32_t acc[CHUNK];
    for (int j = 0; j < CHUNK; j++)
      acc[j] = ROUND_HALF;
    for (int t = 0; t < taps; t++) {
      const uint8_t *restrict p = rows + (size_t)t * stride + i;
      int16_t w = k[t];
      for (int j = 0; j < CHUNK; j++)
        acc[j] += p[j] * w;
    }
    for (int j = 0; j < CHUNK; j++)
      out[i + j] = to8(acc[j]);
  }
  for (; i < n; i++) {
    int32_t acc = ROUND_HALF;
    for (int t = 0; t < taps; t++)
      acc += rows[(size_t)t * stride + i] * k[t];
    out[i] = to8(acc);
  }
}

/* dst (cols rows of `rows` pixels) = src (rows x cols pixels) transposed,
 * in column strips so that both sides stay in cache. */
static void transpose_px(const uint8_t *src, size_t src_stride, uint32_t rows,
                         uint32_t cols, uint8_t *dst, size_t dst_stride) {
  enum { STRIP = 16 };
  for (uint32_t x0 = 0; x0 < cols; x0 += STRIP) {
    uint32_t x1 = PL_MIN(x0 + STRIP, cols);
    for (uint32_t y = 0; y < rows; y++)
      for (uint32_t x = x0; x < x1; x++)
        memcpy(dst + x * dst_stride + (size_t)y * 4,
               src + y * src_stride + (size_t)x * 4, 4);
  }
}

/* Column xx of the output (out_h RGBX pixels) into the three planes. */
static void column_to_planes(const uint8_t *col, uint32_t out_w,
                             uint32_t out_h, uint32_t xx, uint8_t *chw) {
  size_t plane = (size_t)out_w * out_h;
  uint8_t *r = chw + xx, *g = r + plane, *b = g + plane;
  for (uint32_t yy = 0; yy < out_h; yy++) {
    r[(size_t)yy * out_w] = col[4 * yy];
    g[(size_t)yy * out_w] = col[4 * yy + 1];
    b[(size_t)yy * out_w] = col[4 * yy + 2];
  }
}

/* The vertical pass first (PIL runs the horizontal first; each pass
 * rounds to uint8, so the order moves an output level by one at times):
 * it then reads whole source rows, and the horizontal pass, run as row
 * combinations over the transposed result, sees only out_h rows. */
pl_status pl_resize_rgbx(const pl_resize_src *s, uint32_t out_w,
                         uint32_t out_h, bool flip, uint8_t *chw,
                         pl_scratch *scratch, int slot, pl_error *err) {
  coeffs cx, cy;
  int kx = coeffs_max_taps(s->box_x0, s->box_x1, (int)out_w);
  int ky = coeffs_max_taps(s->box_y0, s->box_y1, (int)out_h);
  size_t col_bytes = (size_t)out_h * 4;
  uint8_t *mem = pl_scratch_get(scratch, slot,
                                coeffs_bytes(kx, (int)out_w) +
                                    coeffs_bytes(ky, (int)out_h) + col_bytes);
  if (!mem)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory resizing");
  mem = coeffs_carve(&cx, kx, (int)out_w, mem);
  uint8_t *col = coeffs_carve(&cy, ky, (int)out_h, mem);
  coeffs_make(s->box_x0, s->box_x1, (int)s->x0, (int)s->x1, (int)out_w, kx,
              &cx);
  coeffs_make(s->box_y0, s->box_y1, (int)s->y0, (int)s->y1, (int)out_h, ky,
              &cy);
  /* Only the columns the horizontal pass reads go through the vertical. */
  uint32_t c0 = (uint32_t)cx.first[0];
  uint32_t cols = (uint32_t)(cx.first[out_w - 1] + cx.taps) - c0;
  size_t vrow = (size_t)cols * 4, src_stride = (size_t)s->w * 4;
  size_t vsize = (size_t)pl_align_up((uint64_t)vrow * out_h, 64);
  uint8_t *v = pl_scratch_get(scratch, slot + 1, 2 * vsize);
  if (!v)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory resizing");
  uint8_t *vt = v + vsize; /* v transposed: cols rows of out_h pixels */
  for (uint32_t yy = 0; yy < out_h; yy++)
    combine_rows(s->rgbx + (size_t)cy.first[yy] * src_stride + c0 * 4,
                 src_stride, cy.k + (size_t)yy * cy.taps, cy.taps, vrow,
                 v + yy * vrow);
  transpose_px(v, vrow, out_h, cols, vt, col_bytes);
  for (uint32_t xx = 0; xx < out_w; xx++) {
    combine_rows(vt + (size_t)(cx.first[xx] - (int)c0) * col_bytes,
                 col_bytes, cx.k + (size_t)xx * cx.taps, cx.taps, col_bytes,
                 col);
    column_to_planes(col, out_w, out_h, flip ? out_w - 1 - xx : xx, chw);
  }
  return PL_OK;
}
