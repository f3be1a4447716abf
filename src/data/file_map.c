/* Data files in memory: mmap for plain files, one zlib pass for .gz. */
#include "data/file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Files up to this size are prefetched into the page cache at open: small
 * enough that the whole file is wanted soon, large enough for MNIST-likes. */
#define PREFETCH_MAX_BYTES (1ull << 30)
/* deflate cannot expand data by more than about 1032:1. */
#define DEFLATE_MAX_RATIO 1032u
#define GZ_MIN_BUFFER (64u << 10)

static const uint8_t empty_file[1];

bool pl_file_map_is_gz(const char *path) {
  size_t n = strlen(path);
  return n >= 3 && !strcmp(path + n - 3, ".gz");
}

static pl_status sys_error(pl_error *err, const char *path, const char *what,
                           int errnum) {
  pl_errorf(err, errnum == ENOMEM ? PL_NO_MEMORY : PL_IO, "%s: %s: %s", path,
            what, strerror(errnum));
  pl_error_set_path(err, path);
  pl_error_set_errno(err, errnum);
  return errnum == ENOMEM ? PL_NO_MEMORY : PL_IO;
}

static pl_status open_regular(const char *path, int *fd, uint64_t *size,
                              pl_error *err) {
  *fd = PL_FAULT(PL_FAULT_FILE_OPEN) ? (errno = EIO, -1)
                                     : open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0)
    return sys_error(err, path, "cannot open", errno);
  struct stat st;
  int rc = PL_FAULT(PL_FAULT_FILE_OPEN) ? (errno = EIO, -1) : fstat(*fd, &st);
  if (rc != 0 || !S_ISREG(st.st_mode)) {
    pl_status s = rc != 0 ? sys_error(err, path, "cannot stat", errno)
                          : pl_errorf(err, PL_IO, "%s: not a regular file",
                                      path);
    close(*fd);
    return s;
  }
  *size = (uint64_t)st.st_size;
  return PL_OK;
}

/* Maps the raw bytes of `path` into m (data, size, mapping). */
static pl_status map_raw(const char *path, pl_file_map *m, pl_error *err) {
  int fd = -1;
  uint64_t size = 0;
  PL_TRY(open_regular(path, &fd, &size, err));
  m->size = size;
  m->data = empty_file;
  if (size == 0) { /* mmap of 0 bytes is EINVAL; an empty file is valid */
    close(fd);
    return PL_OK;
  }
  if (size > SIZE_MAX) {
    close(fd);
    return pl_errorf(err, PL_IO, "%s: %llu bytes do not fit in memory", path,
                     (unsigned long long)size);
  }
  /* Shared, not private: for a read-only mapping the two read the same
   * page-cache pages, but only a shared one can be page-locked in place
   * (cudaHostRegister of a private file mapping hung the driver on the
   * H200 machine; bench/results/direct-probe-h200-2026-12-01.md). Some
   * file systems (FUSE in direct_io mode) refuse shared mappings: those
   * files are mapped private, and direct mode leaves them alone. */
  void *p = PL_FAULT(PL_FAULT_FILE_MAP)
                ? (errno = ENOMEM, MAP_FAILED)
                : mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
  m->shared = p != MAP_FAILED;
  if (p == MAP_FAILED && (errno == ENODEV || errno == EACCES ||
                          errno == EINVAL || errno == EPERM))
    p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  int mmap_errno = errno;
  close(fd); /* the mapping keeps the file */
  if (p == MAP_FAILED)
    return sys_error(err, path, "mmap failed", mmap_errno);
  if (size <= PREFETCH_MAX_BYTES)
    (void)madvise(p, (size_t)size, MADV_WILLNEED); /* a hint only */
  m->mapping = p;
  m->mapping_len = (size_t)size;
  m->data = p;
  return PL_OK;
}

/* ---------------------------------------------------------------- gzip */

typedef struct gz_out {
  uint8_t *buf;
  size_t used, cap;
  uint64_t limit; /* cap never exceeds limit + 1: one byte more proves excess */
} gz_out;

