/* A GPU JPEG decoder as the image source sees it: jobs in, size x size
 * CHW uint8 crops out, in host memory the caller names (the batch's
 * staging slots), or in device memory (the batch's own device buffer,
 * when the loader's batches live on the decoder's device: the crop never
 * crosses the bus, and is not copied again with the batch). The data layer only declares the contract; the nvJPEG
 * implementation lives in backend/cuda/nvjpeg_decode.c and the loader
 * (loader/decode_attach.c) hands one to the source, so that no data file
 * calls into a layer above it.
 *
 * Threads: begin / finish may be called by any number of threads at once
 * (each call takes a decode context of its own from the decoder's pool);
 * a ticket is finished by the thread that began it. */
#ifndef PL_GPU_DECODE_H
#define PL_GPU_DECODE_H

#include "core/common.h"
#include "data/dataset.h" /* PL_DEVICE_WAITS */

typedef struct pl_gpu_job {
  const uint8_t *data; /* the JPEG file, whole */
  size_t len;
  uint32_t width, height;     /* from its header */
  uint32_t rx, ry, rw, rh;    /* region the filter may read, full-res */
  double x0, y0, x1, y1;      /* the box that becomes the output, full-res */
  int flip;                   /* mirror the output's columns */
  uint8_t *dst;               /* 3 x size x size, planar RGB: host memory */
  void *ddst;                 /* non-NULL: there instead, device memory of
                                 the decoder's device */
  int failed;                 /* set by finish: decode it on the CPU (its
                                 dst or ddst was not written) */
} pl_gpu_job;



typedef struct pl_gpu_decoder pl_gpu_decoder;
struct pl_gpu_decoder {
  char name[96]; /* "nvJPEG hardware, cuda:0" */
  int hardware;  /* the hardware decoder: baseline JPEG only */
  int device;    /* the CUDA device it decodes on (a job's ddst's) */
  /* Queues jobs[0..n) (n >= 1) and returns, the work going on meanwhile
   * (the caller decodes its own share); *ticket is for finish. The jobs
   * (and their data and dst) stay put until finish returns. An error here
   * or at finish is the decoder's (CUDA, nvJPEG), not an image's: an
   * image nvJPEG refuses is a failed job.
   * A decoder still starting (backend/nvjpeg.h's warm-up) waits for it
   * when `wait`; without, it returns PL_OK with *ticket NULL, nothing
   * queued: the caller decodes the jobs itself. `events` (NULL, or
   * PL_DEVICE_WAITS entries, cudaEvent_t or NULL) are waited for on the
   * device before any ddst is written.
   * Jobs nvJPEG refuses in a batch are found one by one (the call is
   * split until each refusal is alone): only those fail. */
  pl_status (*begin)(pl_gpu_decoder *d, pl_gpu_job *jobs, uint32_t n,
                     uint32_t size, int wait, void *const *events,
                     void **ticket, pl_error *err);
  /* Waits for the ticket's work; sets each job's failed. Once it returns,
   * every crop is in place, the device ones too (later work on any
   * stream of the device sees them). *done_at: when
   * that work was complete (pl_now()'s clock), which is before this call
   * when the GPU ended first; 0 when the decoder cannot tell. The split
   * needs it: the wait here alone says only which path ended last. */
  pl_status (*finish)(pl_gpu_decoder *d, void *ticket, double *done_at,
                      pl_error *err);
  void (*destroy)(pl_gpu_decoder *d);
};

#endif /* PL_GPU_DECODE_H */
