/* The consumer: pl_loader_next takes the jobs in order, fills them itself
 * with no workers, hands out ready batches, passes failures on, and
 * notices stalls (a sample loading past timeout_s, or every worker stuck)
 * instead of waiting forever. */
#include "loader/loader_internal.h"

#include <assert.h>
#include <math.h>
#include <time.h>

/* The consumer is past b (delivered, or failed with error_ends_epoch 0):
 * the next delivery is the job after it, and the epoch's end is pending
 * when that job begins another epoch. [mu] */
static void step_past(pl_core *c, const pl_batch *b) {
  c->stream.next_deliver = b->job + 1;
  if (c->stream.next_claim < c->stream.next_deliver)
    c->stream.next_claim = c->stream.next_deliver;
  c->stream.cur_epoch = b->epoch;
  uint64_t next_b;
  pl_epoch_plan p;
  if (!pl_core_job_exists(c, c->stream.next_deliver))
    c->stream.end_pending = 1;
  else {
    pl_core_job_locate(c, c->stream.next_deliver, &next_b, &p, NULL);
    c->stream.end_pending = next_b == 0;
  }
  pl_wake_worker(c); /* one more job may be claimed */
}

static pl_status deliver(pl_core *c, pl_batch *b, pl_batch **out,
                         pl_error *err) {
  assert(b->state == SLOT_READY);
  b->state = SLOT_HELD;
  c->refs++;
  step_past(c, b);
  assert(c->refs >= 2); /* the loader handle and this batch */
  pthread_mutex_unlock(&c->mu);
  pl_status s = c->be->vt->deliver(c->be, &b->mem, err);
  pthread_mutex_lock(&c->mu);
  if (s != PL_OK) { /* the copy failed (sync mode): this epoch ends here */
    b->state = SLOT_FREE;
    c->refs--; /* the loader handle still holds one */
    c->stream.end_pending = 0;
    pl_core_hold_failed(c, b);
    pl_core_skip_epoch(c, b->epoch);
    return s;
  }
  c->stream.failed_held = 0;
  c->count.batches_delivered++;
  c->count.samples_delivered += b->size;
  for (int f = 0; f < c->ds->nfields; f++) /* as delivered: transformed */
    c->count.bytes_delivered += (uint64_t)b->size * c->layout.out_bytes[f];
  *out = b;
  return PL_OK;
}

static pl_status take_failure(pl_core *c, pl_batch *b, pl_error *err) {
  assert(b->state == SLOT_FAILED && b->err.status != PL_OK);
  pl_status s = b->err.status;
  if (err)
    *err = b->err;
  b->state = SLOT_FREE;
  pl_core_hold_failed(c, b);
  if (c->cfg.error_ends_epoch)
    pl_core_skip_epoch(c, b->epoch);
  else /* only this batch is lost: the epoch goes on */
    step_past(c, b);
  return s;
}

/* A stalled sample: the job being waited for has spent more than
 * timeout_s on one sample. [mu] */
static pl_status check_stall(pl_core *c, pl_batch *b, pl_error *err) {
  double t0 = atomic_load_explicit(&b->cur_t0, memory_order_acquire);
  if (c->cfg.timeout_s <= 0 || t0 <= 0 || pl_now() - t0 <= c->cfg.timeout_s)
    return PL_OK;
  uint64_t idx = atomic_load_explicit(&b->cur_sample, memory_order_relaxed);
  pl_errorf(err, PL_TIMEOUT,
            "sample %llu: still loading after %.1f s (timeout %.1f s)",
            (unsigned long long)idx, pl_now() - t0, c->cfg.timeout_s);
  pl_error_set_sample(err, idx);
  pl_core_hold_failed(c, b);
  pl_core_skip_epoch(c, b->epoch);
  return PL_TIMEOUT;
}

/* With no workers the consumer fills the batch itself. [mu] */
static pl_status fill_here(pl_core *c, pl_batch *b, pl_error *err) {
  pl_core_claim(c, b);
  pthread_mutex_unlock(&c->mu);
  pl_fill(c, b);
  pthread_mutex_lock(&c->mu);
  if (b->err.status == PL_NOT_READY && b->gen == c->stream.gen) {
    /* pyworkers: the read was interrupted (PL_READ_INTERRUPTED): give the
     * job back, unfilled, for the next call. */
    b->state = SLOT_FREE;
    c->stream.next_claim = b->job;
    if (err)
      *err = b->err;
    return PL_NOT_READY;
  }
  pl_core_publish(c, b);
  return PL_OK;
}

/* Workers stuck in one sample for more than timeout_s (any job, also
 * abandoned ones), and the longest-running such sample. [mu] */
static int count_stuck(const pl_core *c, uint64_t *sample, double *secs) {
  int n = 0;
  double now = pl_now();
  *secs = 0;
  for (int i = 0; i < c->pool.nslots; i++) {
    const pl_batch *b = c->pool.slots[i];
    if (b->state != SLOT_FILLING)
      continue;
    double t0 = atomic_load_explicit(&b->cur_t0, memory_order_acquire);
    if (t0 <= 0 || now - t0 <= c->cfg.timeout_s)
      continue;
    n++;
    if (now - t0 > *secs) {
      *secs = now - t0;
      *sample = atomic_load_explicit(&b->cur_sample, memory_order_relaxed);
    }
  }
  return n;
}

