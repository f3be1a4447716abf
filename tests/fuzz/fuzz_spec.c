/* Fuzz pl_dataset_open_spec: the input (up to its first NUL) is the spec.
 * The working directory is a temp dir holding small valid files (i, l: IDX
 * images and labels; i.gz, l.gz; c: two CIFAR records) so that well-formed
 * specs get past parsing into the sources. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void write_fixtures(void) {
  uint8_t img[16 + 3 * 2 * 2] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
  uint8_t lab[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 7, 1, 9};
  for (int i = 16; i < (int)sizeof img; i++)
    img[i] = (uint8_t)(i * 37);
  uint8_t cif[2 * 3073];
  for (int i = 0; i < (int)sizeof cif; i++)
    cif[i] = (uint8_t)(i * 11);
  char p[128];
  fuzz_write(fuzz_path(p, "i"), img, sizeof img);
  fuzz_write(fuzz_path(p, "l"), lab, sizeof lab);
  fuzz_write_gz(fuzz_path(p, "i.gz"), img, sizeof img);
  fuzz_write_gz(fuzz_path(p, "l.gz"), lab, sizeof lab);
  fuzz_write(fuzz_path(p, "c"), cif, sizeof cif);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  write_fixtures();
  if (chdir(fuzz_tmpdir()) != 0)
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *spec = malloc(size + 1);
  if (!spec)
    abort();
  memcpy(spec, data, size);
  spec[size] = '\0';
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s = pl_dataset_open_spec(spec, &ds, &err);
  if (s == PL_OK) {
    fuzz_check_dataset(ds);
    pl_dataset_destroy(ds);
  } else if (ds || !err.message[0] || err.status != s) {
    abort();
  }
  free(spec);
  return 0;
}
