/* Internal helpers shared by every component: error reporting, logging,
 * clocks and checked arithmetic. Not part of the public API. */
#ifndef PL_COMMON_H
#define PL_COMMON_H

#include "pinloader.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Test-only fault injection (see core/fault.h). Compiled out unless the build
 * sets PL_FAULT_INJECTION. */
#include "core/fault.h"

#if defined(__GNUC__)
#define PL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define PL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PL_PRINTF(f, a)
#define PL_UNLIKELY(x) (x)
#endif

#define PL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PL_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Sets err (if not NULL) to `status` and a formatted message; returns
 * status, so that `return pl_errorf(err, PL_IO, "...", ...);` reads well. */
pl_status pl_errorf(pl_error *err, pl_status status, const char *fmt, ...)
    PL_PRINTF(3, 4);

/* Prefixes err's message with a formatted context ("sample 12: ...") and
 * returns err's status. Used where an error crosses a component boundary. */
pl_status pl_error_prefix(pl_error *err, const char *fmt, ...) PL_PRINTF(2, 3);

/* The structured fields of an error (pinloader.h, pl_error), set next to
 * the pl_errorf that wrote its message; pl_errorf clears them, and
 * pl_error_prefix keeps them. err may be NULL. */
void pl_error_set_sample(pl_error *err, uint64_t index);
void pl_error_set_path(pl_error *err, const char *path);
void pl_error_set_errno(pl_error *err, int errnum);
void pl_error_set_cuda(pl_error *err, int code);

/* An error value to return where err may be NULL: the status is kept. */
#define PL_TRY(expr)                 \
  do {                               \
    pl_status pl_try_s_ = (expr);    \
    if (pl_try_s_ != PL_OK)          \
      return pl_try_s_;              \
  } while (0)

/* Logging through the loader's hook; the hook may be NULL. */
typedef struct pl_logger {
  pl_log_fn fn;
  void *user;
  pl_log_level level;
} pl_logger;

void pl_log(const pl_logger *lg, pl_log_level level, const char *fmt, ...)
    PL_PRINTF(3, 4);

/* Monotonic seconds. */
double pl_now(void);

/* a * b and a + b with overflow detection: return false on overflow. */
static inline bool pl_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool pl_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline uint64_t pl_align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

/* The part holding item x of parts laid end to end: the last i < n with
 * first[i] <= x, where first[] are the parts' prefix sums (first[0] = 0;
 * empty parts are skipped over since their range is empty). */
static inline int pl_part_of(const uint64_t *first, int n, uint64_t x) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (first[mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* The basename of a path, for messages. */
const char *pl_basename(const char *path);

/* malloc / calloc / realloc for the library's own bookkeeping (handles,
 * copy plans, span arrays, slot tables): the fault-injection build can make
 * any of them fail (PL_FAULT_ALLOC), so that every such site is tested to
 * give a clean PL_NO_MEMORY. Freed with free(). */
static inline void *pl_malloc(size_t n) {
  return PL_FAULT(PL_FAULT_ALLOC) ? NULL : malloc(n);
}
static inline void *pl_calloc(size_t n, size_t size) {
  return PL_FAULT(PL_FAULT_ALLOC) ? NULL : calloc(n, size);
}
static inline void *pl_realloc(void *p, size_t n) {
  return PL_FAULT(PL_FAULT_ALLOC) ? NULL : realloc(p, n);
}

#endif /* PL_COMMON_H */