/* With every worker stuck nothing can be loaded: say so instead of
 * waiting forever. Later calls say it again until a callback returns. */
static pl_status check_all_stuck(const pl_core *c, int workers, pl_error *err) {
  uint64_t idx = 0;
  double secs;
  workers = PL_MIN(workers, c->tune.active); /* autotuning parks the rest */
  if (c->cfg.timeout_s <= 0 || workers <= 0 ||
      count_stuck(c, &idx, &secs) < workers)
    return PL_OK;
  return pl_errorf(err, PL_TIMEOUT,
                   "all %d workers are stuck: sample %llu has been loading "
                   "for %.1f s (timeout %.1f s); nothing can be loaded until "
                   "a callback returns",
                   workers, (unsigned long long)idx, secs, c->cfg.timeout_s);
}

static void timed_wait(pl_core *c, double deadline) {
  double wake = deadline;
  if (c->cfg.timeout_s > 0) /* poll often enough to notice a stall */
    wake = PL_MIN(wake, pl_now() + PL_MIN(c->cfg.timeout_s / 4, 0.25));
  /* And at least once a second: a signal glibc lost (threads.c,
   * worker_wait) costs a second, not the rest of the run. The caller
   * rechecks everything. */
  wake = PL_MIN(wake, pl_now() + 1.0);
  /* Condition variables use CLOCK_REALTIME; convert the monotonic wake.
   * A far deadline (wait_s = 1e300) would overflow time_t: the timedwait
   * then fails at once without ever releasing mu, so no worker could
   * publish, a hang (now a second at most, above). */
  double rel = PL_MIN(wake - pl_now(), 86400.0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + rel;
  if (at < 0)
    at = 0;
  ts.tv_sec = (time_t)at;
  ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
  pthread_cond_timedwait(&c->ready_cv, &c->mu, &ts);
}

static pl_status next_locked(pl_core *c, int workers, double deadline,
                             pl_batch **out, pl_error *err) {
  if (c->stream.end_pending || !pl_core_job_exists(c, c->stream.next_deliver)) {
    c->stream.end_pending = 0;
    c->stream.cur_epoch++;
    return PL_END_OF_EPOCH;
  }
  for (;;) {
    uint64_t job = c->stream.next_deliver;
    pl_batch *b = pl_pool_find_job(c, job);
    if (b && b->state == SLOT_READY)
      return deliver(c, b, out, err);
    if (b && b->state == SLOT_FAILED)
      return take_failure(c, b, err);
    if (b)
      PL_TRY(check_stall(c, b, err));
    if (!b && c->stream.next_claim == job) { /* nobody is filling it */
      pl_batch *f = pl_pool_find_free(c);
      if (!f && !pl_pool_all_held(c) &&
          c->pool.nslots + c->pool.growing < c->pool.max_slots) {
        PL_TRY(pl_pool_grow(c, err));
        continue;
      }
      if (!f && pl_pool_all_held(c))
        return pl_errorf(err, PL_EXHAUSTED,
                         "all %d batch buffers are held by the consumer: "
                         "release one (pl_batch_release) or raise "
                         "max_batch_buffers",
                         c->pool.max_slots);
      if (f && workers == 0) {
        PL_TRY(fill_here(c, f, err));
        continue;
      }
    }
    PL_TRY(check_all_stuck(c, workers, err));
    c->stream.waited_for = job + 1; /* a poll that found none waited too */
    if (pl_now() >= deadline)
      return pl_errorf(err, PL_NOT_READY, "no batch ready yet");
    timed_wait(c, deadline);
  }
}

pl_status pl_loader_next_timed(pl_loader *ld, double wait_s, pl_batch **out,
                               pl_error *err) {
  if (!ld || !out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader and out are required");
  *out = NULL;
  if (isnan(wait_s)) /* a NaN deadline: the same hang as in timed_wait */
    return pl_errorf(err, PL_INVALID_ARGUMENT, "wait_s is NaN");
  pl_core *c = ld->core;
  if (pl_core_foreign(c))
    return pl_core_forked(c, err);
  double t0 = pl_now();
  double deadline = wait_s < 0 ? INFINITY : t0 + wait_s;
  pthread_mutex_lock(&c->mu);
  pl_status s = c->replay.active
                    ? pl_replay_next(c, out, err)
                    : next_locked(c, ld->nthreads, deadline, out, err);
  if (s == PL_OK)
    pl_replay_on_deliver(c, *out);
  double now = pl_now();
  c->count.consumer_wait_s += now - t0;
  pl_timing_returned(c, t0, now, s == PL_OK ? *out : NULL);
  pthread_mutex_unlock(&c->mu);
  pl_decode_poll(c);
  int want = pl_tune_tick(c);
  if (want > 0) { /* a deeper prefetch needs the buffers to fill */
    pthread_mutex_lock(&c->mu);
    while (c->pool.nslots + c->pool.growing < PL_MIN(want, c->pool.max_slots) &&
           pl_pool_grow(c, NULL) == PL_OK)
      ;
    pthread_mutex_unlock(&c->mu);
  }
  return s;
}

pl_status pl_loader_next(pl_loader *ld, pl_batch **out, pl_error *err) {
  return pl_loader_next_timed(ld, -1, out, err);
}
