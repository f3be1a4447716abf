/* JPEG (libjpeg-turbo) and PNG (libpng) decoding of one region of an
 * image held in memory, to interleaved RGB.
 *
 * Decoding is planned in two steps so that only what the crop needs is
 * decoded: the header gives the size, the caller's `plan` picks the region
 * (full-resolution pixels) and a JPEG DCT scale 1/denom, and the decoder
 * then skips the rows above the region (jpeg_skip_scanlines), decodes only
 * the iMCU columns that cover it (jpeg_crop_scanline) and stops after its
 * last row. Decoder failures never exit: libjpeg's error_exit and libpng's
 * error_fn longjmp back, and the message names the file and the decoder's
 * reason. Builds without the libraries return PL_UNSUPPORTED. */
#ifndef PL_IMAGE_DECODE_H
#define PL_IMAGE_DECODE_H

#include "core/common.h"

/* The most pixels an image may have (a guard against absurd headers). */
#define PL_IMAGE_MAX_PIXELS (1ull << 27)

typedef struct pl_decode_plan {
  uint32_t x, y, w, h; /* region to decode, full-resolution pixels */
  uint32_t denom;      /* 1, 2, 4 or 8 (JPEG only; PNG decodes at 1) */
} pl_decode_plan;

/* Given the image's size, fill *plan. denom is clamped to what the format
 * allows. */
typedef void (*pl_plan_fn)(void *user, uint32_t width, uint32_t height,
                           uint32_t max_denom, pl_decode_plan *plan);

typedef struct pl_decoded {
  uint8_t *rgb;           /* bw x bh x 3, malloc'ed (free it) */
  uint32_t bw, bh;        /* buffer size */
  uint32_t bx, by;        /* buffer origin in the scaled image */
  uint32_t sw, sh;        /* the scaled image's size */
  uint32_t width, height; /* the image's full size */
  pl_decode_plan plan;    /* as applied */
} pl_decoded;

/* Decodes data[0..n) (JPEG or PNG, told apart by their signatures). */
pl_status pl_image_decode(const uint8_t *data, size_t n, const char *path,
                          pl_plan_fn plan, void *user, pl_decoded *out,
                          pl_error *err);

/* Whether this build can decode JPEG / PNG. */
bool pl_image_have_jpeg(void);
bool pl_image_have_png(void);

#endif /* PL_IMAGE_DECODE_H */
