/* The job stream's arithmetic (loader_internal.h, "The job stream"): which
 * jobs a stream holds, which epoch and batch each one is, and where the
 * next delivery stands. Pure functions of the core's stream fields, called
 * under mu by the loader (claims, deliveries, errors), the replay (the jobs
 * it stands in for) and checkpoints. */
#include "loader/loader_internal.h"

#include <assert.h>

int pl_core_job_exists(const pl_core *c, uint64_t job) {
  if (job < c->stream.base) /* an explicit epoch dropped by a queue_order */
    return 0;
  uint64_t j = job - c->stream.base;
  if (pl_core_explicit(c)) /* explicit epochs end their stream */
    return j < c->stream.first.num_batches +
                   (c->stream.then ? c->stream.second.num_batches : 0);
  return j < c->stream.first.num_batches || c->stream.full.num_batches > 0;
}

void pl_core_job_locate(const pl_core *c, uint64_t job, uint64_t *batch,
                        pl_epoch_plan *plan, pl_order **order) {
  uint64_t j = job - c->stream.base;
  if (j < c->stream.first.num_batches) {
    *plan = c->stream.first;
    *batch = j;
    if (order)
      *order = c->stream.order;
    return;
  }
  j -= c->stream.first.num_batches;
  if (pl_core_explicit(c)) { /* the queued explicit epoch */
    *plan = c->stream.second;
    *batch = j;
    if (order)
      *order = c->stream.then;
    return;
  }
  uint64_t nb = c->stream.full.num_batches;
  pl_sampler_plan(&c->sampler, c->stream.first.epoch + 1 + j / nb, 0, plan);
  *batch = j % nb;
  if (order)
    *order = NULL;
}

uint64_t pl_core_epoch_first_job(const pl_core *c, uint64_t epoch) {
  uint64_t n1 = c->stream.base + c->stream.first.num_batches;
  if (epoch <= c->stream.first.epoch)
    return c->stream.base;
  if (pl_core_explicit(c))
    return n1 + (epoch > c->stream.first.epoch + 1 && c->stream.then
                     ? c->stream.second.num_batches
                     : 0);
  return n1 + (epoch - c->stream.first.epoch - 1) * c->stream.full.num_batches;
}

void pl_core_hold_failed(pl_core *c, const pl_batch *b) {
  if (b->gen != c->stream.gen || !pl_core_job_exists(c, b->job) ||
      pl_core_explicit(c))
    return;
  uint64_t batch;
  pl_epoch_plan p;
  pl_core_job_locate(c, b->job, &batch, &p, NULL);
  p.start += batch * c->sampler.batch * c->sampler.world;
  c->stream.failed_plan = p;
  c->stream.failed_held = 1;
}

void pl_core_position(const pl_core *c, uint64_t *epoch, uint64_t *start,
                      uint32_t *streams) {
  if (c->stream.failed_held) {
    *epoch = c->stream.failed_plan.epoch;
    *start = c->stream.failed_plan.start;
    *streams = c->stream.failed_plan.streams;
    return;
  }
  if (c->stream.end_pending || !pl_core_job_exists(c, c->stream.next_deliver)) {
    pl_epoch_plan next;
    pl_sampler_plan(&c->sampler, c->stream.cur_epoch + 1, 0, &next);
    *epoch = next.epoch;
    *start = 0;
    *streams = next.streams;
    return;
  }
  uint64_t b;
  pl_epoch_plan p;
  pl_core_job_locate(c, c->stream.next_deliver, &b, &p, NULL);
  *epoch = p.epoch;
  *start = p.start + b * c->sampler.batch * c->sampler.world;
  *streams = p.streams;
}

static int slot_is_stale(const pl_core *c, const pl_batch *b) {
  return b->gen != c->stream.gen || b->job < c->stream.next_deliver;
}

/* Finished, undelivered buffers of stale jobs go back to the free list;
 * buffers still being filled are freed by their filler. [mu] */
static void drop_stale(pl_core *c) {
  for (int i = 0; i < c->pool.nslots; i++) {
    pl_batch *b = c->pool.slots[i];
    if ((b->state == SLOT_READY || b->state == SLOT_FAILED) &&
        slot_is_stale(c, b))
      b->state = SLOT_FREE;
  }
  pl_wake_all_workers(c);
}

