/* CUDA helpers every file of the CUDA backend uses: binding a thread to
 * the backend's device for the length of one call, turning CUDA errors
 * into pl_status, events that the fault-injection build can refuse. */
#ifndef PL_CUDA_DEVICE_H
#define PL_CUDA_DEVICE_H

#include "core/common.h"

#include <cuda_runtime.h>

/* Status for a CUDA failure: running out of memory is PL_NO_MEMORY, the
 * rest PL_CUDA; the message names the call, as "cudaMalloc: out of memory".
 * Clears CUDA's sticky last error. */
pl_status pl_cuda_fail(pl_error *err, cudaError_t rc, const char *call);

#define CUDA_TRY(call, err)                    \
  do {                                         \
    cudaError_t ct_rc_ = (call);               \
    if (ct_rc_ != cudaSuccess)                 \
      return pl_cuda_fail(err, ct_rc_, #call); \
  } while (0)

/* Every entry point of the backend runs between these two: workers and the
 * releasing thread may never have touched the device, and a consumer
 * working on another device must find its own current again on return.
 * pl_cuda_enter stores the caller's device (-1: none) in *prev, makes
 * `device` current, and fails (PL_CUDA) if it cannot; pl_cuda_leave(device,
 * *prev) is then harmless either way. */
pl_status pl_cuda_enter(int device, int *prev, pl_error *err);
void pl_cuda_leave(int device, int prev);

/* cudaEventCreateWithFlags, failing on purpose under PL_FAULT_ALLOC. */
pl_status pl_cuda_event_new(cudaEvent_t *ev, unsigned flags, pl_error *err);

/* Nanoseconds between two completed events, 0 when they cannot say. */
uint64_t pl_cuda_elapsed_ns(cudaEvent_t start, cudaEvent_t done);

#endif /* PL_CUDA_DEVICE_H */
