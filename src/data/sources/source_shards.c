/* WebDataset tar shards: samples are (shard, member group) pairs, numbered
 * shard after shard in the order given; fields are members chosen by
 * extension (pinloader.h, pl_dataset_open_shards).
 *
 * Local shards are memory-mapped for the dataset's life, as every other
 * source's files. Remote shards (http/https) are indexed at open (the
 * cached index is used when the server's ETag and length still match it;
 * else the shard is fetched once and indexed), then read either whole into
 * the cache folder on first use (PL_SHARDS_WHOLE, mapped from there, the
 * cache bounded by cache_bytes with least-recently-read eviction) or one
 * range request per member (PL_SHARDS_RANGES). Every request carries the
 * index's ETag and length: a shard that changed is refused. */
#include "data/dataset.h"
#include "core/rng.h"
#include "data/file_map.h"
#include "data/http_fetch.h"
#include "data/image_sample.h"
#include "data/npy_member.h"
#include "data/tar_index.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FIELDS 16
#define MAX_SHARDS (1 << 24)
#define SLOT_MEMBER PL_IMAGE_SAMPLE_FREE_SLOT
#define ORDER_SLOTS 4 /* epochs whose shard order is kept at once */
#define RNG_STREAM_SHARDS 0x7368726473ull /* "shrds" */

typedef enum { F_IMAGE, F_INT, F_BYTES, F_NPY } field_kind;

typedef struct field_spec {
  char name[64];
  char len_name[72]; /* a bytes field's length field: NAME_len */
  char exts[128]; /* ';'-separated alternatives */
  field_kind kind;
  pl_npy_view npy; /* F_NPY: the dtype and shape, from the first sample */
} field_spec;

typedef struct shard {
  char *path;        /* path or URL, as given (after brace expansion) */
  bool remote;
  pl_tar_index ix;
  uint64_t first;    /* dataset index of its first sample */
  pl_file_map map;   /* local: for the dataset's life; remote: while
                        resident (WHOLE) */
  /* Remote only: */
  pl_http_meta meta; /* as indexed */
  char *cache_tar;   /* the whole shard in the cache folder */
  bool on_disk;      /* cache_tar holds it (WHOLE) */
  bool loading;      /* a reader is fetching it: others wait on `ready` */
  bool queued;       /* in the prefetch queue */
  int refs;          /* readers of map now */
  uint64_t last_use;
} shard;

/* One epoch's shard order: order[k] is the k-th shard read, prefix[k] the
 * samples before it in that order. */
typedef struct epoch_order {
  uint64_t key[2];
  bool valid;
  uint64_t last_use;
  uint32_t *order;
  uint64_t *prefix; /* n + 1 */
} epoch_order;

typedef struct shards_impl {
  pl_shards_options opt;
  char *fields_text, *cache_dir;
  field_spec f[MAX_FIELDS];
  int nf;
  int n;
  shard *s;
  pl_http *http;
  /* Remote residency: lock guards on_disk, loading, refs, last_use, map of
   * remote shards, resident and clock; never held during a transfer or a
   * read of a mapping. */
  pthread_mutex_t lock;
  pthread_cond_t ready;
  uint64_t resident, clock;
  /* Read-ahead (WHOLE): the shards that a shuffled epoch reads next are
   * fetched by one thread of the dataset's, started at the first request;
   * queue and its counts are under `lock`, `work` wakes the thread. */
  pthread_t prefetcher;
  bool prefetch_started;
  atomic_bool stop; /* destroy: the thread ends, a transfer is cut short */
  pthread_cond_t work;
  int *queue, qhead, qlen;
  /* The shard orders of the epochs being read; order_lock guards them and
   * is held for a lookup (a slot is reused only under it). */
  pthread_mutex_t order_lock;
  epoch_order orders[ORDER_SLOTS];
  uint64_t order_clock;
  pl_scratch_pool scratch;
} shards_impl;

void pl_shards_options_init(pl_shards_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  pl_image_options_init(&o->image);
  o->cache_bytes = 4ull << 30;
  o->max_bytes = 4096;
  o->readahead = PL_SHARDS_WHOLE;
  o->retries = 4;
  o->backoff_ms = 200;
  o->timeout_ms = 30000;
  o->shuffle_buffer = 1000;
  o->prefetch = 2;
}

/* ---------------------------------------------------------------- fields */

