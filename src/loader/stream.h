/* The job stream's state (pl_core.stream, every field [mu]; the rules are
 * in loader_internal.h, "The job stream"). Batches are numbered jobs 0,
 * 1, 2, ... from the stream's start; its arithmetic is stream.c, its
 * restarts and skips stream.c too, the explicit epochs loader_order.c. */
#ifndef PL_LOADER_STREAM_H
#define PL_LOADER_STREAM_H

#include "loader/order.h"
#include "loader/sampler.h"

#include <stdatomic.h>

typedef struct pl_stream {
  uint64_t gen;             /* bumped by every restart */
  pl_order *order;          /* the explicit epoch `first`, or NULL */
  pl_order *then;           /* the explicit epoch queued after it, or NULL */
  pl_epoch_plan second;     /* then's plan */
  uint64_t base;            /* first's first job (0 but after a queue_order) */
  pl_epoch_plan first;      /* the stream's first epoch (may be partial) */
  pl_epoch_plan full;       /* plan of a whole epoch, epoch number aside */
  uint64_t next_claim;      /* next job a filler takes */
  uint64_t next_deliver;    /* next job the consumer takes */
  uint64_t waited_for;      /* 1 + the job the consumer last waited for
                               (0: none yet in this stream) */
  int end_pending;          /* the consumer owes an END_OF_EPOCH */
  uint64_t cur_epoch;       /* epoch of the next delivery (for empty epochs) */
  /* A failed batch the consumer was moved past (to the epoch's end, or to
   * the batch after it): a checkpoint taken now resumes at it, so that a
   * run restarted after the cause is mended loses nothing. Until the next
   * delivery or restart. */
  int failed_held;
  pl_epoch_plan failed_plan; /* its epoch and streams; start = its position */
  _Atomic uint64_t gen_now; /* copy of gen, read without the lock */
} pl_stream;

#endif /* PL_LOADER_STREAM_H */
