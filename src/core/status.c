/* Status codes, dtypes, version, error and log helpers. */
#include "core/common.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

unsigned pl_version(void) { return PL_VERSION_HEX; }

#define PL_STR_(x) #x
#define PL_XSTR_(x) PL_STR_(x)
const char *pl_version_string(void) {
  return PL_XSTR_(PL_VERSION_MAJOR) "." PL_XSTR_(PL_VERSION_MINOR) "." PL_XSTR_(
      PL_VERSION_PATCH);
}

const char *pl_status_name(pl_status s) {
  switch (s) {
#define PL_STATUS_NAME_(name, desc) \
  case PL_##name:                   \
    return "PL_" #name;
    PL_STATUS_MAP(PL_STATUS_NAME_)
#undef PL_STATUS_NAME_
  default:
    return "PL_UNKNOWN";
  }
}

const char *pl_status_str(pl_status s) {
  switch (s) {
#define PL_STATUS_STR_(name, desc) \
  case PL_##name:                  \
    return desc;
    PL_STATUS_MAP(PL_STATUS_STR_)
#undef PL_STATUS_STR_
  default:
    return "unknown status";
  }
}

static void error_fields_clear(pl_error *err) {
  err->sample_index = UINT64_MAX;
  err->path[0] = '\0';
  err->sys_errno = 0;
  err->cuda_error = 0;
}

void pl_error_clear(pl_error *err) {
  if (err) {
    err->status = PL_OK;
    err->message[0] = '\0';
    error_fields_clear(err);
  }
}

/* Messages are formatted here first, then fitted into pl_error. */
enum { LONG_MESSAGE = 8192 };

/* A message too long for the error loses its middle, not its end: the
 * start names the thing (a file, a sample), the end says what went wrong,
 * and long paths sit in between. */
static void put_message(char *dst, size_t cap, const char *msg) {
  static const char cut[] = " ... ";
  size_t len = strlen(msg), cutlen = sizeof cut - 1;
  if (len < cap) {
    memcpy(dst, msg, len + 1);
    return;
  }
  size_t head = (cap - 1 - cutlen) / 3, tail = cap - 1 - cutlen - head;
  memcpy(dst, msg, head);
  memcpy(dst + head, cut, cutlen);
  memcpy(dst + head + cutlen, msg + len - tail, tail);
  dst[cap - 1] = '\0';
}

pl_status pl_errorf(pl_error *err, pl_status status, const char *fmt, ...) {
  if (err) {
    char msg[LONG_MESSAGE];
    va_list ap;
    va_start(ap, fmt);
    err->status = status;
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    put_message(err->message, sizeof err->message, msg);
    error_fields_clear(err);
  }
  return status;
}

void pl_error_set_sample(pl_error *err, uint64_t index) {
  if (err)
    err->sample_index = index;
}

void pl_error_set_path(pl_error *err, const char *path) {
  if (err && path)
    snprintf(err->path, sizeof err->path, "%s", path);
}

void pl_error_set_errno(pl_error *err, int errnum) {
  if (err)
    err->sys_errno = errnum;
}

void pl_error_set_cuda(pl_error *err, int code) {
  if (err)
    err->cuda_error = code;
}

pl_status pl_error_prefix(pl_error *err, const char *fmt, ...) {
  if (!err)
    return PL_OK; /* caller returns its own status when err is NULL */
  char msg[LONG_MESSAGE];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg - 2, fmt, ap);
  va_end(ap);
  size_t k = n < 0 ? 0 : PL_MIN((size_t)n, sizeof msg - 3);
  snprintf(msg + k, sizeof msg - k, ": %s", err->message);
  put_message(err->message, sizeof err->message, msg);
  return err->status;
}

void pl_log(const pl_logger *lg, pl_log_level level, const char *fmt, ...) {
  if (!lg || !lg->fn || level < lg->level)
    return;
  char full[LONG_MESSAGE], msg[PL_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(full, sizeof full, fmt, ap);
  va_end(ap);
  put_message(msg, sizeof msg, full);
  lg->fn(lg->user, level, msg);
}

double pl_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

const char *pl_basename(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

size_t pl_dtype_size(pl_dtype t) {
  static const size_t sizes[PL_DTYPE_COUNT_] = {
#define PL_DTYPE_SIZE_(NAME, name, bytes, format, dlpack) bytes,
      PL_DTYPE_MAP(PL_DTYPE_SIZE_)
#undef PL_DTYPE_SIZE_
  };
  return (unsigned)t < PL_DTYPE_COUNT_ ? sizes[t] : 0;
}

const char *pl_dtype_name(pl_dtype t) {
  static const char *const names[PL_DTYPE_COUNT_] = {
#define PL_DTYPE_NAME_(NAME, name, bytes, format, dlpack) #name,
      PL_DTYPE_MAP(PL_DTYPE_NAME_)
#undef PL_DTYPE_NAME_
  };
  return (unsigned)t < PL_DTYPE_COUNT_ ? names[t] : "invalid";
}

uint64_t pl_field_numel(const pl_field *f) {
  uint64_t n = 1;
  for (int i = 0; i < f->ndim && i < PL_MAX_DIMS; i++)
    if (f->shape[i] <= 0 || !pl_mul_u64(n, (uint64_t)f->shape[i], &n))
      return 0;
  return n;
}

uint64_t pl_field_bytes(const pl_field *f) {
  uint64_t b;
  return pl_mul_u64(pl_field_numel(f), pl_dtype_size(f->dtype), &b) ? b : 0;
}
