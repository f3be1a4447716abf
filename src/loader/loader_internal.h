/* The loader's shared state: pl_core, made of sub-structs each with a
 * header of its own (layout.h, pool.h, stream.h, order.h, timing.h,
 * tune.h), and the calls the loader's files make to each other.
 *
 * Ownership. A pl_loader is a thin handle on a pl_core. The core, with its
 * backend and batch buffers, is reference-counted: one reference for the
 * loader handle and one per batch the consumer holds, so a batch stays valid
 * after pl_loader_destroy and the memory is freed by whoever lets go last.
 *
 * Locking. One mutex (core->mu) guards every field marked [mu]. Workers
 * never hold it while reading samples or talking to the backend's copy
 * engine; the consumer never holds it while filling a batch (num_workers 0)
 * or waiting on the device. Three condition variables: work_cv wakes
 * active workers (a job became claimable, or stop), park_cv the tuner's
 * parked ones (it changed how many are active, or stop), ready_cv the
 * consumer (a batch became ready or failed, or a buffer was released).
 *
 * The parts, each a file (and the state it owns a sub-struct of pl_core
 * with a header of its own):
 *   loader_create.c  create and destroy: options, plan, backend, layout
 *   core.c           the core's references, its free
 *   pool.c           the batch buffers (pool.h: pl_batch, pl_pool)
 *   stream.c         the job stream: restarts, skips, claims and
 *                    publishes, its arithmetic
 *                    (stream.h: pl_stream; order.h: explicit epochs)
 *   threads.c        the worker threads: claim, fill, publish
 *   consumer.c       pl_loader_next: delivery, failures, stall detection
 *   loader_order.c   set_order, queue_order, set_epoch
 *   stats.c          counters, device, sync (pl_counters here)
 *   loader_fill.c, loader_direct.c  filling one batch
 *   batch.c, state.c, replay.c, timing.c, tune.c  as their headers say
 * Calls go one way (scripts/check-layers.py checks that no circle of
 * files forms): create, the consumer and the workers call the pool, the
 * stream, the fill and core.c; the fill calls loader_direct.c; the pool,
 * the stream and the order call none of those above them.
 *
 * The job stream. Batches are numbered jobs 0, 1, 2, ... from the stream's
 * start (creation, set_epoch, set_order or load_state start a new stream
 * and bump `gen`). The first epoch of a stream may start mid-epoch (a
 * restored checkpoint); every later epoch is whole. Workers claim jobs in
 * order, at most `prefetch` ahead of the consumer; the consumer takes them
 * in order. An explicit epoch (set_order) is followed by nothing, or by
 * the one explicit epoch queued after it (queue_order), whose jobs come
 * next in the same stream; queueing one more drops the first, once fully
 * delivered, and `base` moves on to the next epoch's first job.
 * A job whose result is no longer wanted (its epoch was ended by an error,
 * or its stream was replaced) is "stale" and its buffer simply goes back to
 * the free list. */
#ifndef PL_LOADER_INTERNAL_H
#define PL_LOADER_INTERNAL_H

#include "backend/backend.h"
#include "data/dataset.h"
#include "loader/layout.h"
#include "loader/order.h"
#include "loader/pool.h"
#include "loader/sampler.h"
#include "loader/stream.h"
#include "loader/timing.h"
#include "loader/tune.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <unistd.h>

/* One worker thread. Lives in the core, not the handle: a worker detached
 * by destroy (stuck in a callback) still holds its core reference and
 * writes `exited` when its callback finally returns. */
typedef struct pl_worker {
  pl_core *core;
  pthread_t thread;
  int exited; /* [mu] */
} pl_worker;

/* The replay (replay.c) [mu]: the batches kept, and whether handing them
 * out again has begun. */
typedef struct pl_replay {
  pl_batch **cache;
  uint32_t n, next;
  uint64_t delivered; /* loaded batches handed out so far */
  int active;
} pl_replay;

/* What pl_loader_stats reports (stats.c). [mu] except the atomics. */
typedef struct pl_counters {
  uint64_t batches_delivered, samples_delivered, bytes_delivered;
  double consumer_wait_s;
  _Atomic uint64_t worker_busy_ns;
  _Atomic uint64_t batches_direct;
} pl_counters;

