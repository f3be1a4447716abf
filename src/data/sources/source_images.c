/* Image folders: torchvision's ImageFolder layout or a "PATH LABEL" list,
 * decoded (data/image_decode) and transformed (data/image_resize) in the
 * worker, per sample, into a fixed [3, size, size] uint8 image; a bad file
 * fails its sample or is replaced by another (on_error).
 *
 * Transforms (images_decode.c) follow torchvision on PIL images:
 *  - train: RandomResizedCrop(size, scale, ratio) - transforms.py
 *    get_params: ten attempts at an area share and a log-uniform aspect,
 *    w = round(sqrt(area * ratio)), h = round(sqrt(area / ratio)) (Python's
 *    round: half to even), accepted when it fits, top and left uniform;
 *    else a central crop clamped to the ratio range - then a horizontal
 *    flip with probability flip_p. Draws come from (seed, epoch, index).
 *  - eval: Resize(resize) of the shorter side (the longer side floors, as
 *    _compute_resized_output_size does), then CenterCrop(size) with
 *    round((h - size) / 2) above.
 * Both become one box in the source image resized to size x size, so only
 * the box (eval: plus the filter's reach) is decoded, at a JPEG DCT scale
 * of 1/2..1/8 when the box stays at least `size` pixels across.
 *
 * The source's files: images_internal.h says which does what. */
#include "data/dataset.h"
#include "core/rng.h"
#include "data/sources/images_gpu.h"
#include "data/sources/images_internal.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RNG_STREAM_SKIP 0x736b6970ull /* "skip" */
#define SKIP_ATTEMPTS 16

void pl_image_options_init(pl_image_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->size = 224;
  o->train = 1;
  o->scale_min = 0.08;
  o->scale_max = 1.0;
  o->ratio_min = 3.0 / 4.0;
  o->ratio_max = 4.0 / 3.0;
  o->flip_p = 0.5;
  o->dct_scaling = 1;
  o->on_error = PL_IMAGE_ERROR_FAIL;
}

void pl_images_put_extras(const images_impl *im, uint64_t index,
                          const crop_box *b, void *const *dst) {
  memcpy(dst[1], &im->label[index], sizeof(int64_t));
  if (im->opt.crop_field) {
    int32_t crop[5] = {b->param[0], b->param[1], b->param[2], b->param[3],
                       b->flip};
    memcpy(dst[2], crop, sizeof crop);
  }
}

pl_status pl_images_decode_one(const images_impl *im, uint64_t index,
                               const pl_sample_ctx *ctx, pl_scratch *sc,
                               const uint8_t *data, size_t n,
                               void *const *dst, pl_error *err) {
  const char *path = im->names + im->offset[index];
  crop_box b;
  pl_status s = pl_images_decode(&im->opt, data, n, path, ctx, index, sc,
                                 dst[0], &b, err);
  if (s != PL_OK) {
    pl_error_set_path(err, path); /* the message names it */
    return s;
  }
  pl_images_put_extras(im, index, &b, dst);
  return PL_OK;
}

static pl_status load_one(const images_impl *im, uint64_t index,
                          const pl_sample_ctx *ctx, pl_scratch *sc,
                          void *const *dst, pl_error *err) {
  const char *path = im->names + im->offset[index];
  uint8_t *data = NULL;
  size_t n = 0;
  PL_TRY(pl_images_read_file(path, sc, &data, &n, err));
  return pl_images_decode_one(im, index, ctx, sc, data, n, dst, err);
}

static void log_replacement(const pl_sample_ctx *ctx, uint64_t index,
                            uint64_t with, const pl_error *why) {
  if (ctx->log)
    pl_log(ctx->log, PL_LOG_WARN,
           "images: sample %llu replaced by sample %llu: %s",
           (unsigned long long)index, (unsigned long long)with, why->message);
}

pl_status pl_images_read_or_replace(images_impl *im, uint64_t index,
                                    const pl_sample_ctx *ctx, pl_scratch *sc,
                                    void *const *dst, pl_error *err) {
  pl_error own; /* err may be NULL (pl_dataset_read): the skip needs one */
  pl_error *e = err ? err : &own;
  pl_status s = load_one(im, index, ctx, sc, dst, e);
  if (s == PL_OK || im->opt.on_error != PL_IMAGE_ERROR_SKIP ||
      s == PL_NO_MEMORY)
    return s;
  /* The replacement depends on the index alone (not the epoch or the
   * worker), so a bad file is always replaced by the same good one. */
  pl_rng r = pl_rng_for(0, 0, index, RNG_STREAM_SKIP);
  /* The sample's own error, before a failed replacement overwrites it. */
  pl_error why = *e;
  int tries = im->n > 1 ? SKIP_ATTEMPTS : 0;
  for (int attempt = 0; attempt < tries; attempt++) {
    uint64_t other = pl_rng_below(&r, im->n - 1);
    other += other >= index;
    if (load_one(im, other, ctx, sc, dst, e) == PL_OK) {
      atomic_fetch_add_explicit(&im->replaced, 1, memory_order_relaxed);
      log_replacement(ctx, index, other, &why);
      /* The loader fails a batch whose error has a status set, whatever
       * the read returned: the failure that was replaced is cleared. */
      pl_error_clear(e);
      return PL_OK;
    }
  }
  /* None read: the error is the sample's own (its file, its path), not
   * that of the last replacement tried. */
  *e = why;
  return pl_error_prefix(e, "no readable replacement after %d tries", tries);
}

