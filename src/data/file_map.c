/* Data files in memory: mmap for plain files, one zlib pass for .gz. */
#include "data/file_map.h"
#include "data/map_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Files up to this size are prefetched into the page cache at open: small
 * enough that the whole file is wanted soon, large enough for MNIST-likes. */
#define PREFETCH_MAX_BYTES (1ull << 30)
#define GZ_MIN_BUFFER (64u << 10)
/* deflate cannot expand data by more than about 1032:1: what a file of n
 * compressed bytes can produce bounds every allocation made ahead of the
 * output. */
#define DEFLATE_MAX_RATIO 1032u

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

/* A file whose size reads 0 may still have bytes (/proc, sysfs): those
 * cannot be mapped, and would load as an empty data set. */
static pl_status check_really_empty(int fd, const char *path, pl_error *err) {
  char c;
  ssize_t n = pread(fd, &c, 1, 0);
  if (n > 0)
    return pl_errorf(err, PL_IO,
                     "%s: the file reports a size of 0 but has data (a "
                     "/proc or sysfs file?); copy it to a regular file",
                     path);
  return PL_OK;
}

/* Opens without blocking (a FIFO's open waits for a writer otherwise),
 * then refuses anything but a regular file before reading a byte. */
static pl_status open_regular(const char *path, int *fd, uint64_t *size,
                              pl_error *err) {
  *fd = PL_FAULT(PL_FAULT_FILE_OPEN)
            ? (errno = EIO, -1)
            : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (*fd < 0)
    return sys_error(err, path, "cannot open", errno);
  struct stat st;
  int rc = PL_FAULT(PL_FAULT_FILE_OPEN) ? (errno = EIO, -1) : fstat(*fd, &st);
  pl_status s = PL_OK;
  if (rc != 0)
    s = sys_error(err, path, "cannot stat", errno);
  else if (!S_ISREG(st.st_mode))
    s = pl_errorf(err, PL_IO, "%s: not a regular file (%s)", path,
                  S_ISFIFO(st.st_mode)   ? "a FIFO"
                  : S_ISDIR(st.st_mode)  ? "a directory"
                  : S_ISCHR(st.st_mode)  ? "a character device"
                  : S_ISBLK(st.st_mode)  ? "a block device"
                  : S_ISSOCK(st.st_mode) ? "a socket"
                                         : "a special file");
  else if (fcntl(*fd, F_SETFL, 0) != 0) /* reads block as usual from here */
    s = sys_error(err, path, "fcntl", errno);
  else if (st.st_size == 0)
    s = check_really_empty(*fd, path, err);
  if (s != PL_OK) {
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
  return pl_map_guard_register(p, (size_t)size, m->path, err);
}

/* ---------------------------------------------------------------- gzip */

/* The compressed file is read with read(), in pieces, not mapped: no
 * SIGBUS if it shrinks, and the header of the output is checked as soon as
 * its bytes exist, so a bomb with a wrong header fails after one piece. */
#define GZ_IN_CHUNK (256u << 10)

typedef struct gz_job {
  const char *path;
  int fd;
  uint64_t file_size; /* compressed */
  uint8_t *in;
  size_t in_cap;
  uint64_t in_pos; /* compressed bytes consumed, for messages */
  uint8_t *buf;
  size_t used, cap;
  uint64_t limit; /* cap never exceeds limit + 1: one byte more proves excess */
  const char *limit_why;
  uint64_t declared; /* the size the header declares; 0: not known yet */
  uint64_t max_output; /* what deflate can make of the file's bytes */
  const pl_file_map_opts *opts;
} gz_job;

static uint64_t read_u64_file(const char *path) {
  FILE *f = fopen(path, "re");
  unsigned long long v = 0;
  if (!f)
    return 0;
  if (fscanf(f, "%llu", &v) != 1)
    v = 0; /* "max", or unreadable: no limit from here */
  fclose(f);
  return v;
}

/* The memory limit of this process's own cgroup, from /proc/self/cgroup:
 * v2 "0::/PATH" (memory.max), v1 "N:memory:/PATH" (memory.limit_in_bytes);
 * 0 if there is none or it says "max". */
static uint64_t own_cgroup_max(void) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  char line[1024], path[1200];
  uint64_t v = 0;
  if (!f)
    return 0;
  while (!v && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    const char *v1 = strstr(line, ":memory:");
    if (!strncmp(line, "0::", 3))
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
    else if (v1)
      snprintf(path, sizeof path,
               "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1 + 8);
    else
      continue;
    v = read_u64_file(path);
  }
  fclose(f);
  return v;
}

uint64_t pl_file_map_memory_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t lim = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page
                                       : UINT64_MAX;
  uint64_t cg = own_cgroup_max();
  if (!cg) /* a container's namespace root */
    cg = read_u64_file("/sys/fs/cgroup/memory.max");
  if (!cg) /* cgroup v1 */
    cg = read_u64_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  return cg ? PL_MIN(lim, cg) : lim;
}

