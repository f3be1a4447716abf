/* See image_crop_cuda.h. One thread per output pixel; the filter's
 * weights are computed where they are used (PIL's precompute_coeffs: a
 * triangle widened by the downscale factor, clipped to the window,
 * normalized), so no tables are built or stored. */
#include "backend/cuda/image_crop_cuda.h"

#define PL_CROP_THREADS 256

/* One axis: output pixel i of `size` from [b0, b1) of [0, n). */
struct taps {
  int first, count;
  float center, inv;
};

__host__ __device__ static taps axis_taps(float b0, float b1, int n, int size, int i) {
  float scale = (b1 - b0) / size;
  float fs = scale < 1.0f ? 1.0f : scale;
  taps t;
  t.center = b0 + (i + 0.5f) * scale;
  t.inv = 1.0f / fs;
  int lo = (int)(t.center - fs + 0.5f), hi = (int)(t.center + fs + 0.5f);
  lo = lo < 0 ? 0 : lo;
  hi = hi > n ? n : hi;
  t.first = lo;
  t.count = hi > lo ? hi - lo : 0;
  return t;
}

__host__ __device__ static float tap_weight(const taps &t, int k) {
  float x = (t.first + k - t.center + 0.5f) * t.inv;
  x = x < 0 ? -x : x;
  return x < 1.0f ? 1.0f - x : 0.0f;
}

/* Output pixel (ox, oy) of job j, all three planes. */
__host__ __device__ static void crop_pixel(const pl_crop_job &j, uint32_t size,
                                           int ox, int oy) {
  taps ty = axis_taps(j.y0, j.y1, j.wh, (int)size, oy);
  taps tx = axis_taps(j.x0, j.x1, j.ww, (int)size, ox);
  float acc[3] = {0, 0, 0}, wsum = 0;
  for (int a = 0; a < ty.count; a++) {
    float wy = tap_weight(ty, a);
    const uint8_t *row =
        j.src + (size_t)(j.oy + ty.first + a) * j.pitch + (size_t)j.ox * 3;
    for (int b = 0; b < tx.count; b++) {
      float w = wy * tap_weight(tx, b);
      const uint8_t *px = row + (size_t)(tx.first + b) * 3;
      acc[0] += w * px[0], acc[1] += w * px[1], acc[2] += w * px[2];
      wsum += w;
    }
  }
  int dx = j.flip ? (int)size - 1 - ox : ox;
  size_t plane = (size_t)size * size, at = (size_t)oy * size + dx;
  for (int c = 0; c < 3; c++) {
    float v = wsum > 0 ? acc[c] / wsum + 0.5f : 0.0f;
    v = v < 0 ? 0 : v > 255 ? 255 : v;
    j.dst[c * plane + at] = (uint8_t)v;
  }
}

__global__ static void crop_kernel(const pl_crop_job *jobs, uint32_t size) {
  const pl_crop_job j = jobs[blockIdx.y];
  uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p < size * size)
    crop_pixel(j, size, (int)(p % size), (int)(p / size));
}

extern "C" void pl_crop_host(const pl_crop_job *jobs, uint32_t n,
                             uint32_t size) {
  for (uint32_t k = 0; k < n; k++)
    for (uint32_t p = 0; p < size * size; p++)
      crop_pixel(jobs[k], size, (int)(p % size), (int)(p / size));
}

extern "C" cudaError_t pl_cuda_crop_batch(const pl_crop_job *jobs, uint32_t n,
                                          uint32_t size, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  uint32_t px = size * size;
  dim3 grid((px + PL_CROP_THREADS - 1) / PL_CROP_THREADS, n);
  crop_kernel<<<grid, PL_CROP_THREADS, 0, stream>>>(jobs, size);
  return cudaGetLastError();
}
