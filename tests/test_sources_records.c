/* The general record source and the file map under it: exact bytes and
 * views, format validation, the gzip guards, and (in fault-injection
 * builds) failures of open, mmap and decompression. */
#include "data/dataset.h"
#include "data/file_map.h"
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>

/* A file of a `header`-byte header and n records of `rec` bytes; record
 * byte j of global record i is pl_test_byte(i, j). */
static void write_records(const char *path, uint64_t header, uint64_t rec,
                          uint64_t first, uint32_t n, int gz) {
  size_t size = (size_t)(header + rec * n);
  uint8_t *b = malloc(size ? size : 1);
  for (uint64_t j = 0; j < header; j++)
    b[j] = (uint8_t)(0xA0 + j);
  for (uint32_t k = 0; k < n; k++)
    for (uint64_t j = 0; j < rec; j++)
      b[header + k * rec + j] = pl_test_byte(first + k, j);
  CHECK((gz ? pl_test_write_gz : pl_test_write_file)(path, b, size) == 0);
  free(b);
}

/* Records of 10 bytes after a 16-byte header: `a` uint8 [3] at 7, `b`
 * int16 [2] at 1. */
static const pl_field fmt_fields[2] = {
    {.name = "a", .dtype = PL_UINT8, .ndim = 1, .shape = {3}},
    {.name = "b", .dtype = PL_INT16, .ndim = 1, .shape = {2}},
};
static const uint64_t fmt_offsets[2] = {7, 1};
static const pl_record_format fmt = {16, 10, 2, fmt_fields, fmt_offsets};

static void check_record(const pl_dataset *ds, uint64_t i) {
  uint8_t a[3], b[4];
  void *dst[2] = {a, b};
  pl_error err;
  CHECK_OK(pl_dataset_read(ds, i, dst, &err), &err);
  for (int j = 0; j < 3; j++)
    CHECK_EQ_U64(a[j], pl_test_byte(i, 7 + (uint64_t)j));
  for (int j = 0; j < 4; j++)
    CHECK_EQ_U64(b[j], pl_test_byte(i, 1 + (uint64_t)j));
  const uint8_t *va = ds->vt->view(ds, i, 0), *vb = ds->vt->view(ds, i, 1);
  CHECK(va && vb && va == vb + 6 && !memcmp(va, a, 3) && !memcmp(vb, b, 4));
}

static void test_read_and_view(void) {
  static char p[3][512];
  snprintf(p[0], 512, "%s", pl_test_path("r0.bin"));
  snprintf(p[1], 512, "%s", pl_test_path("r1.bin.gz"));
  snprintf(p[2], 512, "%s", pl_test_path("r2.bin"));
  write_records(p[0], 16, 10, 0, 4, 0);
  write_records(p[1], 16, 10, 4, 6, 1);
  write_records(p[2], 16, 10, 10, 1, 0);
  const char *const paths[3] = {p[0], p[1], p[2]};
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_records(&fmt, paths, 3, &ds, &err), &err);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), 11);
  CHECK_EQ_U64(pl_dataset_sample_bytes(ds), 7);
  for (uint64_t i = 0; i < 11; i++)
    check_record(ds, (i * 5) % 11);
  pl_dataset_destroy(ds);
}

static void expect_format(const pl_record_format *f, const char *path,
                          pl_status want, const char *needle) {
  const char *const paths[1] = {path};
  pl_error err;
  pl_dataset *ds = (pl_dataset *)1;
  CHECK_STATUS(pl_dataset_open_records(f, paths, 1, &ds, &err), want, &err);
  CHECK(ds == NULL);
  CHECK_MSG(&err, needle);
}

