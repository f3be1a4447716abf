/* CIFAR-10 binary batches (data_batch_N.bin, test_batch.bin): records of
 * 1 label byte then 3072 pixel bytes (3 planes of 32x32, CHW), no header.
 * The image comes first among the fields, as torchvision returns it, though
 * the label comes first in the record. */
#include "data/dataset.h"
#include "data/sources/registry.h"

#define CIFAR_RECORD_BYTES 3073u

pl_status pl_dataset_open_cifar10(const char *const *paths, int npaths,
                                  pl_dataset **out, pl_error *err) {
  static const pl_field fields[2] = {
      {.name = "image", .dtype = PL_UINT8, .ndim = 3, .shape = {3, 32, 32}},
      {.name = "label", .dtype = PL_UINT8, .ndim = 0},
  };
  static const uint64_t offsets[2] = {1, 0};
  const pl_record_format fmt = {
      .header_bytes = 0,
      .record_bytes = CIFAR_RECORD_BYTES,
      .nfields = 2,
      .fields = fields,
      .offsets = offsets,
  };
  PL_TRY(pl_dataset_open_records(&fmt, paths, npaths, out, err));
  if (pl_dataset_length(*out) > 0)
    return PL_OK;
  /* A CIFAR-10 set without a single record is a mistake (an empty or
   * truncated download), not an epoch of nothing. */
  pl_dataset_destroy(*out);
  *out = NULL;
  if (npaths == 1)
    return pl_errorf(err, PL_FORMAT, "%s: empty: no records", paths[0]);
  return pl_errorf(err, PL_FORMAT, "%s and the %d other files: empty: no "
                   "records", paths[0], npaths - 1);
}

pl_status pl_source_open_cifar10(const char *const *paths, int npaths,
                                 const pl_options *o, pl_dataset **out,
                                 pl_error *err) {
  return pl_dataset_open_cifar10(paths, npaths, out, err);
}
