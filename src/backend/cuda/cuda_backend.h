/* The CUDA backend's shared state, and what each of its files provides.
 * Not a public header. One file per concern; the calls between them form
 * a tree rooted at backend_cuda.c (the lifetime and the vtable):
 *
 *   backend_cuda.c  create / destroy / stats, the caps, the vtable
 *   consumer.c      deliver, wait_stream, wait_host, release, read_back,
 *                   sync
 *   submit.c        fill_begin, submit, fill_abort, device_dst: the worker
 *                   side, and the
 *                   copies themselves (one copy, a cudaMemcpyBatchAsync, or
 *                   a loop where the driver lacks it), and their timing
 *   buffers.c       batch buffers: device memory, their events, and the
 *                   timing events of batches copied with no staging buffer
 *   regions.c       dataset memory page-locked in place (direct mode)
 *   staging_pool.c  the page-locked staging buffers (staging_pool.h)
 *   device.c        device binding, CUDA errors, events (device.h)
 *   transform_stream.c  device transforms after a batch's copies, on a
 *                   stream of their own (kernels: transform.cu)
 *
 * Events, not host waits, order the three parties:
 *
 *   worker:   [stream waits buf.released] stage.start . copies .
 *             [buf.done on the batch's last submit] . stage.done
 *   consumer: deliver (sync mode: wait done) / wait_stream (its stream
 *             waits done) / release (records buf.released on its stream)
 *   worker:   fill_begin takes a staging buffer whose stage.done completed
 *   reader:   device_dst (a reader that writes m->data itself, such as the
 *             GPU decode's crops): its stream waits buf.released and
 *             buf.done (the last transform read the staged bytes), and
 *             its writes end before the batch's first submit
 *
 * Per-buffer state (cuda_buf) is ordered by the loader, which never runs
 * two calls on one buffer at once except wait_host / read_back / stats,
 * which only read events. All copies go on one non-blocking stream, so a
 * batch's last event also covers its earlier pieces. */
#ifndef PL_CUDA_BACKEND_H
#define PL_CUDA_BACKEND_H

#include "backend/backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/staging_pool.h"

#include <stdatomic.h>

/* Copy time is measured on the staging buffer's events when the batch has
 * one (they are waited on before reuse anyway, so the time is read at no
 * extra wait); a batch with none (direct mode, every field in place) has
 * its own pair. */
typedef struct cuda_buf {
  cudaEvent_t done;     /* the last copy into it finished */
  cudaEvent_t released; /* the consumer's last use of it */
  cudaEvent_t copied;   /* transforms: the staged bytes landed (engine
                           stream); `done` then follows the kernels */
  int has_released;     /* `released` recorded since the last copy */
  pl_stage *stage;      /* attached between fill_begin and submit */
  cudaEvent_t t_start, t_done; /* made on first stage-less copy */
  int timing; /* t_start/t_done time a copy not yet in copy_ns */
  /* The arrays cudaMemcpyBatchAsync takes, `cap` entries. */
  void **dsts;
  const void **srcs;
  size_t *sizes;
  int cap;
} cuda_buf;

typedef struct cuda_backend {
  pl_backend base;
  int non_blocking;
  uint64_t batch_bytes; /* the plan's: no batch buffer is larger */
  const pl_logger *log;
  cudaStream_t stream;
  pl_stage_pool pool;
  /* Direct mode (regions.c): the plan's regions, page-locked in place at
   * create and unregistered at destroy; read-only in between. */
  void **sources;
  int nsources;
  uint64_t source_bytes;
  atomic_int no_batch_api; /* cudaMemcpyBatchAsync unsupported: loop */
  /* Device transforms (transform_stream.c): the plan, where the output lies in a
   * buffer, the kernels' own stream, the tables in device memory. */
  const pl_xform_plan *xf;
  uint64_t xf_out_off;
  cudaStream_t xstream;
  void *xtable;
  _Atomic uint64_t batches_copied, bytes_copied, copy_ns;
  double link_rate; /* bytes/s, measured once by link_rate; < 0: failed */
} cuda_backend;

static inline cuda_backend *cb_of(pl_backend *be) {
  return (cuda_backend *)be;
}

static inline int cuda_dev(const cuda_backend *be) {
  return be->base.device_index;
}

/* buffers.c */
pl_status pl_cuda_buf_alloc(pl_backend *b, pl_bufmem *m, pl_error *err);
void pl_cuda_buf_free(pl_backend *b, pl_bufmem *m);
/* The timed events around a copy into cb: the staging buffer's when one
 * is attached (the pool reads them), else cb's own (made on first use; the
 * previous copy's time is added to be->copy_ns first if it finished). */
pl_status pl_cuda_buf_timing(cuda_backend *be, cuda_buf *cb,
                             cudaEvent_t *start, cudaEvent_t *done,
                             pl_error *err);
/* Room for n entries in cb's batch-copy arrays. */
pl_status pl_cuda_buf_arrays(cuda_buf *cb, int n, pl_error *err);

/* submit.c */
pl_status pl_cuda_fill_begin(pl_backend *b, pl_bufmem *m, pl_error *err);
pl_status pl_cuda_submit(pl_backend *b, pl_bufmem *m, const pl_span *sp,
                         int n, int flags, pl_error *err);
void pl_cuda_fill_abort(pl_backend *b, pl_bufmem *m);
pl_status pl_cuda_device_dst(pl_backend *b, pl_bufmem *m, int *device,
                             void **events, pl_error *err);

/* consumer.c */
pl_status pl_cuda_deliver(pl_backend *b, pl_bufmem *m, pl_error *err);
pl_status pl_cuda_wait_stream(pl_backend *b, pl_bufmem *m, void *stream,
                              pl_error *err);
pl_status pl_cuda_wait_host(pl_backend *b, pl_bufmem *m, pl_error *err);
void pl_cuda_release(pl_backend *b, pl_bufmem *m, void *stream);
pl_status pl_cuda_read_back(pl_backend *b, pl_bufmem *m, uint64_t offset,
                            void *dst, uint64_t n, pl_error *err);
pl_status pl_cuda_sync(pl_backend *b, pl_error *err);

/* transform_stream.c: device transforms (be->xf). setup at create (stream,
 * tables); before_copy on the engine stream before a batch's first copy
 * into a buffer (the buffer's last transform has read its staged bytes);
 * complete after its last copy: queues the kernels and records cb->done
 * after them (without a plan: records cb->done on the engine stream).
 * destroy at backend destroy. */
pl_status pl_cuda_xform_setup(cuda_backend *be, pl_error *err);
pl_status pl_cuda_xform_before_copy(cuda_backend *be, cuda_buf *cb,
                                    pl_error *err);
pl_status pl_cuda_xform_complete(cuda_backend *be, pl_bufmem *m,
                                 pl_error *err);
void pl_cuda_xform_destroy(cuda_backend *be);

/* regions.c: page-locks the n regions (device current); on failure none
 * stays locked. unregister: the stream is synchronized. */
pl_status pl_cuda_regions_register(cuda_backend *be, const pl_region *r, int n,
                                   pl_error *err);
void pl_cuda_regions_unregister(cuda_backend *be);

/* link.c: the vt's link_rate (a short pinned copy, timed). */
double pl_cuda_link_rate(pl_backend *b);

#endif /* PL_CUDA_BACKEND_H */
