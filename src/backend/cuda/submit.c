/* The worker side of the CUDA backend: a staging buffer for the gather
 * (fill_begin), and the one copy primitive (submit): a batch's spans,
 * queued on the backend's stream, one call per batch (a whole staged
 * batch is one span; direct mode is every run of samples in place plus one
 * span per gathered field) or one per chunk (chunked gathers).
 *
 * How the copies go: one span is one cudaMemcpyAsync; several are one
 * cudaMemcpyBatchAsync, which reaches the plain-copy rate for copies of 64
 * KiB and more (bench/results/direct-probe-h200-2026-12-01.md), or, with a
 * driver that lacks it, a loop of cudaMemcpyAsync, correct but slower. */
#include "backend/cuda/cuda_backend.h"
#include "backend/host_pages.h" /* pl_fd_id */

#include <assert.h>

pl_status pl_cuda_fill_begin(pl_backend *b, pl_bufmem *m, pl_error *err) {
  cuda_backend *be = cb_of(b);
  cuda_buf *cb = m->priv;
  assert(cb && !cb->stage); /* one fill at a time, ended by submit/abort */
  if (be->pool.cfg.bytes == 0) /* direct mode with every field direct */
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "fill_begin: this backend has no staging buffers");
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, err);
  pl_stage *st = NULL;
  if (s == PL_OK)
    s = pl_stage_acquire(&be->pool, &st, err);
  pl_cuda_leave(cuda_dev(be), prev);
  if (s != PL_OK)
    return s;
  cb->stage = st;
  m->host = st->p;
  if (be->pool.cfg.shared) { /* pyworkers: a worker process writes it */
    m->host_fd = st->fd;
    m->host_fd_bytes = be->pool.cfg.bytes;
    m->host_id = pl_fd_id(st->fd);
  }
  return PL_OK;
}

void pl_cuda_fill_abort(pl_backend *b, pl_bufmem *m) {
  cuda_buf *cb = m->priv;
  if (cb->stage)
    pl_stage_put(&cb_of(b)->pool, cb->stage, 0);
  cb->stage = NULL;
  m->host = NULL;
}

/* The buffer's last readers, for a writer of m->data on a stream of its
 * own: the consumer's stream (released; never recorded: no wait) and the
 * last transform, which read the staged bytes (done: it follows the
 * kernels; the copies before them without transforms, long complete).
 * Read, not changed: the batch's first submit still waits released on
 * the copy stream. */
_Static_assert(PL_DEVICE_WAITS == 2, "device_dst hands out two events");

pl_status pl_cuda_device_dst(pl_backend *b, pl_bufmem *m, int *device,
                             void **events, pl_error *err) {
  cuda_backend *be = cb_of(b);
  cuda_buf *cb = m->priv;
  if (!cb->stage)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "device_dst: no fill of this buffer has begun");
  *device = cuda_dev(be);
  events[0] = cb->released;
  events[1] = cb->done;
  return PL_OK;
}

/* Whether cudaMemcpyBatchAsync is missing (an older driver): then the
 * copies go one cudaMemcpyAsync each. */
static int batch_api_missing(cudaError_t rc) {
  return rc == cudaErrorNotSupported || rc == cudaErrorCallRequiresNewerDriver ||
         rc == cudaErrorNotYetImplemented;
}

/* One cudaMemcpyBatchAsync of n copies. The call appeared in CUDA 12.8
 * with a failure-index argument that CUDA 13 dropped; older toolkits have
 * none, and their builds always take the loop. Stream order: a source may
 * be staging memory that a later fill rewrites once this copy's events say
 * it is done. */
static cudaError_t batch_copy(cuda_buf *cb, int n, cudaStream_t s) {
#if CUDART_VERSION >= 12080
  struct cudaMemcpyAttributes at = {
      .srcAccessOrder = cudaMemcpySrcAccessOrderStream};
  size_t zero = 0;
#if CUDART_VERSION >= 13000
  return cudaMemcpyBatchAsync(cb->dsts, cb->srcs, cb->sizes, (size_t)n, &at,
                              &zero, 1, s);
#else
  size_t fail_idx = 0;
  return cudaMemcpyBatchAsync(cb->dsts, cb->srcs, cb->sizes, (size_t)n, &at,
                              &zero, 1, &fail_idx, s);
#endif
#else
  (void)cb, (void)n, (void)s;
  return cudaErrorNotSupported;
#endif
}

/* Several spans in one call, when the driver has it. Returns PL_OK with
 * *done = 0 when it does not (the caller loops). */
static pl_status copy_batched(cuda_backend *be, pl_bufmem *m,
                              const pl_span *sp, int n, int *done,
                              pl_error *err) {
  cuda_buf *cb = m->priv;
  *done = 0;
  if (atomic_load(&be->no_batch_api))
    return PL_OK;
  PL_TRY(pl_cuda_buf_arrays(cb, n, err));
  for (int i = 0; i < n; i++) {
    cb->dsts[i] = (char *)m->data + sp[i].dst_off;
    cb->srcs[i] = sp[i].src;
    cb->sizes[i] = (size_t)sp[i].len;
  }
  cudaError_t rc = batch_copy(cb, n, be->stream);
  if (rc == cudaSuccess) {
    *done = 1;
    return PL_OK;
  }
  if (!batch_api_missing(rc))
    return pl_cuda_fail(err, rc, "cudaMemcpyBatchAsync");
  (void)cudaGetLastError();
  atomic_store(&be->no_batch_api, 1);
  return PL_OK;
}

