/* Private to the image source's files, each of one concern:
 *   source_images.c    the dataset: options, open, per-sample reads with
 *                      replacement, destroy
 *   images_scan.c      the listing: a class-folder tree or a list file
 *   images_files.c     one image file read whole, checked first
 *   images_decode.c    crop planning (torchvision's draws), decode and
 *                      resize of one image's bytes; also for tar shards
 *                      (data/image_sample.h)
 *   images_gpu_view.c  a loader's GPU decode view (images_gpu.h)
 * Calls go down this list's tree: the view calls the dataset's reads and
 * the files; the dataset calls the listing, the files and the decode; the
 * listing calls the files; the files and the decode call none of these. */
#ifndef PL_IMAGES_INTERNAL_H
#define PL_IMAGES_INTERNAL_H

#include "data/dataset.h"
#include "core/scratch.h"
#include "data/image_decode.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#define MAX_FILE_BYTES (256ull << 20)
/* The source's own scratch slots, after the decoder's. */
#define SLOT_FILE PL_DECODE_SLOTS
#define SLOT_RESIZE (PL_DECODE_SLOTS + 1) /* and the next */
_Static_assert(SLOT_RESIZE + 2 <= PL_SCRATCH_SLOTS, "scratch slots");

typedef struct images_impl {
  pl_image_options opt;
  uint64_t n;
  char *names;      /* NUL-separated paths */
  uint64_t *offset; /* n: path i at names + offset[i] */
  int64_t *label;
  atomic_uint_fast64_t replaced;
  /* Decode and resize buffers, one scratch per concurrent reader: a worker
   * takes one per sample and gives it back, so after the first samples
   * nothing of ours is allocated per image. A pool in the dataset rather
   * than worker-owned memory: any thread may read (loader workers, the
   * consumer with num_workers 0, Python's ds[i]), the loader needs no
   * hook, and destroy frees it all. */
  pl_scratch_pool scratch;
} images_impl;

/* ---------------------------------------------------------------- decode */

typedef struct crop_box {
  double x0, y0, x1, y1; /* the box that becomes the output */
  uint32_t rx, ry, rw, rh; /* the region decoded */
  bool flip;
  int32_t param[4]; /* top, left, height, width (the crop field) */
} crop_box;

/* The crop box of sample `index` in a W x H image: the draws of
 * (ctx->seed, ctx->epoch, index), the same on the CPU and GPU paths. */
void pl_images_crop(const pl_image_options *opt, const pl_sample_ctx *ctx,
                    uint64_t index, uint32_t W, uint32_t H, crop_box *box);

/* data[0..n) (`name` in messages) decoded, cropped and resized into image
 * ([3, size, size] uint8); *box the crop it drew. A failed resize's
 * message starts with name. */
pl_status pl_images_decode(const pl_image_options *opt, const uint8_t *data,
                           size_t n, const char *name,
                           const pl_sample_ctx *ctx, uint64_t index,
                           pl_scratch *sc, void *image, crop_box *box,
                           pl_error *err);

/* ---------------------------------------------------------------- files */

/* "FIFO", "directory"...: what a file that is not a regular one is. */
const char *pl_images_file_kind(mode_t m);

/* The file open for reading, checked, and its size. */
pl_status pl_images_open(const char *path, int *fd_out, size_t *size_out,
                         pl_error *err);

/* size bytes of fd into buf; closes fd. */
pl_status pl_images_read_all(int fd, const char *path, uint8_t *buf,
                             size_t size, pl_error *err);

/* The whole file into the scratch's file slot. */
pl_status pl_images_read_file(const char *path, pl_scratch *sc,
                              uint8_t **out, size_t *n, pl_error *err);

/* ---------------------------------------------------------------- listing */

typedef struct listing {
  char *names;
  size_t used, cap;
  uint64_t *offset;
  int64_t *label;
  uint64_t n, ncap;
} listing;

/* The images of a class-folder tree (is_dir) or a "PATH LABEL" list file,
 * appended to l. */
pl_status pl_images_list(const char *root_or_list, bool is_dir, listing *l,
                         pl_error *err);

/* ---------------------------------------------------------------- reads */

/* Sample `index` from its file's bytes data[0..n): image, label, crop. */
pl_status pl_images_decode_one(const images_impl *im, uint64_t index,
                               const pl_sample_ctx *ctx, pl_scratch *sc,
                               const uint8_t *data, size_t n,
                               void *const *dst, pl_error *err);

/* Sample `index` read from its file, replaced as opt.on_error says. */
pl_status pl_images_read_or_replace(images_impl *im, uint64_t index,
                                    const pl_sample_ctx *ctx, pl_scratch *sc,
                                    void *const *dst, pl_error *err);

/* The label and crop fields of a sample whose image is written. */
void pl_images_put_extras(const images_impl *im, uint64_t index,
                          const crop_box *b, void *const *dst);

#endif /* PL_IMAGES_INTERNAL_H */
