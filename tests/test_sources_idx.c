/* IDX source: exact bytes (plain and .gz), multi-byte element types in host
 * order, every header error, and the real Fashion-MNIST when installed. */
#include "data/dataset.h"
#include "testutil.h"

#include <stdlib.h>
#include <zlib.h>

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* Reads every sample and compares with what pl_test_write_idx wrote. */
static void check_synthetic(const char *images, const char *labels,
                            uint32_t n, uint32_t rows, uint32_t cols) {
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_idx(images, labels, &ds, &err), &err);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), n);
  CHECK_EQ_U64(pl_dataset_num_fields(ds), 2);
  const pl_field *img = pl_dataset_field(ds, 0), *lab = pl_dataset_field(ds, 1);
  CHECK(!strcmp(img->name, "image") && img->dtype == PL_UINT8);
  CHECK(img->ndim == 2 && img->shape[0] == rows && img->shape[1] == cols);
  CHECK(!strcmp(lab->name, "label") && lab->dtype == PL_UINT8);
  CHECK(lab->ndim == 0);
  uint8_t *ib = malloc((size_t)rows * cols);
  uint8_t lb;
  void *dst[2] = {ib, &lb};
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = (k * 7919u) % n; /* every index, out of order */
    CHECK_OK(pl_dataset_read(ds, i, dst, &err), &err);
    int bad = 0;
    for (uint32_t j = 0; j < rows * cols; j++)
      bad += ib[j] != pl_test_byte(i, j);
    CHECK(bad == 0);
    CHECK_EQ_U64(lb, pl_test_byte(i, 1u << 20) % 10);
    const uint8_t *v = ds->vt->view(ds, i, 0);
    CHECK(v && !memcmp(v, ib, (size_t)rows * cols));
  }
  CHECK_STATUS(pl_dataset_read(ds, n, dst, &err), PL_INVALID_ARGUMENT, &err);
  free(ib);
  pl_dataset_destroy(ds);
}

static void test_plain_and_gz(void) {
  const char *im = pl_test_path("p-images"), *lb = pl_test_path("p-labels");
  CHECK(pl_test_write_idx(im, lb, 101, 5, 7, 0) == 0);
  check_synthetic(im, lb, 101, 5, 7);
  const char *gim = pl_test_path("g-images.gz");
  const char *glb = pl_test_path("g-labels.gz");
  CHECK(pl_test_write_idx(gim, glb, 300, 28, 28, 1) == 0);
  check_synthetic(gim, glb, 300, 28, 28);
}

/* An IDX file: magic 00 00 type ndim, dims, then `data` as given. */
static const char *write_idx_raw(const char *name, uint8_t type, uint8_t ndim,
                                 const uint32_t *dims, int ndims_written,
                                 const void *data, size_t n) {
  uint8_t buf[4096];
  buf[0] = 0;
  buf[1] = 0;
  buf[2] = type;
  buf[3] = ndim;
  for (int i = 0; i < ndims_written; i++)
    put_be32(buf + 4 + 4 * i, dims[i]);
  size_t h = 4 + 4 * (size_t)ndims_written;
  if (n)
    memcpy(buf + h, data, n);
  const char *p = pl_test_path(name);
  CHECK(pl_test_write_file(p, buf, h + n) == 0);
  return p;
}

