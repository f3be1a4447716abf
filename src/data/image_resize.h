/* Antialiased bilinear resampling of an RGB region, as PIL's
 * Image.resize(size, BILINEAR, box) computes it (libImaging/Resample.c:
 * a triangle filter widened by the downscale factor, normalized weights in
 * 22-bit fixed point, horizontal pass then vertical, each rounded to
 * uint8), which is what torchvision applies to PIL images. Here the
 * vertical pass runs first and weights have 14 fractional bits, so an
 * output level may differ by one from PIL's.
 * The input is RGBX (4 bytes a pixel, the 4th ignored: the layout the
 * passes vectorize on); the output is planar RGB (CHW), optionally
 * mirrored left-right. */
#ifndef PL_IMAGE_RESIZE_H
#define PL_IMAGE_RESIZE_H

#include "core/common.h"
#include "core/scratch.h"

typedef struct pl_resize_src {
  const uint8_t *rgbx; /* interleaved, w x h x 4 */
  uint32_t w, h;
  /* The box (in these pixels, fractional) that becomes the output, and the
   * window [x0, x1) x [y0, y1) the filter may read: PIL clips the filter
   * to the image it resizes, so for a crop the window is the crop. */
  double box_x0, box_y0, box_x1, box_y1;
  uint32_t x0, y0, x1, y1;
} pl_resize_src;

/* Writes 3 planes of out_h x out_w into chw, its filter weights and the
 * row between the passes in slots `slot` and `slot + 1` of scratch.
 * PL_NO_MEMORY on allocation failure. */
pl_status pl_resize_rgbx(const pl_resize_src *src, uint32_t out_w,
                         uint32_t out_h, bool flip, uint8_t *chw,
                         pl_scratch *scratch, int slot, pl_error *err);

/* The same, bit for bit, in plain C only (what a build without SSE2 runs):
 * for tests of the vector kernels. */
pl_status pl_resize_rgbx_generic(const pl_resize_src *src, uint32_t out_w,
                                 uint32_t out_h, bool flip, uint8_t *chw,
                                 pl_scratch *scratch, int slot,
                                 pl_error *err);

#endif /* PL_IMAGE_RESIZE_H */