static pl_status gz_too_big(const gz_job *j, pl_error *err) {
  if (j->declared)
    return pl_errorf(err, PL_FORMAT,
                     "%s: decompresses to more than the %llu bytes its "
                     "header declares", j->path,
                     (unsigned long long)j->declared);
  return pl_errorf(err, PL_FORMAT,
                   "%s: decompresses to more than %llu bytes; refusing "
                   "(corrupt file or decompression bomb? limit: %s)",
                   j->path, (unsigned long long)j->limit, j->limit_why);
}

static pl_status gz_resize(gz_job *j, uint64_t want, pl_error *err) {
  uint8_t *p = realloc(j->buf, (size_t)PL_MAX(want, 1));
  if (!p)
    return pl_errorf(err, PL_NO_MEMORY,
                     "%s: out of memory decompressing (%llu bytes)", j->path,
                     (unsigned long long)want);
  j->buf = p;
  j->cap = (size_t)want;
  return PL_OK;
}

/* The first buffer: the size the gzip trailer claims (mod 2^32), bounded
 * by what deflate can produce and by the limit, so that a lying trailer
 * cannot force a huge allocation up front (and pages are only touched as
 * output arrives). */
static size_t gz_first_cap(const gz_job *j) {
  uint64_t hint = GZ_MIN_BUFFER;
  uint8_t t[4];
  if (j->file_size >= 18 &&
      pread(j->fd, t, 4, (off_t)(j->file_size - 4)) == 4) {
    uint64_t isize = (uint64_t)t[0] | (uint64_t)t[1] << 8 |
                     (uint64_t)t[2] << 16 | (uint64_t)t[3] << 24;
    hint = PL_MAX(hint, PL_MIN(isize + 1, j->max_output));
  }
  return (size_t)PL_MIN(hint, j->limit + 1);
}

static pl_status gz_grow(gz_job *j, pl_error *err) {
  if (j->cap > j->limit)
    return gz_too_big(j, err);
  /* Doubling, or straight to the declared size, but never past what the
   * compressed bytes can produce: a small file that declares gigabytes
   * does not get them. */
  uint64_t want = (uint64_t)j->cap * 2;
  if (j->declared)
    want = PL_MAX(want, PL_MIN(j->declared + 1, j->max_output));
  return gz_resize(j, PL_MIN(PL_MAX(want, GZ_MIN_BUFFER), j->limit + 1),
                   err);
}

/* Asks the source about the bytes so far; once it knows the total, the
 * limit becomes that total. */
static pl_status gz_check_header(gz_job *j, pl_error *err) {
  const pl_file_map_opts *o = j->opts;
  if (!o || !o->expect || j->declared)
    return PL_OK;
  uint64_t total = 0;
  PL_TRY(o->expect(o->user, j->path, j->buf, j->used, &total, err));
  if (!total)
    return PL_OK;
  if (total > j->limit)
    return pl_errorf(err, PL_FORMAT,
                     "%s: its header declares %llu bytes, more than %llu "
                     "(%s)", j->path, (unsigned long long)total,
                     (unsigned long long)j->limit, j->limit_why);
  j->declared = total;
  j->limit = total;
  if (j->used > total)
    return gz_too_big(j, err);
  return PL_OK;
}

