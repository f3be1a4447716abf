/* JPEG (libjpeg-turbo) and PNG (libpng) decoding of one region of an
 * image held in memory, to interleaved RGBX (4 bytes a pixel, the 4th
 * undefined: libjpeg-turbo writes that layout as fast as RGB, and the
 * resize vectorizes on it; PNG alpha is dropped, as PIL's convert("RGB")
 * does, by ignoring the 4th byte).
 *
 * Decoding is planned in two steps so that only what the crop needs is
 * decoded: the header gives the size, the caller's `plan` picks the region
 * (full-resolution pixels) and a JPEG DCT scale of eighths/8, and the decoder
 * then skips the rows above the region (jpeg_skip_scanlines), decodes only
 * the iMCU columns that cover it (jpeg_crop_scanline) and stops after its
 * last row. Decoder failures never exit: libjpeg's error_exit and libpng's
 * error_fn longjmp back, and the message names the file and the decoder's
 * reason. Builds without the libraries return PL_UNSUPPORTED. */
#ifndef PL_IMAGE_DECODE_H
#define PL_IMAGE_DECODE_H

#include "core/common.h"
#include "core/scratch.h"

/* The most pixels an image may have (a guard against absurd headers). */
#define PL_IMAGE_MAX_PIXELS (1ull << 27)

typedef struct pl_decode_plan {
  uint32_t x, y, w, h; /* region to decode, full-resolution pixels */
  /* JPEG: decode at a DCT scale of eighths/8, 1 to 8 (libjpeg-turbo's
   * scaled inverse DCTs produce eighths x eighths pixels per 8x8 block;
   * the image becomes ceil(width * eighths / 8) across). PNG: always 8. */
  uint32_t eighths;
} pl_decode_plan;

/* Given the image's size, fill *plan. eighths is clamped to
 * [min_eighths, 8]: 1 for JPEG, 8 for PNG (no scaled decoding). */
typedef void (*pl_plan_fn)(void *user, uint32_t width, uint32_t height,
                           uint32_t min_eighths, pl_decode_plan *plan);

/* The scratch slots the decoder uses; a caller's own start at
 * PL_DECODE_SLOTS. */
enum {
  PL_DECODE_SLOT_PIXELS = 0, /* pl_decoded.rgb */
  PL_DECODE_SLOT_JOB,        /* the codec's state */
  PL_DECODE_SLOT_ROW,        /* a PNG staging row */
  PL_DECODE_SLOT_FULL,       /* an interlaced PNG, whole */
  PL_DECODE_SLOT_ROWS,       /* its row pointers */
  PL_DECODE_SLOTS
};

typedef struct pl_decoded {
  uint8_t *rgbx;          /* bw x bh x 4, in the scratch (valid until its
                             next use; not to be freed) */
  uint32_t bw, bh;        /* buffer size */
  uint32_t bx, by;        /* buffer origin in the scaled image */
  uint32_t sw, sh;        /* the scaled image's size */
  uint32_t width, height; /* the image's full size */
  pl_decode_plan plan;    /* as applied */
} pl_decoded;

/* Decodes data[0..n) (JPEG or PNG, told apart by their signatures), its
 * buffers from slots 0..PL_DECODE_SLOTS-1 of `scratch` (no allocation of
 * ours once they have grown; the codecs' own per-image state remains). */
pl_status pl_image_decode(const uint8_t *data, size_t n, const char *path,
                          pl_plan_fn plan, void *user, pl_scratch *scratch,
                          pl_decoded *out, pl_error *err);

/* Whether this build can decode JPEG / PNG. */
bool pl_image_have_jpeg(void);
bool pl_image_have_png(void);

#endif /* PL_IMAGE_DECODE_H */
