/* pl_dataset_open_spec: the kinds it opens, paths with ':' in them, and a
 * clear PL_INVALID_ARGUMENT for every malformed spec. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void expect_ok(const char *spec, uint64_t len, int64_t dim0) {
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), len);
  CHECK(pl_dataset_field(ds, 0)->shape[0] == dim0);
  pl_dataset_destroy(ds);
}

static void expect_bad(const char *spec, pl_status want, const char *needle) {
  pl_error err;
  pl_dataset *ds = (pl_dataset *)1;
  CHECK_STATUS(pl_dataset_open_spec(spec, &ds, &err), want, &err);
  CHECK(ds == NULL);
  CHECK_MSG(&err, needle);
}

/* The registry's rows: every kind a spec opens, in the order of the
 * "want" list, and NULL past the last; the unknown-kind message lists
 * each row's usage. */
static void check_registry(void) {
  static const char *const kinds[] = {"idx",    "cifar10", "tokens",
                                      "npy",    "images",  "shards"};
  int n = 0;
  for (const pl_source_info *s; (s = pl_source_at(n)); n++) {
    CHECK(n < 6 && !strcmp(s->kind, kinds[n]));
    CHECK(!strncmp(s->usage, s->kind, strlen(s->kind)) &&
          s->usage[strlen(s->kind)] == ':');
    CHECK(s->keys && s->doc && s->doc[0]);
  }
  CHECK(n == 6 && !pl_source_at(-1));
  CHECK(!strcmp(pl_source_at(2)->keys, "context samples stride dtype format"));
  expect_bad("mnist:a", PL_INVALID_ARGUMENT,
             "(want idx:IMAGES,LABELS, cifar10:FILE[,FILE...], "
             "tokens:FILE[,FILE...]?context=T, npy:FILE[,FILE...], "
             "images:ROOT or "
             "shards:TAR|URL|PATTERN[,...]?fields=image:jpg,label:cls)");
  pl_error err;
  pl_dataset *ds = NULL;
  const char *one[] = {"a"};
  CHECK_STATUS(pl_dataset_open("idx", one, 1, "x=1", &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "idx takes no options");
}

int main(void) {
  char im[512], lb[512], c1[512], c2[512], spec[2048];
  snprintf(im, sizeof im, "%s", pl_test_path("im:ages")); /* ':' in a name */
  snprintf(lb, sizeof lb, "%s", pl_test_path("labels.gz"));
  snprintf(c1, sizeof c1, "%s", pl_test_path("c1.bin"));
  snprintf(c2, sizeof c2, "%s", pl_test_path("c:2.bin"));
  CHECK(pl_test_write_idx(im, pl_test_path("unused.gz"), 12, 4, 3, 0) == 0);
  CHECK(pl_test_write_idx(pl_test_path("unused"), lb, 12, 4, 3, 1) == 0);
  CHECK(pl_test_write_cifar(c1, 0, 2) == 0);
  CHECK(pl_test_write_cifar(c2, 2, 3) == 0);

  snprintf(spec, sizeof spec, "idx:%s,%s", im, lb);
  expect_ok(spec, 12, 4);
  snprintf(spec, sizeof spec, "cifar10:%s,%s", c1, c2);
  expect_ok(spec, 5, 3);
  snprintf(spec, sizeof spec, "cifar10:%s", c2);
  expect_ok(spec, 3, 3);

  /* The spec is checked before any file is opened. */
  expect_bad(NULL, PL_INVALID_ARGUMENT, "dataset spec is NULL");
  expect_bad("", PL_INVALID_ARGUMENT, "dataset spec '': no 'KIND:' prefix");
  expect_bad("mnist", PL_INVALID_ARGUMENT, "dataset spec 'mnist': no 'KIND:'");
  expect_bad("mnist:a,b", PL_INVALID_ARGUMENT, "unknown kind 'mnist'");
  expect_bad("IDX:a,b", PL_INVALID_ARGUMENT, "unknown kind 'IDX'");
  expect_bad(" idx:a,b", PL_INVALID_ARGUMENT, "unknown kind ' idx'");
  expect_bad(":a,b", PL_INVALID_ARGUMENT, "unknown kind ''");
  expect_bad("idx:", PL_INVALID_ARGUMENT, "'idx:': no files after 'idx:'");
  expect_bad("cifar10:", PL_INVALID_ARGUMENT, "no files after 'cifar10:'");
  expect_bad("idx:a", PL_INVALID_ARGUMENT,
             "'idx:a': idx takes 2 files (images, labels), got 1");
  expect_bad("idx:a,b,c", PL_INVALID_ARGUMENT, "got 3");
  expect_bad("idx:a,", PL_INVALID_ARGUMENT, "'idx:a,': path 2 is empty");
  expect_bad("idx:,b", PL_INVALID_ARGUMENT, "path 1 is empty");
  expect_bad("cifar10:a,,b", PL_INVALID_ARGUMENT, "path 2 is empty");
  expect_bad("cifar10:a,b,", PL_INVALID_ARGUMENT, "path 3 is empty");
  /* Then the files: their errors come through unchanged. */
  snprintf(spec, sizeof spec, "cifar10:%s,%s/nope.bin", c1, pl_test_tmpdir());
  expect_bad(spec, PL_IO, "nope.bin: cannot open: No such file");
  snprintf(spec, sizeof spec, "idx:%s,%s", lb, c1);
  expect_bad(spec, PL_FORMAT, "c1.bin: bad IDX magic");
  check_registry();
  pl_error err;
  CHECK_STATUS(pl_dataset_open_spec("idx:a,b", NULL, &err),
               PL_INVALID_ARGUMENT, &err);
  return pl_test_finish("test_dataset_spec");
}
