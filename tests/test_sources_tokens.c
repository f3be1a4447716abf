/* Token shards: nanoGPT raw files and llm.c shards built by hand, read back
 * byte-exact as x/y windows (stride and random modes), dtypes, the spec
 * syntax, and hostile files with their exact errors. */
#include "data/dataset.h"
#include "testutil.h"

#include <stdlib.h>

static void write_raw16(const char *path, uint32_t first, uint32_t n) {
  uint16_t *t = malloc(n * sizeof *t + 1);
  for (uint32_t i = 0; i < n; i++)
    t[i] = (uint16_t)(first + i);
  CHECK(pl_test_write_file(path, t, n * sizeof *t) == 0);
  free(t);
}

/* An llm.c shard of n tokens first, first+1, ... of `elem` bytes. */
static void write_llmc(const char *path, uint32_t magic, uint32_t version,
                       int32_t count, uint32_t first, uint32_t n,
                       size_t elem) {
  size_t size = 1024 + n * elem;
  uint8_t *b = calloc(1, size);
  int32_t h[3] = {(int32_t)magic, (int32_t)version, count};
  memcpy(b, h, sizeof h);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t v = first + i;
    memcpy(b + 1024 + i * elem, &v, elem);
  }
  CHECK(pl_test_write_file(path, b, size) == 0);
  free(b);
}

static pl_dataset *open_spec(const char *spec) {
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  return ds;
}

static void test_stride_two_shards(void) {
  char a[512], b[512], spec[1200];
  snprintf(a, sizeof a, "%s", pl_test_path("a.bin"));
  snprintf(b, sizeof b, "%s", pl_test_path("b.bin"));
  write_raw16(a, 1000, 100);               /* windows of 10+1: 9 */
  write_llmc(b, 20240520, 1, 25, 5000, 25, 2); /* 2 */
  snprintf(spec, sizeof spec, "tokens:%s,%s?context=10", a, b);
  pl_dataset *ds = open_spec(spec);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), 11);
  CHECK(pl_dataset_field(ds, 0)->dtype == PL_INT64);
  int64_t x[10], y[10];
  void *dst[2] = {x, y};
  pl_error err;
  for (uint64_t i = 0; i < 11; i++) {
    CHECK_OK(pl_dataset_read(ds, i, dst, &err), &err);
    int64_t start = i < 9 ? 1000 + 10 * (int64_t)i : 5000 + 10 * (int64_t)(i - 9);
    for (int k = 0; k < 10; k++) {
      CHECK_EQ_U64(x[k], start + k);
      CHECK_EQ_U64(y[k], start + k + 1);
    }
  }
  CHECK(ds->vt->view(ds, 0, 0) == NULL); /* int64 from uint16: no view */
  pl_dataset_destroy(ds);

  /* Their own dtype: views into the file, overlapping stride. */
  snprintf(spec, sizeof spec, "tokens:%s?context=10&dtype=uint16&stride=5", a);
  ds = open_spec(spec);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), (100 - 10 - 1) / 5 + 1);
  const uint16_t *v = ds->vt->view(ds, 3, 1);
  CHECK(v && v[0] == 1000 + 15 + 1);
  pl_dataset_destroy(ds);
}

static void test_random_windows(void) {
  char a[512], spec[1200];
  snprintf(a, sizeof a, "%s", pl_test_path("u32.bin"));
  write_llmc(a, 20240801, 7, 300, 70000, 300, 4);
  snprintf(spec, sizeof spec, "tokens:%s?context=16&samples=1000&dtype=int32",
           a);
  pl_dataset *ds = open_spec(spec);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), 1000);
  int32_t x[16], y[16];
  void *dst[2] = {x, y};
  pl_error err;
  bool seen_last = false;
  int32_t first0 = 0;
  for (uint64_t i = 0; i < 1000; i++) {
    pl_sample_ctx ctx = {9, 2, NULL};
    CHECK_OK(pl_dataset_read_sample(ds, i, &ctx, dst, &err), &err);
    CHECK(x[0] >= 70000 && x[0] <= 70000 + 300 - 17);
    seen_last |= x[0] == 70000 + 300 - 17;
    for (int k = 0; k < 16; k++)
      CHECK(x[k] == x[0] + k && y[k] == x[k] + 1);
    if (i == 0)
      first0 = x[0];
  }
  CHECK(seen_last); /* 284 starts, 1000 draws */
  pl_sample_ctx again = {9, 2, NULL}, other = {9, 3, NULL};
  CHECK_OK(pl_dataset_read_sample(ds, 0, &again, dst, &err), &err);
  CHECK(x[0] == first0);
  int differ = 0;
  for (uint64_t i = 0; i < 20; i++) {
    CHECK_OK(pl_dataset_read_sample(ds, i, &other, dst, &err), &err);
    int32_t e3 = x[0];
    CHECK_OK(pl_dataset_read_sample(ds, i, &again, dst, &err), &err);
    differ += e3 != x[0];
  }
  CHECK(differ > 10); /* another epoch, other windows */
  CHECK(ds->vt->view(ds, 0, 0) == NULL);
  pl_dataset_destroy(ds);
}

