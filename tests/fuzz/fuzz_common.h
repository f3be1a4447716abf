/* Shared helpers for the libFuzzer targets: a per-process temp directory,
 * file writers (plain, gzip-compressed by the harness, or raw bytes under a
 * .gz name so the decompressor sees the fuzzer's bytes), and a check that
 * reads every sample of an opened dataset (bounded) and compares the
 * source's zero-copy view with its read. A mismatch aborts: libFuzzer
 * reports it as a crash. */
#ifndef PL_FUZZ_COMMON_H
#define PL_FUZZ_COMMON_H

#include "data/dataset.h"
#include "pinloader.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { FUZZ_MAX_SAMPLES = 2000 };
#define FUZZ_MAX_SAMPLE_BYTES (16u << 20)

static char fuzz_dir[64];

/* Removes the temp dir and its (flat) contents at exit. */
static void fuzz_cleanup(void) {
  DIR *d = opendir(fuzz_dir);
  if (d) {
    struct dirent *e;
    char p[192];
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') {
        snprintf(p, sizeof p, "%s/%s", fuzz_dir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(fuzz_dir);
}

static inline const char *fuzz_tmpdir(void) {
  if (!fuzz_dir[0]) {
    /* /dev/shm: every execution writes files; keep that off the disk. */
    strcpy(fuzz_dir, access("/dev/shm", W_OK) == 0 ? "/dev/shm/plfuzz-XXXXXX"
                                                   : "/tmp/plfuzz-XXXXXX");
    if (!mkdtemp(fuzz_dir))
      abort();
    atexit(fuzz_cleanup);
  }
  return fuzz_dir;
}

/* path of `name` inside the temp dir; buf must hold 128 bytes. */
static inline const char *fuzz_path(char *buf, const char *name) {
  snprintf(buf, 128, "%s/%s", fuzz_tmpdir(), name);
  return buf;
}

static inline void fuzz_write(const char *path, const uint8_t *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    abort();
  if (n && fwrite(p, 1, n, f) != n)
    abort();
  fclose(f);
}

static inline void fuzz_write_gz(const char *path, const uint8_t *p, size_t n) {
  gzFile g = gzopen(path, "wb1");
  if (!g)
    abort();
  if (n && gzwrite(g, p, (unsigned)n) != (int)n)
    abort();
  gzclose(g);
}

/* mode 0: plain file `name`; 1: harness-compressed `name.gz`; 2: the raw
 * bytes written as `name.gz`. Returns the path in buf. */
static inline const char *fuzz_put(char *buf, const char *name, int mode,
                            const uint8_t *p, size_t n) {
  char base[64];
  snprintf(base, sizeof base, "%s%s", name, mode ? ".gz" : "");
  fuzz_path(buf, base);
  if (mode == 1)
    fuzz_write_gz(buf, p, n);
  else
    fuzz_write(buf, p, n);
  return buf;
}

/* Reads samples [0, min(length, FUZZ_MAX_SAMPLES)), plus the last one, and
 * checks view == read for every field the source can view. */
static inline void fuzz_check_dataset(const pl_dataset *ds) {
  int nf = pl_dataset_num_fields(ds);
  uint64_t n = pl_dataset_length(ds);
  if (nf <= 0 || nf > 64)
    abort(); /* sources never make these */
  uint64_t total = pl_dataset_sample_bytes(ds), sum = 0;
  for (int f = 0; f < nf; f++)
    sum += pl_field_bytes(pl_dataset_field(ds, f));
  if (sum != total)
    abort();
  if (n == 0 || total > FUZZ_MAX_SAMPLE_BYTES)
    return;
  void *dst[64];
  for (int f = 0; f < nf; f++) {
    dst[f] = malloc(pl_field_bytes(pl_dataset_field(ds, f)) + 1);
    if (!dst[f])
      abort();
  }
  pl_error err;
  uint64_t m = n < FUZZ_MAX_SAMPLES ? n : FUZZ_MAX_SAMPLES;
  for (uint64_t k = 0; k <= m; k++) {
    uint64_t i = k < m ? k : n - 1;
    if (pl_dataset_read(ds, i, dst, &err) != PL_OK)
      continue; /* a read may fail (a lazy source); it must not crash */
    for (int f = 0; ds->vt->view && f < nf; f++) {
      const void *v = ds->vt->view(ds, i, f);
      uint64_t fb = pl_field_bytes(pl_dataset_field(ds, f));
      if (v && fb && memcmp(v, dst[f], fb) != 0)
        abort(); /* view and read disagree */
    }
  }
  /* Out of range must be refused, not read. */
  if (pl_dataset_read(ds, n, dst, &err) != PL_INVALID_ARGUMENT)
    abort();
  for (int f = 0; f < nf; f++)
    free(dst[f]);
}

#endif /* PL_FUZZ_COMMON_H */
