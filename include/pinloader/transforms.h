/* pinloader/transforms.h: per-sample transforms of a batch's fields.
 * Part of the public API: include <pinloader.h>, which includes this file
 * (its top describes objects, errors and threads). */
#ifndef PINLOADER_TRANSFORMS_H
#define PINLOADER_TRANSFORMS_H

#ifndef PINLOADER_H
#error "include <pinloader.h>, not pinloader/transforms.h"
#endif

/* ---------------------------------------------------------------- transforms */

/* Per-sample transforms of a batch's fields, named as torchvision's. With a
 * CUDA loader they run on the GPU, on the loader's own stream right after a
 * batch's copy: the uint8 bytes cross PCIe, the transformed arrays are
 * written into the batch's device buffer, and the consumer's
 * pl_batch_wait_stream covers them. With a CPU loader the workers run the
 * same transforms on the host, with the same results (bit for bit: both use
 * one table computed on the host, see docs/transforms.md).
 *
 * Whatever the list's order, one field's transforms apply in this order:
 *   RANDOM_CROP   pad every side with `padding` pixels of value `fill`, then
 *                 crop size[0] x size[1] at a random offset (torchvision
 *                 RandomCrop(size, padding, fill), padding_mode constant)
 *   RANDOM_HFLIP  mirror the columns with probability p
 *   CONVERT       uint8 x -> x / 255 in `dtype` (float32, bfloat16, float16):
 *                 ConvertImageDtype / ToTensor
 *   NORMALIZE     (x / 255 - mean[c]) / std[c]; implies CONVERT to float32
 *                 unless a CONVERT names another dtype
 *   LAYOUT        the output's memory order: PL_LAYOUT_CHW ([C,H,W], torch's
 *                 contiguous NCHW) or PL_LAYOUT_HWC ([H,W,C], the memory of a
 *                 channels_last tensor); the default output layout is CHW
 *   TO_INT64      an integer field (labels) widened to int64, as torch's
 *                 default collate hands labels out
 * Float values are computed in float32, each operation correctly rounded
 * (what torch computes for ToTensor + Normalize in float32), then rounded
 * once, to nearest even, to the output dtype.
 *
 * Image fields are uint8 [C,H,W], [H,W,C] or [H,W]; `input_layout` (on any
 * of the field's transforms) says which when the shape does not: AUTO takes
 * a 3-d shape as [H,W,C] when its last dimension is 1, 3 or 4 and its first
 * is not, else as [C,H,W].
 *
 * Random parameters (crop offset, flip) of sample `index` are a function of
 * (loader seed, epoch, index, field) alone: the same for any number of
 * workers, on the CPU and on the GPU. pl_batch_field reports the
 * transformed dtype and shape. */
#define PL_TRANSFORM_MAX_CHANNELS 16

typedef enum pl_transform_kind {
  PL_TRANSFORM_NONE = 0,
  PL_TRANSFORM_RANDOM_CROP,
  PL_TRANSFORM_RANDOM_HFLIP,
  PL_TRANSFORM_CONVERT,
  PL_TRANSFORM_NORMALIZE,
  PL_TRANSFORM_LAYOUT,
  PL_TRANSFORM_TO_INT64,
  PL_TRANSFORM_KIND_COUNT_
} pl_transform_kind;

typedef enum pl_layout {
  PL_LAYOUT_AUTO = 0,
  PL_LAYOUT_CHW,
  PL_LAYOUT_HWC
} pl_layout;

typedef struct pl_transform {
  pl_transform_kind kind;
  const char *field; /* the field it applies to; NULL: "label" for TO_INT64,
                        else "image". Copied at pl_loader_create */
  pl_layout input_layout; /* how the stored field is laid out; AUTO */
  /* RANDOM_CROP */
  int32_t size[2];   /* output height, width; 0: the input's */
  int32_t padding;   /* pixels added on each side */
  uint8_t fill;      /* value of the padding pixels (before CONVERT) */
  /* RANDOM_HFLIP */
  float p;           /* probability of a flip; pl_transform_init: 0.5 */
  /* CONVERT */
  pl_dtype dtype;    /* PL_FLOAT32, PL_BFLOAT16 or PL_FLOAT16 */
  /* NORMALIZE: per channel, or one value for every channel */
  int num_channels;
  float mean[PL_TRANSFORM_MAX_CHANNELS];
  float std[PL_TRANSFORM_MAX_CHANNELS];
  /* LAYOUT */
  pl_layout layout;  /* PL_LAYOUT_CHW or PL_LAYOUT_HWC (channels_last) */
} pl_transform;

/* Zeroes t and sets its kind and defaults (p = 0.5, dtype float32, layout
 * CHW). */
PL_API void pl_transform_init(pl_transform *t, pl_transform_kind kind);

#endif /* PINLOADER_TRANSFORMS_H */