static void test_multibyte_types(void) {
  /* int16 images [3][2]: big-endian in the file, host order in a read. */
  uint32_t d3[2] = {3, 2};
  uint8_t be16[12] = {0x01, 0x02, 0xff, 0xfe, 0x80, 0x00,
                      0x7f, 0xff, 0x00, 0x00, 0x12, 0x34};
  const char *im = write_idx_raw("i16", 0x0B, 2, d3, 2, be16, sizeof be16);
  /* float32 labels: 1.5, -2, 0x1p-3 */
  uint32_t d1[1] = {3};
  uint8_t bef[12] = {0x3f, 0xc0, 0, 0, 0xc0, 0x00, 0, 0, 0x3e, 0x00, 0, 0};
  const char *lb = write_idx_raw("f32", 0x0D, 1, d1, 1, bef, sizeof bef);
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_idx(im, lb, &ds, &err), &err);
  if (!ds)
    return;
  CHECK(pl_dataset_field(ds, 0)->dtype == PL_INT16);
  CHECK(pl_dataset_field(ds, 0)->ndim == 1);
  CHECK(pl_dataset_field(ds, 0)->shape[0] == 2);
  CHECK(pl_dataset_field(ds, 1)->dtype == PL_FLOAT32);
  const int16_t want_i[3][2] = {{0x0102, -2}, {-32768, 32767}, {0, 0x1234}};
  const float want_f[3] = {1.5f, -2.0f, 0.125f};
  for (int i = 0; i < 3; i++) {
    int16_t v[2];
    float f;
    void *dst[2] = {v, &f};
    CHECK_OK(pl_dataset_read(ds, (uint64_t)i, dst, &err), &err);
    CHECK(v[0] == want_i[i][0] && v[1] == want_i[i][1]);
    CHECK(f == want_f[i]);
    CHECK(ds->vt->view(ds, (uint64_t)i, 0) == NULL); /* needs a swap */
  }
  pl_dataset_destroy(ds);

  /* int8, int32 and float64 as well. */
  int8_t i8[2] = {-1, 5};
  uint32_t d2[2] = {2, 1};
  im = write_idx_raw("i8", 0x09, 2, d2, 2, i8, 2);
  uint8_t be32v[8] = {0xff, 0xff, 0xff, 0xfe, 0x00, 0x01, 0x00, 0x00};
  uint32_t dl[1] = {2};
  lb = write_idx_raw("i32", 0x0C, 1, dl, 1, be32v, 8);
  CHECK_OK(pl_dataset_open_idx(im, lb, &ds, &err), &err);
  if (ds) {
    int8_t a;
    int32_t b;
    void *dst[2] = {&a, &b};
    CHECK_OK(pl_dataset_read(ds, 1, dst, &err), &err);
    CHECK(a == 5 && b == 65536);
    CHECK_OK(pl_dataset_read(ds, 0, dst, &err), &err);
    CHECK(a == -1 && b == -2);
    CHECK(ds->vt->view(ds, 0, 0) != NULL); /* one byte: no swap */
    pl_dataset_destroy(ds);
  }
  uint8_t be64[8] = {0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18};
  uint32_t dd[1] = {1};
  const char *f64 = write_idx_raw("f64", 0x0E, 1, dd, 1, be64, 8);
  uint32_t di[2] = {1, 1};
  im = write_idx_raw("i8one", 0x09, 2, di, 2, i8, 1);
  CHECK_OK(pl_dataset_open_idx(im, f64, &ds, &err), &err);
  if (ds) {
    int8_t a;
    double b;
    void *dst[2] = {&a, &b};
    CHECK_OK(pl_dataset_read(ds, 0, dst, &err), &err);
    CHECK(a == -1 && b == 3.141592653589793);
    pl_dataset_destroy(ds);
  }
}

/* Opening `bad` as images (with a valid labels file) fails with `want`
 * and a message naming the file and containing `reason`. */
static void expect_bad(const char *bad, const char *good_labels,
                       pl_status want, const char *reason) {
  pl_error err;
  pl_dataset *ds = (pl_dataset *)1;
  CHECK_STATUS(pl_dataset_open_idx(bad, good_labels, &ds, &err), want, &err);
  CHECK(ds == NULL);
  CHECK_MSG(&err, pl_basename(bad));
  CHECK_MSG(&err, reason);
  /* and as labels */
  CHECK_STATUS(pl_dataset_open_idx(good_labels, bad, &ds, &err), want, &err);
  CHECK_MSG(&err, pl_basename(bad));
  CHECK_MSG(&err, reason);
}