void pl_core_restart(pl_core *c, uint64_t epoch, uint64_t start,
                     uint32_t streams) {
  pl_order_unref(c->stream.order);
  pl_order_unref(c->stream.then);
  c->stream.order = c->stream.then = NULL;
  c->stream.base = 0;
  pl_sampler_plan(&c->sampler, 0, 0, &c->stream.full);
  pl_sampler_plan(&c->sampler, epoch, start, &c->stream.first);
  if (start > 0 && streams > 0) /* the saved epoch's split, kept */
    c->stream.first.streams = streams;
  if (c->stream.first.num_batches == 0 && start > 0 &&
      c->stream.full.num_batches > 0)
    pl_sampler_plan(&c->sampler, ++epoch, 0, &c->stream.first);
  if (c->cfg.explicit_order) /* an empty explicit epoch until set_order */
    c->stream.first.start = c->stream.first.per_rank =
        c->stream.first.num_batches = 0;
  c->stream.gen++;
  atomic_store_explicit(&c->stream.gen_now, c->stream.gen,
                        memory_order_relaxed);
  c->stream.next_claim = c->stream.next_deliver = 0;
  c->stream.waited_for = 0;
  c->stream.end_pending = 0;
  c->stream.cur_epoch = epoch;
  c->stream.failed_held = 0;
  drop_stale(c);
}

/* The consumer gave up on the rest of `epoch` (an error): the next
 * delivery is the next epoch's first batch. Never backwards: the epoch may
 * have been delivered to its end and dropped meanwhile (a queue_order while
 * deliver had the lock released). */
void pl_core_skip_epoch(pl_core *c, uint64_t epoch) {
  uint64_t next = pl_core_epoch_first_job(c, epoch + 1);
  if (c->stream.next_deliver < next)
    c->stream.next_deliver = next;
  if (c->stream.next_claim < c->stream.next_deliver)
    c->stream.next_claim = c->stream.next_deliver;
  if (c->stream.cur_epoch < epoch + 1)
    c->stream.cur_epoch = epoch + 1;
  drop_stale(c);
}

/* Batches of the current stream the consumer could take now without
 * waiting: loaded, in its order, from the one it takes next (found as
 * the consumer finds it, pl_pool_find_job). Batches loaded behind one
 * still in work do not count: the consumer waits for that one all the
 * same (counted, 16 workers on the H200 with decode=auto saw the loader
 * "ahead" for 95 of 210 batches while the consumer waited 92% of its
 * time). [mu] */
static uint32_t ready_ahead(pl_core *c) {
  uint32_t n = 0;
  pl_batch *b;
  while ((b = pl_pool_find_job(c, c->stream.next_deliver + n)) &&
         b->state == SLOT_READY)
    n++;
  return n;
}

/* Batches the consumer took since it last waited for one. [mu] */
static uint32_t since_wait(const pl_core *c) {
  uint64_t w = c->stream.waited_for, d = c->stream.next_deliver;
  if (!w)
    return UINT32_MAX;
  return d > w ? (uint32_t)PL_MIN(d - w, (uint64_t)UINT32_MAX - 1) : 0;
}

/* Claims the next job into a free buffer. [mu] The sample indices are
 * computed later, by the filler, outside the lock. */
pl_batch *pl_core_claim(pl_core *c, pl_batch *b) {
  assert(b->state == SLOT_FREE);
  b->state = SLOT_FILLING;
  b->gen = c->stream.gen;
  b->job = c->stream.next_claim++;
  b->claim_seq = c->claims++;
  b->ready_ahead = ready_ahead(c);
  b->depth = (uint32_t)c->prefetch;
  b->since_wait = since_wait(c);
  pl_order *order;
  pl_core_job_locate(c, b->job, &b->index, &b->plan, &order);
  b->epoch = b->plan.epoch;
  pl_order_unref(b->order);
  b->order = pl_order_ref(order);
  b->size = b->order ? pl_order_batch_size(b->order, b->index)
                     : pl_sampler_batch_size(&c->sampler, &b->plan, b->index);
  atomic_store_explicit(&b->cur_t0, 0.0, memory_order_relaxed);
  pl_error_clear(&b->err);
  return b;
}

/* Publishes a filled buffer. [mu] */
void pl_core_publish(pl_core *c, pl_batch *b) {
  assert(b->state == SLOT_FILLING);
  if (slot_is_stale(c, b)) {
    b->state = SLOT_FREE;
    pl_wake_worker(c);
    return;
  }
  b->state = b->err.status == PL_OK ? SLOT_READY : SLOT_FAILED;
  pthread_cond_signal(&c->ready_cv); /* one consumer at a time */
}
