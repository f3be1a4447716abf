/* Autotuning of workers and prefetch; tune.h describes the controller. */
#include "loader/loader_internal.h"
#include "core/cpus.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define WINDOW_S 0.25      /* a decision at most this often */
#define WINDOW_BATCHES 4   /* and after at least this many batches */
#define WAIT_GROW 0.05     /* the step waits more than this: grow */
#define WAIT_SLACK 0.02    /* less than this: a shrink may be due */
#define BUSY_GROW 0.70     /* workers this busy: more of them would help */
#define BUSY_SHRINK 0.60   /* one fewer would still be at most this busy */
#define COPY_FULL 0.85     /* the copy engine this busy: workers won't help */
#define GAIN 1.05          /* more workers must give this much more, or revert */
#define DEPTH_LOSS 0.95    /* a deeper prefetch is undone only below this:
                              it costs memory, not cores, and one window's
                              noise must not stop it (on the H200 it did:
                              the step waited 41% with workers 44% busy) */
#define CAP_WINDOWS 40     /* a reverted growth is not retried for this long */
#define SLACK_WINDOWS 4
#define START_WORKERS 2    /* the CLI's default: where tuning starts */

double pl_tune_budget(double requested, int cpus) {
  double cores = cpus > 0 ? cpus : 1;
  double b = requested > 0 ? requested : cores - PL_MAX(1.0, floor(cores / 8));
  return PL_MAX(1.0, PL_MIN(b, cores));
}

void pl_tune_setup(pl_core *c) {
  pl_tune *t = &c->tune;
  pl_loader_config *cfg = &c->cfg;
  t->auto_workers = cfg->num_workers == PL_AUTO;
  t->auto_prefetch = cfg->prefetch == PL_AUTO;
  t->cpus = pl_cpus_available();
  t->budget = pl_tune_budget(cfg->cpu_budget, t->cpus);
  if (t->auto_workers) {
    cfg->num_workers = (int)t->budget;
    t->active = PL_MIN(START_WORKERS, cfg->num_workers);
    t->prefetch_follows = cfg->prefetch == 0;
  } else {
    t->active = cfg->num_workers;
  }
  t->threads = cfg->num_workers;
  int w = PL_MAX(t->active, 1);
  if (t->auto_prefetch || t->prefetch_follows) {
    cfg->prefetch = PL_MAX(2 * w, 2);
    t->prefetch_max = PL_MIN(PL_MAX(4 * t->threads, 16), 256);
  } else {
    t->prefetch_max = cfg->prefetch;
  }
  t->prefetch = cfg->prefetch;
  t->worker_cap = t->threads;
  t->prefetch_cap = t->prefetch_max;
}

/* ------------------------------------------------------------ decide */

static pl_tune_action set_workers(pl_tune *t, int n, pl_tune_action a) {
  t->before = t->active;
  t->active = n;
  if (t->prefetch_follows)
    t->prefetch = PL_MIN(PL_MAX(2 * n, 2), t->prefetch_max);
  return a;
}

static pl_tune_action revert(pl_tune *t, const pl_tune_window *w, char *why,
                             size_t len) {
  if (t->last_action == PL_TUNE_GROW_WORKERS) {
    snprintf(why, len,
             "%d workers were no faster than %d (%.4g vs %.4g batches/s): "
             "back to %d",
             t->active, t->before, w->rate, t->last_rate, t->before);
    t->worker_cap = t->before;
    int was = t->before;
    set_workers(t, was, PL_TUNE_REVERT);
  } else {
    snprintf(why, len,
             "prefetch %d was slower than %d (%.4g vs %.4g batches/s): "
             "back to %d",
             t->prefetch, t->before, w->rate, t->last_rate, t->before);
    t->prefetch_cap = t->before;
    t->prefetch = t->before;
  }
  t->cap_ttl = CAP_WINDOWS;
  return PL_TUNE_REVERT;
}

static int can_add_worker(const pl_tune *t, const pl_tune_window *w) {
  return t->auto_workers && t->active < t->worker_cap &&
         t->active < t->threads && w->busy >= BUSY_GROW &&
         w->copy < COPY_FULL && w->cpu_cores < t->cpus - 0.5;
}

static pl_tune_action grow(pl_tune *t, const pl_tune_window *w, char *why,
                           size_t len) {
  if (can_add_worker(t, w)) {
    int add = w->wait > 0.3 ? PL_MAX(1, t->active / 2) : 1;
    int n = PL_MIN(t->active + add, PL_MIN(t->worker_cap, t->threads));
    snprintf(why, len,
             "%d -> %d workers: the step waited %.0f%% of the last %.2g s "
             "and the workers were busy %.0f%% (process at %.1f of %d cores)",
             t->active, n, 100 * w->wait, w->dt, 100 * w->busy, w->cpu_cores,
             t->cpus);
    return set_workers(t, n, PL_TUNE_GROW_WORKERS);
  }
  if (t->auto_prefetch && t->prefetch < t->prefetch_cap &&
      w->busy < BUSY_GROW) {
    int n = PL_MIN(t->prefetch + PL_MAX(2, t->active), t->prefetch_cap);
    snprintf(why, len,
             "prefetch %d -> %d: the step waited %.0f%% of the last %.2g s "
             "while the workers were busy only %.0f%%",
             t->prefetch, n, 100 * w->wait, w->dt, 100 * w->busy);
    t->before = t->prefetch;
    t->prefetch = n;
    return PL_TUNE_GROW_PREFETCH;
  }
  return PL_TUNE_NONE;
}