struct pl_core {
  pthread_mutex_t mu;
  pthread_cond_t work_cv, park_cv, ready_cv;
  /* Turns (loader_fill.c): claims so far, and the claim whose fill may
   * call an in-order dataset's read_batch now. [mu] */
  pthread_cond_t turn_cv;
  uint64_t claims, turn;
  int refs; /* [mu] the loader handle + batches held + running workers */
  /* The process that created the core. In a forked child the lock may
   * have been copied held and the workers do not exist: every entry point
   * checks this first and touches nothing shared (pl_core_foreign). */
  pid_t pid;
  pl_worker *workers; /* nworkers of them, fixed at create */
  int nworkers;

  pl_dataset *ds;
  pl_backend *be;
  pl_logger log;
  pl_sampler sampler;
  pl_loader_config cfg;

  pl_batch_layout layout; /* layout.h: where a batch's bytes go */
  pl_pool pool;           /* pool.h: the batch buffers [mu] */
  int prefetch;           /* jobs claimable ahead of the consumer */
  pl_stream stream;       /* stream.h: the job stream [mu] */
  atomic_int stop;        /* [mu] to write; read anywhere */
  pl_counters count;

  pl_timing tm;       /* per-stage clocks (timing.c) */
  atomic_int decode_off_logged; /* decode_setup.c */
  pl_replay replay;   /* replay.c */
  pl_tune tune;       /* tune.c: active workers, the tuned depth */
  atomic_int worker_ids; /* each worker takes the next id at start */
};

struct pl_loader {
  pl_core *core;
  int nthreads; /* workers started (and not stopped) */
};

/* Whether nobody wants this batch any more (destroy, set_epoch, restore):
 * checked between samples so that destroy waits for one sample, not a
 * whole batch. Read without the lock: a stale answer only delays. */
static inline int pl_core_abandoned(pl_core *c, const pl_batch *b) {
  return atomic_load_explicit(&c->stop, memory_order_relaxed) ||
         atomic_load_explicit(&c->stream.gen_now, memory_order_relaxed) !=
             b->gen;
}

/* Fills a claimed batch (loader_fill.c) the way c->layout.copy says: sample
 * indices, the gather and the copies; failures in b->err. Lock not held. */
void pl_fill(pl_core *c, pl_batch *b);

/* Direct mode's fill of one batch (loader_direct.c, called by pl_fill):
 * spans straight from the dataset's memory, the small fields gathered. */
pl_status pl_direct_fill(pl_core *c, pl_batch *b);

/* Whether the stream is made of explicit epochs: an order given
 * (set_order), or config.explicit_order (then, before the first order or
 * after a set_epoch, an empty explicit epoch). [mu] */
static inline int pl_core_explicit(const pl_core *c) {
  return c->stream.order != NULL || c->cfg.explicit_order;
}

/* Whether the caller is a forked child of the process that made c. */
static inline int pl_core_foreign(const pl_core *c) {
  return getpid() != c->pid;
}
/* The error for a use of an inherited loader in a forked child. */
pl_status pl_core_forked(const pl_core *c, pl_error *err);

/* Timings (timing.c). init: at create, after the backend. returned: at
 * the end of each pl_loader_next, b the batch handed out (or NULL). [mu] */
void pl_timing_init(pl_core *c);
void pl_timing_returned(pl_core *c, double t0, double now, pl_batch *b);
/* A batch given back: its hold time. [mu] */
void pl_timing_released(pl_core *c, pl_batch *b);
/* The stage sums and clocks now (the report's and the tuner's windows);
 * any thread, lock not needed. */
void pl_timing_snap(pl_core *c, pl_stage_snap *s);

/* The replay (replay.c). setup: at create (sizes the cache). on_deliver: a
 * loaded batch was handed out; it may be kept, and the replay begin. next:
 * pl_loader_next while the replay is active. release: the batch was a
 * replay handle; frees it (returns 1), else 0. [mu] except setup/free. */
pl_status pl_replay_setup(pl_core *c, pl_error *err);
void pl_replay_on_deliver(pl_core *c, pl_batch *b);
pl_status pl_replay_next(pl_core *c, pl_batch **out, pl_error *err);
int pl_replay_release(pl_core *c, pl_batch *b);
void pl_replay_free(pl_core *c);

