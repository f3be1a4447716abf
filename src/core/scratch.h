/* Working memory that outlives one call, so that a per-sample hot path
 * (decoding and resizing an image) allocates nothing once warmed up.
 *
 * A pl_scratch is a handful of growable buffers ("slots"; the user names
 * them): pl_scratch_get(s, slot, n) returns at least n bytes, reusing the
 * slot's buffer when it is large enough. Contents do not survive between
 * gets of the same slot. One scratch is used by one thread at a time.
 *
 * A pl_scratch_pool hands scratches to concurrent callers: take one, use
 * it for one sample, give it back. The pool holds at most as many as were
 * ever in use at once (the number of threads reading), reuses the most
 * recently given (its buffers are warm in cache), and frees them all at
 * destroy. Buffers grown past PL_SCRATCH_KEEP_BYTES for one odd sample (a
 * 100-megapixel image) are freed when the scratch is given back, so the
 * pool's memory stays what typical samples need. Allocations go through
 * the fault-injection build's PL_FAULT_ALLOC. */
#ifndef PL_SCRATCH_H
#define PL_SCRATCH_H

#include "core/common.h"

#include <pthread.h>

#define PL_SCRATCH_SLOTS 8
#define PL_SCRATCH_KEEP_BYTES (64ull << 20)

typedef struct pl_scratch {
  void *buf[PL_SCRATCH_SLOTS];
  size_t cap[PL_SCRATCH_SLOTS];
  struct pl_scratch *next; /* the pool's free list */
} pl_scratch;

/* At least n bytes (64-byte aligned) in `slot`; NULL when out of memory
 * (the slot's previous buffer is then freed). */
void *pl_scratch_get(pl_scratch *s, int slot, size_t n);

/* Frees the buffers of every slot (not s). */
void pl_scratch_release_all(pl_scratch *s);

typedef struct pl_scratch_pool {
  pthread_mutex_t mu; /* guards free_list; held for a pointer swap only */
  pl_scratch *free_list;
} pl_scratch_pool;

void pl_scratch_pool_init(pl_scratch_pool *p);
/* A scratch for the calling thread's next sample; NULL when out of memory. */
pl_scratch *pl_scratch_take(pl_scratch_pool *p);
/* Gives s back (NULL is ignored); trims buffers over PL_SCRATCH_KEEP_BYTES. */
void pl_scratch_give(pl_scratch_pool *p, pl_scratch *s);
/* Frees every scratch; none may be taken. */
void pl_scratch_pool_destroy(pl_scratch_pool *p);

#endif /* PL_SCRATCH_H */
