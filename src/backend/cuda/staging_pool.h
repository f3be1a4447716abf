/* The staging pool: the page-locked host buffers workers gather batches
 * (or chunks of them) into, and the copy engine reads from.
 *
 * Size. `count` buffers of `bytes` each (both from the copy plan), the
 * first made with the pool (pl_stage_pool_first) and the others on first
 * need, pinned once and reused until destroy: nothing is
 * pinned, unpinned, allocated or freed per batch. There are as many as
 * the workers need at once (prefetch-deep for whole batches, two per
 * worker for chunks), not one per batch buffer.
 *
 * Budget. At most `budget` bytes of the buffers are page-locked (the plan's
 * pinned budget less what direct mode locked in place). A buffer that
 * would exceed it, or whose pinning fails, is pageable instead: the copy
 * is slower but correct; it is counted in `fallbacks` and logged once.
 *
 * Locking. `mu` guards the slot table (state, copied, seq) and the pinned
 * reservation; it is held only for bookkeeping and cudaEventQuery, never
 * across a blocking CUDA call or an allocation (a slot being made or being
 * waited for is BUSY, so nobody else touches it meanwhile). `cv` wakes a
 * filler waiting for a buffer. A BUSY buffer belongs to the one thread that
 * took it, which may read and write its memory and events without the
 * lock. Counters are atomics.
 *
 * Reuse. A buffer goes back FREE with its copy still in flight; a filler
 * takes a FREE one whose copy has finished, else makes a new one (up to
 * count), else waits on the host for the oldest copy, in the worker, off
 * the consumer's path. Its `start`/`done` events bracket its last copy,
 * whose time is added to copy_ns once `done` is known complete. The
 * caller has the device current for every call. */
#ifndef PL_CUDA_STAGING_POOL_H
#define PL_CUDA_STAGING_POOL_H

#include "core/common.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdatomic.h>

typedef enum { STAGE_EMPTY = 0, STAGE_FREE, STAGE_BUSY } pl_stage_state;
typedef enum { PIN_REGISTER = 0, PIN_HOSTALLOC } pl_pin_method;

typedef struct pl_stage {
  pl_stage_state state; /* [mu] EMPTY: not allocated; BUSY: a filler has it */
  int copied;           /* [mu] `done` was recorded at least once */
  uint64_t seq;         /* [mu] order of its last copy: the oldest is waited on */
  int timing;           /* [owner] start/done time a copy not yet in copy_ns */
  void *p;              /* `bytes` of host memory */
  int fd;               /* pyworkers: p's memfd (cfg.shared), else -1 */
  int pinned;           /* p is page-locked (counted in pinned_bytes) */
  int registered;       /* pinned by cudaHostRegister (else cudaHostAlloc) */
  cudaEvent_t start, done; /* around the last copy out of it (timed) */
} pl_stage;

typedef struct pl_stage_pool_config {
  uint64_t bytes;   /* one buffer, rounded up to pages here; 0: no staging */
  int count;        /* >= 1 */
  uint64_t budget;  /* page-locked bytes allowed */
  int pin;          /* pin_memory: 0 makes every buffer pageable, silently */
  pl_pin_method method;
  int numa_node;    /* -1: no preference */
  int shared;       /* pages from a memfd another process maps (a worker
                       process writes them); pinned by registering them */
  const pl_logger *log;
  const char *name; /* the backend's, for the warning; outlives the pool */
} pl_stage_pool_config;

typedef struct pl_stage_pool {
  pl_stage_pool_config cfg; /* fixed; cfg.bytes is the mapped size */
  pthread_mutex_t mu;
  pthread_cond_t cv;  /* a buffer became FREE or EMPTY */
  pl_stage *slots;    /* [mu] cfg.count entries */
  uint64_t seq;       /* [mu] */
  uint64_t reserved;  /* [mu] pinned bytes held or being pinned */
  atomic_int warned;  /* the one fallback warning was logged */
  _Atomic uint64_t pinned_bytes, fallbacks, copy_ns;
} pl_stage_pool;

pl_status pl_stage_pool_init(pl_stage_pool *p, const pl_stage_pool_config *cfg,
                             pl_error *err);
/* Frees every buffer; no copy may still read one (the caller synchronized
 * the stream). Safe on a zeroed pool and on one whose init failed. */
void pl_stage_pool_destroy(pl_stage_pool *p);

/* Makes the first buffer now, at create: a loader's first batch then does
 * not wait for its buffer behind the others being made at the same time
 * (on the H200 machine six 12 MB buffers made at once by six workers took
 * 8-19 ms each, and the first batch's came last; one made alone takes
 * about 10, now inside create). Best effort: a failure is met again, and
 * reported, by the acquire that needs the buffer. */
void pl_stage_pool_first(pl_stage_pool *p);

/* Takes a buffer for a filler (BUSY, its last copy finished). */
pl_status pl_stage_acquire(pl_stage_pool *p, pl_stage **out, pl_error *err);
/* Gives a BUSY buffer back; `copied`: a copy out of it was just queued,
 * bracketed by its start/done events. */
void pl_stage_put(pl_stage_pool *p, pl_stage *st, int copied);

/* Adds the time of finished copies no filler has looked at yet. */
void pl_stage_pool_poll(pl_stage_pool *p);

#endif /* PL_CUDA_STAGING_POOL_H */