static void test_header_errors(void) {
  char lb[512]; /* pl_test_path's buffers are reused after 8 calls */
  snprintf(lb, sizeof lb, "%s", pl_test_path("ok-labels"));
  CHECK(pl_test_write_idx(pl_test_path("ok-images"), lb, 3, 2, 2, 0) == 0);
  uint8_t data[64] = {0};
  uint32_t dims[9] = {3, 2, 2};

  const char *p = pl_test_path("magic");
  uint8_t m[16] = {0x01, 0x02, 0x08, 0x03};
  CHECK(pl_test_write_file(p, m, sizeof m) == 0);
  expect_bad(p, lb, PL_FORMAT, "bad IDX magic: found bytes 01 02 08 03");

  p = write_idx_raw("type", 0x0A, 3, dims, 3, data, 12);
  expect_bad(p, lb, PL_FORMAT, "unknown IDX type code 0x0a");
  p = write_idx_raw("ndim0", 0x08, 0, dims, 0, data, 0);
  expect_bad(p, lb, PL_FORMAT, "IDX header has 0 dims");
  p = write_idx_raw("ndim10", 0x08, 10, dims, 9, data, 40);
  expect_bad(p, lb, PL_FORMAT, "IDX header has 10 dims (want 1 to 9)");

  uint32_t zero[3] = {3, 0, 2};
  p = write_idx_raw("zerodim", 0x08, 3, zero, 3, data, 0);
  expect_bad(p, lb, PL_FORMAT, "IDX dim 1 is 0");

  uint32_t big[9];
  for (int i = 0; i < 9; i++)
    big[i] = 0xffffffffu;
  p = write_idx_raw("overflow", 0x08, 9, big, 9, data, 0);
  expect_bad(p, lb, PL_FORMAT, "IDX dims overflow 64 bits");
  uint32_t big2[3] = {0xffffffffu, 0xffffffffu, 2};
  p = write_idx_raw("overflow2", 0x08, 3, big2, 3, data, 0);
  expect_bad(p, lb, PL_FORMAT, "IDX dims overflow 64 bits");

  p = write_idx_raw("short", 0x08, 3, dims, 3, data, 10);
  expect_bad(p, lb, PL_FORMAT,
             "offset 16: data is 12 bytes (3 x 4) but the file has 10 left");
  p = write_idx_raw("trailing", 0x08, 3, dims, 3, data, 14);
  expect_bad(p, lb, PL_FORMAT, "offset 28: 2 trailing bytes");

  p = pl_test_path("tiny");
  CHECK(pl_test_write_file(p, m, 3) == 0);
  expect_bad(p, lb, PL_FORMAT, "the file is 3 bytes, too short");
  p = write_idx_raw("cuthdr", 0x08, 3, dims, 1, data, 0);
  expect_bad(p, lb, PL_FORMAT, "too short for an IDX header with 3 dims");
  p = pl_test_path("empty");
  CHECK(pl_test_write_file(p, m, 0) == 0);
  expect_bad(p, lb, PL_FORMAT, "the file is 0 bytes");

  expect_bad(pl_test_path("missing"), lb, PL_IO,
             "cannot open: No such file or directory");
}

