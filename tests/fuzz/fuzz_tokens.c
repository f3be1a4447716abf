/* Fuzz the token source: the first bytes pick the context, the mode, the
 * dtype and the format; the rest becomes one or two shard files. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4)
    return 0;
  pl_tokens_options o;
  pl_tokens_options_init(&o);
  o.context = data[0] % 40;        /* 0 is refused */
  o.samples = data[1] & 1 ? data[1] : 0;
  o.stride = data[2] % 5;
  static const pl_dtype dt[4] = {PL_INT64, PL_INT32, PL_UINT32, PL_UINT16};
  o.dtype = dt[data[3] & 3];
  o.format = (pl_tokens_format)((data[3] >> 2) % 4);
  int nfiles = 1 + ((data[3] >> 4) & 1);
  data += 4, size -= 4;
  char paths[2][128];
  const char *pp[2];
  size_t half = nfiles == 2 ? size / 2 : size;
  pp[0] = fuzz_put(paths[0], "t0.bin", 0, data, half);
  if (nfiles == 2)
    pp[1] = fuzz_put(paths[1], "t1.bin", 0, data + half, size - half);
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s = pl_dataset_open_tokens(pp, nfiles, &o, &ds, &err);
  if (s == PL_OK) {
    fuzz_check_dataset(ds);
    pl_dataset_destroy(ds);
  } else if (ds || !err.message[0]) {
    abort();
  }
  return 0;
}
