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

pl_status pl_errorf(pl_error *err, pl_status status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->status = status;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
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
  char prefix[PL_ERROR_MESSAGE_MAX], old[PL_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, err->message, sizeof old);
  /* Both parts are cut to fit: the cause is more useful than the prefix. */
  size_t n = strnlen(prefix, sizeof prefix - 3);
  memcpy(err->message, prefix, n);
  memcpy(err->message + n, ": ", 2);
  size_t room = sizeof err->message - n - 3;
  size_t m = strnlen(old, room);
  memcpy(err->message + n + 2, old, m);
  err->message[n + 2 + m] = '\0';
  return err->status;
}

void pl_log(const pl_logger *lg, pl_log_level level, const char *fmt, ...) {
  if (!lg || !lg->fn || level < lg->level)
    return;
  char msg[PL_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
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
