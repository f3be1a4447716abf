/* PIL-compatible antialiased bilinear resampling (see image_resize.h).
 *
 * The vertical pass runs first, one output row at a time, into a row
 * buffer that stays in L1; the horizontal pass then reads that row and
 * writes the output row straight into the three CHW planes, mirrored when
 * flipped (it takes the mirrored column's weights), so there is no
 * intermediate image, no transpose and no final copy. Every output pixel
 * reads the same number of taps (padded with zero weights). Weights are
 * 14-bit fixed point in int16 (PIL uses 22 bits in int32) so that two taps
 * go through one 16x16->32 multiply-add (SSE2's pmaddwd: x86-64's
 * baseline, no -march needed); an output level moves by one, at times,
 * against PIL's. Without SSE2 plain C computes the same sums, bit for bit
 * (pl_resize_rgbx_generic, which the tests compare). */
#include "data/image_resize.h"

#include <math.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define PRECISION_BITS 14
#define ROUND_HALF (1 << (PRECISION_BITS - 1))
/* Output columns computed, then stored into the planes, at once. */
#define GROUP 16

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

/* The output position p shows column column_of(p): flipping is reading
 * the mirrored column's weights. */
static uint32_t column_of(uint32_t p, uint32_t out_w, bool flip) {
  return flip ? out_w - 1 - p : p;
}

/* out[i..n) = the `taps` rows from `rows` (`stride` bytes apart) weighted
 * by k: the vertical pass, over bytes (channels do not matter). */
static void combine_rows_scalar(const uint8_t *rows, size_t stride,
                                const int16_t *k, int taps, size_t i,
                                size_t n, uint8_t *restrict out) {
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

/* Rows [y, out_h) of n output columns (RGBX, col_bytes apart in cols)
 * into positions [p, p + n) of the planes (w pixels a row). */
static void columns_to_planes_scalar(const uint8_t *cols, size_t col_bytes,
                                     uint32_t n, uint32_t y, uint32_t out_h,
                                     uint32_t w, uint32_t p, uint8_t *chw) {
  size_t plane = (size_t)w * out_h;
  for (uint32_t j = 0; j < n; j++) {
    const uint8_t *col = cols + j * col_bytes;
    uint8_t *r = chw + p + j, *g = r + plane, *b = g + plane;
    for (uint32_t yy = y; yy < out_h; yy++) {
      r[(size_t)yy * w] = col[4 * yy];
      g[(size_t)yy * w] = col[4 * yy + 1];
      b[(size_t)yy * w] = col[4 * yy + 2];
    }
  }
}

#if defined(__SSE2__)
/* k[t] and k[t + 1] (0 past the last tap) in every 32-bit lane: the
 * pairs pmaddwd multiplies-and-adds with (tap t, tap t + 1) values. */
static __m128i weight_pair(const int16_t *k, int t, int taps) {
  uint32_t lo = (uint16_t)k[t], hi = t + 1 < taps ? (uint16_t)k[t + 1] : 0;
  return _mm_set1_epi32((int)(lo | hi << 16));
}

/* combine_rows_scalar for whole 16-byte chunks, two rows per multiply-add;
 * returns how far it got. */
static size_t combine_rows_vector(const uint8_t *rows, size_t stride,
                                  const int16_t *k, int taps, size_t n,
                                  uint8_t *restrict out) {
  const __m128i zero = _mm_setzero_si128(), half = _mm_set1_epi32(ROUND_HALF);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a0 = half, a1 = half, a2 = half, a3 = half;
    for (int t = 0; t < taps; t += 2) {
      const uint8_t *p0 = rows + (size_t)t * stride + i;
      const uint8_t *p1 = t + 1 < taps ? p0 + stride : p0; /* weight 0 */
      __m128i w = weight_pair(k, t, taps);
      __m128i x0 = _mm_loadu_si128((const __m128i *)p0);
      __m128i x1 = _mm_loadu_si128((const __m128i *)p1);
      __m128i lo = _mm_unpacklo_epi8(x0, x1), hi = _mm_unpackhi_epi8(x0, x1);
      a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), w));
      a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), w));
      a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), w));
      a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), w));
    }
    __m128i s01 = _mm_packs_epi32(_mm_srai_epi32(a0, PRECISION_BITS),
                                  _mm_srai_epi32(a1, PRECISION_BITS));
    __m128i s23 = _mm_packs_epi32(_mm_srai_epi32(a2, PRECISION_BITS),
                                  _mm_srai_epi32(a3, PRECISION_BITS));
    _mm_storeu_si128((__m128i *)(out + i), _mm_packus_epi16(s01, s23));
  }
  return i;
}

/* One channel (the byte at `shift` bits) of 16 RGBX pixels, stored. */
static void store_channel(uint8_t *dst, const __m128i *q, int shift) {
  const __m128i mask = _mm_set1_epi32(0xff), n = _mm_cvtsi32_si128(shift);
  __m128i c[4];
  for (int j = 0; j < 4; j++)
    c[j] = _mm_and_si128(_mm_srl_epi32(q[j], n), mask);
  _mm_storeu_si128((__m128i *)dst,
                   _mm_packus_epi16(_mm_packs_epi32(c[0], c[1]),
                                    _mm_packs_epi32(c[2], c[3])));
}

/* columns_to_planes_scalar for GROUP columns and rows [0, out_h & ~3):
 * 4 x 4 pixel blocks transposed in registers, 16 bytes stored per plane
 * and row; returns the first row it left. */
