/* The worker threads: each claims the next job into a free buffer, fills
 * it outside the lock and publishes it; started by create, stopped by
 * destroy (a worker stuck in a callback is detached after timeout_s). */
#include "loader/loader_internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

static int claimable(const pl_core *c) {
  return !c->replay.active && pl_core_job_exists(c, c->stream.next_claim) &&
         c->stream.next_claim - c->stream.next_deliver < (uint64_t)c->prefetch;
}

/* What a worker about to wait is waiting for (timing.h), judged once as
 * it begins: a parked worker's time counts nowhere. [mu] */
static pl_stage wait_stage(pl_core *c, int id) {
  if (!c->tm.on || !pl_worker_active(c, id))
    return PL_ST_COUNT_;
  return claimable(c) && !pl_pool_find_free(c) ? PL_ST_BUFWAIT : PL_ST_IDLE;
}

/* A worker's wait for work, rechecked every RECHECK_S even without a
 * wakeup: glibc before 2.41 can lose a pthread_cond_signal among several
 * waiters (sourceware bug 25847: a woken waiter "steals" a later signal;
 * Debian 12 ships 2.36). Seen here as a free buffer and a claimable job
 * with all six workers asleep for the test's whole 60 s (test_property,
 * 1 run in about 900). A broadcast per job would wake every worker for
 * each batch; a recheck costs an idle worker 20 wakeups a second, and a
 * lost signal 50 ms instead of a hang. [mu] */
#define RECHECK_S 0.05

static void worker_wait(pthread_cond_t *cv, pthread_mutex_t *mu) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)(RECHECK_S * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(cv, mu, &ts);
}

static void *worker_main(void *arg) {
  pl_worker *w = arg;
  pl_core *c = w->core;
  int id = atomic_fetch_add(&c->worker_ids, 1);
  pthread_mutex_lock(&c->mu);
  for (;;) {
    pl_batch *b = NULL;
    pl_stage waiting = wait_stage(c, id);
    double t = pl_stage_now(&c->tm);
    while (!c->stop && !(pl_worker_active(c, id) && claimable(c) &&
                         (b = pl_pool_find_free(c))))
      worker_wait(pl_worker_active(c, id) ? &c->work_cv : &c->park_cv,
                  &c->mu);
    if (c->stop)
      break;
    pl_core_claim(c, b);
    pthread_mutex_unlock(&c->mu);
    if (waiting != PL_ST_COUNT_)
      pl_stage_add(&c->tm, waiting, t);
    pl_fill(c, b);
    pthread_mutex_lock(&c->mu);
    pl_core_publish(c, b);
  }
  /* Destroy may have detached this thread (stuck in a callback): the
   * reference it holds kept the core alive until now. */
  w->exited = 1;
  pthread_cond_broadcast(&c->ready_cv);
  int last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last)
    pl_core_free(c);
  return NULL;
}

/* Waits on ready_cv until `deadline` (monotonic seconds). [mu] */
static void wait_until(pl_core *c, double deadline) {
  double rel = PL_MIN(deadline - pl_now(), 86400.0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + PL_MAX(rel, 0.0);
  ts.tv_sec = (time_t)at;
  ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
  pthread_cond_timedwait(&c->ready_cv, &c->mu, &ts);
}

static int workers_exited(const pl_core *c, int n) {
  int k = 0;
  for (int i = 0; i < n; i++)
    k += c->workers[i].exited;
  return k;
}

/* Stops the workers: each finishes the sample it is reading. With a
 * timeout_s, a worker still in its sample timeout_s later is stuck: it is
 * detached, not joined (it holds a core reference and exits when its
 * callback returns), so destroy returns in bounded time. */
void pl_workers_stop(pl_loader *ld) {
  pl_core *c = ld->core;
  int n = ld->nthreads;
  double timeout = c->cfg.timeout_s;
  double deadline = timeout > 0 ? pl_now() + timeout : INFINITY;
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pl_wake_all_workers(c);
  while (workers_exited(c, n) < n && pl_now() < deadline)
    if (deadline == INFINITY)
      pthread_cond_wait(&c->ready_cv, &c->mu);
    else
      wait_until(c, deadline);
  int done[PL_MAX_WORKERS];
  for (int i = 0; i < n; i++)
    done[i] = c->workers[i].exited;
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; i < n; i++) {
    if (done[i]) {
      pthread_join(c->workers[i].thread, NULL);
      continue;
    }
    pl_log(&c->log, PL_LOG_WARN,
           "worker %d is stuck in a sample callback for more than %.1f s: "
           "detached; it exits when the callback returns",
           i, timeout);
    pthread_detach(c->workers[i].thread);
  }
  ld->nthreads = 0;
}

pl_status pl_workers_start(pl_loader *ld, int n, pl_error *err) {
  pl_core *c = ld->core;
  c->workers = pl_calloc((size_t)PL_MAX(n, 1), sizeof *c->workers);
  if (!c->workers)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  c->nworkers = n;
  for (int i = 0; i < n; i++) {
    pl_worker *w = &c->workers[i];
    w->core = c;
    pthread_mutex_lock(&c->mu);
    c->refs++; /* the worker's own: see worker_main */
    pthread_mutex_unlock(&c->mu);
    int rc = PL_FAULT(PL_FAULT_THREAD_CREATE)
                 ? EAGAIN
                 : pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
      pthread_mutex_lock(&c->mu);
      c->refs--;
      pthread_mutex_unlock(&c->mu);
      return pl_errorf(err, PL_NO_MEMORY, "starting worker %d of %d: %s", i + 1,
                       n, strerror(rc));
    }
    ld->nthreads++;
  }
  return PL_OK;
}