/* The first buffer: the size the gzip trailer claims (mod 2^32), bounded by
 * what deflate can produce, so that a lying trailer cannot force a huge
 * allocation up front. */
static size_t gz_first_cap(const uint8_t *in, uint64_t n, uint64_t limit) {
  uint64_t hint = GZ_MIN_BUFFER;
  if (n >= 18) {
    const uint8_t *t = in + n - 4;
    uint64_t isize = (uint64_t)t[0] | (uint64_t)t[1] << 8 |
                     (uint64_t)t[2] << 16 | (uint64_t)t[3] << 24;
    uint64_t bound = n > UINT64_MAX / DEFLATE_MAX_RATIO
                         ? UINT64_MAX
                         : n * DEFLATE_MAX_RATIO;
    hint = PL_MAX(hint, PL_MIN(isize + 1, bound));
  }
  return (size_t)PL_MIN(hint, limit + 1);
}

static pl_status gz_too_big(const gz_out *o, const char *path,
                            pl_error *err) {
  return pl_errorf(err, PL_FORMAT,
                   "%s: decompresses to more than %llu bytes; refusing "
                   "(corrupt file or decompression bomb?)",
                   path, (unsigned long long)o->limit);
}

static pl_status gz_grow(gz_out *o, const char *path, pl_error *err) {
  if (o->cap > o->limit)
    return gz_too_big(o, path, err);
  uint64_t want = (uint64_t)o->cap * 2;
  want = PL_MIN(PL_MAX(want, GZ_MIN_BUFFER), o->limit + 1);
  uint8_t *p = realloc(o->buf, (size_t)want);
  if (!p)
    return pl_errorf(err, PL_NO_MEMORY,
                     "%s: out of memory decompressing (%llu bytes)", path,
                     (unsigned long long)want);
  o->buf = p;
  o->cap = (size_t)want;
  return PL_OK;
}

static bool all_zero(const uint8_t *p, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i])
      return false;
  return true;
}

/* After one gzip member ended at `pos`: whether another member follows
 * (gzip allows concatenation). Trailing zeros are padding, as gzip -d
 * treats them; anything else is an error. */
static pl_status gz_member_end(const uint8_t *in, uint64_t n, uint64_t pos,
                               const char *path, bool *more, pl_error *err) {
  *more = false;
  if (pos == n || all_zero(in + pos, n - pos))
    return PL_OK;
  if (n - pos >= 2 && in[pos] == 0x1f && in[pos + 1] == 0x8b) {
    *more = true;
    return PL_OK;
  }
  return pl_errorf(err, PL_FORMAT,
                   "%s: compressed offset %llu: %llu bytes of trailing "
                   "garbage after the gzip stream",
                   path, (unsigned long long)pos,
                   (unsigned long long)(n - pos));
}

static pl_status gz_inflate_error(int rc, z_stream *zs, uint64_t pos,
                                  const char *path, pl_error *err) {
  if (rc == Z_MEM_ERROR)
    return pl_errorf(err, PL_NO_MEMORY, "%s: zlib out of memory", path);
  if (rc == Z_BUF_ERROR) /* no progress with input exhausted */
    return pl_errorf(err, PL_FORMAT,
                     "%s: compressed offset %llu: gzip stream is truncated",
                     path, (unsigned long long)pos);
  return pl_errorf(err, PL_FORMAT,
                   "%s: compressed offset %llu: corrupt gzip data (%s)", path,
                   (unsigned long long)pos,
                   zs->msg ? zs->msg : "zlib error");
}

