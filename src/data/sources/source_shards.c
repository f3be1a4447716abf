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
 * index's ETag and length: a shard that changed is refused.
 *
 * The source's files: shards_internal.h says which does what. */
#include "data/sources/shards_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  free(im->identity.order);
  free(im->identity.prefix);
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

static const pl_dataset_vt shards_vt = {
    .kind = "shards",
    .read = pl_shards_read,
    .sample_path = pl_shards_sample_path,
    .shuffle_window = pl_shards_window,
    .block_index = pl_shards_block_index,
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
    PL_TRY(sh->remote ? pl_shards_open_remote(im, sh, err)
                      : pl_shards_open_local(im, sh, err));
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
  uint64_t m;
  PL_TRY(pl_shards_member(sh, 0, f, &m, err));
  const pl_tar_member *t = &sh->ix.members[m];
  uint8_t *copy = NULL;
  const uint8_t *p = sh->map.data ? sh->map.data + t->offset : NULL;
  pl_status s = PL_OK;
  if (!p) { /* remote: one range */
    buf_sink b = {copy = malloc((size_t)PL_MAX(t->size, 1)), 0, t->size};
    s = copy ? pl_shards_remote_get(im, sh, t->offset, t->size, &sh->meta,
                                    pl_shards_to_buf, &b, NULL, err)
             : pl_errorf(err, PL_NO_MEMORY, "out of memory");
    p = copy;
  }
  char label[512];
  pl_shards_member_label(sh, m, label, sizeof label);
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
  PL_TRY(pl_shards_parse_fields(im, err));
  if (needs_images(im) && (!pl_image_have_jpeg() || !pl_image_have_png()))
    return pl_errorf(err, PL_UNSUPPORTED,
                     "shards: this build lacks libjpeg-turbo or libpng "
                     "(install libjpeg62-turbo-dev and libpng-dev, then "
                     "rebuild)");
  strv list = {0};
  pl_status s = PL_OK;
  for (int i = 0; s == PL_OK && i < npaths; i++)
    s = paths[i] && paths[i][0]
            ? pl_shards_expand(paths[i], &list, err)
            : pl_errorf(err, PL_INVALID_ARGUMENT, "shards: path %d is empty",
                        i + 1);
  if (s == PL_OK)
    s = open_all(im, &list, err);
  if (s == PL_OK)
    s = pl_shards_alloc_orders(im, err);
  for (int i = 0; s == PL_OK && i < im->nf; i++)
    if (im->f[i].kind == F_NPY)
      s = probe_npy(im, &im->f[i], err);
  if (s == PL_OK && !(im->queue = malloc((size_t)im->n * sizeof(int))))
    s = pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_shards_strv_free(&list);
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
  int nf = s == PL_OK ? pl_shards_make_fields(im, fields) : 0;
  if (s == PL_OK)
    s = pl_dataset_new(&shards_vt, im, total, fields, nf, out, err);
  if (s != PL_OK)
    shards_destroy(im);
  return s;
}