static pl_status copy_spans(cuda_backend *be, pl_bufmem *m, const pl_span *sp,
                            int n, pl_error *err) {
  int done = 0;
  if (n > 1)
    PL_TRY(copy_batched(be, m, sp, n, &done, err));
  for (int i = 0; !done && i < n; i++)
    CUDA_TRY(cudaMemcpyAsync((char *)m->data + sp[i].dst_off, sp[i].src,
                             (size_t)sp[i].len, cudaMemcpyHostToDevice,
                             be->stream),
             err);
  return PL_OK;
}

/* Every span inside the batch buffer; a span read from the attached
 * staging buffer inside that too. Sums their bytes into *total. */
static pl_status check_spans(const cuda_backend *be, const pl_bufmem *m,
                             const pl_span *sp, int n, uint64_t *total,
                             pl_error *err) {
  const cuda_buf *cb = m->priv;
  *total = 0;
  for (int i = 0; i < n; i++) {
    PL_TRY(pl_span_check(m, sp, i, err));
#ifndef NDEBUG
    const char *src = sp[i].src, *st = cb->stage ? cb->stage->p : NULL;
    if (st && src >= st && src < st + be->pool.cfg.bytes)
      assert(sp[i].len <= be->pool.cfg.bytes - (uint64_t)(src - st));
#endif
    *total += sp[i].len;
  }
  (void)be, (void)cb;
  return PL_OK;
}

/* Queues the spans between their timing events; the batch's `done` after
 * the last. Returns with the staging buffer still attached. */
static pl_status issue(cuda_backend *be, pl_bufmem *m, const pl_span *sp,
                       int n, int flags, pl_error *err) {
  cuda_buf *cb = m->priv;
  cudaEvent_t start = NULL, done = NULL;
  PL_TRY(pl_cuda_buf_timing(be, cb, &start, &done, err));
  cudaStream_t s = be->stream;
  if ((flags & PL_SPANS_FIRST) && cb->has_released) {
    /* the consumer's stream is done with m->data */
    CUDA_TRY(cudaStreamWaitEvent(s, cb->released, 0), err);
    cb->has_released = 0;
  }
  if (flags & PL_SPANS_FIRST)
    PL_TRY(pl_cuda_xform_before_copy(be, cb, err));
  if (PL_FAULT(PL_FAULT_COPY)) /* named as copy_spans would call it */
    return pl_cuda_fail(err, cudaErrorInvalidValue,
                        n > 1 ? "cudaMemcpyBatchAsync" : "cudaMemcpyAsync");
  CUDA_TRY(cudaEventRecord(start, s), err);
  PL_TRY(copy_spans(be, m, sp, n, err));
  CUDA_TRY(cudaEventRecord(done, s), err);
  if (flags & PL_SPANS_LAST) /* records cb->done, after any transforms */
    PL_TRY(pl_cuda_xform_complete(be, m, err));
  cb->timing = cb->stage == NULL;
  return PL_OK;
}

/* Gives back the staging buffer, counts the copies, or cleans up after a
 * failure. */
static pl_status finish(cuda_backend *be, pl_bufmem *m, pl_status s, int n,
                        int flags, uint64_t total, pl_error *err) {
  cuda_buf *cb = m->priv;
  pl_stage *st = cb->stage;
  cb->stage = NULL;
  m->host = NULL;
  if (s != PL_OK) {
    /* A partly queued copy may still read the staging buffer. */
    cudaStreamSynchronize(be->stream);
    (void)cudaGetLastError();
    if (st)
      pl_stage_put(&be->pool, st, 0);
    pl_error_prefix(err, "copying %d piece%s of a batch to %s", n,
                    n == 1 ? "" : "s", be->base.name);
    return s;
  }
  if (flags & PL_SPANS_LAST)
    atomic_fetch_add(&be->batches_copied, 1);
  atomic_fetch_add(&be->bytes_copied, total);
  if (st)
    pl_stage_put(&be->pool, st, 1);
  return PL_OK;
}

pl_status pl_cuda_submit(pl_backend *b, pl_bufmem *m, const pl_span *sp,
                         int n, int flags, pl_error *err) {
  cuda_backend *be = cb_of(b);
  assert(m->priv && n >= 0);
  uint64_t total = 0;
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, err);
  if (s == PL_OK)
    s = check_spans(be, m, sp, n, &total, err);
  if (s == PL_OK)
    s = issue(be, m, sp, n, flags, err);
  s = finish(be, m, s, n, flags, total, err);
  pl_cuda_leave(cuda_dev(be), prev);
  return s;
}
