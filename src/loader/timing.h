/* Per-stage clocks of one loader (pl_loader_timings): cheap enough to stay
 * on. Each stage is one atomic nanosecond sum, added to once per batch (or
 * per chunk) by the thread that ran the stage, never per sample.
 *
 * Steady state. The sums run from the loader's start; at the first batch
 * handed out the consumer takes a snapshot (`first`), and at the start of a
 * replay another (`end`), so that a report describes loading after the
 * pipeline filled and before the replay began. The snapshots and the
 * consumer's own clocks are written by the consumer under the core's lock;
 * the sums are atomics, written by any thread. */
#ifndef PL_LOADER_TIMING_H
#define PL_LOADER_TIMING_H

#include "core/common.h"

#include <stdatomic.h>

typedef enum {
  PL_ST_READ = 0,   /* workers: reading and decoding samples */
  PL_ST_TRANSFORM,  /* workers: host transforms; nested inside READ, which
                       reports its time less this */
  PL_ST_BUFWAIT,    /* workers: a job to do, no free batch buffer */
  PL_ST_STAGE,      /* workers: fill time that is neither read nor
                       transform (staging buffers, queueing copies) */
  PL_ST_IDLE,       /* workers: nothing to claim (prefetch full) */
  PL_ST_DEVXFORM,   /* device transforms */
  PL_ST_HOLD,       /* consumer: handed out -> released */
  PL_ST_COUNT_
} pl_stage;

/* The sums, at one moment. */
typedef struct pl_stage_snap {
  uint64_t ns[PL_ST_COUNT_];
  uint64_t released;   /* batches given back */
  double copy_s;       /* from the backend's stats */
  uint64_t bytes_copied;
  double process_cpu_s;
  double worker_cpu_s; /* the dataset's worker processes (0: none) */
  double t;            /* when (pl_now) */
} pl_stage_snap;

typedef struct pl_timing {
  int on;                         /* config.timings */
  _Atomic uint64_t ns[PL_ST_COUNT_];
  _Atomic uint64_t released;
  /* The consumer's side [mu]. */
  double t_first_call;  /* first pl_loader_next began (0: not yet) */
  double t_last;        /* last loaded batch handed out */
  double wait_s;        /* consumer waits after the first batch */
  uint64_t batches, samples; /* loaded batches after the first */
  int have_first, have_end;
  pl_stage_snap first, end;
  double startup_s;
  /* The replay [mu]. */
  uint64_t replayed;
  double t_replay0, t_replay_last, replay_wait_s;
  double link_bytes_per_s; /* fixed at create */
} pl_timing;

/* Adds now - t0 to stage st; returns now, so that the next stage's clock
 * starts without another read. A no-op returning 0 when timings are off. */
static inline double pl_stage_add(pl_timing *tm, pl_stage st, double t0) {
  if (!tm->on)
    return 0;
  double now = pl_now();
  double d = now - t0;
  if (t0 > 0 && d > 0)
    atomic_fetch_add_explicit(&tm->ns[st], (uint64_t)(d * 1e9),
                              memory_order_relaxed);
  return now;
}

/* One fill's time: its reads, and the rest (staging, copies queued). */
static inline void pl_timing_filled(pl_timing *tm, uint64_t read_ns,
                                    uint64_t busy_ns) {
  if (!tm->on)
    return;
  atomic_fetch_add_explicit(&tm->ns[PL_ST_READ], read_ns,
                            memory_order_relaxed);
  if (busy_ns > read_ns)
    atomic_fetch_add_explicit(&tm->ns[PL_ST_STAGE], busy_ns - read_ns,
                              memory_order_relaxed);
}

/* A clock read only when timings are on (0 otherwise). */
static inline double pl_stage_now(const pl_timing *tm) {
  return tm->on ? pl_now() : 0;
}

#endif /* PL_LOADER_TIMING_H */
