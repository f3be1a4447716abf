/* The batch buffers (pool.h): allocated, found, freed. */
#include "loader/loader_internal.h"

#include <assert.h>
#include <stdlib.h>

pl_batch *pl_pool_find_free(pl_core *c) {
  for (int i = 0; i < c->pool.nslots; i++)
    if (c->pool.slots[i]->state == SLOT_FREE)
      return c->pool.slots[i];
  return NULL;
}

pl_batch *pl_pool_find_job(pl_core *c, uint64_t job) {
  for (int i = 0; i < c->pool.nslots; i++) {
    pl_batch *b = c->pool.slots[i];
    if (b->gen == c->stream.gen && b->job == job && b->state != SLOT_FREE &&
        b->state != SLOT_HELD && b->state != SLOT_CACHED)
      return b;
  }
  return NULL;
}

int pl_pool_all_held(const pl_core *c) {
  if (c->pool.nslots + c->pool.growing < c->pool.max_slots)
    return 0;
  for (int i = 0; i < c->pool.nslots; i++)
    if (c->pool.slots[i]->state != SLOT_HELD &&
        c->pool.slots[i]->state != SLOT_CACHED)
      return 0;
  return 1;
}

void pl_pool_slot_free(pl_core *c, pl_batch *b) {
  if (b->mem.data || b->mem.priv)
    c->be->vt->buf_free(c->be, &b->mem);
  pl_order_unref(b->order);
  free(b->spans);
  free(b->written);
  free(b->sample_idx);
  free(b);
}

pl_status pl_pool_slot_new(pl_core *c, pl_batch **out, pl_error *err) {
  pl_batch *b = pl_calloc(1, sizeof *b);
  if (b)
    b->sample_idx = pl_calloc(c->cfg.batch_size, sizeof *b->sample_idx);
  if (b && b->sample_idx)
    b->spans = pl_calloc((size_t)c->layout.copy.max_spans, sizeof *b->spans);
  if (b && b->spans && c->layout.copy.device_writes)
    b->written = pl_calloc(c->cfg.batch_size, 1);
  if (!b || !b->sample_idx || !b->spans ||
      (c->layout.copy.device_writes && !b->written)) {
    if (b) {
      free(b->spans);
      free(b->written);
      free(b->sample_idx);
    }
    free(b);
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for a batch");
  }
  b->core = c;
  b->mem.bytes = c->layout.mem_bytes;
  b->mem.host_fd = -1;
  pl_status s = c->be->vt->buf_alloc(c->be, &b->mem, err);
  if (s != PL_OK) {
    free(b->spans);
    free(b->written);
    free(b->sample_idx);
    free(b);
    return s;
  }
  *out = b;
  return PL_OK;
}

/* Adds one buffer to the pool; called by the consumer, lock held on entry
 * and exit, released while allocating. */
pl_status pl_pool_grow(pl_core *c, pl_error *err) {
  c->pool.growing++;
  pthread_mutex_unlock(&c->mu);
  pl_batch *b = NULL;
  pl_status s = pl_pool_slot_new(c, &b, err);
  pthread_mutex_lock(&c->mu);
  c->pool.growing--;
  if (s == PL_OK) {
    c->pool.slots[c->pool.nslots++] = b;
    pl_wake_all_workers(c);
  }
  return s;
}
