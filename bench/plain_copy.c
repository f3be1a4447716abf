/* An independent yardstick for `pinloader bench bandwidth`: plain
 * cudaMemcpyAsync host-to-device from cudaHostAlloc'ed memory and cudaMemcpy
 * from malloc'ed memory, timed with events, nothing of pinloader's code.
 * scripts/gpu/20-bench.sh builds it with nvcc or gcc and compares its
 * figures with the bench's JSON from the same run.
 *   plain_copy            prints "bytes pinned_async_GBps pageable_GBps" */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                            \
  do {                                                                   \
    cudaError_t e_ = (x);                                                \
    if (e_ != cudaSuccess) {                                             \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));           \
      return 1;                                                          \
    }                                                                    \
  } while (0)

static int timed(void *dst, const void *src, size_t n, int async,
                 cudaStream_t s, double *gbps) {
  int reps = (int)((size_t)(2u << 30) / n);
  reps = reps < 4 ? 4 : reps > 500 ? 500 : reps;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice)); /* warm up */
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; i++) {
    if (async)
      CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
    else
      CK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
  }
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  *gbps = (double)n * reps / (ms * 1e-3) / 1e9;
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return 0;
}

int main(void) {
  const size_t sizes[] = {1u << 20, 16u << 20, 64u << 20, 256u << 20};
  const size_t max = 256u << 20;
  void *d, *pinned, *pageable = malloc(max);
  cudaStream_t s = 0; /* the legacy stream: cudaMemcpy's too */
  CK(cudaMalloc(&d, max));
  CK(cudaHostAlloc(&pinned, max, cudaHostAllocDefault));
  if (!pageable)
    return 1;
  memset(pinned, 1, max);
  memset(pageable, 1, max);
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    double p, g;
    if (timed(d, pinned, sizes[i], 1, s, &p) || timed(d, pageable, sizes[i], 0, s, &g))
      return 1;
    printf("%zu %.2f %.2f\n", sizes[i], p, g);
  }
  return 0;
}
