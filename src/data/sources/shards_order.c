/* The tar shards' epoch order (shards_internal.h): the shards shuffled
 * per (seed, epoch), samples in tar order within each, so the loader's
 * shuffle window reads a few shards at a time. */
#include "data/sources/shards_internal.h"
#include "core/rng.h"

#include <stdlib.h>

#define RNG_STREAM_SHARDS 0x7368726473ull /* "shrds" */

/* ---------------------------------------------------------------- order */

uint64_t pl_shards_window(const pl_dataset *ds) {
  const shards_impl *im = ds->impl;
  return im->opt.shuffle_buffer;
}

/* The shard order of `key`: a Fisher-Yates shuffle from the key; NULL:
 * the shards in list order (an unshuffled epoch). */
static void fill_order(const shards_impl *im, epoch_order *e,
                       const uint64_t key[2]) {
  for (int k = 0; k < im->n; k++)
    e->order[k] = (uint32_t)k;
  if (key) {
    pl_rng r = pl_rng_for(key[0], key[1], 0, RNG_STREAM_SHARDS);
    for (int k = im->n - 1; k > 0; k--) {
      uint64_t j = pl_rng_below(&r, (uint64_t)k + 1);
      uint32_t t = e->order[k];
      e->order[k] = e->order[j], e->order[j] = t;
    }
  }
  e->prefix[0] = 0;
  for (int k = 0; k < im->n; k++)
    e->prefix[k + 1] = e->prefix[k] + im->s[e->order[k]].ix.nsamples;
  e->key[0] = key ? key[0] : 0, e->key[1] = key ? key[1] : 0;
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

/* Whether the shards are fetched whole by the read-ahead thread. */
static bool reads_ahead(const shards_impl *im) {
  return (im->http || im->opt.fetch) && im->opt.readahead == PL_SHARDS_WHOLE &&
         im->opt.prefetch;
}

/* Position c of the epoch's shard order (key NULL: unshuffled, the list
 * order): the shard whose samples cover it, and the sample there in tar
 * order. */
uint64_t pl_shards_block_index(const pl_dataset *ds, const uint64_t key[2],
                               uint64_t c, uint64_t c_end) {
  shards_impl *im = ds->impl;
  if (!key && !reads_ahead(im))
    return c; /* the list order is the index order: nothing to look up */
  pthread_mutex_lock(&im->order_lock);
  epoch_order *e = key ? order_for(im, key) : &im->identity;
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
  if (reads_ahead(im)) {
    /* This position's shard and the next ones of the reader's run (its
     * stream: a rank's own shards, not its neighbour's): the loader asks
     * for positions a few batches before it reads them. */
    pthread_mutex_lock(&im->lock);
    for (int k = lo; k < im->n && k <= lo + (int)im->opt.prefetch &&
                     e->prefix[k] < c_end;
         k++)
      pl_shards_prefetch(im, (int)e->order[k]);
    pthread_mutex_unlock(&im->lock);
  }
  pthread_mutex_unlock(&im->order_lock);
  return index;
}

pl_status pl_shards_alloc_orders(shards_impl *im, pl_error *err) {
  for (int i = 0; i < ORDER_SLOTS; i++) {
    epoch_order *e = &im->orders[i];
    e->order = malloc((size_t)im->n * sizeof *e->order);
    e->prefix = malloc((size_t)(im->n + 1) * sizeof *e->prefix);
    if (!e->order || !e->prefix)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  }
  epoch_order *id = &im->identity;
  id->order = malloc((size_t)im->n * sizeof *id->order);
  id->prefix = malloc((size_t)(im->n + 1) * sizeof *id->prefix);
  if (!id->order || !id->prefix)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  fill_order(im, id, NULL);
  return PL_OK;
}
