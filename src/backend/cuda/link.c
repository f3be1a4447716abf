/* The link's own rate, for the report: a pinned buffer copied to the
 * device a few times on the backend's stream, timed with events, the best
 * of them kept. Measured once, at the loader's create (before any batch
 * copy competes for the link). The buffer is pinned as staging buffers
 * are (pages made, then registered: host_pages.h), not by cudaHostAlloc:
 * on the H200 machine cudaHostAlloc of 32 MB and its free took about
 * 15 ms of every loader's start; 16 MB registered, about 1, and the copies
 * 1.5. */
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "backend/host_pages.h"

/* Long enough to reach the full rate: on the H200 machine a copy's fixed
 * cost is a few us, 1-2% of 16 MB's 300 us. */
#define LINK_BYTES (16ull << 20)
#define LINK_RUNS 4

static double time_copies(cuda_backend *be, void *dst, const void *src) {
  cudaEvent_t a = NULL, b = NULL;
  double best = 0;
  if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)
    goto out;
  for (int i = 0; i <= LINK_RUNS; i++) { /* run 0 warms the path up */
    float ms = 0;
    if (cudaEventRecord(a, be->stream) != cudaSuccess ||
        cudaMemcpyAsync(dst, src, LINK_BYTES, cudaMemcpyHostToDevice,
                        be->stream) != cudaSuccess ||
        cudaEventRecord(b, be->stream) != cudaSuccess ||
        cudaEventSynchronize(b) != cudaSuccess ||
        cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
      break;
    double rate = ms > 0 ? (double)LINK_BYTES / (ms * 1e-3) : 0;
    if (i > 0 && rate > best)
      best = rate;
  }
out:
  if (a)
    cudaEventDestroy(a);
  if (b)
    cudaEventDestroy(b);
  return best;
}

static double measure(cuda_backend *be) {
  uint64_t bytes = pl_pages_size(LINK_BYTES);
  void *host = pl_pages_alloc(bytes, be->pool.cfg.numa_node, 0), *dev = NULL;
  int registered = host && cudaHostRegister(host, bytes,
                                            cudaHostRegisterDefault) ==
                               cudaSuccess;
  double rate = 0;
  if (registered && cudaMalloc(&dev, LINK_BYTES) == cudaSuccess)
    rate = time_copies(be, dev, host);
  if (dev)
    cudaFree(dev);
  if (registered)
    cudaHostUnregister(host);
  if (host)
    pl_pages_free(host, bytes);
  (void)cudaGetLastError(); /* a failed measure is "unknown", not an error */
  return rate;
}

double pl_cuda_link_rate(pl_backend *b) {
  cuda_backend *be = cb_of(b);
  if (be->link_rate != 0)
    return be->link_rate > 0 ? be->link_rate : 0;
  int prev = -1;
  double rate = 0;
  if (pl_cuda_enter(cuda_dev(be), &prev, NULL) == PL_OK) {
    rate = measure(be);
    pl_cuda_leave(cuda_dev(be), prev);
  }
  be->link_rate = rate > 0 ? rate : -1;
  return rate;
}