static uint32_t columns_to_planes_vector(const uint8_t *cols,
                                         size_t col_bytes, uint32_t out_h,
                                         uint32_t w, uint32_t p,
                                         uint8_t *chw) {
  size_t plane = (size_t)w * out_h;
  uint32_t yy = 0;
  for (; yy + 4 <= out_h; yy += 4) {
    __m128i q[4][4]; /* [row][4 columns] as RGBX bytes */
    for (int j = 0; j < 4; j++) {
      __m128i c[4];
      for (int i = 0; i < 4; i++)
        c[i] = _mm_loadu_si128(
            (const __m128i *)(cols + (size_t)(4 * j + i) * col_bytes + 4 * yy));
      __m128i t0 = _mm_unpacklo_epi32(c[0], c[1]);
      __m128i t1 = _mm_unpacklo_epi32(c[2], c[3]);
      __m128i t2 = _mm_unpackhi_epi32(c[0], c[1]);
      __m128i t3 = _mm_unpackhi_epi32(c[2], c[3]);
      q[0][j] = _mm_unpacklo_epi64(t0, t1);
      q[1][j] = _mm_unpackhi_epi64(t0, t1);
      q[2][j] = _mm_unpacklo_epi64(t2, t3);
      q[3][j] = _mm_unpackhi_epi64(t2, t3);
    }
    for (uint32_t k = 0; k < 4; k++) {
      uint8_t *r = chw + (size_t)(yy + k) * w + p;
      store_channel(r, q[k], 0);
      store_channel(r + plane, q[k], 8);
      store_channel(r + 2 * plane, q[k], 16);
    }
  }
  return yy;
}
#else
static size_t combine_rows_vector(const uint8_t *rows, size_t stride,
                                  const int16_t *k, int taps, size_t n,
                                  uint8_t *restrict out) {
  return 0;
}

static uint32_t columns_to_planes_vector(const uint8_t *cols,
                                         size_t col_bytes, uint32_t out_h,
                                         uint32_t w, uint32_t p,
                                         uint8_t *chw) {
  return 0;
}
#endif

/* out[0..n) = the `taps` rows from `rows` (`stride` bytes apart)
 * weighted by k: the one kernel of both passes. */
static void combine(const uint8_t *rows, size_t stride, const int16_t *k,
                    int taps, size_t n, uint8_t *restrict out, bool vector) {
  size_t done = vector ? combine_rows_vector(rows, stride, k, taps, n, out) : 0;
  combine_rows_scalar(rows, stride, k, taps, done, n, out);
}

/* The vertical pass first (PIL runs the horizontal first; each pass
 * rounds to uint8, so the order moves an output level by one at times):
 * it then reads whole source rows, and the horizontal pass, run as row
 * combinations over the transposed result, sees only out_h rows. */
static pl_status resize(const pl_resize_src *s, uint32_t out_w,
                        uint32_t out_h, bool flip, uint8_t *chw,
                        pl_scratch *scratch, int slot, bool vector,
                        pl_error *err) {
  coeffs cx, cy;
  int kx = coeffs_max_taps(s->box_x0, s->box_x1, (int)out_w);
  int ky = coeffs_max_taps(s->box_y0, s->box_y1, (int)out_h);
  size_t col_bytes = (size_t)out_h * 4;
  uint8_t *mem = pl_scratch_get(scratch, slot,
                                coeffs_bytes(kx, (int)out_w) +
                                    coeffs_bytes(ky, (int)out_h) +
                                    GROUP * col_bytes);
  if (!mem)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory resizing");
  mem = coeffs_carve(&cx, kx, (int)out_w, mem);
  uint8_t *group = coeffs_carve(&cy, ky, (int)out_h, mem);
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
    combine(s->rgbx + (size_t)cy.first[yy] * src_stride + c0 * 4, src_stride,
            cy.k + (size_t)yy * cy.taps, cy.taps, vrow, v + yy * vrow,
            vector);
  transpose_px(v, vrow, out_h, cols, vt, col_bytes);
  /* Output positions p.. come from columns column_of(p..): flipping is
   * computing them in mirrored order. */
  for (uint32_t p = 0; p < out_w; p += GROUP) {
    uint32_t n = PL_MIN(GROUP, out_w - p);
    for (uint32_t j = 0; j < n; j++) {
      uint32_t xx = column_of(p + j, out_w, flip);
      combine(vt + (size_t)(cx.first[xx] - (int)c0) * col_bytes, col_bytes,
              cx.k + (size_t)xx * cx.taps, cx.taps, col_bytes,
              group + j * col_bytes, vector);
    }
    uint32_t y = vector && n == GROUP
                     ? columns_to_planes_vector(group, col_bytes, out_h,
                                                out_w, p, chw)
                     : 0;
    columns_to_planes_scalar(group, col_bytes, n, y, out_h, out_w, p, chw);
  }
  return PL_OK;
}

pl_status pl_resize_rgbx(const pl_resize_src *s, uint32_t out_w,
                         uint32_t out_h, bool flip, uint8_t *chw,
                         pl_scratch *scratch, int slot, pl_error *err) {
  return resize(s, out_w, out_h, flip, chw, scratch, slot, true, err);
}

pl_status pl_resize_rgbx_generic(const pl_resize_src *s, uint32_t out_w,
                                 uint32_t out_h, bool flip, uint8_t *chw,
                                 pl_scratch *scratch, int slot,
                                 pl_error *err) {
  return resize(s, out_w, out_h, flip, chw, scratch, slot, false, err);
}
