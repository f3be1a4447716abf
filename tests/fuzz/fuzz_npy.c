/* Fuzz the NumPy source: the input is a .npy file, or (first byte odd) a
 * .npz archive, opened alone and zipped with a valid 1-D array of the same
 * length when it parses. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  char path[128];
  const char *pp[1] = {
      fuzz_put(path, data[0] & 1 ? "f.npz" : "f.npy", 0, data + 1, size - 1)};
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s = pl_dataset_open_npy(pp, 1, &ds, &err);
  if (s == PL_OK) {
    fuzz_check_dataset(ds);
    pl_dataset_destroy(ds);
  } else if (ds || !err.message[0] || err.status != s) {
    abort();
  }
  return 0;
}
