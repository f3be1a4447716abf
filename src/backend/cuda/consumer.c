/* The consumer side of the CUDA backend: handing a batch out, making the
 * consumer's stream (or the host) wait for its copy, taking it back, and
 * reading it back for checks. Each call binds the device for its length
 * (device.h). */
#include "backend/cuda/cuda_backend.h"

#include <assert.h>

static pl_status wait_copy(const cuda_buf *cb, pl_error *err) {
  cudaError_t rc = cudaEventSynchronize(cb->done);
  return rc == cudaSuccess ? PL_OK
                           : pl_cuda_fail(err, rc, "cudaEventSynchronize");
}

pl_status pl_cuda_deliver(pl_backend *b, pl_bufmem *m, pl_error *err) {
  cuda_backend *be = cb_of(b);
  if (be->non_blocking)
    return PL_OK; /* the consumer orders its stream with wait_stream */
  return pl_cuda_wait_host(b, m, err);
}

pl_status pl_cuda_wait_host(pl_backend *b, pl_bufmem *m, pl_error *err) {
  cuda_backend *be = cb_of(b);
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, err);
  if (s == PL_OK)
    s = wait_copy(m->priv, err);
  pl_cuda_leave(cuda_dev(be), prev);
  return s;
}

pl_status pl_cuda_wait_stream(pl_backend *b, pl_bufmem *m, void *stream,
                              pl_error *err) {
  cuda_backend *be = cb_of(b);
  const cuda_buf *cb = m->priv;
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, err);
  cudaError_t rc = cudaSuccess;
  if (s == PL_OK)
    rc = cudaStreamWaitEvent((cudaStream_t)stream, cb->done, 0);
  if (rc != cudaSuccess)
    s = pl_cuda_fail(err, rc, "cudaStreamWaitEvent");
  pl_cuda_leave(cuda_dev(be), prev);
  return s;
}

/* No event to order the next copy by (a bad stream handle, say): wait for
 * all work on the device instead, so m->data is safe to overwrite. */
static void release_by_sync(cuda_backend *be, cuda_buf *cb, cudaError_t rc) {
  (void)cudaGetLastError();
  cb->has_released = 0;
  cudaDeviceSynchronize();
  (void)cudaGetLastError();
  pl_log(be->log, PL_LOG_WARN,
         "%s: releasing a batch: cudaEventRecord: %s; synchronized the device "
         "instead",
         be->base.name, cudaGetErrorString(rc));
}

void pl_cuda_release(pl_backend *b, pl_bufmem *m, void *stream) {
  cuda_backend *be = cb_of(b);
  cuda_buf *cb = m->priv;
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, NULL);
  /* NULL is the legacy default stream of this (now current) device. */
  cudaError_t rc = s == PL_OK
                       ? cudaEventRecord(cb->released, (cudaStream_t)stream)
                       : cudaErrorInvalidDevice;
  if (rc == cudaSuccess)
    cb->has_released = 1;
  else
    release_by_sync(be, cb, rc);
  pl_cuda_leave(cuda_dev(be), prev);
}

pl_status pl_cuda_read_back(pl_backend *b, pl_bufmem *m, uint64_t offset,
                            void *dst, uint64_t n, pl_error *err) {
  cuda_backend *be = cb_of(b);
  if (offset > m->bytes || n > m->bytes - offset)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "bytes [%llu, +%llu) are outside the %llu-byte buffer",
                     (unsigned long long)offset, (unsigned long long)n,
                     (unsigned long long)m->bytes);
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, err);
  if (s == PL_OK)
    s = wait_copy(m->priv, err);
  cudaError_t rc = cudaSuccess;
  if (s == PL_OK && n > 0)
    rc = cudaMemcpy(dst, (const char *)m->data + offset, n,
                    cudaMemcpyDeviceToHost);
  if (rc != cudaSuccess)
    s = pl_cuda_fail(err, rc, "cudaMemcpy");
  pl_cuda_leave(cuda_dev(be), prev);
  return s;
}

pl_status pl_cuda_sync(pl_backend *b, pl_error *err) {
  cuda_backend *be = cb_of(b);
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, err);
  cudaError_t rc = s == PL_OK ? cudaStreamSynchronize(be->stream)
                              : cudaSuccess;
  if (rc != cudaSuccess)
    s = pl_cuda_fail(err, rc, "cudaStreamSynchronize");
  pl_cuda_leave(cuda_dev(be), prev);
  return s;
}
