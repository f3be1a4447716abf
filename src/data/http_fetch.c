/* HTTP range reads through a dlopen'ed libcurl; see http_fetch.h. */
#include "data/http_fetch.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* curl's ABI, from curl/curl.h (stable since 7.x): option numbers are
 * type base (LONG 0, OBJECTPOINT 10000, FUNCTIONPOINT 20000) + number. */
enum {
  C_OPT_WRITEDATA = 10001,
  C_OPT_URL = 10002,
  C_OPT_RANGE = 10007,
  C_OPT_ERRORBUFFER = 10010,
  C_OPT_LOW_SPEED_LIMIT = 19,
  C_OPT_LOW_SPEED_TIME = 20,
  C_OPT_HEADERDATA = 10029,
  C_OPT_FOLLOWLOCATION = 52,
  C_OPT_BUFFERSIZE = 98,
  C_OPT_NOSIGNAL = 99,
  C_OPT_CONNECTTIMEOUT_MS = 156,
  C_OPT_WRITEFUNCTION = 20011,
  C_OPT_HEADERFUNCTION = 20079,
  C_INFO_RESPONSE_CODE = 0x200000 + 2,
  C_GLOBAL_DEFAULT = 3,
  C_ERROR_SIZE = 256,
  POOL_MAX = 64
};

typedef size_t (*curl_cb)(char *, size_t, size_t, void *);

typedef struct curl_api {
  void *lib;
  int (*global_init)(long);
  void (*global_cleanup)(void);
  void *(*easy_init)(void);
  int (*easy_setopt)(void *, int, ...);
  int (*easy_perform)(void *);
  int (*easy_getinfo)(void *, int, ...);
  void (*easy_cleanup)(void *);
  void (*easy_reset)(void *);
  const char *(*easy_strerror)(int);
} curl_api;

struct pl_http {
  curl_api c;
  pl_http_opts opts;
  pthread_mutex_t lock; /* guards pool and npool only */
  void *pool[POOL_MAX];
  int npool;
};

static pl_status load_curl(curl_api *c, pl_error *err) {
  c->lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (!c->lib)
    c->lib = dlopen("libcurl-gnutls.so.4", RTLD_NOW | RTLD_LOCAL);
  if (!c->lib)
    return pl_errorf(err, PL_UNSUPPORTED,
                     "http: cannot load libcurl.so.4 (%s): install libcurl4 "
                     "(Debian, Ubuntu) or libcurl (Fedora) to read shards "
                     "over HTTP",
                     dlerror());
#define SYM(field, name)                                                   \
  *(void **)&c->field = dlsym(c->lib, name);                               \
  if (!c->field) {                                                         \
    dlclose(c->lib);                                                       \
    return pl_errorf(err, PL_UNSUPPORTED, "http: libcurl.so.4 lacks %s",  \
                     name);                                                \
  }
  SYM(global_init, "curl_global_init");
  SYM(global_cleanup, "curl_global_cleanup");
  SYM(easy_init, "curl_easy_init");
  SYM(easy_setopt, "curl_easy_setopt");
  SYM(easy_perform, "curl_easy_perform");
  SYM(easy_getinfo, "curl_easy_getinfo");
  SYM(easy_cleanup, "curl_easy_cleanup");
  SYM(easy_reset, "curl_easy_reset");
  SYM(easy_strerror, "curl_easy_strerror");
#undef SYM
  return PL_OK;
}

pl_status pl_http_open(const pl_http_opts *opts, pl_http **out,
                       pl_error *err) {
  *out = NULL;
  pl_http *h = calloc(1, sizeof *h);
  if (!h)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = load_curl(&h->c, err);
  if (s != PL_OK) {
    free(h);
    return s;
  }
  /* Reference-counted by curl, and thread-safe from 7.84 on. */
  if (h->c.global_init(C_GLOBAL_DEFAULT) != 0) {
    dlclose(h->c.lib);
    free(h);
    return pl_errorf(err, PL_IO, "http: curl_global_init failed");
  }
  h->opts = *opts;
  pthread_mutex_init(&h->lock, NULL);
  *out = h;
  return PL_OK;
}

void pl_http_close(pl_http *h) {
  if (!h)
    return;
  for (int i = 0; i < h->npool; i++)
    h->c.easy_cleanup(h->pool[i]);
  h->c.global_cleanup();
  dlclose(h->c.lib);
  pthread_mutex_destroy(&h->lock);
  free(h);
}

bool pl_http_is_url(const char *url) {
  return !strncmp(url, "http://", 7) || !strncmp(url, "https://", 8);
}

static void *take_handle(pl_http *h) {
  void *e = NULL;
  pthread_mutex_lock(&h->lock);
  if (h->npool)
    e = h->pool[--h->npool];
  pthread_mutex_unlock(&h->lock);
  return e ? e : h->c.easy_init();
}

