/* Private to the tar shards source's files, each of one concern:
 *   source_shards.c  the dataset: options, open, destroy
 *   shards_fields.c  the fields (NAME:EXT[;EXT][:KIND]), brace patterns
 *   shards_index.c   each shard opened and indexed: local, or remote
 *                    through HTTP or a fetcher, the index cached
 *   shards_fetch.c   remote shards on disk: residency, eviction,
 *                    read-ahead
 *   shards_read.c    a sample's fields from its members
 *   shards_order.c   the epoch's shard order (the shuffle window)
 * Calls go one way: the dataset calls every other file; read calls fetch,
 * index and fields; order calls fetch; fetch calls index; index and
 * fields call none of these. */
#ifndef PL_SHARDS_INTERNAL_H
#define PL_SHARDS_INTERNAL_H

#include "data/dataset.h"
#include "core/scratch.h"
#include "data/file_map.h"
#include "data/http_fetch.h"
#include "data/image_sample.h"
#include "data/npy_member.h"
#include "data/tar_index.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define MAX_FIELDS 16
#define MAX_SHARDS (1 << 24)
#define ORDER_SLOTS 4 /* epochs whose shard order is kept at once */

typedef enum { F_IMAGE, F_INT, F_BYTES, F_NPY } field_kind;

typedef struct field_spec {
  char name[PL_NAME_MAX];
  char len_name[PL_NAME_MAX]; /* a bytes field's length field: NAME_len */
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
  epoch_order identity; /* an unshuffled epoch's: the shards in list order */
  uint64_t order_clock;
  pl_scratch_pool scratch;
} shards_impl;

/* ---------------------------------------------------------------- fields */

/* im->fields_text parsed into im->f (the text is cut up). */
pl_status pl_shards_parse_fields(shards_impl *im, pl_error *err);

/* The dataset's fields into out (2 * MAX_FIELDS); returns how many. */
int pl_shards_make_fields(const shards_impl *im, pl_field *out);

/* *m: the first member of sample j of sh whose extension is one of
 * f's; PL_FORMAT, naming the extensions it has, when none is. */
pl_status pl_shards_member(const shard *sh, uint64_t j, const field_spec *f,
                           uint64_t *m, pl_error *err);

/* "PATH: KEY.EXT", member m's name in messages. */
void pl_shards_member_label(const shard *sh, uint64_t m, char *out,
                            size_t cap);

typedef struct strv {
  char **v;
  int n, cap;
} strv;

/* Pattern pat's paths appended to out. */
pl_status pl_shards_expand(const char *pat, strv *out, pl_error *err);
void pl_shards_strv_free(strv *l);

/* ---------------------------------------------------------------- index */

pl_status pl_shards_open_local(shards_impl *im, shard *sh, pl_error *err);
pl_status pl_shards_open_remote(shards_impl *im, shard *sh, pl_error *err);

/* A range of a remote shard, through the user's fetcher or HTTP. */
pl_status pl_shards_remote_get(shards_impl *im, const shard *sh, uint64_t off,
                               uint64_t len, const pl_http_meta *expect,
                               pl_http_sink sink, void *user,
                               pl_http_meta *got, pl_error *err);

/* The whole of sh->path into sh->cache_tar, through a temporary name. */
pl_status pl_shards_download(shards_impl *im, shard *sh,
                             const pl_http_meta *x, pl_http_meta *got,
                             pl_error *err);

/* A sink (pl_http_sink) into a buf_sink. */
typedef struct buf_sink {
  uint8_t *p;
  uint64_t n, cap;
} buf_sink;
int pl_shards_to_buf(void *user, const void *data, size_t n);

/* ---------------------------------------------------------------- fetch */

/* Makes a remote shard readable from its mapping (fetching it when it is
 * not on disk) and holds it there until pl_shards_release. */
pl_status pl_shards_acquire(shards_impl *im, shard *sh, pl_error *err);
void pl_shards_release(shards_impl *im, shard *sh);

/* Queues shard t for the read-ahead thread (started here the first time).
 * Under im->lock. */
void pl_shards_prefetch(shards_impl *im, int t);

/* ---------------------------------------------------------------- reads */

pl_status pl_shards_read(const pl_dataset *ds, uint64_t index,
                         const pl_sample_ctx *ctx, void *const *dst,
                         pl_error *err);
const char *pl_shards_sample_path(const pl_dataset *ds, uint64_t index,
                                  int64_t *label);

/* ---------------------------------------------------------------- order */

uint64_t pl_shards_window(const pl_dataset *ds);
uint64_t pl_shards_block_index(const pl_dataset *ds, const uint64_t key[2],
                               uint64_t c, uint64_t c_end);
pl_status pl_shards_alloc_orders(shards_impl *im, pl_error *err);

#endif /* PL_SHARDS_INTERNAL_H */
