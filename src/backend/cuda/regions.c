/* Direct mode's device half: the dataset memory the copy plan names
 * (mapped files, decompressed heap) page-locked in place, so the copy
 * engine reads samples straight out of it and no CPU gathers them.
 *
 * Why: a gather reads every byte and writes it to a staging buffer, and
 * the DMA reads it again; on the H200 machine host memory bandwidth caps
 * that at about 47 GB/s while PCIe moves 55 (bench/results/gpu-engine-*).
 * Pinning a file's pages costs budget (they count as pinned; the planner
 * checked they fit) and time at create (about 0.3 s per GiB), which is why
 * it happens only when the caller asked (direct_copy). */
#include "backend/cuda/cuda_backend.h"

#include <assert.h>
#include <stdlib.h>

static void unregister_all(void **p, int n) {
  for (int i = 0; i < n; i++)
    cudaHostUnregister(p[i]);
  (void)cudaGetLastError();
}

/* A mapped file's pages are registered read-only (the mapping is
 * PROT_READ); decompressed bytes are ordinary heap. */
static pl_status register_one(const pl_region *r, pl_error *err) {
  int file = r->kind == PL_REGION_SHARED_FILE;
  if (r->kind == PL_REGION_PRIVATE_FILE) /* would hang the driver: never */
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "a private file mapping cannot be page-locked");
  unsigned flags = file ? cudaHostRegisterReadOnly : cudaHostRegisterDefault;
  cudaError_t rc = PL_FAULT(PL_FAULT_PIN_ALLOC)
                       ? cudaErrorMemoryAllocation
                       : cudaHostRegister((void *)r->ptr, r->len, flags);
  if (rc == cudaSuccess)
    return PL_OK;
  pl_status s = pl_cuda_fail(err, rc, file ? "cudaHostRegister(ReadOnly)"
                                           : "cudaHostRegister");
  pl_error_prefix(err, "page-locking %llu bytes of dataset memory",
                  (unsigned long long)r->len);
  return s;
}

pl_status pl_cuda_regions_register(cuda_backend *be, const pl_region *r, int n,
                                   pl_error *err) {
  assert(be->nsources == 0);
  if (n == 0)
    return PL_OK;
  void **regs = pl_calloc((size_t)n, sizeof *regs);
  if (!regs)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  uint64_t bytes = 0;
  for (int i = 0; i < n; i++) {
    pl_status s = register_one(&r[i], err);
    if (s != PL_OK) {
      unregister_all(regs, i);
      free(regs);
      return s;
    }
    regs[i] = (void *)r[i].ptr;
    bytes += r[i].len;
  }
  be->sources = regs;
  be->nsources = n;
  be->source_bytes = bytes;
  return PL_OK;
}

void pl_cuda_regions_unregister(cuda_backend *be) {
  unregister_all(be->sources, be->nsources);
  free(be->sources);
  be->sources = NULL;
  be->nsources = 0;
  be->source_bytes = 0;
}
