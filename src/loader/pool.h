/* The batch buffers (pool.c): each a pl_batch in one of the slot states
 * below, all of them in pl_core.pool. A buffer is allocated by the
 * consumer (create, or when the consumer holds more than the prefetch),
 * claimed by a filler, published, delivered, given back. */
#ifndef PL_LOADER_POOL_H
#define PL_LOADER_POOL_H

#include "backend/backend.h"
#include "loader/order.h"
#include "loader/sampler.h"

#include <stdatomic.h>

typedef enum {
  SLOT_FREE = 0, /* in the free list */
  SLOT_FILLING,  /* a worker (or the consumer, with 0 workers) fills it */
  SLOT_READY,    /* filled, waiting to be delivered */
  SLOT_FAILED,   /* its job failed: err says why */
  SLOT_HELD,     /* handed to the consumer */
  SLOT_CACHED    /* kept for the replay (replay.c), out of circulation */
} slot_state;

typedef struct pl_core pl_core;

struct pl_batch {
  pl_core *core;
  pl_bufmem mem;
  slot_state state; /* [mu] */
  uint64_t gen;     /* [mu] stream of the job */
  uint64_t job;     /* [mu] job number in that stream */
  uint64_t epoch;   /* the rest: written when claimed or by the filler */
  uint64_t index;
  pl_epoch_plan plan;
  pl_order *order; /* the explicit order it was claimed from, or NULL */
  uint32_t size;
  uint64_t *sample_idx; /* batch_size entries */
  pl_span *spans;       /* plan.max_spans entries */
  uint8_t *written;     /* plan.device_writes: batch_size flags, the fields
                           the reader wrote on the device (pl_device_dst) */
  pl_error err;
  /* Stall detection: the sample being read and since when (timeout_s). */
  _Atomic uint64_t cur_sample;
  _Atomic double cur_t0;
  /* Timings (timing.h): when it was handed out; reads of this fill. */
  double t_out;
  uint64_t read_ns;
  /* Turns (loader_fill.c): its claim's number in the core's claim order,
   * and whether its fill still holds the turn. [mu] */
  uint64_t claim_seq;
  int turn_held;
  /* When it was claimed: batches of its stream the consumer could take in
   * order, the prefetch depth, batches taken since the consumer last
   * waited (pl_batch_info). [mu] */
  uint32_t ready_ahead, depth, since_wait;
  /* The replay (replay.c): kept for it, or a handle on a kept batch. */
  int cached;
  pl_batch *replay_of;
};

/* [mu] */
typedef struct pl_pool {
  pl_batch **slots; /* all buffers allocated so far */
  int nslots;
  int growing; /* buffers being allocated outside the lock */
  int max_slots;
} pl_pool;

/* A new buffer for c's batches (lock not needed: create, or grow). */
pl_status pl_pool_slot_new(pl_core *c, pl_batch **out, pl_error *err);
void pl_pool_slot_free(pl_core *c, pl_batch *b);
/* Adds one buffer to the pool; lock held on entry and exit, released while
 * allocating. */
pl_status pl_pool_grow(pl_core *c, pl_error *err);
/* A free buffer, or NULL. [mu] */
pl_batch *pl_pool_find_free(pl_core *c);
/* The buffer of the current stream's `job`, being filled or finished (not
 * free, held or cached), or NULL. [mu] */
pl_batch *pl_pool_find_job(pl_core *c, uint64_t job);
/* Whether every buffer there may be is held by the consumer. [mu] */
int pl_pool_all_held(const pl_core *c);

#endif /* PL_LOADER_POOL_H */
