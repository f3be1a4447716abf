/* Each tar shard opened and indexed (shards_internal.h): local shards
 * mapped, their index kept beside them or in the cache folder; remote
 * ones indexed from the cache when the server's ETag and length still
 * match, else fetched once; ranges read through HTTP or the fetcher. */
#include "data/sources/shards_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- files */

static uint64_t fnv1a(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h;
}

static pl_status mkdirs(const char *dir, pl_error *err) {
  char *d = strdup(dir);
  if (!d)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  for (char *p = d + 1; ; p++) {
    bool last = !*p;
    if (*p == '/' || last) {
      *p = '\0';
      if (mkdir(d, 0777) != 0 && errno != EEXIST) {
        int e = errno;
        pl_errorf(err, PL_IO, "shards: cache folder %s: %s", d, strerror(e));
        free(d);
        return PL_IO;
      }
      if (last)
        break;
      *p = '/';
    }
  }
  free(d);
  return PL_OK;
}

/* Writes buf to path through a temporary name and a rename, so that a
 * reader never sees half a file. */
static bool write_atomic(const char *path, const void *buf, uint64_t n) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return false;
  const uint8_t *p = buf;
  uint64_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, p + done, (size_t)PL_MIN(n - done, 1u << 30));
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break;
    done += (uint64_t)w;
  }
  bool ok = close(fd) == 0 && done == n && rename(tmp, path) == 0;
  if (!ok)
    unlink(tmp);
  return ok;
}

/* The cached index at `path` if its tag matches. */
static bool load_cached(const char *path, const char *tag, pl_tar_index *ix) {
  pl_file_map m;
  pl_error e;
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
      pl_file_map_open(path, &m, &e) != PL_OK)
    return false;
  bool ok = pl_tar_index_load(m.data, m.size, tag, ix, &e) == PL_OK;
  pl_file_map_close(&m);
  return ok;
}

static void save_cached(const char *path, const char *tag,
                        const pl_tar_index *ix) {
  uint8_t *buf;
  uint64_t n;
  pl_error e;
  if (pl_tar_index_save(ix, tag, &buf, &n, &e) != PL_OK)
    return; /* the index stays in memory only */
  write_atomic(path, buf, n);
  free(buf);
}

static char *cache_name(const shards_impl *im, const char *what,
                        const char *ext) {
  size_t n = strlen(im->cache_dir) + 64;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/%016llx%s", im->cache_dir,
             (unsigned long long)fnv1a(what), ext);
  return p;
}

/* ---------------------------------------------------------------- local */

pl_status pl_shards_open_local(shards_impl *im, shard *sh, pl_error *err) {
  PL_TRY(pl_file_map_open(sh->path, &sh->map, err));
  struct stat st;
  char tag[128];
  if (stat(sh->path, &st) != 0)
    return pl_errorf(err, PL_IO, "%s: cannot stat: %s", sh->path,
                     strerror(errno));
  snprintf(tag, sizeof tag, "local %llu %lld.%09ld",
           (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
           st.st_mtim.tv_nsec);
  size_t n = strlen(sh->path) + 8;
  char *beside = malloc(n), *other = cache_name(im, sh->path, ".plidx");
  pl_status s = beside && other ? PL_OK
                                : pl_errorf(err, PL_NO_MEMORY, "out of memory");
  if (s == PL_OK) {
    snprintf(beside, n, "%s.plidx", sh->path);
    if (!load_cached(beside, tag, &sh->ix) &&
        !load_cached(other, tag, &sh->ix)) {
      s = pl_tar_index_build(sh->map.data, sh->map.size, sh->path, &sh->ix,
                             err);
      if (s == PL_OK) {
        save_cached(beside, tag, &sh->ix);
        if (access(beside, F_OK) != 0 && mkdirs(im->cache_dir, err) == PL_OK)
          save_cached(other, tag, &sh->ix);
        pl_error_clear(err);
      }
    }
  }
  free(beside);
  free(other);
  return s;
}

/* ---------------------------------------------------------------- remote */

typedef struct fd_sink {
  int fd;
  const atomic_bool *stop;
} fd_sink;

static int to_fd(void *user, const void *data, size_t n) {
  fd_sink *f = user;
  const uint8_t *p = data;
  if (atomic_load_explicit(f->stop, memory_order_relaxed))
    return 1; /* the dataset is being destroyed */
  while (n) {
    ssize_t w = write(f->fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return 1;
    p += w, n -= (size_t)w;
  }
  return 0;
}

static int discard(void *user, const void *data, size_t n) { return 0; }

/* A range of a remote shard, through the user's fetcher or HTTP. */
pl_status pl_shards_remote_get(shards_impl *im, const shard *sh, uint64_t off,
                            uint64_t len, const pl_http_meta *expect,
                            pl_http_sink sink, void *user, pl_http_meta *got,
                            pl_error *err) {
  if (!im->opt.fetch)
    return pl_http_get(im->http, sh->path, off, len, expect, sink, user, got,
                       err);
  char msg[512] = "";
  if (im->opt.fetch(im->opt.fetch_user, sh->path, off, len, sink, user, msg,
                    sizeof msg) == 0)
    return PL_OK;
  pl_errorf(err, PL_IO, "%s: the fetcher failed: %s", sh->path,
            msg[0] ? msg : "(no message)");
  pl_error_set_path(err, sh->path);
  return PL_IO;
}

/* The whole of sh->path into sh->cache_tar, through a temporary name. */
pl_status pl_shards_download(shards_impl *im, shard *sh, const pl_http_meta *x,
                          pl_http_meta *got, pl_error *err) {
  size_t n = strlen(sh->cache_tar) + 32;
  char *tmp = malloc(n);
  if (!tmp)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  snprintf(tmp, n, "%s.part%lx", sh->cache_tar, (unsigned long)pthread_self());
  fd_sink f = {open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666),
               &im->stop};
  pl_status s = PL_OK;
  if (f.fd < 0)
    s = pl_errorf(err, PL_IO, "shards: cache file %s: %s", tmp,
                  strerror(errno));
  if (s == PL_OK)
    s = pl_shards_remote_get(im, sh, 0, 0, x, to_fd, &f, got, err);
  if (f.fd >= 0 && close(f.fd) != 0 && s == PL_OK)
    s = pl_errorf(err, PL_IO, "shards: cache file %s: %s", tmp,
                  strerror(errno));
  if (s == PL_OK && rename(tmp, sh->cache_tar) != 0)
    s = pl_errorf(err, PL_IO, "shards: cache file %s: %s", sh->cache_tar,
                  strerror(errno));
  if (s != PL_OK)
    unlink(tmp);
  free(tmp);
  return s;
}

static bool file_has_size(const char *path, uint64_t size) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
         (uint64_t)st.st_size == size;
}

