/* The GPU decode path's resize (image_crop.cu): a region decoded by
 * nvJPEG (interleaved RGB in device memory) to a size x size planar RGB
 * uint8 crop, optionally mirrored: PIL's antialiased bilinear filter
 * (Image.resize(BILINEAR, box), as data/image_resize.h describes it),
 * computed in float in one pass. The CPU path rounds between its two
 * passes and works in 14-bit fixed point: the two differ by a level or two
 * (the GPU tests measure it as PSNR). */
#ifndef PL_IMAGE_CROP_CUDA_H
#define PL_IMAGE_CROP_CUDA_H

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_crop_job {
  const uint8_t *src; /* the decoded region's buffer, RGB interleaved */
  uint32_t pitch;     /* its bytes a row */
  int32_t ox, oy;     /* the filter's window in it: [ox, ox + ww) ... */
  int32_t ww, wh;
  float x0, y0, x1, y1; /* the box, relative to (ox, oy) */
  int32_t flip;
  uint8_t *dst; /* 3 x size x size, device */
} pl_crop_job;

/* jobs: n of them, in device memory. Returns the launch's error. */
cudaError_t pl_cuda_crop_batch(const pl_crop_job *jobs, uint32_t n,
                               uint32_t size, cudaStream_t stream);

/* The same arithmetic on the host, jobs and memory in host memory: for
 * tests of the filter where there is no GPU. */
void pl_crop_host(const pl_crop_job *jobs, uint32_t n, uint32_t size);

#ifdef __cplusplus
}
#endif

#endif /* PL_IMAGE_CROP_CUDA_H */