/* By the first alternative's last part: "seg.png" is an image. */
static field_kind default_kind(const char *exts) {
  char whole[128];
  size_t n = strcspn(exts, ";");
  snprintf(whole, sizeof whole, "%.*s", (int)PL_MIN(n, 127), exts);
  const char *dot = strrchr(whole, '.');
  const char *first = dot ? dot + 1 : whole;
  if (!strcasecmp(first, "jpg") || !strcasecmp(first, "jpeg") ||
      !strcasecmp(first, "png"))
    return F_IMAGE;
  if (!strcasecmp(first, "npy"))
    return F_NPY;
  return !strcasecmp(first, "cls") ? F_INT : F_BYTES;
}

static pl_status parse_field(shards_impl *im, char *item, pl_error *err) {
  char *c1 = strchr(item, ':');
  char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c1 || c1 == item || !c1[1] || (c2 && (c2 == c1 + 1 || !c2[1])))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: field '%s' (want NAME:EXT[;EXT...][:KIND])",
                     item);
  if (im->nf == MAX_FIELDS)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "shards: over %d fields",
                     MAX_FIELDS);
  *c1 = '\0';
  if (c2)
    *c2 = '\0';
  field_spec *f = &im->f[im->nf++];
  if (strlen(item) + 5 > PL_NAME_MAX || strlen(c1 + 1) >= sizeof f->exts)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "shards: field '%s': name "
                     "or extensions too long", item);
  strcpy(f->name, item);
  snprintf(f->len_name, sizeof f->len_name, "%s_len", item);
  strcpy(f->exts, c1 + 1);
  f->kind = default_kind(f->exts);
  if (!c2)
    return PL_OK;
  if (!strcmp(c2 + 1, "image"))
    f->kind = F_IMAGE;
  else if (!strcmp(c2 + 1, "int"))
    f->kind = F_INT;
  else if (!strcmp(c2 + 1, "bytes"))
    f->kind = F_BYTES;
  else if (!strcmp(c2 + 1, "npy"))
    f->kind = F_NPY;
  else
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: field '%s': kind '%s' (want image, int, bytes "
                     "or npy)", item, c2 + 1);
  return PL_OK;
}

static pl_status parse_fields(shards_impl *im, pl_error *err) {
  char *save = NULL;
  for (char *t = strtok_r(im->fields_text, ",", &save); t;
       t = strtok_r(NULL, ",", &save))
    PL_TRY(parse_field(im, t, err));
  if (!im->nf)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "shards: no fields");
  return PL_OK;
}

/* The dataset's fields: a bytes field is two (its bytes, its length). */
static int make_fields(const shards_impl *im, pl_field *out) {
  int k = 0;
  int64_t size = im->opt.image.size;
  for (int i = 0; i < im->nf; i++) {
    const field_spec *f = &im->f[i];
    pl_field *o = &out[k++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", f->name);
    o->dtype = f->kind == F_INT ? PL_INT64 : PL_UINT8;
    if (f->kind == F_NPY) {
      o->dtype = f->npy.dtype;
      o->ndim = f->npy.ndim;
      memcpy(o->shape, f->npy.shape, sizeof o->shape);
    } else if (f->kind == F_IMAGE) {
      o->ndim = 3;
      o->shape[0] = 3, o->shape[1] = size, o->shape[2] = size;
    } else if (f->kind == F_BYTES) {
      o->ndim = 1;
      o->shape[0] = im->opt.max_bytes;
      pl_field *l = &out[k++];
      memset(l, 0, sizeof *l);
      snprintf(l->name, sizeof l->name, "%s", f->len_name);
      l->dtype = PL_INT64;
    }
  }
  return k;
}

/* ---------------------------------------------------------------- brace
 * patterns: "a-{000..099}.tar" as WebDataset (braceexpand) writes them,
 * each {A..B} a range of integers, zero-padded to A's width when A has a
 * leading zero; several braces multiply. */

typedef struct strv {
  char **v;
  int n, cap;
} strv;

static pl_status strv_add(strv *l, const char *s, size_t n, pl_error *err) {
  if (l->n == MAX_SHARDS)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "shards: over %d shards",
                     MAX_SHARDS);
  if (l->n == l->cap) {
    int cap = PL_MAX(l->cap * 2, 16);
    char **v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory");
    l->v = v, l->cap = cap;
  }
  if (!(l->v[l->n] = strndup(s, n)))
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  l->n++;
  return PL_OK;
}

static void strv_free(strv *l) {
  for (int i = 0; i < l->n; i++)
    free(l->v[i]);
  free(l->v);
}

