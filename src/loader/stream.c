/* The job stream's arithmetic (loader_internal.h, "The job stream"): which
 * jobs a stream holds, which epoch and batch each one is, and where the
 * next delivery stands. Pure functions of the core's stream fields, called
 * under mu by the loader (claims, deliveries, errors), the replay (the jobs
 * it stands in for) and checkpoints. */
#include "loader/loader_internal.h"

int pl_core_job_exists(const pl_core *c, uint64_t job) {
  if (job < c->base) /* an explicit epoch dropped by a queue_order */
    return 0;
  uint64_t j = job - c->base;
  if (pl_core_explicit(c)) /* explicit epochs end their stream */
    return j < c->first.num_batches +
                   (c->then ? c->second.num_batches : 0);
  return j < c->first.num_batches || c->full.num_batches > 0;
}

void pl_core_job_locate(const pl_core *c, uint64_t job, uint64_t *batch,
                        pl_epoch_plan *plan, pl_order **order) {
  uint64_t j = job - c->base;
  if (j < c->first.num_batches) {
    *plan = c->first;
    *batch = j;
    if (order)
      *order = c->order;
    return;
  }
  j -= c->first.num_batches;
  if (pl_core_explicit(c)) { /* the queued explicit epoch */
    *plan = c->second;
    *batch = j;
    if (order)
      *order = c->then;
    return;
  }
  uint64_t nb = c->full.num_batches;
  pl_sampler_plan(&c->sampler, c->first.epoch + 1 + j / nb, 0, plan);
  *batch = j % nb;
  if (order)
    *order = NULL;
}

uint64_t pl_core_epoch_first_job(const pl_core *c, uint64_t epoch) {
  uint64_t n1 = c->base + c->first.num_batches;
  if (epoch <= c->first.epoch)
    return c->base;
  if (pl_core_explicit(c))
    return n1 + (epoch > c->first.epoch + 1 && c->then
                     ? c->second.num_batches
                     : 0);
  return n1 + (epoch - c->first.epoch - 1) * c->full.num_batches;
}

void pl_core_position(const pl_core *c, uint64_t *epoch, uint64_t *start) {
  if (c->end_pending || !pl_core_job_exists(c, c->next_deliver)) {
    *epoch = c->cur_epoch + 1;
    *start = 0;
    return;
  }
  uint64_t b;
  pl_epoch_plan p;
  pl_core_job_locate(c, c->next_deliver, &b, &p, NULL);
  *epoch = p.epoch;
  *start = p.start + b * c->sampler.batch * c->sampler.world;
}
