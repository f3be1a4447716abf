/* Autotuning of workers and prefetch (num_workers / prefetch PL_AUTO).
 *
 * The loader starts as many worker threads as the CPU budget allows and
 * lets `active` of them claim jobs; the rest park on the work condition
 * (no thread is created or destroyed per change; a Python worker process
 * driven by a parked thread idles with it). Every window (WINDOW_S and a
 * few batches) the consumer's thread measures the last window (the step's
 * wait for data, how busy the active workers were, the copy engine, the
 * process's CPU use) and pl_tune_decide makes at most one change:
 *
 *   grow workers   the step waits, the workers are busy, the copy engine is
 *                  not, the budget and the machine have cores to spare:
 *                  twice as many when the step waits > 30%, else one more
 *                  (an auto prefetch deepens to 2 per worker with them);
 *   grow prefetch  the step waits but the workers are not busy;
 *   try a worker   the step waits, the workers are not busy and a deeper
 *                  prefetch stopped paying (less than GAIN): the wait is
 *                  each batch's latency, which more workers in parallel
 *                  can hide;
 *   revert         the last growth of workers gave less than GAIN more
 *                  batches/s, or the last deeper prefetch made it slower:
 *                  undone, and not retried for a while (a deeper prefetch
 *                  that is merely no faster stays, since it costs memory,
 *                  not cores, but is not deepened further for a while);
 *   shrink         for several windows the step never waited and one
 *                  worker fewer would still be lightly loaded: a core back
 *                  to the trainer.
 *
 * A window is at least WINDOW_S and two batches per active worker, so that
 * each judgment sees every worker deliver twice.
 *
 * Each change goes to the log (INFO) with the numbers behind it. */
#ifndef PL_LOADER_TUNE_H
#define PL_LOADER_TUNE_H

#include "core/common.h"
#include "loader/timing.h"

typedef enum {
  PL_TUNE_NONE = 0,
  PL_TUNE_GROW_WORKERS,
  PL_TUNE_GROW_PREFETCH,
  PL_TUNE_SHRINK_WORKERS,
  PL_TUNE_REVERT
} pl_tune_action;

typedef struct pl_tune {
  int auto_workers, auto_prefetch;
  int prefetch_follows; /* prefetch 0 with auto workers: 2 per active one */
  int threads;          /* worker threads started */
  int active;           /* [mu] workers that may claim jobs */
  int prefetch_max;
  int cpus;             /* cores this process may use */
  double budget;        /* cores the workers may use */
  /* The controller (consumer's thread only). */
  int prefetch;         /* the depth it set last */
  double t_last;
  pl_stage_snap last;
  uint64_t batches_last;
  double wait_last;
  pl_tune_action last_action;
  int before;           /* workers or depth before the last growth */
  int before_prefetch;  /* depth before the last growth of workers */
  double last_rate;
  int worker_cap, prefetch_cap; /* no growth past these until cap_ttl ends */
  int cap_ttl;
  int slack;            /* windows in a row that would allow a shrink */
  int windows;
} pl_tune;

/* One window's measurements. */
typedef struct pl_tune_window {
  double dt;        /* seconds */
  double rate;      /* batches handed out per second */
  double wait;      /* fraction of dt the consumer waited */
  double busy;      /* fraction of active workers x dt spent filling */
  double copy;      /* fraction of dt the copy engine was busy */
  double cpu_cores; /* cores the whole process used */
} pl_tune_window;

/* Makes at most one change to t->active / t->prefetch from window w and
 * returns it, with the reason in why. Pure: for tests. */
pl_tune_action pl_tune_decide(pl_tune *t, const pl_tune_window *w, char *why,
                              size_t why_len);

/* The CPU budget: requested cores (0: default) against those available. */
double pl_tune_budget(double requested, int cpus);

#endif /* PL_LOADER_TUNE_H */
