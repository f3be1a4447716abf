/* Autotuning of workers and prefetch; tune.h describes the controller. */
#include "loader/loader_internal.h"
#include "core/cpus.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define WINDOW_S 0.25      /* a decision at most this often */
#define WINDOW_BATCHES 4   /* and after at least this many batches, and two
                              per active worker: a window spans two rounds
                              of every worker, so a new worker's first
                              (slower) batch cannot hide its gain */
#define WAIT_GROW 0.05     /* the step waits more than this: grow */
#define WAIT_STARVED 0.30  /* this much: double the workers, not one more */
#define WAIT_SLACK 0.02    /* less than this: a shrink may be due */
#define BUSY_GROW 0.70     /* workers this busy: more of them would help */
#define BUSY_SHRINK 0.60   /* one fewer would still be at most this busy */
#define COPY_FULL 0.85     /* the copy engine this busy: workers won't help */
#define GAIN 1.05          /* a growth must give this much more to be kept
                              (workers) or to go on (prefetch) */
#define DEPTH_LOSS 0.95    /* a deeper prefetch is undone only below this:
                              it costs memory, not cores, and one window's
                              noise must not stop it (on the H200 it did:
                              the step waited 41% with workers 44% busy) */
#define CAP_WINDOWS 20     /* a growth that did not pay is not retried for
                              this long (about 5 s) */
#define SLACK_WINDOWS 4
#define START_WORKERS 2    /* the CLI's default: where tuning starts */

/* The default is every core: a step that waits for data leaves its own
 * core idle, and growth stops anyway where the process uses them all
 * (worker_room). On the H200 an image folder ran 1.5x faster with 16
 * workers than with 12 (bench/results/h200-26a0142-2026-12-01), so
 * holding back cores/8 cost more than it saved. */
double pl_tune_budget(double requested, int cpus) {
  double cores = cpus > 0 ? cpus : 1;
  double b = requested > 0 ? requested : cores;
  return PL_MAX(1.0, PL_MIN(b, cores));
}

/* Workers and depth resolved once, here, into the tuning state; the config
 * stays as the caller gave it (PL_AUTO and 0 included), so that what was
 * asked and what runs can both be told. */
void pl_tune_setup(pl_core *c) {
  pl_tune *t = &c->tune;
  const pl_loader_config *cfg = &c->cfg;
  t->auto_workers = cfg->num_workers == PL_AUTO;
  t->auto_prefetch = cfg->prefetch == PL_AUTO;
  t->cpus = pl_cpus_available();
  t->budget = pl_tune_budget(cfg->cpu_budget, t->cpus);
  t->threads = t->auto_workers ? (int)t->budget : cfg->num_workers;
  t->active = t->auto_workers ? PL_MIN(START_WORKERS, t->threads) : t->threads;
  /* prefetch 0 is "two per worker": with auto workers it follows them */
  t->prefetch_follows = t->auto_workers && cfg->prefetch == 0;
  if (t->auto_prefetch || t->prefetch_follows) {
    t->prefetch = PL_MAX(2 * PL_MAX(t->active, 1), 2);
    t->prefetch_max = PL_MIN(PL_MAX(4 * t->threads, 16), 256);
  } else {
    t->prefetch = cfg->prefetch ? (int)cfg->prefetch : PL_MAX(2 * t->threads, 2);
    t->prefetch_max = t->prefetch;
  }
  t->worker_cap = t->threads;
  t->prefetch_cap = t->prefetch_max;
}

/* ------------------------------------------------------------ decide */

/* n active workers; an auto prefetch is at least the default depth for
 * them (2 each), or the new workers would find nothing to claim. */