static void test_count_mismatch(void) {
  const char *im = pl_test_path("cm-images"), *lb = pl_test_path("cm-labels");
  CHECK(pl_test_write_idx(im, pl_test_path("cm-unused"), 10, 2, 2, 0) == 0);
  CHECK(pl_test_write_idx(pl_test_path("cm-unused2"), lb, 9, 2, 2, 0) == 0);
  pl_error err;
  pl_dataset *ds;
  CHECK_STATUS(pl_dataset_open_idx(im, lb, &ds, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "cm-images has 10 images but ");
  CHECK_MSG(&err, "cm-labels has 9 labels");
  CHECK_STATUS(pl_dataset_open_idx(NULL, lb, &ds, &err), PL_INVALID_ARGUMENT,
               &err);
}

/* Labels have 1 dim and images 2 or more: swapped files and the images
 * file given twice are refused, naming the file and what it looks like. */
static void test_roles(void) {
  char im[512], lb[512], want[1400];
  snprintf(im, sizeof im, "%s", pl_test_path("role-images"));
  snprintf(lb, sizeof lb, "%s", pl_test_path("role-labels"));
  CHECK(pl_test_write_idx(im, lb, 5, 2, 3, 0) == 0);
  pl_error err;
  pl_dataset *ds = (pl_dataset *)1;
  CHECK_STATUS(pl_dataset_open_idx(im, im, &ds, &err), PL_FORMAT, &err);
  CHECK(ds == NULL);
  snprintf(want, sizeof want, "%s: an IDX labels file has 1 dim, this one has "
           "3: it looks like an images file (the images file comes first, "
           "then the labels)", im);
  CHECK(!strcmp(err.message, want));
  CHECK_STATUS(pl_dataset_open_idx(lb, im, &ds, &err), PL_FORMAT, &err);
  snprintf(want, sizeof want, "%s: an IDX images file has 2 or more dims, "
           "this one has 1: it looks like a labels file (the images file "
           "comes first, then the labels)", lb);
  CHECK(!strcmp(err.message, want));
  CHECK_STATUS(pl_dataset_open_idx(lb, lb, &ds, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "an IDX images file has 2 or more dims, this one has 1");
  CHECK_OK(pl_dataset_open_idx(im, lb, &ds, &err), &err);
  pl_dataset_destroy(ds);
}

/* A copy of a .gz made bad: cut short, or with flipped bytes inside. */
static void test_bad_gzip(void) {
  const char *im = pl_test_path("z-images.gz"), *lb = pl_test_path("z-labels");
  CHECK(pl_test_write_idx(im, pl_test_path("z-l.gz"), 50, 28, 28, 1) == 0);
  CHECK(pl_test_write_idx(pl_test_path("z-i"), lb, 50, 28, 28, 0) == 0);
  FILE *f = fopen(im, "rb");
  uint8_t buf[1 << 16];
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f)
    fclose(f);
  CHECK(n > 1000 && n < sizeof buf);
  const char *cut = pl_test_path("cut.gz");
  CHECK(pl_test_write_file(cut, buf, n / 2) == 0);
  expect_bad(cut, lb, PL_FORMAT, "gzip stream is truncated");
  for (size_t i = 100; i < 140; i++)
    buf[i] ^= 0x5a;
  const char *bad = pl_test_path("flipped.gz");
  CHECK(pl_test_write_file(bad, buf, n) == 0);
  expect_bad(bad, lb, PL_FORMAT, "corrupt gzip data");
  pl_error err;
  pl_dataset *ds;
  CHECK_STATUS(pl_dataset_open_idx(bad, lb, &ds, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "compressed offset ");
}

static int gz_byte_at(const char *path, long off) {
  gzFile g = gzopen(path, "rb");
  if (!g)
    return -1;
  uint8_t b[64];
  if (off + 1 > (long)sizeof b)
    return -1;
  int n = gzread(g, b, (unsigned)(off + 1));
  gzclose(g);
  return n == off + 1 ? b[off] : -1;
}

static void check_fashion(const char *dir, const char *prefix,
                          uint64_t want_len) {
  char im[512], lb[512];
  snprintf(im, sizeof im, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
  snprintf(lb, sizeof lb, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_idx(im, lb, &ds, &err), &err);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), want_len);
  const pl_field *img = pl_dataset_field(ds, 0), *lab = pl_dataset_field(ds, 1);
  CHECK(!strcmp(img->name, "image") && img->dtype == PL_UINT8);
  CHECK(img->ndim == 2 && img->shape[0] == 28 && img->shape[1] == 28);
  CHECK(!strcmp(lab->name, "label") && lab->dtype == PL_UINT8);
  CHECK(lab->ndim == 0);
  uint8_t pix[784], label = 0xff;
  void *dst[2] = {pix, &label};
  CHECK_OK(pl_dataset_read(ds, 0, dst, &err), &err);
  CHECK_EQ_U64(label, (uint64_t)gz_byte_at(lb, 8));
  CHECK(label < 10);
  CHECK_EQ_U64(pix[0], (uint64_t)gz_byte_at(im, 16));
  CHECK_OK(pl_dataset_read(ds, want_len - 1, dst, &err), &err);
  CHECK(label < 10);
  pl_dataset_destroy(ds);
}

static void test_fashion_mnist(void) {
  const char *dir = "/usr/share/datasets/fashion-mnist";
  char probe[512];
  snprintf(probe, sizeof probe, "%s/train-labels-idx1-ubyte.gz", dir);
  FILE *f = fopen(probe, "rb");
  if (!f) {
    printf("fashion-mnist not installed: skipping that part\n");
    return;
  }
  fclose(f);
  check_fashion(dir, "train", 60000);
  check_fashion(dir, "t10k", 10000);
}

int main(void) {
  test_plain_and_gz();
  test_multibyte_types();
  test_header_errors();
  test_count_mismatch();
  test_roles();
  test_bad_gzip();
  test_fashion_mnist();
  return pl_test_finish("test_sources_idx");
}