/* Indexes a shard fetched whole now; keeps the file when it fits. */
static pl_status index_by_fetch(shards_impl *im, shard *sh, const char *idx,
                                const char *tag, pl_error *err) {
  PL_TRY(pl_shards_download(im, sh, &sh->meta, NULL, err));
  pl_file_map m;
  pl_status s = pl_file_map_open(sh->cache_tar, &m, err);
  if (s == PL_OK) {
    s = pl_tar_index_build(m.data, m.size, sh->path, &sh->ix, err);
    pl_file_map_close(&m);
  }
  if (s == PL_OK)
    save_cached(idx, tag, &sh->ix);
  bool keep = s == PL_OK && im->opt.readahead == PL_SHARDS_WHOLE &&
              im->resident + sh->meta.length <= im->opt.cache_bytes;
  if (keep) {
    sh->on_disk = true;
    im->resident += sh->meta.length;
  } else {
    unlink(sh->cache_tar);
  }
  return s;
}

/* With a fetcher: fetched and indexed at every open (nothing to check a
 * cache against). */
static pl_status open_fetched(shards_impl *im, shard *sh, pl_error *err) {
  PL_TRY(mkdirs(im->cache_dir, err));
  sh->cache_tar = cache_name(im, sh->path, ".tar");
  pl_status s = sh->cache_tar ? pl_shards_download(im, sh, NULL, NULL, err)
                              : pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_file_map m;
  if (s == PL_OK && (s = pl_file_map_open(sh->cache_tar, &m, err)) == PL_OK) {
    s = pl_tar_index_build(m.data, m.size, sh->path, &sh->ix, err);
    sh->meta.length = m.size; /* what the cache counts */
    pl_file_map_close(&m);
  }
  bool keep = s == PL_OK && im->opt.readahead == PL_SHARDS_WHOLE &&
              im->resident + sh->meta.length <= im->opt.cache_bytes;
  if (keep) {
    sh->on_disk = true;
    im->resident += sh->meta.length;
  } else if (sh->cache_tar) {
    unlink(sh->cache_tar);
  }
  return s;
}

pl_status pl_shards_open_remote(shards_impl *im, shard *sh, pl_error *err) {
  if (im->opt.fetch)
    return open_fetched(im, sh, err);
  if (!im->http) {
    pl_http_opts ho = {im->opt.retries, im->opt.backoff_ms,
                       im->opt.timeout_ms};
    PL_TRY(pl_http_open(&ho, &im->http, err));
  }
  PL_TRY(mkdirs(im->cache_dir, err));
  /* What the shard is now: the cached index is good only for that. */
  PL_TRY(pl_http_get(im->http, sh->path, 0, 1, NULL, discard, NULL,
                     &sh->meta, err));
  char tag[256];
  snprintf(tag, sizeof tag, "remote %s %llu", sh->meta.etag,
           (unsigned long long)sh->meta.length);
  char *idx = cache_name(im, sh->path, ".plidx");
  sh->cache_tar = cache_name(im, sh->path, ".tar");
  if (!idx || !sh->cache_tar) {
    free(idx);
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  }
  pl_status s = PL_OK;
  if (load_cached(idx, tag, &sh->ix)) {
    bool keep = im->opt.readahead == PL_SHARDS_WHOLE &&
                file_has_size(sh->cache_tar, sh->meta.length) &&
                im->resident + sh->meta.length <= im->opt.cache_bytes;
    sh->on_disk = keep;
    im->resident += keep ? sh->meta.length : 0;
  } else {
    s = index_by_fetch(im, sh, idx, tag, err);
  }
  free(idx);
  return s;
}

int pl_shards_to_buf(void *user, const void *data, size_t n) {
  buf_sink *b = user;
  if (n > b->cap - b->n)
    return 1;
  memcpy(b->p + b->n, data, n);
  b->n += n;
  return 0;
}
