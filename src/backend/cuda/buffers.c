/* Batch buffers: device memory and the events that order its copies and
 * its consumers (see cuda_backend.h). */
#include "backend/cuda/cuda_backend.h"

#include <assert.h>
#include <stdlib.h>

static void buf_events_destroy(cuda_buf *cb) {
  if (cb->done)
    cudaEventDestroy(cb->done);
  if (cb->released)
    cudaEventDestroy(cb->released);
}

static pl_status device_alloc(pl_bufmem *m, pl_error *err) {
  if (PL_FAULT(PL_FAULT_DEVICE_ALLOC))
    return pl_cuda_fail(err, cudaErrorMemoryAllocation, "cudaMalloc");
  CUDA_TRY(cudaMalloc(&m->data, m->bytes ? m->bytes : 1), err);
  return PL_OK;
}

/* The buffer's state and memory; the device is current. */
static pl_status buf_make(pl_bufmem *m, pl_error *err) {
  cuda_buf *cb = pl_calloc(1, sizeof *cb);
  if (!cb)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = pl_cuda_event_new(&cb->done, cudaEventDisableTiming, err);
  if (s == PL_OK)
    s = pl_cuda_event_new(&cb->released, cudaEventDisableTiming, err);
  if (s == PL_OK)
    s = device_alloc(m, err);
  if (s != PL_OK) {
    buf_events_destroy(cb);
    free(cb);
    m->data = NULL;
    return s;
  }
  m->priv = cb;
  return PL_OK;
}

pl_status pl_cuda_buf_alloc(pl_backend *b, pl_bufmem *m, pl_error *err) {
  cuda_backend *be = cb_of(b);
  m->data = m->priv = m->host = NULL;
  if (m->bytes > be->batch_bytes)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "a %llu-byte batch buffer exceeds the %llu-byte batches "
                     "the backend was made for",
                     (unsigned long long)m->bytes,
                     (unsigned long long)be->batch_bytes);
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, err);
  if (s == PL_OK)
    s = buf_make(m, err);
  pl_cuda_leave(cuda_dev(be), prev);
  if (s != PL_OK)
    pl_error_prefix(err, "%llu-byte batch buffer on %s",
                    (unsigned long long)m->bytes, be->base.name);
  return s;
}

/* Time of a stage-less copy, read when the buffer is filled again or
 * freed (by then long finished; one still running is skipped rather than
 * waited for). */
static void buf_account(cuda_backend *be, cuda_buf *cb) {
  if (!cb->timing || cudaEventQuery(cb->t_done) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  cb->timing = 0;
  atomic_fetch_add(&be->copy_ns, pl_cuda_elapsed_ns(cb->t_start, cb->t_done));
}

static void buf_timing_free(cuda_backend *be, cuda_buf *cb) {
  if (!cb->t_done)
    return;
  cudaEventSynchronize(cb->t_done);
  buf_account(be, cb);
  cudaEventDestroy(cb->t_start);
  cudaEventDestroy(cb->t_done);
}

void pl_cuda_buf_free(pl_backend *b, pl_bufmem *m) {
  cuda_backend *be = cb_of(b);
  cuda_buf *cb = m->priv;
  int prev;
  (void)pl_cuda_enter(cuda_dev(be), &prev, NULL);
  if (cb) {
    /* Neither our copies nor the consumer's last work may still use it.
     * The stream, not just `done`: a batch that failed halfway through its
     * chunks queued copies that no `done` covers. */
    cudaStreamSynchronize(be->stream);
    cudaEventSynchronize(cb->done);
    if (cb->has_released)
      cudaEventSynchronize(cb->released);
    if (cb->stage)
      pl_stage_put(&be->pool, cb->stage, 0);
    buf_timing_free(be, cb);
    buf_events_destroy(cb);
    free(cb->dsts);
    free(cb->srcs);
    free(cb->sizes);
    free(cb);
  }
  if (m->data)
    cudaFree(m->data);
  (void)cudaGetLastError();
  pl_cuda_leave(cuda_dev(be), prev);
  m->data = m->priv = m->host = NULL;
}

pl_status pl_cuda_buf_timing(cuda_backend *be, cuda_buf *cb,
                             cudaEvent_t *start, cudaEvent_t *done,
                             pl_error *err) {
  if (cb->stage) {
    *start = cb->stage->start;
    *done = cb->stage->done;
    return PL_OK;
  }
  if (!cb->t_done) {
    PL_TRY(pl_cuda_event_new(&cb->t_start, cudaEventDefault, err));
    pl_status s = pl_cuda_event_new(&cb->t_done, cudaEventDefault, err);
    if (s != PL_OK) {
      cudaEventDestroy(cb->t_start);
      cb->t_start = NULL;
      return s;
    }
  }
  buf_account(be, cb);
  *start = cb->t_start;
  *done = cb->t_done;
  return PL_OK;
}

pl_status pl_cuda_buf_arrays(cuda_buf *cb, int n, pl_error *err) {
  if (n <= cb->cap)
    return PL_OK;
  void **d = pl_realloc(cb->dsts, (size_t)n * sizeof *d);
  if (d)
    cb->dsts = d;
  const void **s = d ? pl_realloc(cb->srcs, (size_t)n * sizeof *s) : NULL;
  if (s)
    cb->srcs = s;
  size_t *z = s ? pl_realloc(cb->sizes, (size_t)n * sizeof *z) : NULL;
  if (z)
    cb->sizes = z;
  if (!z)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for %d copies", n);
  cb->cap = n;
  assert(cb->dsts && cb->srcs && cb->sizes);
  return PL_OK;
}
