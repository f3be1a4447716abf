/* NumPy sources from hand-built files: .npy v1/v2 with exact bytes, a
 * stored .npz, big-endian swapping, and every refusal's exact message. */
#include "data/dataset.h"
#include "testutil.h"

#include <stdlib.h>
#include <zlib.h>

/* A .npy file: header dict `dict`, then `n` data bytes from `data`. */
static void write_npy(const char *path, int major, const char *dict,
                      const void *data, size_t n) {
  uint8_t buf[4096];
  size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
  size_t hl = ((pre + dl + 1 + 63) / 64) * 64 - pre;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)major, buf[7] = 0;
  uint32_t h32 = (uint32_t)hl;
  memcpy(buf + 8, &h32, major == 1 ? 2 : 4);
  memset(buf + pre, ' ', hl);
  memcpy(buf + pre, dict, dl);
  buf[pre + hl - 1] = '\n';
  memcpy(buf + pre + hl, data, n);
  CHECK(pl_test_write_file(path, buf, pre + hl + n) == 0);
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* A one-member zip (method 0 stored, or `method` as claimed). */
static void write_zip(const char *path, const char *name, const uint8_t *m,
                      size_t n, uint16_t method) {
  size_t nl = strlen(name), size = 30 + nl + n + 46 + nl + 22;
  uint8_t *z = calloc(1, size), *p = z;
  uint32_t crc = (uint32_t)crc32(0, m, (uInt)n);
  put32(p, 0x04034b50), put16(p + 8, method), put32(p + 14, crc);
  put32(p + 18, (uint32_t)n), put32(p + 22, (uint32_t)n), put16(p + 26, (uint16_t)nl);
  memcpy(p + 30, name, nl), memcpy(p + 30 + nl, m, n);
  p += 30 + nl + n;
  put32(p, 0x02014b50), put16(p + 10, method), put32(p + 16, crc);
  put32(p + 20, (uint32_t)n), put32(p + 24, (uint32_t)n), put16(p + 28, (uint16_t)nl);
  memcpy(p + 46, name, nl);
  uint32_t cd = (uint32_t)(p - z);
  p += 46 + nl;
  put32(p, 0x06054b50), put16(p + 8, 1), put16(p + 10, 1);
  put32(p + 12, (uint32_t)(46 + nl)), put32(p + 16, cd);
  CHECK(pl_test_write_file(path, z, size) == 0);
  free(z);
}

static pl_dataset *open1(const char *path, pl_status want, const char *msg) {
  pl_dataset *ds = NULL;
  pl_error err;
  const char *paths[1] = {path};
  CHECK_STATUS(pl_dataset_open_npy(paths, 1, &ds, &err), want, &err);
  if (msg)
    CHECK_MSG(&err, msg);
  return ds;
}

static void test_exact_bytes(void) {
  int16_t v[12];
  for (int i = 0; i < 12; i++)
    v[i] = (int16_t)(i * 1000 - 5000);
  char a[512], b[512];
  snprintf(a, sizeof a, "%s", pl_test_path("a.npy"));
  snprintf(b, sizeof b, "%s", pl_test_path("lab.npy"));
  write_npy(a, 1, "{'descr': '<i2', 'fortran_order': False, 'shape': (4, 3), }", v, sizeof v);
  uint8_t lab[4] = {1, 0, 1, 1};
  write_npy(b, 2, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", lab, 4);
  const char *paths[2] = {a, b};
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_npy(paths, 2, &ds, &err), &err);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), 4);
  CHECK(!strcmp(pl_dataset_field(ds, 0)->name, "a"));
  CHECK(!strcmp(pl_dataset_field(ds, 1)->name, "lab"));
  CHECK(pl_dataset_field(ds, 1)->dtype == PL_UINT8 && pl_dataset_field(ds, 1)->ndim == 0);
  int16_t x[3];
  uint8_t y;
  void *dst[2] = {x, &y};
  for (int i = 0; i < 4; i++) {
    CHECK_OK(pl_dataset_read(ds, (uint64_t)i, dst, &err), &err);
    CHECK(!memcmp(x, v + 3 * i, sizeof x) && y == lab[i]);
    CHECK(!memcmp(ds->vt->view(ds, (uint64_t)i, 0), v + 3 * i, sizeof x));
  }
  pl_dataset_destroy(ds);
  /* Big-endian int32 arrives in host order; complex64 as float32 [.., 2]. */
  uint8_t be[8] = {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe};
  write_npy(a, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be, 8);
  ds = open1(a, PL_OK, NULL);
  int32_t i32;
  void *d1[1] = {&i32};
  if (ds) {
    CHECK_OK(pl_dataset_read(ds, 1, d1, &err), &err);
    CHECK(i32 == -2 && ds->vt->view(ds, 0, 0) == NULL);
    pl_dataset_destroy(ds);
  }
  float c[4] = {1, 2, 3, 4};
  write_npy(a, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", c, 16);
  ds = open1(a, PL_OK, NULL);
  if (ds) {
    const pl_field *f = pl_dataset_field(ds, 0);
    CHECK(f->dtype == PL_FLOAT32 && f->ndim == 1 && f->shape[0] == 2);
    pl_dataset_destroy(ds);
  }
}

