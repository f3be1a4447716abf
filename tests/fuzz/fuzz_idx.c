/* Fuzz pl_dataset_open_idx. Input: byte 0 picks each file's mode (plain,
 * harness-gzipped, raw bytes named .gz), bytes 1-2 (LE) the images file's
 * share of the rest; the remainder is split into the images and labels
 * files. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3)
    return 0;
  int mi = data[0] % 3, ml = (data[0] / 3) % 3;
  size_t split = (size_t)data[1] | (size_t)data[2] << 8;
  data += 3;
  size -= 3;
  if (split > size)
    split = size;
  char ip[128], lp[128];
  fuzz_put(ip, "images", mi, data, split);
  fuzz_put(lp, "labels", ml, data + split, size - split);
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s = pl_dataset_open_idx(ip, lp, &ds, &err);
  if (s == PL_OK) {
    if (!ds)
      abort();
    fuzz_check_dataset(ds);
    pl_dataset *fl = NULL;
    if (pl_dataset_to_float32(ds, "image", 1.0f / 255, &fl, &err) == PL_OK) {
      fuzz_check_dataset(fl);
      pl_dataset_destroy(fl);
    }
    pl_dataset_destroy(ds);
  } else if (ds || !err.message[0] || err.status != s) {
    abort(); /* a failure must say why and leave *out NULL */
  }
  unlink(ip);
  unlink(lp);
  return 0;
}
