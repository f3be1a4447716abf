/* Device transforms in the CUDA backend: after a batch's copies the
 * kernels of backend/cuda/transform.cu turn the staged bytes (m->data) into
 * the delivered arrays (m->data + xf_out_off), on a stream of the
 * backend's own:
 *
 *   engine stream:  [wait buf.done] copies . record buf.copied
 *   xform stream:   wait buf.copied . kernels . record buf.done
 *
 * The consumer waits for buf.done as before, so its wait covers the
 * kernels. The copy of the next batch into another buffer does not wait
 * for them (two streams); the next copy into the same buffer waits for
 * buf.done, because the kernels read the staged bytes it overwrites (the
 * consumer's release alone does not say they are done: a batch may be
 * released unread). */
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/transform_cuda.h"

pl_status pl_cuda_xform_setup(cuda_backend *be, pl_error *err) {
  const pl_xform_plan *p = be->xf;
  if (!p)
    return PL_OK;
  CUDA_TRY(cudaStreamCreateWithFlags(&be->xstream, cudaStreamNonBlocking),
           err);
  if (PL_FAULT(PL_FAULT_DEVICE_ALLOC))
    return pl_cuda_fail(err, cudaErrorMemoryAllocation, "cudaMalloc");
  CUDA_TRY(cudaMalloc(&be->xtable, p->table_bytes ? p->table_bytes : 1), err);
  if (p->table_bytes)
    CUDA_TRY(cudaMemcpy(be->xtable, p->table, p->table_bytes,
                        cudaMemcpyHostToDevice),
             err);
  return PL_OK;
}

pl_status pl_cuda_xform_before_copy(cuda_backend *be, cuda_buf *cb,
                                    pl_error *err) {
  if (be->xf) /* a never-recorded event is no wait */
    CUDA_TRY(cudaStreamWaitEvent(be->stream, cb->done, 0), err);
  return PL_OK;
}

pl_status pl_cuda_xform_complete(cuda_backend *be, pl_bufmem *m,
                                 pl_error *err) {
  cuda_buf *cb = m->priv;
  const pl_xform_plan *p = be->xf;
  if (!p) {
    CUDA_TRY(cudaEventRecord(cb->done, be->stream), err);
    return PL_OK;
  }
  CUDA_TRY(cudaEventRecord(cb->copied, be->stream), err);
  CUDA_TRY(cudaStreamWaitEvent(be->xstream, cb->copied, 0), err);
  uint8_t *base = m->data;
  CUDA_TRY(pl_cuda_xform_batch(p, be->xtable, base,
                               base + be->xf_out_off, m->samples,
                               be->xstream),
           err);
  CUDA_TRY(cudaEventRecord(cb->done, be->xstream), err);
  return PL_OK;
}

void pl_cuda_xform_destroy(cuda_backend *be) {
  if (be->xstream) {
    cudaStreamSynchronize(be->xstream);
    cudaStreamDestroy(be->xstream);
  }
  if (be->xtable)
    cudaFree(be->xtable);
  (void)cudaGetLastError();
  be->xstream = NULL;
  be->xtable = NULL;
}
