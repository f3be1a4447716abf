/* PIL-compatible antialiased bilinear resampling (see image_resize.h). */
#include "data/image_resize.h"

#include <math.h>
#include <stdlib.h>

#define PRECISION_BITS (32 - 8 - 2)

/* Per output pixel: the first input pixel and the weights that follow. */
typedef struct coeffs {
  int ksize;
  int *first, *count;
  int32_t *k; /* out x ksize */
} coeffs;

static double triangle(double x) {
  x = fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

static void coeffs_free(coeffs *c) {
  free(c->first);
  free(c->count);
  free(c->k);
}

/* PIL's precompute_coeffs + normalize_coeffs_8bpc, with the filter clipped
 * to [lo, hi) instead of [0, size). */
static bool coeffs_make(double in0, double in1, int lo, int hi, int out,
                        coeffs *c) {
  double scale = (in1 - in0) / out;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  double support = 1.0 * filterscale;
  c->ksize = (int)ceil(support) * 2 + 1;
  c->first = malloc((size_t)out * sizeof *c->first);
  c->count = malloc((size_t)out * sizeof *c->count);
  c->k = malloc((size_t)out * (size_t)c->ksize * sizeof *c->k);
  double *w = malloc((size_t)c->ksize * sizeof *w);
  if (!c->first || !c->count || !c->k || !w) {
    free(w);
    return false;
  }
  for (int xx = 0; xx < out; xx++) {
    double center = in0 + (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
    int xmin = (int)(center - support + 0.5);
    int xmax = (int)(center + support + 0.5);
    xmin = xmin < lo ? lo : xmin;
    xmax = xmax > hi ? hi : xmax;
    int n = xmax - xmin;
    n = n < 0 ? 0 : n > c->ksize ? c->ksize : n;
    for (int x = 0; x < n; x++) {
      w[x] = triangle((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    int32_t *k = c->k + (size_t)xx * c->ksize;
    for (int x = 0; x < n; x++) {
      double v = ww != 0.0 ? w[x] / ww : 0.0;
      k[x] = (int32_t)(v * (1 << PRECISION_BITS) + (v < 0 ? -0.5 : 0.5));
    }
    c->first[xx] = xmin;
    c->count[xx] = n;
  }
  free(w);
  return true;
}

static uint8_t clip8(int32_t v) {
  v >>= PRECISION_BITS;
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Rows [r0, r1) of the source, resampled horizontally into tmp (interleaved,
 * out_w wide). */
static void horizontal(const pl_resize_src *s, const coeffs *cx, int r0,
                       int r1, uint32_t out_w, uint8_t *tmp) {
  for (int y = r0; y < r1; y++) {
    const uint8_t *row = s->rgb + (size_t)y * s->w * 3;
    uint8_t *o = tmp + (size_t)(y - r0) * out_w * 3;
    for (uint32_t xx = 0; xx < out_w; xx++) {
      const int32_t *k = cx->k + (size_t)xx * cx->ksize;
      const uint8_t *p = row + (size_t)cx->first[xx] * 3;
      int32_t a = 1 << (PRECISION_BITS - 1), b = a, c = a;
      for (int x = 0; x < cx->count[xx]; x++, p += 3) {
        a += p[0] * k[x];
        b += p[1] * k[x];
        c += p[2] * k[x];
      }
      o[xx * 3] = clip8(a);
      o[xx * 3 + 1] = clip8(b);
      o[xx * 3 + 2] = clip8(c);
    }
  }
}

/* The vertical pass from tmp (rows from r0) into the output planes. */
static void vertical(const coeffs *cy, const uint8_t *tmp, int r0,
                     uint32_t out_w, uint32_t out_h, bool flip,
                     uint8_t *chw) {
  size_t plane = (size_t)out_w * out_h;
  for (uint32_t yy = 0; yy < out_h; yy++) {
    const int32_t *k = cy->k + (size_t)yy * cy->ksize;
    const uint8_t *base = tmp + (size_t)(cy->first[yy] - r0) * out_w * 3;
    for (uint32_t xx = 0; xx < out_w; xx++) {
      int32_t a = 1 << (PRECISION_BITS - 1), b = a, c = a;
      const uint8_t *p = base + (size_t)xx * 3;
      for (int y = 0; y < cy->count[yy]; y++, p += (size_t)out_w * 3) {
        a += p[0] * k[y];
        b += p[1] * k[y];
        c += p[2] * k[y];
      }
      size_t at = (size_t)yy * out_w + (flip ? out_w - 1 - xx : xx);
      chw[at] = clip8(a);
      chw[plane + at] = clip8(b);
      chw[2 * plane + at] = clip8(c);
    }
  }
}

pl_status pl_resize_rgb(const pl_resize_src *s, uint32_t out_w,
                        uint32_t out_h, bool flip, uint8_t *chw,
                        pl_error *err) {
  coeffs cx = {0}, cy = {0};
  uint8_t *tmp = NULL;
  bool ok = coeffs_make(s->box_x0, s->box_x1, (int)s->x0, (int)s->x1,
                        (int)out_w, &cx) &&
            coeffs_make(s->box_y0, s->box_y1, (int)s->y0, (int)s->y1,
                        (int)out_h, &cy);
  if (ok) {
    /* Only the rows the vertical pass reads go through the horizontal. */
    int r0 = cy.first[0];
    int r1 = cy.first[out_h - 1] + cy.count[out_h - 1];
    r1 = r1 > r0 ? r1 : r0 + 1;
    tmp = malloc((size_t)(r1 - r0) * out_w * 3);
    ok = tmp != NULL;
    if (ok) {
      horizontal(s, &cx, r0, r1, out_w, tmp);
      vertical(&cy, tmp, r0, out_w, out_h, flip, chw);
    }
  }
  free(tmp);
  coeffs_free(&cx);
  coeffs_free(&cy);
  return ok ? PL_OK : pl_errorf(err, PL_NO_MEMORY, "out of memory resizing");
}