static pl_status images_read(const pl_dataset *ds, uint64_t index,
                             const pl_sample_ctx *ctx, void *const *dst,
                             pl_error *err) {
  images_impl *im = ds->impl;
  pl_scratch *sc = pl_scratch_take(&im->scratch);
  if (!sc)
    return pl_errorf(err, PL_NO_MEMORY, "images: out of memory");
  pl_status s = pl_images_read_or_replace(im, index, ctx, sc, dst, err);
  pl_scratch_give(&im->scratch, sc);
  return s;
}

static uint64_t images_replaced(const pl_dataset *ds) {
  images_impl *im = ds->impl;
  return atomic_load_explicit(&im->replaced, memory_order_relaxed);
}

static void images_destroy(void *p) {
  images_impl *im = p;
  if (!im)
    return;
  free(im->names);
  free(im->offset);
  free(im->label);
  pl_scratch_pool_destroy(&im->scratch);
  free(im);
}

static const char *images_sample_path(const pl_dataset *ds, uint64_t index,
                                      int64_t *label) {
  const images_impl *im = ds->impl;
  if (label)
    *label = im->label[index];
  return im->names + im->offset[index];
}

static const pl_dataset_vt images_vt = {
    .kind = "images",
    .read = images_read,
    .replaced = images_replaced,
    .sample_path = images_sample_path,
    .destroy_impl = images_destroy,
};

int pl_images_is(const pl_dataset *ds) {
  return ds && ds->vt == &images_vt;
}

static pl_status check_options(const pl_image_options *o, pl_error *err) {
  if (o->struct_size != sizeof *o)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: options not initialised with "
                     "pl_image_options_init");
  if (o->size == 0 || o->size > 8192)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: size %u (want 1 to 8192)", o->size);
  if (!(o->scale_min > 0 && o->scale_min <= o->scale_max && o->scale_max <= 1))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: scale %g:%g (want 0 < min <= max <= 1)",
                     o->scale_min, o->scale_max);
  if (!(o->ratio_min > 0 && o->ratio_min <= o->ratio_max &&
        isfinite(o->ratio_max)))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: ratio %g:%g (want 0 < min <= max)",
                     o->ratio_min, o->ratio_max);
  if (!(o->flip_p >= 0 && o->flip_p <= 1))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: flip probability %g (want 0 to 1)", o->flip_p);
  if (!o->train && o->resize && o->resize < o->size)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: resize %u is smaller than size %u", o->resize,
                     o->size);
  if (!pl_image_have_jpeg() || !pl_image_have_png())
    return pl_errorf(err, PL_UNSUPPORTED,
                     "images: this build lacks %s (install libjpeg62-turbo-dev "
                     "and libpng-dev, then rebuild)",
                     !pl_image_have_jpeg() ? "libjpeg-turbo" : "libpng");
  return PL_OK;
}

pl_status pl_dataset_open_images(const char *root_or_list,
                                 const pl_image_options *opt,
                                 pl_dataset **out, pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!root_or_list || !root_or_list[0] || !opt)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: a folder or list file and options are "
                     "required");
  PL_TRY(check_options(opt, err));
  struct stat st;
  if (stat(root_or_list, &st) != 0) {
    int e = errno;
    pl_errorf(err, PL_IO, "%s: %s", root_or_list, strerror(e));
    pl_error_set_errno(err, e);
    pl_error_set_path(err, root_or_list);
    return PL_IO;
  }
  listing l = {0};
  pl_status s = pl_images_list(root_or_list, S_ISDIR(st.st_mode), &l, err);
  images_impl *im = s == PL_OK ? calloc(1, sizeof *im) : NULL;
  if (s == PL_OK && !im)
    s = pl_errorf(err, PL_NO_MEMORY, "out of memory");
  if (s != PL_OK) {
    free(l.names), free(l.offset), free(l.label);
    return s;
  }
  im->opt = *opt;
  if (!im->opt.resize)
    im->opt.resize = (uint32_t)(opt->size / 0.875);
  im->n = l.n, im->names = l.names, im->offset = l.offset, im->label = l.label;
  atomic_init(&im->replaced, 0);
  pl_scratch_pool_init(&im->scratch);
  pl_field fields[3] = {
      {.name = "image", .dtype = PL_UINT8, .ndim = 3,
       .shape = {3, opt->size, opt->size}},
      {.name = "label", .dtype = PL_INT64, .ndim = 0},
      {.name = "crop", .dtype = PL_INT32, .ndim = 1, .shape = {5}},
  };
  s = pl_dataset_new(&images_vt, im, im->n, fields, opt->crop_field ? 3 : 2,
                     out, err);
  if (s != PL_OK)
    images_destroy(im);
  return s;
}
