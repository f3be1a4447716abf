/* Fuzz the image decoders and transforms: the input is one image file
 * (JPEG, PNG or anything), listed in a list file, read in train mode (a
 * random crop, DCT scaling) and in eval mode. Errors must be clean. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_all(const char *list, int train, uint32_t out) {
  pl_image_options o;
  pl_image_options_init(&o);
  o.train = train;
  o.size = out;
  o.crop_field = 1;
  pl_dataset *ds = NULL;
  pl_error err;
  if (pl_dataset_open_images(list, &o, &ds, &err) != PL_OK)
    abort(); /* the list is valid */
  static uint8_t img[3 * 64 * 64];
  int64_t label;
  int32_t crop[5];
  void *dst[3] = {img, &label, crop};
  for (uint64_t epoch = 0; epoch < 3; epoch++) {
    pl_sample_ctx ctx = {1, epoch, NULL};
    pl_status s = pl_dataset_read_sample(ds, 0, &ctx, dst, &err);
    if (s != PL_OK && (!err.message[0] || err.status != s))
      abort();
  }
  pl_dataset_destroy(ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  char img[128], list[128];
  fuzz_put(img, "x.img", 0, data + 1, size - 1);
  fuzz_put(list, "list.txt", 0, (const uint8_t *)"x.img 0\n", 8);
  uint32_t out = 1 + data[0] % 64;
  read_all(list, 1, out);
  read_all(list, 0, out);
  return 0;
}
