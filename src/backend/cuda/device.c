/* Device binding, CUDA errors and events (see device.h). */
#include "backend/cuda/device.h"

pl_status pl_cuda_fail(pl_error *err, cudaError_t rc, const char *call) {
  (void)cudaGetLastError(); /* do not leave it for an unrelated caller */
  pl_status s =
      pl_errorf(err, rc == cudaErrorMemoryAllocation ? PL_NO_MEMORY : PL_CUDA,
                "%s: %s", call, cudaGetErrorString(rc));
  pl_error_set_cuda(err, (int)rc);
  return s;
}

pl_status pl_cuda_enter(int device, int *prev, pl_error *err) {
  *prev = -1;
  if (cudaGetDevice(prev) != cudaSuccess) {
    (void)cudaGetLastError();
    *prev = -1;
  }
  if (*prev == device)
    return PL_OK;
  cudaError_t rc = cudaSetDevice(device);
  return rc == cudaSuccess ? PL_OK : pl_cuda_fail(err, rc, "cudaSetDevice");
}

void pl_cuda_leave(int device, int prev) {
  if (prev >= 0 && prev != device)
    (void)cudaSetDevice(prev);
}

pl_status pl_cuda_event_new(cudaEvent_t *ev, unsigned flags, pl_error *err) {
  *ev = NULL;
  if (PL_FAULT(PL_FAULT_ALLOC))
    return pl_cuda_fail(err, cudaErrorMemoryAllocation, "cudaEventCreate");
  CUDA_TRY(cudaEventCreateWithFlags(ev, flags), err);
  return PL_OK;
}

uint64_t pl_cuda_elapsed_ns(cudaEvent_t start, cudaEvent_t done) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, start, done) == cudaSuccess && ms > 0)
    return (uint64_t)((double)ms * 1e6);
  (void)cudaGetLastError();
  return 0;
}
