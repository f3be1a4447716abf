/* Epochs the caller chooses: an explicit order (set_order), the one queued
 * after it (queue_order), or a sampler epoch by number (set_epoch); each
 * begins a new job stream or extends it (loader_internal.h, "The job
 * stream"). The order object itself is order.c. */
#include "loader/loader_internal.h"

/* The order a caller gives (set_order, queue_order), checked and copied. */
static pl_status order_given(pl_loader *ld, const uint64_t *indices,
                             const uint64_t *starts, uint64_t nbatches,
                             pl_order **out, pl_error *err) {
  if (!ld)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader is NULL");
  if (pl_core_foreign(ld->core))
    return pl_core_forked(ld->core, err);
  return pl_order_new(ld->core->ds->length, ld->core->cfg.batch_size, indices,
                      starts, nbatches, out, err);
}

/* The plan of an explicit epoch: all of o, from its first batch. */
static pl_epoch_plan explicit_plan(uint64_t epoch, const pl_order *o) {
  pl_epoch_plan p = {.epoch = epoch, .num_batches = o->nbatches};
  p.per_rank = o->nbatches ? o->starts[o->nbatches] : 0;
  return p;
}

/* An explicit epoch (order.c holds the order itself). */
pl_status pl_loader_set_order(pl_loader *ld, uint64_t epoch,
                              const uint64_t *indices, const uint64_t *starts,
                              uint64_t nbatches, pl_error *err) {
  pl_order *o = NULL;
  PL_TRY(order_given(ld, indices, starts, nbatches, &o, err));
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  pl_core_restart(c, epoch, 0, 0); /* drops any earlier order */
  c->stream.order = o;
  c->stream.first = explicit_plan(epoch, o);
  pl_wake_all_workers(c);
  pthread_mutex_unlock(&c->mu);
  return PL_OK;
}

/* The explicit epoch after first's, queued: its jobs follow first's in
 * the stream. The consumer already past first (every batch of it taken):
 * first is dropped, the queued epoch becomes first and `base` moves on to
 * its first job, so that o can be queued after it. Empty epochs are
 * refused on either side: an epoch's end is known by its last batch
 * (deliver), and an empty one has none. [mu] */
static pl_status queue_locked(pl_core *c, uint64_t epoch, pl_order *o,
                              pl_error *err) {
  if (!pl_core_explicit(c))
    return pl_errorf(err, PL_BAD_STATE,
                     "no explicit epoch to queue epoch %llu after "
                     "(pl_loader_set_order begins one)",
                     (unsigned long long)epoch);
  if (c->stream.first.num_batches == 0 || o->nbatches == 0)
    return pl_errorf(
        err, PL_INVALID_ARGUMENT,
        "epoch %llu is empty: an empty epoch is given by "
        "pl_loader_set_order, never queued or followed",
        (unsigned long long)(o->nbatches ? c->stream.first.epoch : epoch));
  if (c->stream.then &&
      c->stream.next_deliver >= c->stream.base + c->stream.first.num_batches) {
    c->stream.base += c->stream.first.num_batches;
    pl_order_unref(c->stream.order);
    c->stream.order = c->stream.then;
    c->stream.first = c->stream.second;
    c->stream.then = NULL;
  }
  if (c->stream.then)
    return pl_errorf(err, PL_BAD_STATE,
                     "epoch %llu is queued already, and the consumer has "
                     "not reached it",
                     (unsigned long long)c->stream.second.epoch);
  if (epoch != c->stream.first.epoch + 1)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "epoch %llu does not follow the explicit epoch %llu",
                     (unsigned long long)epoch,
                     (unsigned long long)c->stream.first.epoch);
  c->stream.then = o;
  c->stream.second = explicit_plan(epoch, o);
  pl_wake_all_workers(c);
  return PL_OK;
}

pl_status pl_loader_queue_order(pl_loader *ld, uint64_t epoch,
                                const uint64_t *indices, const uint64_t *starts,
                                uint64_t nbatches, pl_error *err) {
  pl_order *o = NULL;
  PL_TRY(order_given(ld, indices, starts, nbatches, &o, err));
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  pl_status s = queue_locked(c, epoch, o, err);
  pthread_mutex_unlock(&c->mu);
  if (s != PL_OK)
    pl_order_unref(o);
  return s;
}

pl_status pl_loader_set_epoch(pl_loader *ld, uint64_t epoch, pl_error *err) {
  if (!ld)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader is NULL");
  if (pl_core_foreign(ld->core))
    return pl_core_forked(ld->core, err);
  pthread_mutex_lock(&ld->core->mu);
  pl_core_restart(ld->core, epoch, 0, 0);
  pthread_mutex_unlock(&ld->core->mu);
  return PL_OK;
}