static pl_tune_action shrink(pl_tune *t, const pl_tune_window *w, char *why,
                             size_t len) {
  int n = t->active;
  if (!t->auto_workers || n <= 1 || w->wait >= WAIT_SLACK ||
      w->busy * n / (n - 1) >= BUSY_SHRINK) {
    t->slack = 0;
    return PL_TUNE_NONE;
  }
  if (++t->slack < SLACK_WINDOWS)
    return PL_TUNE_NONE;
  t->slack = 0;
  snprintf(why, len,
           "%d -> %d workers: for %d windows the step waited under %.0f%% "
           "and the workers were busy %.0f%%: a core back to the trainer",
           n, n - 1, SLACK_WINDOWS, 100 * WAIT_SLACK, 100 * w->busy);
  return set_workers(t, n - 1, PL_TUNE_SHRINK_WORKERS);
}

pl_tune_action pl_tune_decide(pl_tune *t, const pl_tune_window *w, char *why,
                              size_t why_len) {
  why[0] = 0;
  t->windows++;
  if (t->cap_ttl > 0 && --t->cap_ttl == 0) {
    t->worker_cap = t->threads;
    t->prefetch_cap = t->prefetch_max;
  }
  pl_tune_action last = t->last_action;
  double last_rate = t->last_rate;
  pl_tune_action a = PL_TUNE_NONE;
  if ((last == PL_TUNE_GROW_WORKERS && w->rate < last_rate * GAIN) ||
      (last == PL_TUNE_GROW_PREFETCH && w->rate < last_rate * DEPTH_LOSS))
    a = revert(t, w, why, why_len);
  else if (w->wait > WAIT_GROW)
    a = grow(t, w, why, why_len);
  else
    a = shrink(t, w, why, why_len);
  t->last_action = a;
  t->last_rate = w->rate;
  return a;
}

/* ------------------------------------------------------------ tick */

static double delta_ns(const pl_stage_snap *a, const pl_stage_snap *b,
                       pl_stage st) {
  return b->ns[st] > a->ns[st] ? (double)(b->ns[st] - a->ns[st]) * 1e-9 : 0;
}

/* The window since the last tick, from the stage sums. */
static pl_tune_window window_of(pl_core *c, const pl_stage_snap *now,
                                uint64_t batches, double wait) {
  pl_tune *t = &c->tune;
  pl_tune_window w;
  w.dt = now->t - t->last.t;
  w.rate = (double)(batches - t->batches_last) / w.dt;
  w.wait = PL_MIN(1.0, (wait - t->wait_last) / w.dt);
  double fill = delta_ns(&t->last, now, PL_ST_READ) +
                delta_ns(&t->last, now, PL_ST_STAGE);
  w.busy = PL_MIN(1.0, fill / (PL_MAX(t->active, 1) * w.dt));
  w.copy = PL_MIN(1.0, (now->copy_s - t->last.copy_s) / w.dt);
  w.cpu_cores = (now->process_cpu_s - t->last.process_cpu_s) / w.dt;
  return w;
}

static void take_snap(pl_core *c, pl_stage_snap *s) {
  for (int i = 0; i < PL_ST_COUNT_; i++)
    s->ns[i] = atomic_load_explicit(&c->tm.ns[i], memory_order_relaxed);
  pl_loader_stats st;
  memset(&st, 0, sizeof st);
  c->be->vt->stats(c->be, &st);
  s->copy_s = st.copy_s;
  s->process_cpu_s = pl_process_cpu_s();
  s->t = pl_now();
}

int pl_tune_tick(pl_core *c) {
  pl_tune *t = &c->tune;
  if (!t->auto_workers && !t->auto_prefetch)
    return 0;
  double now = pl_now();
  pthread_mutex_lock(&c->mu);
  uint64_t batches = c->batches_delivered;
  double wait = c->consumer_wait_s;
  int replaying = c->replay.active;
  pthread_mutex_unlock(&c->mu);
  if (replaying)
    return 0;
  if (t->t_last == 0 || now - t->t_last < WINDOW_S ||
      batches - t->batches_last < WINDOW_BATCHES) {
    if (t->t_last == 0) { /* the first window starts at the first batch */
      t->t_last = now;
      take_snap(c, &t->last);
      t->batches_last = batches;
      t->wait_last = wait;
    }
    return 0;
  }
  pl_stage_snap s;
  take_snap(c, &s);
  pl_tune_window w = window_of(c, &s, batches, wait);
  char why[256];
  t->last = s;
  t->t_last = s.t;
  t->batches_last = batches;
  t->wait_last = wait;
  /* Under mu: the workers read `active` there. */
  pthread_mutex_lock(&c->mu);
  pl_tune_action a = pl_tune_decide(t, &w, why, sizeof why);
  if (a != PL_TUNE_NONE) {
    c->prefetch = t->prefetch;
    pthread_cond_broadcast(&c->work_cv); /* unpark, or let more claim */
  }
  pthread_mutex_unlock(&c->mu);
  if (a == PL_TUNE_NONE)
    return 0;
  pl_log(&c->log, PL_LOG_INFO, "autotune: %s", why);
  return t->prefetch + 2 + t->active;
}
