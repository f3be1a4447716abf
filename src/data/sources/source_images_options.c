/* The images source's registry opener: its "key=value" options into
 * pl_image_options (the source itself is source_images.c); the shards
 * source takes the same keys for its images. */
#include "data/dataset.h"
#include "data/sources/registry.h"

pl_status pl_source_image_options(const pl_options *o, pl_image_options *m,
                                  pl_error *err) {
  uint64_t size = m->size, resize = m->resize, train = 1, dct = 1, crop = 0;
  int on_error = 0;
  const char *flip_key, *dct_key;
  PL_TRY(pl_options_key_of(o, "flip_p", "flip", &flip_key, err));
  PL_TRY(pl_options_key_of(o, "dct_scaling", "dct", &dct_key, err));
  PL_TRY(pl_options_u64(o, "size", 65535, &size, err));
  PL_TRY(pl_options_u64(o, "train", 1, &train, err));
  PL_TRY(pl_options_u64(o, "resize", 65535, &resize, err));
  PL_TRY(pl_options_u64(o, dct_key, 1, &dct, err));
  PL_TRY(pl_options_u64(o, "crop_field", 1, &crop, err));
  PL_TRY(pl_options_pair(o, "scale", &m->scale_min, &m->scale_max, err));
  PL_TRY(pl_options_pair(o, "ratio", &m->ratio_min, &m->ratio_max, err));
  PL_TRY(pl_options_double(o, flip_key, 0, 1, &m->flip_p, err));
  PL_TRY(pl_options_choice(o, "on_error", "fail skip", &on_error, err));
  m->size = (uint32_t)size;
  m->resize = (uint32_t)resize;
  m->train = (int)train;
  m->dct_scaling = (int)dct;
  m->crop_field = (int)crop;
  m->on_error = (pl_image_on_error)on_error;
  return PL_OK;
}

pl_status pl_source_open_images(const char *const *paths, int npaths,
                                const pl_options *o, pl_dataset **out,
                                pl_error *err) {
  if (npaths != 1)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images takes 1 path (a folder or a list file), got %d",
                     npaths);
  pl_image_options m;
  pl_image_options_init(&m);
  PL_TRY(pl_source_image_options(o, &m, err));
  return pl_dataset_open_images(paths[0], &m, out, err);
}
