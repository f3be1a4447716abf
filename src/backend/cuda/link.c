/* The link's own rate, for the report: a pinned buffer copied to the
 * device a few times on the backend's stream, timed with events, the best
 * of them kept. Measured once, at the loader's create when timings are on
 * (before any batch copy competes for the link): about 10 ms. */
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"

#define LINK_BYTES (32ull << 20) /* long enough to reach the full rate */
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
  void *host = NULL, *dev = NULL;
  double rate = 0;
  if (cudaHostAlloc(&host, LINK_BYTES, cudaHostAllocDefault) == cudaSuccess &&
      cudaMalloc(&dev, LINK_BYTES) == cudaSuccess)
    rate = time_copies(be, dev, host);
  if (dev)
    cudaFree(dev);
  if (host)
    cudaFreeHost(host);
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
