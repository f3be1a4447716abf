#include "testutil.h"

#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

int pl_test_failures;

int pl_test_finish(const char *name) {
  if (pl_test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, pl_test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

const char *pl_test_tmpdir(void) {
  static char dir[256];
  if (!dir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/pltest.XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(dir)) {
      perror("mkdtemp");
      exit(2);
    }
  }
  return dir;
}

const char *pl_test_path(const char *name) {
  static char bufs[8][512];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, 512, "%s/%s", pl_test_tmpdir(), name);
  return b;
}

int pl_test_write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  size_t w = n ? fwrite(data, 1, n, f) : 0;
  return (fclose(f) == 0 && w == n) ? 0 : -1;
}

int pl_test_write_gz(const char *path, const void *data, size_t n) {
  gzFile g = gzopen(path, "wb");
  if (!g)
    return -1;
  int w = n ? gzwrite(g, data, (unsigned)n) : 0;
  return (gzclose(g) == Z_OK && (size_t)w == n) ? 0 : -1;
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

int pl_test_write_idx(const char *images, const char *labels, uint32_t n,
                      uint32_t rows, uint32_t cols, int gz) {
  size_t img = (size_t)rows * cols;
  uint8_t *a = malloc(16 + (size_t)n * img), *b = malloc(8 + (size_t)n);
  if (!a || !b)
    return -1;
  put_be32(a, 0x00000803);
  put_be32(a + 4, n);
  put_be32(a + 8, rows);
  put_be32(a + 12, cols);
  put_be32(b, 0x00000801);
  put_be32(b + 4, n);
  for (uint32_t i = 0; i < n; i++) {
    for (size_t j = 0; j < img; j++)
      a[16 + i * img + j] = pl_test_byte(i, j);
    b[8 + i] = pl_test_byte(i, 1u << 20) % 10;
  }
  int (*wr)(const char *, const void *, size_t) =
      gz ? pl_test_write_gz : pl_test_write_file;
  int rc = wr(images, a, 16 + (size_t)n * img) | wr(labels, b, 8 + (size_t)n);
  free(a);
  free(b);
  return rc;
}

int pl_test_write_cifar(const char *path, uint64_t first, uint32_t n) {
  uint8_t *a = malloc((size_t)n * 3073);
  if (!a)
    return -1;
  for (uint32_t k = 0; k < n; k++) {
    uint8_t *r = a + (size_t)k * 3073;
    r[0] = pl_test_byte(first + k, 1u << 20) % 10;
    for (int j = 0; j < 3072; j++)
      r[1 + j] = pl_test_byte(first + k, (uint64_t)j);
  }
  int rc = pl_test_write_file(path, a, (size_t)n * 3073);
  free(a);
  return rc;
}

uint64_t pl_test_fnv1a(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

void pl_test_capture_log(void *user, pl_log_level level, const char *msg) {
  pl_test_log *lc = user;
  pthread_mutex_lock(&lc->mu);
  if (level == PL_LOG_WARN) {
    lc->warnings++;
    snprintf(lc->last, sizeof lc->last, "%s", msg);
  }
  pthread_mutex_unlock(&lc->mu);
}
