/* The shards source's registry opener and pl_dataset_open_shards_fetch:
 * its "key=value" options (the images keys, plus its own) into
 * pl_shards_options (the source itself is source_shards.c). */
#include "data/dataset.h"
#include "data/sources/registry.h"

static pl_status shards_from_options(const pl_options *o,
                                     pl_shards_options *out, pl_error *err) {
  pl_shards_options so = *out;
  uint64_t cache = so.cache_bytes, maxb = so.max_bytes, retries = 4;
  uint64_t backoff = so.backoff_ms, timeout = so.timeout_ms;
  uint64_t prefetch = so.prefetch;
  int ra = 0;
  PL_TRY(pl_source_image_options(o, &so.image, err));
  PL_TRY(pl_options_u64(o, "cache_bytes", UINT64_MAX, &cache, err));
  PL_TRY(pl_options_u64(o, "shuffle_buffer", UINT64_MAX, &so.shuffle_buffer,
                        err));
  PL_TRY(pl_options_u64(o, "max_bytes", UINT32_MAX, &maxb, err));
  PL_TRY(pl_options_u64(o, "retries", 1000, &retries, err));
  PL_TRY(pl_options_u64(o, "backoff_ms", UINT32_MAX, &backoff, err));
  PL_TRY(pl_options_u64(o, "timeout_ms", UINT32_MAX, &timeout, err));
  PL_TRY(pl_options_choice(o, "readahead", "whole ranges", &ra, err));
  PL_TRY(pl_options_u64(o, "prefetch", 1u << 16, &prefetch, err));
  so.prefetch = (uint32_t)prefetch;
  so.fields = pl_options_get(o, "fields");
  so.cache_dir = pl_options_get(o, "cache");
  so.cache_bytes = cache, so.max_bytes = (uint32_t)maxb;
  so.retries = (int)retries, so.backoff_ms = (uint32_t)backoff;
  so.timeout_ms = (uint32_t)timeout;
  so.readahead = (pl_shards_readahead)ra;
  *out = so;
  return PL_OK;
}

/* pl_dataset_open_shards owns so's fetcher: freed here on a bad option. */
static pl_status open_shards_with(const char *const *paths, int n,
                                  const pl_options *o, pl_shards_options so,
                                  pl_dataset **out, pl_error *err) {
  pl_status s = shards_from_options(o, &so, err);
  if (s == PL_OK)
    return pl_dataset_open_shards(paths, n, &so, out, err);
  if (so.fetch_free)
    so.fetch_free(so.fetch_user);
  return s;
}

pl_status pl_source_open_shards(const char *const *paths, int n,
                                const pl_options *o, pl_dataset **out,
                                pl_error *err) {
  pl_shards_options so;
  pl_shards_options_init(&so);
  return open_shards_with(paths, n, o, so, out, err);
}

pl_status pl_dataset_open_shards_fetch(const char *const *paths, int npaths,
                                       const char *options,
                                       pl_shards_fetch_fn fetch,
                                       void *fetch_user,
                                       void (*fetch_free)(void *),
                                       pl_dataset **out, pl_error *err) {
  pl_shards_options so;
  pl_shards_options_init(&so);
  so.fetch = fetch, so.fetch_user = fetch_user, so.fetch_free = fetch_free;
  pl_options o;
  pl_status s = pl_options_parse("shards", options, PL_SHARDS_KEYS, &o, err);
  if (s == PL_OK) {
    s = open_shards_with(paths, npaths, &o, so, out, err);
    pl_options_free(&o);
  } else if (fetch_free) {
    fetch_free(fetch_user); /* the open owns it, also when it fails */
  }
  return s;
}