static pl_tune_action set_workers(pl_tune *t, int n, pl_tune_action a) {
  t->before = t->active;
  t->before_prefetch = t->prefetch;
  t->active = n;
  int depth = PL_MAX(2 * n, 2);
  if (t->auto_prefetch) /* never shallower than it was tuned to */
    depth = PL_MAX(depth, t->prefetch);
  if (t->prefetch_follows || t->auto_prefetch)
    t->prefetch = PL_MIN(depth, t->prefetch_max);
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
    t->active = t->before;
    t->prefetch = t->before_prefetch;
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

/* Room for another worker: threads parked, cores free, the copy engine not
 * the limit. Whether one would help is the caller's question. */
static int worker_room(const pl_tune *t, const pl_tune_window *w) {
  return t->auto_workers && t->active < t->worker_cap &&
         t->active < t->threads && w->copy < COPY_FULL &&
         w->cpu_cores < t->cpus - 0.5;
}

static int can_deepen(const pl_tune *t) {
  return t->auto_prefetch && t->prefetch < t->prefetch_cap;
}

static pl_tune_action add_workers(pl_tune *t, const pl_tune_window *w,
                                  const char *because, char *why,
                                  size_t len) {
  int add = w->wait > WAIT_STARVED ? t->active : 1;
  int n = PL_MIN(t->active + add, PL_MIN(t->worker_cap, t->threads));
  snprintf(why, len,
           "%d -> %d workers: the step waited %.0f%% of the last %.2g s "
           "and the workers were busy %.0f%% (%s; process at %.1f of %d "
           "cores)",
           t->active, n, 100 * w->wait, w->dt, 100 * w->busy, because,
           w->cpu_cores, t->cpus);
  return set_workers(t, n, PL_TUNE_GROW_WORKERS);
}

/* The step waits. Busy workers: more of them. Idle workers: a deeper
 * prefetch, to ride out slow batches. Idle workers and a deeper prefetch
 * that no longer helps: the wait is latency (each batch takes long to go
 * through), which more workers in parallel can hide: one more as a trial,
 * kept only if it pays. */
static pl_tune_action grow(pl_tune *t, const pl_tune_window *w, char *why,
                           size_t len) {
  int room = worker_room(t, w);
  if (room && w->busy >= BUSY_GROW)
    return add_workers(t, w, "busy", why, len);
  if (can_deepen(t) && w->busy < BUSY_GROW) {
    int n = PL_MIN(t->prefetch + PL_MAX(2, t->active), t->prefetch_cap);
    snprintf(why, len,
             "prefetch %d -> %d: the step waited %.0f%% of the last %.2g s "
             "while the workers were busy only %.0f%%",
             t->prefetch, n, 100 * w->wait, w->dt, 100 * w->busy);
    t->before = t->prefetch;
    t->prefetch = n;
    return PL_TUNE_GROW_PREFETCH;
  }
  if (room)
    return add_workers(t, w,
                       t->auto_prefetch
                           ? "a trial: a deeper prefetch did not help"
                           : "a trial: the prefetch is fixed",
                       why, len);
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

/* A deeper prefetch that gained less than GAIN stays (memory only) but is
 * not deepened further for a while: the next growth tries workers. */
static void judge_depth(pl_tune *t, const pl_tune_window *w,
                        double last_rate) {
  if (w->rate < last_rate * GAIN) {
    t->prefetch_cap = t->prefetch;
    t->cap_ttl = CAP_WINDOWS;
  }
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
      (last == PL_TUNE_GROW_PREFETCH && w->rate < last_rate * DEPTH_LOSS)) {
    a = revert(t, w, why, why_len);
  } else {
    if (last == PL_TUNE_GROW_PREFETCH)
      judge_depth(t, w, last_rate);
    a = w->wait > WAIT_GROW ? grow(t, w, why, why_len)
                            : shrink(t, w, why, why_len);
  }
  t->last_action = a;
  t->last_rate = w->rate;
  return a;
}

/* A window's length in batches: WINDOW_BATCHES, and two per active worker. */
static uint64_t window_batches(const pl_tune *t) {
  return (uint64_t)PL_MAX(WINDOW_BATCHES, 2 * t->active);
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
  /* The worker processes' CPU too: a Python dataset's work is there. */
  w.cpu_cores = (now->process_cpu_s - t->last.process_cpu_s +
                 PL_MAX(0.0, now->worker_cpu_s - t->last.worker_cpu_s)) /
                w.dt;
  return w;
}

int pl_tune_tick(pl_core *c) {
  pl_tune *t = &c->tune;
  if (!t->auto_workers && !t->auto_prefetch)
    return 0;
  double now = pl_now();
  pthread_mutex_lock(&c->mu);
  uint64_t batches = c->count.batches_delivered;
  double wait = c->count.consumer_wait_s;
  int replaying = c->replay.active;
  pthread_mutex_unlock(&c->mu);
  if (replaying)
    return 0;
  if (t->t_last == 0 || now - t->t_last < WINDOW_S ||
      batches - t->batches_last < window_batches(t)) {
    if (t->t_last == 0) { /* the first window starts at the first batch */
      t->t_last = now;
      pl_timing_snap(c, &t->last);
      t->batches_last = batches;
      t->wait_last = wait;
    }
    return 0;
  }
  pl_stage_snap s;
  pl_timing_snap(c, &s);
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
    pl_wake_all_workers(c); /* unpark, park, or let more claim */
  }
  pthread_mutex_unlock(&c->mu);
  if (a == PL_TUNE_NONE)
    return 0;
  pl_log(&c->log, PL_LOG_INFO, "autotune: %s", why);
  return t->prefetch + 2 + t->active;
}