static pl_status gz_inflate_error(int rc, z_stream *zs, const gz_job *j,
                                  pl_error *err) {
  uint64_t pos = j->in_pos - zs->avail_in;
  if (rc == Z_MEM_ERROR)
    return pl_errorf(err, PL_NO_MEMORY, "%s: zlib out of memory", j->path);
  if (rc == Z_BUF_ERROR) /* no progress with input exhausted */
    return pl_errorf(err, PL_FORMAT,
                     "%s: compressed offset %llu: gzip stream is truncated",
                     j->path, (unsigned long long)pos);
  return pl_errorf(err, PL_FORMAT,
                   "%s: compressed offset %llu: corrupt gzip data (%s)",
                   j->path, (unsigned long long)pos,
                   zs->msg ? zs->msg : "zlib error");
}

/* Refills the input; *eof when the file has no more bytes. */
static pl_status gz_read_more(gz_job *j, z_stream *zs, bool *eof,
                              pl_error *err) {
  if (zs->avail_in)
    return PL_OK;
  ssize_t n;
  do
    n = read(j->fd, j->in, j->in_cap);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return sys_error(err, j->path, "read failed", errno);
  zs->next_in = j->in;
  zs->avail_in = (uInt)n;
  j->in_pos += (uint64_t)n;
  *eof = n == 0;
  return PL_OK;
}

/* After a member ended: trailing zeros are padding (as gzip -d treats
 * them), another gzip magic starts a member, anything else is an error.
 * *more: another member follows. */
static pl_status gz_member_end(gz_job *j, z_stream *zs, bool *more,
                               pl_error *err) {
  *more = false;
  uint64_t end = j->in_pos - zs->avail_in; /* where the member ended */
  for (;;) {
    bool eof = false;
    PL_TRY(gz_read_more(j, zs, &eof, err));
    if (eof)
      return PL_OK;
    while (zs->avail_in && zs->next_in[0] == 0) {
      zs->next_in++;
      zs->avail_in--;
    }
    if (!zs->avail_in)
      continue;
    if (zs->next_in[0] == 0x1f) { /* the second magic byte is zlib's job */
      *more = true;
      return PL_OK;
    }
    return pl_errorf(err, PL_FORMAT,
                     "%s: compressed offset %llu: %llu bytes of trailing "
                     "garbage after the gzip stream",
                     j->path, (unsigned long long)end,
                     (unsigned long long)(j->file_size - end));
  }
}

/* One inflate step; *done once the last member has ended. */
static pl_status gz_step(gz_job *j, z_stream *zs, bool *done, pl_error *err) {
  bool eof = false; /* inflate then reports Z_BUF_ERROR if it needed more */
  PL_TRY(gz_read_more(j, zs, &eof, err));
  if (j->used == j->cap)
    PL_TRY(gz_grow(j, err));
  zs->next_out = j->buf + j->used;
  /* Until the source has seen its header, small steps: a wrong header
   * fails after one of them, whatever the buffer's size. */
  size_t step = j->opts && j->opts->expect && !j->declared ? GZ_MIN_BUFFER
                                                            : (size_t)UINT_MAX;
  zs->avail_out = (uInt)PL_MIN(j->cap - j->used, step);
  uInt out0 = zs->avail_out;
  int rc = PL_FAULT(PL_FAULT_GZ_READ) ? Z_DATA_ERROR : inflate(zs, Z_NO_FLUSH);
  j->used += out0 - zs->avail_out;
  PL_TRY(gz_check_header(j, err));
  if (rc == Z_STREAM_END) {
    bool more;
    PL_TRY(gz_member_end(j, zs, &more, err));
    *done = !more;
    if (more && inflateReset(zs) != Z_OK)
      return gz_inflate_error(Z_STREAM_ERROR, zs, j, err);
    return PL_OK;
  }
  if (rc == Z_OK || (rc == Z_BUF_ERROR && zs->avail_out == 0))
    return PL_OK;
  if (rc == Z_DATA_ERROR && !zs->msg)
    zs->msg = (char *)"injected fault";
  return gz_inflate_error(rc, zs, j, err);
}