/* decode_setup.c: cfg.decode gpu / auto for an image folder: c->ds becomes
 * its GPU view (or, auto without a GPU path, stays, with a notice). */
pl_status pl_decode_setup(pl_core *c, pl_error *err);
/* After each pl_loader_next, without the lock: logs (WARN, once) that the
 * GPU decode path turned off after an error, and why. */
void pl_decode_poll(pl_core *c);

/* Autotuning (tune.c). setup: at create, before the layout: resolves
 * PL_AUTO into threads to start and a first depth, and sets active. tick:
 * the consumer's thread after each pl_loader_next, lock not held; returns
 * the batch buffers the pool should have (0: no change). */
void pl_tune_setup(pl_core *c);
int pl_tune_tick(pl_core *c);
/* Whether worker `id` may claim jobs now. [mu] */
static inline int pl_worker_active(const pl_core *c, int id) {
  return id < c->tune.active;
}

/* One more job may be claimed: wake an active worker. Parked workers wait
 * on park_cv, so they cannot swallow the signal (a lost wakeup that once
 * hung auto-tuned loaders on a 16-core machine), and are not woken for
 * every job either (a broadcast per job woke every parked thread for
 * nothing, at up to 10,000 jobs/s on CIFAR). A signal glibc loses (bug
 * 25847) is caught by the workers' recheck (threads.c, worker_wait). [mu] */
static inline void pl_wake_worker(pl_core *c) {
  pthread_cond_signal(&c->work_cv);
}

/* Every worker re-reads its state: stop, a restart, more buffers, or the
 * tuner changed `active` (a worker parked or unparked moves to the other
 * condition; the broadcast takes each waiter off the one it slept on).
 * [mu] */
static inline void pl_wake_all_workers(pl_core *c) {
  pthread_cond_broadcast(&c->work_cv);
  pthread_cond_broadcast(&c->park_cv);
}

/* Drop one reference; frees the core at zero. Takes the lock itself. */
void pl_core_unref(pl_core *c);
/* Frees the core; its last reference is gone. */
void pl_core_free(pl_core *c);

/* The job stream's arithmetic (stream.c), all [mu]: whether job exists in
 * the stream; for a job >= base that exists, its batch within its epoch,
 * that epoch's plan and its explicit order (or NULL); the first job of
 * `epoch` (the stream's end for an epoch past its last explicit one); and
 * where the next delivery stands: its epoch, the global position (in
 * the epoch's order, all ranks together) of its first sample and the
 * epoch's streams (sampler.h). */
int pl_core_job_exists(const pl_core *c, uint64_t job);
void pl_core_job_locate(const pl_core *c, uint64_t job, uint64_t *batch,
                        pl_epoch_plan *plan, pl_order **order);
uint64_t pl_core_epoch_first_job(const pl_core *c, uint64_t epoch);
void pl_core_position(const pl_core *c, uint64_t *epoch, uint64_t *start,
                      uint32_t *streams);

/* Batch b failed and the consumer is being moved past it: until the next
 * delivery, pl_core_position names b's own place (stream.h). [mu] */
void pl_core_hold_failed(pl_core *c, const pl_batch *b);

/* Start a new stream at (epoch, global start position); streams: that
 * epoch's (a saved state's), or 0 for the sampler's own. A fresh epoch
 * (start 0) always takes the sampler's own. [mu] held. */
void pl_core_restart(pl_core *c, uint64_t epoch, uint64_t start,
                     uint32_t streams);
/* The consumer gave up on the rest of `epoch` (an error): the next
 * delivery is the next epoch's first batch. [mu] */
void pl_core_skip_epoch(pl_core *c, uint64_t epoch);
/* Claims the next job into the free buffer b (stream.c); the sample
 * indices are computed later, by the filler, outside the lock. [mu] */
pl_batch *pl_core_claim(pl_core *c, pl_batch *b);
/* Publishes a filled buffer: ready, failed, or (its job stale) free. [mu] */
void pl_core_publish(pl_core *c, pl_batch *b);

/* The worker threads (threads.c). start: n threads, each with a core
 * reference. stop: each finishes its sample; one stuck past timeout_s is
 * detached. Lock not held. */
pl_status pl_workers_start(pl_loader *ld, int n, pl_error *err);
void pl_workers_stop(pl_loader *ld);

#endif /* PL_LOADER_INTERNAL_H */
