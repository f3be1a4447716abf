/* A small test harness: CHECK macros that report file:line and keep going,
 * a temporary directory per test, and writers for the file formats the
 * sources read (so tests build exact bytes they can compare against). */
#ifndef PL_TESTUTIL_H
#define PL_TESTUTIL_H

#include "pinloader.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern int pl_test_failures;

#define PL_TEST_MIN(a, b) ((a) < (b) ? (a) : (b))

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,     \
              #cond);                                                       \
      pl_test_failures++;                                                   \
    }                                                                       \
  } while (0)

#define CHECK_EQ_U64(a, b)                                                  \
  do {                                                                      \
    uint64_t ca_ = (uint64_t)(a), cb_ = (uint64_t)(b);                      \
    if (ca_ != cb_) {                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu != %llu)\n",    \
              __FILE__, __LINE__, #a, #b, (unsigned long long)ca_,          \
              (unsigned long long)cb_);                                     \
      pl_test_failures++;                                                   \
    }                                                                       \
  } while (0)

/* The call must return `want`; prints the error message if not. */
#define CHECK_STATUS(call, want, errp)                                      \
  do {                                                                      \
    pl_status cs_ = (call);                                                 \
    if (cs_ != (want)) {                                                    \
      fprintf(stderr, "%s:%d: %s returned %s, want %s: %s\n", __FILE__,    \
              __LINE__, #call, pl_status_name(cs_), pl_status_name(want),   \
              pl_test_msg(errp));                                           \
      pl_test_failures++;                                                   \
    }                                                                       \
  } while (0)

#define CHECK_OK(call, errp) CHECK_STATUS(call, PL_OK, errp)

/* The message must contain `needle`. */
#define CHECK_MSG(errp, needle)                                             \
  do {                                                                      \
    if (!strstr((errp)->message, (needle))) {                               \
      fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__,    \
              __LINE__, (errp)->message, (needle));                         \
      pl_test_failures++;                                                   \
    }                                                                       \
  } while (0)

static inline const char *pl_test_msg(const pl_error *e) {
  return e ? e->message : "";
}

/* Ends a test's main(): prints a summary, returns the exit code. */
int pl_test_finish(const char *name);

/* A fresh temporary directory for this process; path + "/" + name. */
const char *pl_test_tmpdir(void);
const char *pl_test_path(const char *name); /* static buffer per call slot */

/* Deterministic bytes: byte j of sample i of a synthetic data set. */
static inline uint8_t pl_test_byte(uint64_t i, uint64_t j) {
  uint64_t x = (i * 0x9E3779B97F4A7C15ull) ^ (j * 0xBF58476D1CE4E5B9ull);
  x ^= x >> 29;
  return (uint8_t)(x * 0x94D049BB133111EBull >> 56);
}

/* Writes a file; returns 0 on success. */
int pl_test_write_file(const char *path, const void *data, size_t n);
/* Gzip-compresses data into path. */
int pl_test_write_gz(const char *path, const void *data, size_t n);

/* IDX files of n images rows x cols (uint8) with labels (uint8) made from
 * pl_test_byte; image i = pl_test_byte(i, 0..rows*cols-1), label i =
 * pl_test_byte(i, 1u << 20) % 10. gz: write compressed. */
int pl_test_write_idx(const char *images, const char *labels, uint32_t n,
                      uint32_t rows, uint32_t cols, int gz);

/* A CIFAR-10 binary file of n records, sample indices starting at `first`:
 * record = label (pl_test_byte(i, 1u << 20) % 10) + 3072 pixel bytes
 * pl_test_byte(i, 0..3071). */
int pl_test_write_cifar(const char *path, uint64_t first, uint32_t n);

/* A log hook (pl_loader_config.log) that counts warnings and keeps the last
 * one; thread-safe. Initialise with PL_TEST_LOG_INIT. */
typedef struct pl_test_log {
  pthread_mutex_t mu;
  int warnings;
  char last[512];
} pl_test_log;
#define PL_TEST_LOG_INIT {PTHREAD_MUTEX_INITIALIZER, 0, ""}
void pl_test_capture_log(void *user, pl_log_level level, const char *msg);

/* 64-bit FNV-1a, continued from h (start with PL_FNV_OFFSET). */
#define PL_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t pl_test_fnv1a(uint64_t h, const void *data, size_t n);

#endif