static pl_status gz_run(gz_job *j, pl_error *err) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 + 16) != Z_OK) /* 16: gzip wrapper only */
    return pl_errorf(err, PL_NO_MEMORY, "%s: zlib init failed", j->path);
  bool done = false;
  pl_status s = PL_OK;
  while (s == PL_OK && !done)
    s = gz_step(j, &zs, &done, err);
  inflateEnd(&zs);
  if (s == PL_OK && j->used > j->limit) /* filled the last byte of the cap */
    s = gz_too_big(j, err);
  return s;
}

static void gz_limit(gz_job *j, uint64_t caller_max) {
  uint64_t mem = pl_file_map_memory_limit();
  j->limit = caller_max;
  j->limit_why = "the limit for this file";
  if (mem < j->limit) {
    j->limit = mem;
    j->limit_why = "this machine's memory, or its cgroup's memory.max";
  }
  j->limit = PL_MIN(j->limit, (uint64_t)SIZE_MAX - 1);
}

static pl_status map_gz(const char *path, const pl_file_map_opts *o,
                        pl_file_map *m, pl_error *err) {
  int fd = -1;
  uint64_t size = 0;
  PL_TRY(open_regular(path, &fd, &size, err));
  if (size == 0) {
    close(fd);
    return pl_errorf(err, PL_FORMAT,
                     "%s: compressed offset 0: gzip stream is truncated "
                     "(the file is empty)", path);
  }
  gz_job j = {.path = path, .fd = fd, .file_size = size, .opts = o};
  gz_limit(&j, o && o->max_gz_bytes ? o->max_gz_bytes : PL_GZ_MAX_BYTES);
  j.in_cap = (size_t)PL_MIN(size, (uint64_t)GZ_IN_CHUNK);
  j.in = malloc(j.in_cap);
  j.max_output = size > UINT64_MAX / DEFLATE_MAX_RATIO
                     ? UINT64_MAX
                     : size * DEFLATE_MAX_RATIO;
  pl_status s = j.in ? gz_resize(&j, gz_first_cap(&j), err)
                     : pl_errorf(err, PL_NO_MEMORY, "out of memory");
  if (s == PL_OK)
    s = gz_run(&j, err);
  free(j.in);
  close(fd);
  if (s == PL_OK && j.declared && j.used < j.declared)
    s = pl_errorf(err, PL_FORMAT,
                  "%s: decompresses to %llu bytes, its header declares %llu "
                  "(truncated)", path, (unsigned long long)j.used,
                  (unsigned long long)j.declared);
  if (s != PL_OK) {
    free(j.buf);
    return s;
  }
  /* Give back the unused tail; keep the larger block if realloc fails. */
  uint8_t *shrunk = j.used ? realloc(j.buf, j.used) : NULL;
  if (shrunk)
    j.buf = shrunk;
  m->owned = j.buf;
  m->data = j.used ? j.buf : empty_file;
  m->size = j.used;
  return PL_OK;
}

pl_status pl_file_map_open_opts(const char *path, const pl_file_map_opts *o,
                                pl_file_map *out, pl_error *err) {
  memset(out, 0, sizeof *out);
  if (!path || !path[0])
    return pl_errorf(err, PL_INVALID_ARGUMENT, "empty file path");
  if (!(out->path = strdup(path)))
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = pl_file_map_is_gz(path) ? map_gz(out->path, o, out, err)
                                        : map_raw(out->path, out, err);
  if (s != PL_OK)
    pl_file_map_close(out);
  return s;
}

pl_status pl_file_map_open_limit(const char *path, uint64_t max_gz_bytes,
                                 pl_file_map *out, pl_error *err) {
  pl_file_map_opts o = {.max_gz_bytes = max_gz_bytes};
  return pl_file_map_open_opts(path, &o, out, err);
}

pl_status pl_file_map_open(const char *path, pl_file_map *out,
                           pl_error *err) {
  return pl_file_map_open_opts(path, NULL, out, err);
}

void pl_file_map_close(pl_file_map *m) {
  if (m->mapping) {
    pl_map_guard_unregister(m->mapping);
    munmap(m->mapping, m->mapping_len);
  }
  free(m->owned);
  free(m->path);
  memset(m, 0, sizeof *m);
}
