/* What a loader says about itself: its epoch, sizes, counters, device;
 * and pl_loader_sync. */
#include "loader/loader_internal.h"

#include <string.h>

uint64_t pl_loader_epoch(const pl_loader *ld) {
  if (!ld || pl_core_foreign(ld->core))
    return 0;
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  uint64_t e = c->stream.cur_epoch;
  pthread_mutex_unlock(&c->mu);
  return e;
}

uint64_t pl_loader_num_batches(const pl_loader *ld) {
  return ld ? ld->core->stream.full.num_batches : 0;
}

uint64_t pl_loader_num_samples(const pl_loader *ld) {
  if (!ld)
    return 0;
  const pl_core *c = ld->core;
  return c->sampler.drop_last ? c->stream.full.num_batches * c->sampler.batch
                              : c->stream.full.per_rank;
}

void pl_loader_stats_get(const pl_loader *ld, pl_loader_stats *out) {
  memset(out, 0, sizeof *out);
  if (!ld || pl_core_foreign(ld->core))
    return;
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  out->batches_delivered = c->count.batches_delivered;
  out->samples_delivered = c->count.samples_delivered;
  out->bytes_delivered = c->count.bytes_delivered;
  out->consumer_wait_s = c->count.consumer_wait_s;
  out->batch_buffers = (uint64_t)c->pool.nslots;
  pthread_mutex_unlock(&c->mu);
  out->batches_direct =
      atomic_load_explicit(&c->count.batches_direct, memory_order_relaxed);
  out->worker_busy_s = (double)atomic_load_explicit(&c->count.worker_busy_ns,
                                                    memory_order_relaxed) *
                       1e-9;
  c->be->vt->stats(c->be, out);
}

pl_device_kind pl_loader_device(const pl_loader *ld, int *index) {
  if (index)
    *index = ld ? ld->core->be->device_index : 0;
  return ld ? ld->core->be->kind : PL_DEVICE_CPU;
}

const char *pl_loader_device_name(const pl_loader *ld) {
  return ld ? ld->core->be->name : "none";
}

pl_status pl_loader_sync(pl_loader *ld, pl_error *err) {
  if (!ld)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader is required");
  if (pl_core_foreign(ld->core))
    return pl_core_forked(ld->core, err);
  pl_backend *be = ld->core->be;
  return be->vt->sync ? be->vt->sync(be, err) : PL_OK;
}
