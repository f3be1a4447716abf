/* Internals shared by the CUDA backend's files: backend_cuda.c (staging
 * buffers, batch buffers, the consumer side) and backend_cuda_direct.c
 * (copies straight from the dataset's memory). Not a public header. */
#ifndef PL_BACKEND_CUDA_H
#define PL_BACKEND_CUDA_H

#include "backend/backend.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdatomic.h>

typedef enum { STAGE_EMPTY = 0, STAGE_FREE, STAGE_BUSY } stage_state;
typedef enum { PIN_REGISTER = 0, PIN_HOSTALLOC } pin_method;

typedef struct staging {
  stage_state state; /* [mu] EMPTY: not allocated; BUSY: a filler has it */
  int copied;        /* [mu] `done` was recorded at least once */
  uint64_t seq;      /* [mu] order of its last copy: the oldest is waited on */
  int timing;        /* [owner] start/done time a copy not yet in copy_ns */
  void *p;
  int fd;               /* pyworkers: p's memfd (cfg.shared_memory), or -1 */
  int pinned;           /* p is page-locked (counted in pinned_bytes) */
  int registered;       /* pinned by cudaHostRegister (else cudaHostAlloc) */
  cudaEvent_t start, done; /* around the last copy out of it (timed) */
} staging;

/* Copy time is measured on the staging buffer's events, not the batch
 * buffer's: a staging buffer is waited on before reuse anyway, so its
 * timing is read when it is known to be complete, at no extra wait. */
typedef struct cuda_buf {
  cudaEvent_t done;     /* the last copy into it finished */
  cudaEvent_t released; /* the consumer's last use of it */
  int has_released;     /* `released` recorded since the last copy */
  staging *stage;       /* attached between fill_begin and fill_end */
  /* Direct mode, batches with no staging buffer: their own timed events
   * (made on first use) and the arrays cudaMemcpyBatchAsync takes. */
  cudaEvent_t t_start, t_done;
  int timing; /* t_start/t_done time a copy not yet in copy_ns */
  void **dsts;
  const void **srcs;
  size_t *sizes;
  int cap;
} cuda_buf;

typedef struct cuda_backend {
  pl_backend base;
  pl_backend_config cfg;
  cudaStream_t stream;
  uint64_t stage_bytes; /* mapped bytes of one staging buffer */
  uint64_t budget;      /* pinned bytes allowed */
  int numa_node;        /* -1: unknown */
  pin_method method;

  pthread_mutex_t mu;
  pthread_cond_t cv; /* a staging buffer became FREE or EMPTY */
  staging *stages;   /* [mu] cfg.staging_buffers entries */
  uint64_t seq;      /* [mu] */
  uint64_t pin_reserved; /* [mu] pinned bytes held or being pinned */

  /* Direct mode (backend_cuda_direct.c): dataset memory registered for
   * the copy engine to read in place, unregistered at destroy. Set once by
   * enable_direct before the first fill, read-only after. */
  void **sources;
  int nsources;
  atomic_int no_batch_api; /* cudaMemcpyBatchAsync unsupported: loop */

  atomic_int warned; /* the one pinning-fallback warning was logged */
  _Atomic uint64_t batches_copied, bytes_copied, pinned_bytes,
      pinned_fallbacks, copy_ns;
} cuda_backend;

static inline cuda_backend *cb_of(pl_backend *be) {
  return (cuda_backend *)be;
}

/* Status for a CUDA failure: running out of memory is PL_NO_MEMORY, the
 * rest PL_CUDA; the message names the call, as "cudaMalloc: out of memory". */
pl_status pl_cuda_fail(pl_error *err, cudaError_t rc, const char *call);

#define CUDA_TRY(call, err)                       \
  do {                                            \
    cudaError_t ct_rc_ = (call);                  \
    if (ct_rc_ != cudaSuccess)                    \
      return pl_cuda_fail(err, ct_rc_, #call);    \
  } while (0)

/* Makes the backend's device current in this thread and returns the
 * caller's (-1: none), which pl_cuda_dev_leave restores: a consumer thread
 * working on another device, or a worker with none yet, must see no
 * change. */
int pl_cuda_dev_enter(cuda_backend *be, pl_status *s, pl_error *err);
void pl_cuda_dev_leave(cuda_backend *be, int prev);

/* Runs `call` (a pl_status expression) with the device current. */
#define WITH_DEVICE(be, err, call)                       \
  do {                                                   \
    pl_status wd_s_;                                     \
    int wd_prev_ = pl_cuda_dev_enter(be, &wd_s_, err);   \
    if (wd_s_ == PL_OK)                                  \
      wd_s_ = (call);                                    \
    pl_cuda_dev_leave(be, wd_prev_);                     \
    return wd_s_;                                        \
  } while (0)

/* Adds the staging buffer's last copy to copy_ns; its `done` event is
 * known to be complete. Called by whoever owns st ([mu] or BUSY). */
void pl_cuda_account(cuda_backend *be, staging *st);

/* Gives a staging buffer back; `copied`: its `done` was just recorded. */
void pl_cuda_stage_put(cuda_backend *be, staging *st, int copied);

/* backend_cuda_direct.c: the vt's enable_direct and fill_spans (direct
 * mode and chunked gathers), and the cleanup of what they made (a
 * buffer's, then the backend's at destroy). */
pl_status pl_cuda_enable_direct(pl_backend *b, const pl_region *r, int n,
                                uint64_t stage_bytes, pl_error *err);
pl_status pl_cuda_fill_spans(pl_backend *b, pl_bufmem *m, const pl_span *sp,
                             int n, int flags, pl_error *err);
void pl_cuda_direct_buf_free(cuda_backend *be, cuda_buf *cb);
void pl_cuda_direct_destroy(cuda_backend *be);

#endif /* PL_BACKEND_CUDA_H */