static void test_npz(void) {
  char m[512], z[512];
  snprintf(m, sizeof m, "%s", pl_test_path("m.npy"));
  snprintf(z, sizeof z, "%s", pl_test_path("d.npz"));
  float v[6] = {1, 2, 3, 4, 5, 6};
  write_npy(m, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", v, sizeof v);
  FILE *f = fopen(m, "rb");
  uint8_t buf[4096];
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f)
    fclose(f);
  write_zip(z, "feat.npy", buf, n, 0);
  pl_dataset *ds = open1(z, PL_OK, NULL);
  if (ds) {
    CHECK(!strcmp(pl_dataset_field(ds, 0)->name, "feat"));
    float x[2];
    void *dst[1] = {x};
    pl_error err;
    CHECK_OK(pl_dataset_read(ds, 2, dst, &err), &err);
    CHECK(x[0] == 5 && x[1] == 6);
    pl_dataset_destroy(ds);
  }
  write_zip(z, "feat.npy", buf, n, 8);
  open1(z, PL_FORMAT,
        "d.npz: member 'feat.npy': the member is compressed (zip method 8, "
        "as np.savez_compressed writes)");
  CHECK(pl_test_write_file(z, buf, 30) == 0);
  open1(z, PL_FORMAT,
        "d.npz: not a valid .npz (zip) archive: no end of central directory "
        "record");
}

static void test_refusals(void) {
  char a[512];
  snprintf(a, sizeof a, "%s", pl_test_path("bad.npy"));
  uint8_t d[64] = {0};
  write_npy(a, 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", d, 32);
  open1(a, PL_FORMAT, "bad.npy: Fortran-order arrays are not supported");
  write_npy(a, 1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", d, 16);
  open1(a, PL_FORMAT, "bad.npy: object arrays (dtype '|O') hold Python objects");
  write_npy(a, 1, "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", d, 24);
  open1(a, PL_FORMAT, "bad.npy: unsupported dtype '<U3'");
  write_npy(a, 1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }", d, 8);
  open1(a, PL_FORMAT, "bad.npy: structured dtypes are not supported");
  write_npy(a, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", d, 4);
  open1(a, PL_FORMAT, "bad.npy: a 0-d array has no first axis to index");
  write_npy(a, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", d, 8);
  open1(a, PL_FORMAT,
        "data is 20 bytes but the file has 8 left (truncated)");
  write_npy(a, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (9999999999999999999, 4), }", d, 8);
  open1(a, PL_FORMAT, "bad.npy: the shape overflows 64 bits");
  write_npy(a, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", d, 12);
  open1(a, PL_FORMAT, "4 trailing bytes after the 8 bytes of data");
  write_npy(a, 1, "{'descr': '<i4', 'shape': (2,), }", d, 8);
  open1(a, PL_FORMAT, "bad.npy: malformed .npy header");
  write_npy(a, 4, "{}", d, 0);
  open1(a, PL_FORMAT, "bad.npy: .npy format version 4.0 is not supported");
  CHECK(pl_test_write_file(a, "PK\3\4 not npy", 12) == 0);
  open1(a, PL_FORMAT, "bad.npy: not a .npy file (no \\x93NUMPY magic)");
  uint8_t t[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0x7f};
  CHECK(pl_test_write_file(a, t, 10) == 0);
  open1(a, PL_FORMAT,
        "bad.npy: the .npy header claims 32767 bytes but the file has 0 "
        "after the preamble (truncated)");
}

int main(void) {
  test_exact_bytes();
  test_npz();
  test_refusals();
  return pl_test_finish("test_sources_npy");
}