static void expect_error(const char *spec, pl_status want, const char *msg) {
  pl_dataset *ds = (pl_dataset *)1;
  pl_error err;
  CHECK_STATUS(pl_dataset_open_spec(spec, &ds, &err), want, &err);
  CHECK(ds == NULL);
  CHECK_MSG(&err, msg);
}

static void test_hostile(void) {
  char p[512], spec[1200];
  snprintf(p, sizeof p, "%s", pl_test_path("odd.bin"));
  CHECK(pl_test_write_file(p, "abc", 3) == 0);
  snprintf(spec, sizeof spec, "tokens:%s?context=1", p);
  expect_error(spec, PL_FORMAT,
               "odd.bin: 3 bytes are not a whole number of 2-byte tokens");
  snprintf(p, sizeof p, "%s", pl_test_path("trunc.bin"));
  write_llmc(p, 20240520, 1, 1000, 0, 10, 2);
  snprintf(spec, sizeof spec, "tokens:%s?context=4", p);
  expect_error(spec, PL_FORMAT,
               "trunc.bin: the header says 1000 tokens (2000 bytes) but the "
               "file has 20 bytes after the 1024-byte header");
  write_llmc(p, 20240520, 1, -5, 0, 10, 2);
  expect_error(spec, PL_FORMAT, "the header says -5 tokens");
  write_llmc(p, 20240520, 2, 10, 0, 10, 2);
  expect_error(spec, PL_FORMAT,
               "trunc.bin: llm.c shard magic 20240520 with version 2 (want "
               "20240520 version 1, or 20240801 version 7)");
  snprintf(spec, sizeof spec, "tokens:%s?context=4&format=llmc", p);
  write_raw16(p, 0, 600);
  expect_error(spec, PL_FORMAT,
               "trunc.bin: bad llm.c magic 65536 (want 20240520 or 20240801)");
  write_raw16(p, 0, 10);
  expect_error(spec, PL_FORMAT,
               "trunc.bin: the file is 20 bytes, shorter than llm.c's "
               "1024-byte header");
  snprintf(spec, sizeof spec, "tokens:%s?context=10", p);
  expect_error(spec, PL_FORMAT, "trunc.bin: no shard has context + 1 = 11 tokens");
  snprintf(spec, sizeof spec, "tokens:%s", p);
  expect_error(spec, PL_INVALID_ARGUMENT, "the context option is required");
  snprintf(spec, sizeof spec, "tokens:%s?context=4&ctx=3", p);
  expect_error(spec, PL_INVALID_ARGUMENT,
               "tokens: unknown option 'ctx' (options: context samples "
               "stride dtype format)");
  snprintf(spec, sizeof spec, "tokens:%s?context=-4", p);
  expect_error(spec, PL_INVALID_ARGUMENT,
               "tokens option context=-4: want an integer from 0 to");
  snprintf(spec, sizeof spec, "tokens:%s?context=4&dtype=float32", p);
  expect_error(spec, PL_INVALID_ARGUMENT,
               "tokens option dtype=float32: want one of: int64 int32 "
               "uint32 uint16");
  snprintf(spec, sizeof spec, "tokens:%s?context=4&context=5", p);
  expect_error(spec, PL_INVALID_ARGUMENT, "tokens: option 'context' given twice");
  snprintf(spec, sizeof spec, "tokens:%s?context=0", p);
  expect_error(spec, PL_INVALID_ARGUMENT,
               "tokens: context must be from 1 to 2^31 tokens, not 0");
  char q[512];
  snprintf(q, sizeof q, "%s", pl_test_path("w32.bin"));
  write_llmc(q, 20240801, 7, 20, 0, 20, 4);
  snprintf(spec, sizeof spec, "tokens:%s,%s?context=4", p, q);
  expect_error(spec, PL_FORMAT, "has 4-byte tokens but");
  snprintf(spec, sizeof spec, "tokens:%s?context=4&dtype=uint16", q);
  expect_error(spec, PL_INVALID_ARGUMENT,
               "uint32 tokens cannot be delivered as uint16");
  expect_error("tokens:/nonexistent/x.bin?context=4", PL_IO,
               "/nonexistent/x.bin: cannot open");
}

int main(void) {
  test_stride_two_shards();
  test_random_windows();
  test_hostile();
  return pl_test_finish("test_sources_tokens");
}