static pl_status expand(const char *pat, strv *out, pl_error *err) {
  const char *open = strchr(pat, '{');
  const char *close = open ? strchr(open, '}') : NULL;
  const char *dots = open && close ? strstr(open, "..") : NULL;
  if (!open)
    return strv_add(out, pat, strlen(pat), err);
  char *end1, *end2;
  unsigned long long a = strtoull(open + 1, &end1, 10);
  unsigned long long b = dots ? strtoull(dots + 2, &end2, 10) : 0;
  if (!close || !dots || dots > close || end1 != dots || end2 != close ||
      end1 == open + 1 || end2 == dots + 2 || b < a || b - a >= MAX_SHARDS)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: '%s': a brace must be {FIRST..LAST} with "
                     "FIRST <= LAST", pat);
  int width = open[1] == '0' ? (int)(dots - open - 1) : 0;
  size_t len = strlen(pat) + 32;
  char *buf = malloc(len);
  if (!buf)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = PL_OK;
  for (unsigned long long i = a; s == PL_OK && i <= b; i++) {
    snprintf(buf, len, "%.*s%0*llu%s", (int)(open - pat), pat, width, i,
             close + 1);
    s = expand(buf, out, err);
  }
  free(buf);
  return s;
}

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

static pl_status open_local(shards_impl *im, shard *sh, pl_error *err) {
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
static pl_status remote_get(shards_impl *im, const shard *sh, uint64_t off,
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
static pl_status download(shards_impl *im, shard *sh, const pl_http_meta *x,
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
    s = remote_get(im, sh, 0, 0, x, to_fd, &f, got, err);
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
  PL_TRY(download(im, sh, &sh->meta, NULL, err));
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
  pl_status s = sh->cache_tar ? download(im, sh, NULL, NULL, err)
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

static pl_status open_remote(shards_impl *im, shard *sh, pl_error *err) {
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

/* Least recently read shards off the disk until the cache fits; shards
 * being read (or fetched) stay. Under im->lock. */
static void evict(shards_impl *im, const shard *keep) {
  while (im->resident > im->opt.cache_bytes) {
    shard *victim = NULL;
    for (int i = 0; i < im->n; i++) {
      shard *c = &im->s[i];
      if (c != keep && c->on_disk && !c->refs && !c->loading &&
          (!victim || c->last_use < victim->last_use))
        victim = c;
    }
    if (!victim)
      return;
    pl_file_map_close(&victim->map);
    unlink(victim->cache_tar);
    victim->on_disk = false;
    im->resident -= victim->meta.length;
  }
}

/* Makes a remote shard readable from its mapping (fetching it when it is
 * not on disk) and holds it there until release. */
static pl_status acquire(shards_impl *im, shard *sh, pl_error *err) {
  pthread_mutex_lock(&im->lock);
  while (sh->loading)
    pthread_cond_wait(&im->ready, &im->lock);
  pl_status s = PL_OK;
  if (!sh->on_disk) {
    sh->loading = true;
    pthread_mutex_unlock(&im->lock);
    s = download(im, sh, &sh->meta, NULL, err);
    pthread_mutex_lock(&im->lock);
    sh->loading = false;
    pthread_cond_broadcast(&im->ready);
    if (s == PL_OK) {
      sh->on_disk = true;
      im->resident += sh->meta.length;
    }
  }
  if (s == PL_OK && !sh->map.data)
    s = pl_file_map_open(sh->cache_tar, &sh->map, err);
  if (s == PL_OK) {
    sh->refs++;
    sh->last_use = ++im->clock;
    evict(im, sh);
  }
  pthread_mutex_unlock(&im->lock);
  return s;
}

static void release(shards_impl *im, shard *sh) {
  pthread_mutex_lock(&im->lock);
  sh->refs--;
  evict(im, NULL);
  pthread_mutex_unlock(&im->lock);
}

/* ---------------------------------------------------------------- read-
 * ahead */

/* Fetches queued shards until destroy; a failed fetch is dropped (the
 * reader that needs the shard fetches it again and reports the error). */
static void *prefetch_main(void *arg) {
  shards_impl *im = arg;
  pthread_mutex_lock(&im->lock);
  while (!atomic_load(&im->stop)) {
    if (!im->qlen) {
      pthread_cond_wait(&im->work, &im->lock);
      continue;
    }
    shard *sh = &im->s[im->queue[im->qhead]];
    im->qhead = (im->qhead + 1) % im->n, im->qlen--;
    sh->queued = false;
    if (sh->on_disk || sh->loading)
      continue;
    sh->loading = true;
    pthread_mutex_unlock(&im->lock);
    pl_error e;
    pl_status s = download(im, sh, &sh->meta, NULL, &e);
    pthread_mutex_lock(&im->lock);
    sh->loading = false;
    if (s == PL_OK) {
      sh->on_disk = true;
      im->resident += sh->meta.length;
      sh->last_use = ++im->clock;
      evict(im, sh);
    }
    pthread_cond_broadcast(&im->ready);
  }
  pthread_mutex_unlock(&im->lock);
  return NULL;
}

/* Queues shard t for the read-ahead thread (started here the first time).
 * Under im->lock. */
static void prefetch(shards_impl *im, int t) {
  shard *sh = &im->s[t];
  if (!sh->remote || sh->on_disk || sh->loading || sh->queued ||
      im->qlen == im->n)
    return;
  if (!im->prefetch_started) {
    if (pthread_create(&im->prefetcher, NULL, prefetch_main, im) != 0)
      return; /* no read-ahead: readers fetch on demand */
    im->prefetch_started = true;
  }
  im->queue[(im->qhead + im->qlen) % im->n] = t;
  im->qlen++;
  sh->queued = true;
  pthread_cond_signal(&im->work);
}

/* ---------------------------------------------------------------- reads */

typedef struct buf_sink {
  uint8_t *p;
  uint64_t n, cap;
} buf_sink;

static int to_buf(void *user, const void *data, size_t n) {
  buf_sink *b = user;
  if (n > b->cap - b->n)
    return 1;
  memcpy(b->p + b->n, data, n);
  b->n += n;
  return 0;
}

/* The bytes of member m: in the mapping, or fetched into the scratch. */
static pl_status member_bytes(shards_impl *im, shard *sh, uint64_t m,
                              pl_scratch *sc, const uint8_t **out,
                              pl_error *err) {
  const pl_tar_member *t = &sh->ix.members[m];
  static const uint8_t none[1];
  if (sh->map.data || !t->size) { /* a range of 0 bytes would be "to the end" */
    *out = sh->map.data ? sh->map.data + t->offset : none;
    return PL_OK;
  }
  buf_sink b = {pl_scratch_get(sc, SLOT_MEMBER, t->size ? t->size : 1), 0,
                t->size};
  if (!b.p)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  PL_TRY(remote_get(im, sh, t->offset, t->size, &sh->meta, to_buf, &b, NULL,
                    err));
  if (b.n != t->size) /* a fetcher of one's own that fell short */
    return pl_errorf(err, PL_IO, "%s: %s.%s: %llu of its %llu bytes came",
                     sh->path, pl_tar_key(&sh->ix, m), pl_tar_ext(&sh->ix, m),
                     (unsigned long long)b.n, (unsigned long long)t->size);
  *out = b.p;
  return PL_OK;
}

static bool ext_matches(const char *exts, const char *ext) {
  size_t len = strlen(ext);
  for (const char *p = exts; *p;) {
    size_t n = strcspn(p, ";");
    if (n == len && !strncasecmp(p, ext, n)) /* webdataset lowercases */
      return true;
    p += n + (p[n] == ';');
  }
  return false;
}

static pl_status missing(const shard *sh, uint64_t j, const field_spec *f,
                         pl_error *err) {
  char have[256] = "";
  size_t used = 0;
  for (uint64_t m = sh->ix.first[j];
       m < sh->ix.first[j + 1] && used + 1 < sizeof have; m++) {
    int w = snprintf(have + used, sizeof have - used, "%s%s", used ? ", " : "",
                     pl_tar_ext(&sh->ix, m));
    used = PL_MIN(used + (size_t)PL_MAX(w, 0), sizeof have - 1);
  }
  pl_errorf(err, PL_FORMAT,
            "%s: sample '%s' has no member for field '%s' (want extension "
            "%s; it has %s)",
            sh->path, pl_tar_key(&sh->ix, sh->ix.first[j]), f->name, f->exts,
            have);
  pl_error_set_path(err, sh->path);
  return PL_FORMAT;
}

static pl_status to_int(const shard *sh, uint64_t m, const uint8_t *p,
                        uint64_t n, void *dst, pl_error *err) {
  char text[32];
  while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' '))
    n--;
  char *end = NULL;
  long long v = 0;
  if (n && n < sizeof text) {
    memcpy(text, p, n);
    text[n] = '\0';
    errno = 0;
    v = strtoll(text, &end, 10);
  }
  if (!end || *end || end == text || errno == ERANGE)
    return pl_errorf(err, PL_FORMAT, "%s: %s.%s: not an integer", sh->path,
                     pl_tar_key(&sh->ix, m), pl_tar_ext(&sh->ix, m));
  int64_t x = v;
  memcpy(dst, &x, sizeof x);
  return PL_OK;
}

static void shape_text(const pl_npy_view *v, char *out, size_t cap) {
  size_t used = (size_t)snprintf(out, cap, "%s (", pl_dtype_name(v->dtype));
  for (int d = 0; d < v->ndim && used < cap; d++)
    used += (size_t)snprintf(out + used, cap - used, "%s%lld", d ? ", " : "",
                             (long long)v->shape[d]);
  if (used < cap)
    snprintf(out + used, cap - used, ")");
}

/* An array member: the dtype and shape of the field, or refused. */
static pl_status to_npy(const shard *sh, uint64_t m, const field_spec *f,
                        const uint8_t *p, uint64_t n, void *dst,
                        pl_error *err) {
  char label[512];
  snprintf(label, sizeof label, "%s: %s.%s", sh->path, pl_tar_key(&sh->ix, m),
           pl_tar_ext(&sh->ix, m));
  pl_npy_view v;
  PL_TRY(pl_npy_view_parse(label, p, n, &v, err));
  if (v.dtype != f->npy.dtype || v.ndim != f->npy.ndim ||
      memcmp(v.shape, f->npy.shape, sizeof v.shape)) {
    char got[160], want[160];
    shape_text(&v, got, sizeof got);
    shape_text(&f->npy, want, sizeof want);
    return pl_errorf(err, PL_FORMAT,
                     "%s: %s, but field '%s' is %s (its first sample's)",
                     label, got, f->name, want);
  }
  pl_npy_view_copy(&v, dst);
  return PL_OK;
}

static pl_status one_field(shards_impl *im, shard *sh, uint64_t m,
                           const field_spec *f, uint64_t index,
                           const pl_sample_ctx *ctx, pl_scratch *sc,
                           void *const *dst, pl_error *err) {
  const uint8_t *p = NULL;
  uint64_t n = sh->ix.members[m].size;
  PL_TRY(member_bytes(im, sh, m, sc, &p, err));
  if (f->kind == F_INT)
    return to_int(sh, m, p, n, dst[0], err);
  if (f->kind == F_NPY)
    return to_npy(sh, m, f, p, n, dst[0], err);
  if (f->kind == F_BYTES) {
    if (n > im->opt.max_bytes)
      return pl_errorf(err, PL_FORMAT, "%s: %s.%s: %llu bytes, over "
                       "max_bytes %u", sh->path, pl_tar_key(&sh->ix, m),
                       pl_tar_ext(&sh->ix, m), (unsigned long long)n,
                       im->opt.max_bytes);
    memcpy(dst[0], p, (size_t)n);
    memset((uint8_t *)dst[0] + n, 0, (size_t)(im->opt.max_bytes - n));
    int64_t len = (int64_t)n;
    memcpy(dst[1], &len, sizeof len);
    return PL_OK;
  }
  char name[512];
  snprintf(name, sizeof name, "%s:%s.%s", sh->path, pl_tar_key(&sh->ix, m),
           pl_tar_ext(&sh->ix, m));
  pl_sample_ctx zero = {0};
  return pl_image_sample_from_bytes(&im->opt.image, p, (size_t)n, name,
                                    ctx ? ctx : &zero, index, sc, dst[0],
                                    NULL, err);
}

static int find_shard(const shards_impl *im, uint64_t index) {
  int lo = 0, hi = im->n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (im->s[mid].first <= index)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

static pl_status read_fields(shards_impl *im, shard *sh, uint64_t j,
                             uint64_t index, const pl_sample_ctx *ctx,
                             pl_scratch *sc, void *const *dst, pl_error *err) {
  int k = 0;
  for (int i = 0; i < im->nf; i++) {
    const field_spec *f = &im->f[i];
    uint64_t m = sh->ix.first[j];
    while (m < sh->ix.first[j + 1] && !ext_matches(f->exts, pl_tar_ext(&sh->ix, m)))
      m++;
    if (m == sh->ix.first[j + 1])
      return missing(sh, j, f, err);
    PL_TRY(one_field(im, sh, m, f, index, ctx, sc, dst + k, err));
    k += f->kind == F_BYTES ? 2 : 1;
  }
  return PL_OK;
}

static pl_status shards_read(const pl_dataset *ds, uint64_t index,
                             const pl_sample_ctx *ctx, void *const *dst,
                             pl_error *err) {
  shards_impl *im = ds->impl;
  shard *sh = &im->s[find_shard(im, index)];
  bool hold = sh->remote && im->opt.readahead == PL_SHARDS_WHOLE;
  if (hold)
    PL_TRY(acquire(im, sh, err));
  pl_scratch *sc = pl_scratch_take(&im->scratch);
  pl_status s = sc ? read_fields(im, sh, index - sh->first, index, ctx, sc,
                                 dst, err)
                   : pl_errorf(err, PL_NO_MEMORY, "shards: out of memory");
  if (sc)
    pl_scratch_give(&im->scratch, sc);
  if (hold)
    release(im, sh);
  return s;
}

static const char *shards_sample_path(const pl_dataset *ds, uint64_t index,
                                      int64_t *label) {
  const shards_impl *im = ds->impl;
  if (label)
    *label = -1;
  return im->s[find_shard(im, index)].path;
}

static void shards_destroy(void *p) {
  shards_impl *im = p;
  if (!im)
    return;
  if (im->prefetch_started) {
    pthread_mutex_lock(&im->lock);
    atomic_store(&im->stop, true);
    pthread_cond_broadcast(&im->work);
    pthread_mutex_unlock(&im->lock);
    pthread_join(im->prefetcher, NULL);
  }
  free(im->queue);
  pthread_cond_destroy(&im->work);
  for (int i = 0; im->s && i < im->n; i++) {
    pl_file_map_close(&im->s[i].map);
    pl_tar_index_free(&im->s[i].ix);
    free(im->s[i].path);
    free(im->s[i].cache_tar);
  }
  free(im->s);
  for (int i = 0; i < ORDER_SLOTS; i++) {
    free(im->orders[i].order);
    free(im->orders[i].prefix);
  }
  pthread_mutex_destroy(&im->order_lock);
  pl_http_close(im->http);
  if (im->opt.fetch_free)
    im->opt.fetch_free(im->opt.fetch_user);
  free(im->fields_text);
  free(im->cache_dir);
  pthread_mutex_destroy(&im->lock);
  pthread_cond_destroy(&im->ready);
  pl_scratch_pool_destroy(&im->scratch);
  free(im);
}

/* ---------------------------------------------------------------- order */

static uint64_t shards_window(const pl_dataset *ds) {
  const shards_impl *im = ds->impl;
  return im->opt.shuffle_buffer;
}

/* The shard order of `key`: a Fisher-Yates shuffle from the key. */
static void fill_order(const shards_impl *im, epoch_order *e,
                       const uint64_t key[2]) {
  pl_rng r = pl_rng_for(key[0], key[1], 0, RNG_STREAM_SHARDS);
  for (int k = 0; k < im->n; k++)
    e->order[k] = (uint32_t)k;
  for (int k = im->n - 1; k > 0; k--) {
    uint64_t j = pl_rng_below(&r, (uint64_t)k + 1);
    uint32_t t = e->order[k];
    e->order[k] = e->order[j], e->order[j] = t;
  }
  e->prefix[0] = 0;
  for (int k = 0; k < im->n; k++)
    e->prefix[k + 1] = e->prefix[k] + im->s[e->order[k]].ix.nsamples;
  e->key[0] = key[0], e->key[1] = key[1];
  e->valid = true;
}

static epoch_order *order_for(shards_impl *im, const uint64_t key[2]) {
  epoch_order *lru = &im->orders[0];
  for (int i = 0; i < ORDER_SLOTS; i++) {
    epoch_order *e = &im->orders[i];
    if (e->valid && e->key[0] == key[0] && e->key[1] == key[1])
      return e;
    if (!e->valid || (lru->valid && e->last_use < lru->last_use))
      lru = e;
  }
  fill_order(im, lru, key);
  return lru;
}

/* Position c of the epoch's shard order: the shard whose samples cover
 * it, and the sample there in tar order. */
static uint64_t shards_block_index(const pl_dataset *ds, const uint64_t key[2],
                                   uint64_t c) {
  shards_impl *im = ds->impl;
  pthread_mutex_lock(&im->order_lock);
  epoch_order *e = order_for(im, key);
  e->last_use = ++im->order_clock;
  int lo = 0, hi = im->n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (e->prefix[mid] <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  uint64_t index = im->s[e->order[lo]].first + (c - e->prefix[lo]);
  if ((im->http || im->opt.fetch) && im->opt.readahead == PL_SHARDS_WHOLE &&
      im->opt.prefetch) {
    /* This position's shard and the next ones in the epoch's order: the
     * loader asks for positions a few batches before it reads them. */
    pthread_mutex_lock(&im->lock);
    for (int k = lo; k < im->n && k <= lo + (int)im->opt.prefetch; k++)
      prefetch(im, (int)e->order[k]);
    pthread_mutex_unlock(&im->lock);
  }
  pthread_mutex_unlock(&im->order_lock);
  return index;
}

static pl_status alloc_orders(shards_impl *im, pl_error *err) {
  for (int i = 0; i < ORDER_SLOTS; i++) {
    epoch_order *e = &im->orders[i];
    e->order = malloc((size_t)im->n * sizeof *e->order);
    e->prefix = malloc((size_t)(im->n + 1) * sizeof *e->prefix);
    if (!e->order || !e->prefix)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  }
  return PL_OK;
}

static const pl_dataset_vt shards_vt = {
    .kind = "shards",
    .read = shards_read,
    .sample_path = shards_sample_path,
    .shuffle_window = shards_window,
    .block_index = shards_block_index,
    .destroy_impl = shards_destroy,
};

/* ---------------------------------------------------------------- open */

static char *default_cache_dir(void) {
  const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char buf[4096];
  if (x && x[0] == '/')
    snprintf(buf, sizeof buf, "%s/pinloader/shards", x);
  else if (home && home[0] == '/')
    snprintf(buf, sizeof buf, "%s/.cache/pinloader/shards", home);
  else
    snprintf(buf, sizeof buf, "/tmp/pinloader-shards-%ld", (long)getuid());
  return strdup(buf);
}

static pl_status check_opts(const pl_shards_options *o, pl_error *err) {
  if (o->struct_size != sizeof *o ||
      o->image.struct_size != sizeof o->image)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: options not initialised with "
                     "pl_shards_options_init");
  if (o->image.size == 0 || o->image.size > 8192)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: size %u (want 1 to 8192)", o->image.size);
  if (o->max_bytes == 0 || o->retries < 0 || o->timeout_ms == 0 ||
      (o->readahead != PL_SHARDS_WHOLE && o->readahead != PL_SHARDS_RANGES))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: max_bytes and timeout_ms must be > 0, "
                     "retries >= 0, readahead whole or ranges");
  return PL_OK;
}

static pl_status open_all(shards_impl *im, const strv *paths, pl_error *err) {
  im->s = calloc((size_t)paths->n, sizeof *im->s);
  if (!im->s)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  uint64_t total = 0;
  for (int i = 0; i < paths->n; i++) {
    shard *sh = &im->s[i];
    im->n = i + 1; /* what destroy frees */
    sh->path = strdup(paths->v[i]);
    if (!sh->path)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory");
    sh->remote = im->opt.fetch ? strstr(sh->path, "://") != NULL
                               : pl_http_is_url(sh->path);
    PL_TRY(sh->remote ? open_remote(im, sh, err) : open_local(im, sh, err));
    sh->first = total;
    total += sh->ix.nsamples;
  }
  return PL_OK;
}

/* An array field's dtype and shape: its member in the first sample. */
static pl_status probe_npy(shards_impl *im, field_spec *f, pl_error *err) {
  int k = 0;
  while (k < im->n && !im->s[k].ix.nsamples)
    k++;
  if (k == im->n)
    return PL_OK; /* no samples: refused by the caller */
  shard *sh = &im->s[k];
  uint64_t m = sh->ix.first[0];
  while (m < sh->ix.first[1] && !ext_matches(f->exts, pl_tar_ext(&sh->ix, m)))
    m++;
  if (m == sh->ix.first[1])
    return missing(sh, 0, f, err);
  const pl_tar_member *t = &sh->ix.members[m];
  uint8_t *copy = NULL;
  const uint8_t *p = sh->map.data ? sh->map.data + t->offset : NULL;
  pl_status s = PL_OK;
  if (!p) { /* remote: one range */
    buf_sink b = {copy = malloc((size_t)PL_MAX(t->size, 1)), 0, t->size};
    s = copy ? remote_get(im, sh, t->offset, t->size, &sh->meta, to_buf, &b,
                          NULL, err)
             : pl_errorf(err, PL_NO_MEMORY, "out of memory");
    p = copy;
  }
  char label[512];
  snprintf(label, sizeof label, "%s: %s.%s", sh->path, pl_tar_key(&sh->ix, m),
           pl_tar_ext(&sh->ix, m));
  if (s == PL_OK)
    s = pl_npy_view_parse(label, p, t->size, &f->npy, err);
  f->npy.data = NULL; /* only the dtype and shape are kept */
  free(copy);
  return s;
}

static bool needs_images(const shards_impl *im) {
  for (int i = 0; i < im->nf; i++)
    if (im->f[i].kind == F_IMAGE)
      return true;
  return false;
}

static pl_status open_impl(shards_impl *im, const char *const *paths,
                           int npaths, pl_error *err) {
  PL_TRY(parse_fields(im, err));
  if (needs_images(im) && (!pl_image_have_jpeg() || !pl_image_have_png()))
    return pl_errorf(err, PL_UNSUPPORTED,
                     "shards: this build lacks libjpeg-turbo or libpng "
                     "(install libjpeg62-turbo-dev and libpng-dev, then "
                     "rebuild)");
  strv list = {0};
  pl_status s = PL_OK;
  for (int i = 0; s == PL_OK && i < npaths; i++)
    s = paths[i] && paths[i][0]
            ? expand(paths[i], &list, err)
            : pl_errorf(err, PL_INVALID_ARGUMENT, "shards: path %d is empty",
                        i + 1);
  if (s == PL_OK)
    s = open_all(im, &list, err);
  if (s == PL_OK)
    s = alloc_orders(im, err);
  for (int i = 0; s == PL_OK && i < im->nf; i++)
    if (im->f[i].kind == F_NPY)
      s = probe_npy(im, &im->f[i], err);
  if (s == PL_OK && !(im->queue = malloc((size_t)im->n * sizeof(int))))
    s = pl_errorf(err, PL_NO_MEMORY, "out of memory");
  strv_free(&list);
  return s;
}

static pl_status check_args(const char *const *paths, int npaths,
                            const pl_shards_options *opt, pl_dataset **out,
                            pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!paths || npaths <= 0 || !opt)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: paths and options are required");
  return check_opts(opt, err);
}

pl_status pl_dataset_open_shards(const char *const *paths, int npaths,
                                 const pl_shards_options *opt,
                                 pl_dataset **out, pl_error *err) {
  pl_status s0 = check_args(paths, npaths, opt, out, err);
  shards_impl *im = s0 == PL_OK ? calloc(1, sizeof *im) : NULL;
  if (!im) { /* the fetcher is ours, also when the open fails */
    if (opt && opt->fetch_free)
      opt->fetch_free(opt->fetch_user);
    return s0 != PL_OK ? s0 : pl_errorf(err, PL_NO_MEMORY, "out of memory");
  }
  im->opt = *opt;
  if (!im->opt.image.resize)
    im->opt.image.resize = (uint32_t)(opt->image.size / 0.875);
  im->fields_text = strdup(opt->fields ? opt->fields
                                       : "image:jpg;jpeg;png,label:cls");
  im->cache_dir = opt->cache_dir ? strdup(opt->cache_dir)
                                 : default_cache_dir();
  im->opt.fields = im->opt.cache_dir = NULL; /* the caller's: not kept */
  pthread_mutex_init(&im->lock, NULL);
  pthread_cond_init(&im->ready, NULL);
  pthread_mutex_init(&im->order_lock, NULL);
  pthread_cond_init(&im->work, NULL);
  atomic_init(&im->stop, false);
  pl_scratch_pool_init(&im->scratch);
  pl_status s = im->fields_text && im->cache_dir
                    ? open_impl(im, paths, npaths, err)
                    : pl_errorf(err, PL_NO_MEMORY, "out of memory");
  uint64_t total = s == PL_OK ? im->s[im->n - 1].first +
                                    im->s[im->n - 1].ix.nsamples
                              : 0;
  if (s == PL_OK && total == 0)
    s = pl_errorf(err, PL_FORMAT, "shards: %s%s holds no samples",
                  im->s[0].path, im->n > 1 ? " and the others" : "");
  pl_field fields[2 * MAX_FIELDS];
  int nf = s == PL_OK ? make_fields(im, fields) : 0;
  if (s == PL_OK)
    s = pl_dataset_new(&shards_vt, im, total, fields, nf, out, err);
  if (s != PL_OK)
    shards_destroy(im);
  return s;
}
