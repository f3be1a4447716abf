/* HTTP(S) reads through libcurl, loaded at run time.
 *
 * libcurl is dlopen'ed ("libcurl.so.4", Debian's libcurl4 or
 * libcurl3-gnutls) when a dataset first needs it, never linked: the CLI
 * and the Python module build and run on machines without curl's headers
 * or library, and only a remote shard then fails, with a message saying
 * what to install. The few entry points and option numbers used are
 * declared here (they are part of curl's stable ABI).
 *
 * A pl_http is one loaded library and a pool of easy handles (connections
 * are kept alive between requests); any thread may call pl_http_get, the
 * pool's lock is held only to take or give back a handle.
 *
 * Each request is retried on a connection failure, a timeout, a cut-short
 * body or an HTTP 5xx / 429 status, `retries` times, waiting backoff_ms,
 * 2 x backoff_ms, 4 x ... between attempts; a retry asks only for the
 * bytes still missing. After the last attempt the error names the URL, the
 * HTTP status or curl's reason, and the number of attempts. Other 4xx
 * statuses fail at once. */
#ifndef PL_HTTP_FETCH_H
#define PL_HTTP_FETCH_H

#include "core/common.h"

typedef struct pl_http pl_http;

typedef struct pl_http_opts {
  int retries;          /* attempts after the first */
  uint32_t backoff_ms;  /* before the first retry; doubles each time */
  uint32_t timeout_ms;  /* a request with no byte for this long fails */
} pl_http_opts;

/* What the server says the resource is. A request given a non-empty
 * `expect` is refused (PL_IO "URL changed ...", never retried) when the
 * response's ETag or total length differ from it: a shard replaced between
 * the index and a read is never mixed. */
typedef struct pl_http_meta {
  uint64_t length;
  char etag[160];
} pl_http_meta;

/* Receives the body's bytes in order; nonzero stops the transfer. */
typedef int (*pl_http_sink)(void *user, const void *data, size_t n);

/* PL_UNSUPPORTED when libcurl cannot be loaded (the message says which
 * package provides it). */
pl_status pl_http_open(const pl_http_opts *opts, pl_http **out,
                       pl_error *err);
void pl_http_close(pl_http *h);

/* Bytes [off, off + len) of url (len 0: to the end) to sink; *got (may be
 * NULL) the meta seen. */
pl_status pl_http_get(pl_http *h, const char *url, uint64_t off,
                      uint64_t len, const pl_http_meta *expect,
                      pl_http_sink sink, void *user, pl_http_meta *got,
                      pl_error *err);

/* Whether url is one this module reads (http:// or https://). */
bool pl_http_is_url(const char *url);

#endif /* PL_HTTP_FETCH_H */