/* One inflate step; *done once the last member has ended. */
static pl_status gz_step(z_stream *zs, const uint8_t *in, uint64_t n,
                         uint64_t *pos, gz_out *o, const char *path,
                         bool *done, pl_error *err) {
  if (o->used == o->cap)
    PL_TRY(gz_grow(o, path, err));
  zs->next_in = (Bytef *)(uintptr_t)(in + *pos);
  zs->avail_in = (uInt)PL_MIN(n - *pos, (uint64_t)UINT_MAX);
  zs->next_out = o->buf + o->used;
  zs->avail_out = (uInt)PL_MIN(o->cap - o->used, (size_t)UINT_MAX);
  uInt in0 = zs->avail_in, out0 = zs->avail_out;
  int rc = PL_FAULT(PL_FAULT_GZ_READ) ? Z_DATA_ERROR : inflate(zs, Z_NO_FLUSH);
  *pos += in0 - zs->avail_in;
  o->used += out0 - zs->avail_out;
  if (rc == Z_STREAM_END) {
    bool more;
    PL_TRY(gz_member_end(in, n, *pos, path, &more, err));
    *done = !more;
    if (more && inflateReset(zs) != Z_OK)
      return gz_inflate_error(Z_STREAM_ERROR, zs, *pos, path, err);
    return PL_OK;
  }
  if (rc == Z_OK || (rc == Z_BUF_ERROR && zs->avail_out == 0))
    return PL_OK;
  if (rc == Z_DATA_ERROR && !zs->msg)
    zs->msg = (char *)"injected fault";
  return gz_inflate_error(rc, zs, *pos, path, err);
}

static pl_status gz_decompress(const uint8_t *in, uint64_t n,
                               uint64_t limit, const char *path, gz_out *o,
                               pl_error *err) {
  if (n == 0)
    return pl_errorf(err, PL_FORMAT,
                     "%s: compressed offset 0: gzip stream is truncated "
                     "(the file is empty)", path);
  o->limit = limit;
  o->cap = gz_first_cap(in, n, limit);
  o->buf = malloc(o->cap);
  if (!o->buf)
    return pl_errorf(err, PL_NO_MEMORY, "%s: out of memory decompressing",
                     path);
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 + 16) != Z_OK) /* 16: gzip wrapper only */
    return pl_errorf(err, PL_NO_MEMORY, "%s: zlib init failed", path);
  uint64_t pos = 0;
  bool done = false;
  pl_status s = PL_OK;
  while (s == PL_OK && !done)
    s = gz_step(&zs, in, n, &pos, o, path, &done, err);
  inflateEnd(&zs);
  if (s == PL_OK && o->used > limit) /* filled the last byte of the cap */
    s = gz_too_big(o, path, err);
  return s;
}

static pl_status map_gz(const char *path, uint64_t limit, pl_file_map *m,
                        pl_error *err) {
  pl_file_map raw;
  memset(&raw, 0, sizeof raw);
  PL_TRY(map_raw(path, &raw, err));
  gz_out o = {0};
  pl_status s = gz_decompress(raw.data, raw.size, limit, path, &o, err);
  pl_file_map_close(&raw);
  if (s != PL_OK) {
    free(o.buf);
    return s;
  }
  /* Give back the unused tail; keep the larger block if realloc fails. */
  uint8_t *shrunk = o.used ? realloc(o.buf, o.used) : NULL;
  if (shrunk)
    o.buf = shrunk;
  m->owned = o.buf;
  m->data = o.used ? o.buf : empty_file;
  m->size = o.used;
  return PL_OK;
}

pl_status pl_file_map_open_limit(const char *path, uint64_t max_gz_bytes,
                                 pl_file_map *out, pl_error *err) {
  memset(out, 0, sizeof *out);
  if (!path || !path[0])
    return pl_errorf(err, PL_INVALID_ARGUMENT, "empty file path");
  max_gz_bytes = PL_MIN(max_gz_bytes, (uint64_t)SIZE_MAX - 1);
  pl_status s = pl_file_map_is_gz(path) ? map_gz(path, max_gz_bytes, out, err)
                                        : map_raw(path, out, err);
  if (s == PL_OK && !(out->path = strdup(path)))
    s = pl_errorf(err, PL_NO_MEMORY, "out of memory");
  if (s != PL_OK)
    pl_file_map_close(out);
  return s;
}

pl_status pl_file_map_open(const char *path, pl_file_map *out,
                           pl_error *err) {
  return pl_file_map_open_limit(path, PL_GZ_MAX_BYTES, out, err);
}

void pl_file_map_close(pl_file_map *m) {
  if (m->mapping)
    munmap(m->mapping, m->mapping_len);
  free(m->owned);
  free(m->path);
  memset(m, 0, sizeof *m);
}
