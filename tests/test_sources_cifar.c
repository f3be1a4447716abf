/* CIFAR-10 source: fields and their order, exact bytes across several files
 * (including an empty one), .gz, and bad sizes. */
#include "data/dataset.h"
#include "testutil.h"

#include <stdlib.h>

static void check_sample(const pl_dataset *ds, uint64_t i, uint64_t gen) {
  uint8_t img[3072], label = 0xff;
  void *dst[2] = {img, &label};
  pl_error err;
  CHECK_OK(pl_dataset_read(ds, i, dst, &err), &err);
  int bad = 0;
  for (int j = 0; j < 3072; j++)
    bad += img[j] != pl_test_byte(gen, (uint64_t)j);
  CHECK(bad == 0);
  CHECK_EQ_U64(label, pl_test_byte(gen, 1u << 20) % 10);
  const uint8_t *v = ds->vt->view(ds, i, 0);
  const uint8_t *l = ds->vt->view(ds, i, 1);
  CHECK(v && !memcmp(v, img, 3072));
  CHECK(l && *l == label && l + 1 == v); /* label precedes the pixels */
}

static void test_fields(const pl_dataset *ds) {
  CHECK_EQ_U64(pl_dataset_num_fields(ds), 2);
  const pl_field *img = pl_dataset_field(ds, 0), *lab = pl_dataset_field(ds, 1);
  CHECK(!strcmp(img->name, "image") && img->dtype == PL_UINT8);
  CHECK(img->ndim == 3 && img->shape[0] == 3 && img->shape[1] == 32 &&
        img->shape[2] == 32);
  CHECK(!strcmp(lab->name, "label") && lab->dtype == PL_UINT8);
  CHECK(lab->ndim == 0);
  CHECK_EQ_U64(pl_dataset_sample_bytes(ds), 3073);
}

/* Files of 3, 0, 5 and 2 records written with consecutive sample numbers:
 * the dataset is their concatenation, in the order given. */
static void test_several_files(void) {
  static char paths[4][512];
  const uint32_t counts[4] = {3, 0, 5, 2};
  uint64_t first = 0;
  for (int f = 0; f < 4; f++) {
    char name[32];
    snprintf(name, sizeof name, "data_batch_%d.bin", f + 1);
    snprintf(paths[f], sizeof paths[f], "%s", pl_test_path(name));
    CHECK(pl_test_write_cifar(paths[f], first, counts[f]) == 0);
    first += counts[f];
  }
  const char *const p[4] = {paths[0], paths[1], paths[2], paths[3]};
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_cifar10(p, 4, &ds, &err), &err);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), 10);
  test_fields(ds);
  const uint64_t order[10] = {2, 3, 7, 8, 9, 0, 1, 4, 5, 6};
  for (int k = 0; k < 10; k++)
    check_sample(ds, order[k], order[k]);
  pl_dataset_destroy(ds);

  /* The same files in another order: the indices follow the given order. */
  const char *const q[2] = {paths[3], paths[0]};
  CHECK_OK(pl_dataset_open_cifar10(q, 2, &ds, &err), &err);
  if (ds) {
    CHECK_EQ_U64(pl_dataset_length(ds), 5);
    check_sample(ds, 0, 8);
    check_sample(ds, 1, 9);
    check_sample(ds, 2, 0);
    check_sample(ds, 4, 2);
    pl_dataset_destroy(ds);
  }
}

static void test_gz(void) {
  const uint32_t n = 7;
  uint8_t *buf = malloc((size_t)n * 3073);
  for (uint32_t k = 0; k < n; k++) {
    uint8_t *r = buf + (size_t)k * 3073;
    r[0] = pl_test_byte(100 + k, 1u << 20) % 10;
    for (int j = 0; j < 3072; j++)
      r[1 + j] = pl_test_byte(100 + k, (uint64_t)j);
  }
  char gz[512];
  snprintf(gz, sizeof gz, "%s", pl_test_path("test_batch.bin.gz"));
  CHECK(pl_test_write_gz(gz, buf, (size_t)n * 3073) == 0);
  free(buf);
  const char *const p[1] = {gz};
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_cifar10(p, 1, &ds, &err), &err);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), n);
  for (uint32_t k = 0; k < n; k++)
    check_sample(ds, k, 100 + k);
  pl_dataset_destroy(ds);
}

static void test_errors(void) {
  char good[512], bad[512];
  snprintf(good, sizeof good, "%s", pl_test_path("good.bin"));
  snprintf(bad, sizeof bad, "%s", pl_test_path("bad_size.bin"));
  CHECK(pl_test_write_cifar(good, 0, 2) == 0);
  uint8_t *b = calloc(1, 3073 * 2 + 5);
  CHECK(pl_test_write_file(bad, b, 3073 * 2 + 5) == 0);
  free(b);
  pl_error err;
  pl_dataset *ds = (pl_dataset *)1;
  const char *const p[2] = {good, bad};
  CHECK_STATUS(pl_dataset_open_cifar10(p, 2, &ds, &err), PL_FORMAT, &err);
  CHECK(ds == NULL);
  CHECK_MSG(&err, "bad_size.bin: 6151 bytes after the 0-byte header are not "
                  "a whole number of 3073-byte records (2 records and 5 "
                  "bytes left)");

  const char *const m[2] = {good, pl_test_path("no_such_batch.bin")};
  CHECK_STATUS(pl_dataset_open_cifar10(m, 2, &ds, &err), PL_IO, &err);
  CHECK_MSG(&err, "no_such_batch.bin: cannot open: No such file or directory");
  CHECK_STATUS(pl_dataset_open_cifar10(p, 0, &ds, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_STATUS(pl_dataset_open_cifar10(NULL, 1, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  const char *const e[1] = {""};
  CHECK_STATUS(pl_dataset_open_cifar10(e, 1, &ds, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_MSG(&err, "empty file path");

  /* No record at all: a mistake, not an epoch of nothing. */
  char empty[512], want[1200];
  snprintf(empty, sizeof empty, "%s", pl_test_path("empty_batch.bin"));
  CHECK(pl_test_write_file(empty, "", 0) == 0);
  const char *const z[2] = {empty, empty};
  CHECK_STATUS(pl_dataset_open_cifar10(z, 1, &ds, &err), PL_FORMAT, &err);
  CHECK(ds == NULL);
  snprintf(want, sizeof want, "%s: empty: no records", empty);
  CHECK(!strcmp(err.message, want));
  CHECK_STATUS(pl_dataset_open_cifar10(z, 2, &ds, &err), PL_FORMAT, &err);
  snprintf(want, sizeof want, "%s and the 1 other files: empty: no records",
           empty);
  CHECK(!strcmp(err.message, want));
}

int main(void) {
  test_several_files();
  test_gz();
  test_errors();
  return pl_test_finish("test_sources_cifar");
}