static void give_handle(pl_http *h, void *e) {
  pthread_mutex_lock(&h->lock);
  if (h->npool < POOL_MAX) {
    h->pool[h->npool++] = e;
    e = NULL;
  }
  pthread_mutex_unlock(&h->lock);
  if (e)
    h->c.easy_cleanup(e);
}

/* ---------------------------------------------------------------- one
 * attempt */

typedef struct attempt {
  long status;       /* of the last status line (redirects reset it) */
  pl_http_meta meta; /* of this response */
  bool have_total;
  uint64_t skip;     /* bytes to drop: a 200 answering a range */
  uint64_t want;     /* bytes still wanted (0: to the end) */
  uint64_t from;     /* offset asked for */
  uint64_t delivered;
  bool checked, changed, sink_stop;
  const pl_http_meta *expect;
  pl_http_sink sink;
  void *user;
  char changed_msg[400];
} attempt;

static void trim_value(const char *v, size_t n, char *out, size_t cap) {
  while (n && (v[0] == ' ' || v[0] == '\t'))
    v++, n--;
  while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
    n--;
  n = PL_MIN(n, cap - 1);
  memcpy(out, v, n);
  out[n] = '\0';
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *user) {
  attempt *a = user;
  size_t n = size * nitems;
  char v[200];
  if (n > 5 && !strncmp(buf, "HTTP/", 5)) {
    const char *sp = memchr(buf, ' ', n);
    a->status = sp ? strtol(sp + 1, NULL, 10) : 0;
    a->meta = (pl_http_meta){0};
    a->have_total = false;
  } else if (n > 5 && !strncasecmp(buf, "etag:", 5)) {
    trim_value(buf + 5, n - 5, a->meta.etag, sizeof a->meta.etag);
  } else if (n > 14 && !strncasecmp(buf, "content-range:", 14)) {
    trim_value(buf + 14, n - 14, v, sizeof v);
    const char *slash = strchr(v, '/');
    if (slash && slash[1] != '*') {
      a->meta.length = strtoull(slash + 1, NULL, 10);
      a->have_total = true;
    }
  } else if (n > 15 && !strncasecmp(buf, "content-length:", 15) &&
             !a->have_total) {
    trim_value(buf + 15, n - 15, v, sizeof v);
    a->meta.length = strtoull(v, NULL, 10);
  }
  return n;
}

/* The response against what the index saw: refused when it differs. */
static bool same_resource(attempt *a) {
  const pl_http_meta *x = a->expect;
  if (!x || (!x->etag[0] && !x->length))
    return true;
  bool etag_differs = x->etag[0] && strcmp(x->etag, a->meta.etag);
  uint64_t total = a->status == 200 ? a->meta.length : a->meta.length;
  bool len_differs = x->length && total && total != x->length;
  if (!etag_differs && !len_differs)
    return true;
  snprintf(a->changed_msg, sizeof a->changed_msg,
           "ETag %s, %llu bytes when indexed; now ETag %s, %llu bytes",
           x->etag[0] ? x->etag : "(none)", (unsigned long long)x->length,
           a->meta.etag[0] ? a->meta.etag : "(none)",
           (unsigned long long)total);
  return false;
}

static size_t on_body(char *buf, size_t size, size_t nitems, void *user) {
  attempt *a = user;
  size_t n = size * nitems;
  if (a->status != 200 && a->status != 206)
    return n; /* an error page: dropped */
  if (!a->checked) {
    a->checked = true;
    if (a->status == 200)
      a->skip = a->from; /* the server sent the whole resource */
    if (!same_resource(a)) {
      a->changed = true;
      return 0;
    }
  }
  size_t drop = (size_t)PL_MIN((uint64_t)n, a->skip);
  a->skip -= drop;
  buf += drop, n -= drop;
  if (a->want)
    n = (size_t)PL_MIN((uint64_t)n, a->want - a->delivered);
  if (n && a->sink(a->user, buf, n)) {
    a->sink_stop = true;
    return 0;
  }
  a->delivered += n;
  if (a->want && a->delivered == a->want)
    return drop + n == size * nitems ? size * nitems : 0;
  return size * nitems;
}

