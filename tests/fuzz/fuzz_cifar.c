/* Fuzz pl_dataset_open_cifar10. Input: byte 0: number of files (1-3) and
 * whether each is gzipped; bytes 1-2 (LE): the size of each file but the
 * last (the rest goes to the last). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3)
    return 0;
  int nfiles = 1 + data[0] % 3;
  int gzmask = data[0] / 3;
  size_t part = (size_t)data[1] | (size_t)data[2] << 8;
  data += 3;
  size -= 3;
  char paths[3][128];
  const char *pp[3];
  for (int i = 0; i < nfiles; i++) {
    size_t n = i == nfiles - 1 ? size : (part < size ? part : size);
    char name[16];
    snprintf(name, sizeof name, "data_batch_%d", i);
    pp[i] = fuzz_put(paths[i], name, (gzmask >> i) & 1, data, n);
    data += n;
    size -= n;
  }
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s = pl_dataset_open_cifar10(pp, nfiles, &ds, &err);
  if (s == PL_OK) {
    fuzz_check_dataset(ds);
    pl_dataset_destroy(ds);
  } else if (ds || !err.message[0] || err.status != s) {
    abort();
  }
  for (int i = 0; i < nfiles; i++)
    unlink(pp[i]);
  return 0;
}
