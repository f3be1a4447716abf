/* Remote shards on disk (shards_internal.h): a reader holds a shard's
 * mapping while it reads; the cache stays under cache_bytes by evicting
 * the least recently read; one thread of the dataset's fetches the shards
 * a shuffled epoch reads next. */
#include "data/sources/shards_internal.h"

#include <unistd.h>

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
pl_status pl_shards_acquire(shards_impl *im, shard *sh, pl_error *err) {
  pthread_mutex_lock(&im->lock);
  while (sh->loading)
    pthread_cond_wait(&im->ready, &im->lock);
  pl_status s = PL_OK;
  if (!sh->on_disk) {
    sh->loading = true;
    pthread_mutex_unlock(&im->lock);
    s = pl_shards_download(im, sh, &sh->meta, NULL, err);
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

void pl_shards_release(shards_impl *im, shard *sh) {
  pthread_mutex_lock(&im->lock);
  sh->refs--;
  evict(im, NULL);
  pthread_mutex_unlock(&im->lock);
}

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
    pl_status s = pl_shards_download(im, sh, &sh->meta, NULL, &e);
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
void pl_shards_prefetch(shards_impl *im, int t) {
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