static int perform(pl_http *h, void *e, const char *url, attempt *a,
                   char *ebuf) {
  curl_api *c = &h->c;
  char range[64];
  c->easy_reset(e);
  c->easy_setopt(e, C_OPT_URL, url);
  c->easy_setopt(e, C_OPT_NOSIGNAL, 1L);
  /* Whole shards: 512 KiB a callback (curl's most before 7.88) rather
   * than 16 KiB, a sixteenth of the write calls. */
  c->easy_setopt(e, C_OPT_BUFFERSIZE, 512L << 10);
  c->easy_setopt(e, C_OPT_FOLLOWLOCATION, 1L);
  c->easy_setopt(e, C_OPT_ERRORBUFFER, ebuf);
  c->easy_setopt(e, C_OPT_HEADERFUNCTION, (curl_cb)on_header);
  c->easy_setopt(e, C_OPT_HEADERDATA, (void *)a);
  c->easy_setopt(e, C_OPT_WRITEFUNCTION, (curl_cb)on_body);
  c->easy_setopt(e, C_OPT_WRITEDATA, (void *)a);
  long secs = (long)PL_MAX(h->opts.timeout_ms / 1000, 1);
  c->easy_setopt(e, C_OPT_CONNECTTIMEOUT_MS, (long)h->opts.timeout_ms);
  c->easy_setopt(e, C_OPT_LOW_SPEED_LIMIT, 1L);
  c->easy_setopt(e, C_OPT_LOW_SPEED_TIME, secs);
  if (a->from || a->want) {
    if (a->want)
      snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)a->from,
               (unsigned long long)(a->from + a->want - 1));
    else
      snprintf(range, sizeof range, "%llu-", (unsigned long long)a->from);
    c->easy_setopt(e, C_OPT_RANGE, range);
  }
  ebuf[0] = '\0';
  return c->easy_perform(e);
}

static void backoff(const pl_http_opts *o, int attempt_no) {
  uint64_t ms = (uint64_t)o->backoff_ms << PL_MIN(attempt_no, 16);
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

/* ---------------------------------------------------------------- get */

typedef struct outcome {
  bool done, retry;
} outcome;

/* Judges one attempt: done, worth another, or failed (err written). */
static outcome judge(pl_http *h, const char *url, int rc, const attempt *a,
                     const char *ebuf, uint64_t total_want, char *last,
                     size_t cap, pl_error *err) {
  if (a->changed) {
    pl_errorf(err, PL_IO, "%s: the shard changed since it was indexed (%s): "
              "refused", url, a->changed_msg);
    return (outcome){false, false};
  }
  if (a->sink_stop) {
    pl_errorf(err, PL_IO, "%s: the reader stopped the transfer", url);
    return (outcome){false, false};
  }
  bool ok_status = a->status == 200 || a->status == 206;
  bool complete = total_want ? a->delivered == total_want : rc == 0;
  if (ok_status && complete)
    return (outcome){true, false};
  if (rc == 0 && !ok_status) {
    snprintf(last, cap, "HTTP status %ld", a->status);
    if (a->status >= 500 || a->status == 429 || a->status == 408)
      return (outcome){false, true};
    pl_errorf(err, PL_IO, "%s: HTTP status %ld", url, a->status);
    return (outcome){false, false};
  }
  if (rc == 0)
    snprintf(last, cap, "the body ended after %llu of %llu bytes",
             (unsigned long long)a->delivered, (unsigned long long)total_want);
  else
    snprintf(last, cap, "%s%s%s (HTTP status %ld)", h->c.easy_strerror(rc),
             ebuf[0] ? ": " : "", ebuf, a->status);
  return (outcome){false, true};
}

pl_status pl_http_get(pl_http *h, const char *url, uint64_t off,
                      uint64_t len, const pl_http_meta *expect,
                      pl_http_sink sink, void *user, pl_http_meta *got,
                      pl_error *err) {
  void *e = take_handle(h);
  if (!e)
    return pl_errorf(err, PL_NO_MEMORY, "http: curl_easy_init failed");
  char ebuf[C_ERROR_SIZE], last[512] = "";
  uint64_t delivered = 0;
  pl_status s = PL_IO;
  bool stop = false;
  for (int k = 0; !stop && k <= h->opts.retries; k++) {
    if (k)
      backoff(&h->opts, k - 1);
    attempt a = {.from = off + delivered, .want = len ? len - delivered : 0,
                 .expect = expect, .sink = sink, .user = user};
    int rc = perform(h, e, url, &a, ebuf);
    delivered += a.delivered;
    if (got && a.checked)
      *got = a.meta;
    attempt whole = a;
    whole.delivered = delivered;
    outcome o = judge(h, url, rc, &whole, ebuf, len, last, sizeof last, err);
    if (o.done)
      s = PL_OK;
    stop = o.done || !o.retry;
    if (stop && !o.done)
      s = PL_IO;
    if (!stop && k == h->opts.retries)
      s = pl_errorf(err, PL_IO, "%s: %s, after %d attempts", url, last,
                    k + 1);
  }
  give_handle(h, e);
  if (s == PL_OK)
    pl_error_clear(err);
  return s;
}