static void test_format_errors(void) {
  char ok[512];
  snprintf(ok, sizeof ok, "%s", pl_test_path("ok.bin"));
  write_records(ok, 16, 10, 0, 2, 0);
  pl_record_format f = fmt;
  f.record_bytes = 0;
  expect_format(&f, ok, PL_INVALID_ARGUMENT, "record_bytes must be > 0");
  uint64_t off[2] = {8, 1}; /* 8 + 3 > 10 */
  f = fmt;
  f.offsets = off;
  expect_format(&f, ok, PL_INVALID_ARGUMENT,
                "field 'a': offset 8 + 3 bytes does not fit in a 10-byte "
                "record");
  off[0] = UINT64_MAX - 1; /* the sum overflows */
  expect_format(&f, ok, PL_INVALID_ARGUMENT, "does not fit");
  f = fmt;
  f.nfields = 0;
  expect_format(&f, ok, PL_INVALID_ARGUMENT, "needs fields");
  pl_field bad[2] = {fmt_fields[0], fmt_fields[1]};
  bad[1].dtype = PL_DTYPE_COUNT_;
  f = fmt;
  f.fields = bad;
  expect_format(&f, ok, PL_INVALID_ARGUMENT, "field 1: invalid");
  bad[1] = bad[0]; /* two fields called 'a': pl_dataset_new says so */
  f.offsets = (const uint64_t[2]){0, 7};
  expect_format(&f, ok, PL_INVALID_ARGUMENT, "two fields are called 'a'");

  /* The body is not whole records; the example in the design notes. */
  const char *p = pl_test_path("odd.bin");
  write_records(p, 16, 100, 0, 1, 0);
  pl_record_format c = fmt;
  c.record_bytes = 3073;
  c.offsets = (const uint64_t[2]){0, 3};
  expect_format(&c, p, PL_FORMAT,
                "odd.bin: 100 bytes after the 16-byte header are not a whole "
                "number of 3073-byte records (0 records and 100 bytes left)");
  p = pl_test_path("tiny.bin");
  write_records(p, 5, 0, 0, 0, 0);
  expect_format(&fmt, p, PL_FORMAT,
                "tiny.bin: the file is 5 bytes, shorter than the 16-byte "
                "header");
  /* A header alone is a valid file without records. */
  p = pl_test_path("header-only.bin");
  write_records(p, 16, 10, 0, 0, 0);
  const char *const one[1] = {p};
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_records(&fmt, one, 1, &ds, &err), &err);
  CHECK_EQ_U64(pl_dataset_length(ds), 0);
  pl_dataset_destroy(ds);
  CHECK_STATUS(pl_dataset_open_records(&fmt, one, 0, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_STATUS(pl_dataset_open_records(NULL, one, 1, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  const char *const nul[1] = {NULL};
  CHECK_STATUS(pl_dataset_open_records(&fmt, nul, 1, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
}

/* ---------------------------------------------------------------- file map */

static void test_file_map(void) {
  pl_file_map m;
  pl_error err;
  const char *p = pl_test_path("empty.bin");
  CHECK(pl_test_write_file(p, "", 0) == 0);
  CHECK_OK(pl_file_map_open(p, &m, &err), &err);
  CHECK(m.data != NULL && m.size == 0 && !strcmp(m.path, p));
  pl_file_map_close(&m);
  pl_file_map_close(&m); /* a closed (zeroed) map closes again harmlessly */

  p = pl_test_path("empty.bin.gz");
  CHECK(pl_test_write_file(p, "", 0) == 0);
  CHECK_STATUS(pl_file_map_open(p, &m, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "empty.bin.gz: compressed offset 0: gzip stream is "
                  "truncated");
  /* gzip of nothing is a valid, empty file */
  p = pl_test_path("nothing.gz");
  CHECK(pl_test_write_gz(p, "", 0) == 0);
  CHECK_OK(pl_file_map_open(p, &m, &err), &err);
  CHECK(m.data != NULL && m.size == 0);
  pl_file_map_close(&m);

  CHECK_STATUS(pl_file_map_open(pl_test_tmpdir(), &m, &err), PL_IO, &err);
  CHECK_MSG(&err, "not a regular file");
  CHECK(m.data == NULL);
  CHECK_STATUS(pl_file_map_open("", &m, &err), PL_INVALID_ARGUMENT, &err);
}

/* The decompression limit: exactly at the limit is fine, a byte over is
 * refused with a clear message. */
static void test_gz_limit(void) {
  uint8_t buf[5000];
  for (int i = 0; i < 5000; i++)
    buf[i] = (uint8_t)(i % 7);
  char p[512];
  snprintf(p, sizeof p, "%s", pl_test_path("five-k.gz"));
  CHECK(pl_test_write_gz(p, buf, sizeof buf) == 0);
  pl_file_map m;
  pl_error err;
  CHECK_OK(pl_file_map_open_limit(p, 5000, &m, &err), &err);
  CHECK(m.size == 5000 && !memcmp(m.data, buf, 5000));
  pl_file_map_close(&m);
  CHECK_STATUS(pl_file_map_open_limit(p, 4999, &m, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "five-k.gz: decompresses to more than 4999 bytes; "
                  "refusing");
  CHECK(m.data == NULL);

  /* 64 MiB of zeros compress to ~64 KiB: refused once past 1 MiB, before
   * the whole of it is allocated. */
  size_t big = 64u << 20;
  uint8_t *z = calloc(1, big);
  const char *bomb = pl_test_path("bomb.gz");
  CHECK(pl_test_write_gz(bomb, z, big) == 0);
  free(z);
  CHECK_STATUS(pl_file_map_open_limit(bomb, 1 << 20, &m, &err), PL_FORMAT,
               &err);
  CHECK_MSG(&err, "more than 1048576 bytes");
}

/* Two gzip members back to back decompress to both; trailing zeros are
 * padding; other trailing bytes are an error. */
static void test_gz_members(void) {
  char a[512], b[512];
  snprintf(a, sizeof a, "%s", pl_test_path("part-a.gz"));
  snprintf(b, sizeof b, "%s", pl_test_path("part-b.gz"));
  CHECK(pl_test_write_gz(a, "hello ", 6) == 0);
  CHECK(pl_test_write_gz(b, "world", 5) == 0);
  pl_file_map ma, mb, m;
  pl_error err;
  CHECK_OK(pl_file_map_open_limit(a, 100, &ma, &err), &err);
  pl_file_map_close(&ma);
  /* Read the raw compressed bytes through a name without .gz. */
  char ra[512], rb[512];
  snprintf(ra, sizeof ra, "%s", pl_test_path("part-a.raw"));
  snprintf(rb, sizeof rb, "%s", pl_test_path("part-b.raw"));
  CHECK(rename(a, ra) == 0 && rename(b, rb) == 0);
  CHECK_OK(pl_file_map_open(ra, &ma, &err), &err);
  CHECK_OK(pl_file_map_open(rb, &mb, &err), &err);
  uint8_t cat[512];
  size_t n = (size_t)(ma.size + mb.size);
  CHECK(n + 8 <= sizeof cat);
  memcpy(cat, ma.data, ma.size);
  memcpy(cat + ma.size, mb.data, mb.size);
  memset(cat + n, 0, 8);
  const char *p = pl_test_path("two.gz");
  CHECK(pl_test_write_file(p, cat, n + 8) == 0);
  CHECK_OK(pl_file_map_open(p, &m, &err), &err);
  CHECK(m.size == 11 && !memcmp(m.data, "hello world", 11));
  pl_file_map_close(&m);
  cat[n + 3] = 'x';
  p = pl_test_path("junk.gz");
  CHECK(pl_test_write_file(p, cat, n + 8) == 0);
  CHECK_STATUS(pl_file_map_open(p, &m, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "junk.gz: compressed offset ");
  CHECK_MSG(&err, "8 bytes of trailing garbage after the gzip stream");
  pl_file_map_close(&ma);
  pl_file_map_close(&mb);
}

/* ---------------------------------------------------------------- threads */

typedef struct reader_arg {
  const pl_dataset *ds;
  int seed;
  int bad;
} reader_arg;

static void *reader(void *p) {
  reader_arg *a = p;
  uint64_t n = pl_dataset_length(a->ds);
  for (int k = 0; k < 2000; k++) {
    uint64_t i = ((uint64_t)k * 31 + (uint64_t)a->seed) % n;
    uint8_t x[3], y[4];
    void *dst[2] = {x, y};
    if (pl_dataset_read(a->ds, i, dst, NULL) != PL_OK ||
        x[0] != pl_test_byte(i, 7) || y[3] != pl_test_byte(i, 4))
      a->bad++;
  }
  return NULL;
}

static void test_concurrent_reads(void) {
  const char *p = pl_test_path("shared.bin");
  write_records(p, 16, 10, 0, 97, 0);
  const char *const paths[2] = {p, p}; /* the same file twice is fine */
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_records(&fmt, paths, 1, &ds, &err), &err);
  if (!ds)
    return;
  pthread_t t[4];
  reader_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (reader_arg){ds, i * 13, 0};
    CHECK(pthread_create(&t[i], NULL, reader, &args[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    CHECK(args[i].bad == 0);
  }
  pl_dataset_destroy(ds);
  CHECK_OK(pl_dataset_open_records(&fmt, paths, 2, &ds, &err), &err);
  CHECK_EQ_U64(pl_dataset_length(ds), 194);
  pl_dataset_destroy(ds);
}

/* ---------------------------------------------------------------- faults */

#ifdef PL_FAULT_INJECTION
static void test_faults(void) {
  char plain[512], gz[512];
  snprintf(plain, sizeof plain, "%s", pl_test_path("fault.bin"));
  snprintf(gz, sizeof gz, "%s", pl_test_path("fault.bin.gz"));
  write_records(plain, 16, 10, 0, 3, 0);
  write_records(gz, 16, 10, 0, 3, 1);
  pl_file_map m;
  pl_error err;
  pl_fault_arm(PL_FAULT_FILE_OPEN, 0, 1);
  CHECK_STATUS(pl_file_map_open(plain, &m, &err), PL_IO, &err);
  CHECK_MSG(&err, "fault.bin: cannot open: Input/output error");
  pl_fault_arm(PL_FAULT_FILE_OPEN, 1, 1); /* the fstat */
  CHECK_STATUS(pl_file_map_open(plain, &m, &err), PL_IO, &err);
  CHECK_MSG(&err, "fault.bin: cannot stat: Input/output error");
  pl_fault_arm(PL_FAULT_FILE_MAP, 0, 1);
  CHECK_STATUS(pl_file_map_open(plain, &m, &err), PL_NO_MEMORY, &err);
  CHECK_MSG(&err, "fault.bin: mmap failed: Cannot allocate memory");
  pl_fault_arm(PL_FAULT_GZ_READ, 0, 1);
  CHECK_STATUS(pl_file_map_open(gz, &m, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "fault.bin.gz: compressed offset 0: corrupt gzip data");
  /* Through a dataset with a second file failing: the first is released.
   * (A .gz is read, not mapped: its fault point is the inflate.) */
  const char *const two[2] = {plain, gz};
  pl_dataset *ds = NULL;
  pl_fault_arm(PL_FAULT_GZ_READ, 0, 1);
  CHECK_STATUS(pl_dataset_open_records(&fmt, two, 2, &ds, &err), PL_FORMAT,
               &err);
  CHECK_MSG(&err, "fault.bin.gz: compressed offset 0: corrupt gzip data");
  pl_fault_reset();
  CHECK_OK(pl_dataset_open_records(&fmt, two, 2, &ds, &err), &err);
  CHECK_EQ_U64(pl_dataset_length(ds), 6);
  pl_dataset_destroy(ds);
}
#endif

int main(void) {
  test_read_and_view();
  test_format_errors();
  test_file_map();
  test_gz_limit();
  test_gz_members();
  test_concurrent_reads();
#ifdef PL_FAULT_INJECTION
  test_faults();
#endif
  return pl_test_finish("test_sources_records");
}
