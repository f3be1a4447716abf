/* One image sample from encoded bytes held in memory, through the images
 * source's crop planning, decode and resize (source_images.c), for other
 * sources whose images are not one file each (tar shards). The result is
 * exactly what the images source delivers for the same bytes, options,
 * (seed, epoch) and index. */
#ifndef PL_IMAGE_SAMPLE_H
#define PL_IMAGE_SAMPLE_H

#include "data/dataset.h"
#include "core/scratch.h"
#include "data/image_decode.h"

/* Slot of `sc` that the function leaves alone: a caller may keep the
 * encoded bytes there. */
#define PL_IMAGE_SAMPLE_FREE_SLOT PL_DECODE_SLOTS

/* Decodes data[0..n) (`name` in messages) into image ([3, size, size]
 * uint8), with the random crop of (ctx->seed, ctx->epoch, index) when
 * opt->train; crop (may be NULL) gets top, left, height, width, flipped.
 * opt->resize must be set (not 0). */
pl_status pl_image_sample_from_bytes(const pl_image_options *opt,
                                     const uint8_t *data, size_t n,
                                     const char *name,
                                     const pl_sample_ctx *ctx, uint64_t index,
                                     pl_scratch *sc, void *image,
                                     int32_t crop[5], pl_error *err);

#endif /* PL_IMAGE_SAMPLE_H */
