/* Opening the GPU JPEG decoder (data/gpu_decode.h) of the CUDA backend:
 * nvJPEG, loaded at run time. A build without CUDA has a stand-in that
 * says so (no_cuda.c). */
#ifndef PL_BACKEND_NVJPEG_H
#define PL_BACKEND_NVJPEG_H

#include "core/common.h"
#include "data/gpu_decode.h"

/* How the decoder starts. All zero (or NULL): as the first form did, the
 * handle made by open, each context by its first caller. */
typedef struct pl_nvjpeg_open_opts {
  const char *wheel_dir; /* the nvidia-nvjpeg wheel's lib folder, or NULL */
  /* Decode contexts (a stream, an nvJPEG state) a thread of the decoder's
   * makes ahead, one after another: the callers expected at once (the
   * loader's workers). A call that may not wait finds none ready until
   * then, and decodes elsewhere (gpu_decode.h). */
  uint32_t contexts;
  /* The handle too is made on that thread (0.5 s for the hardware
   * backend): open returns after the cheap checks (a CUDA device, nvJPEG
   * loaded), and an error of the handle is every later call's. The name
   * is then "nvJPEG (starting), cuda:N" for good. */
  int background;
  /* Tests: called on that thread before it starts (it may block). */
  void (*before_warm)(void *arg);
  void *before_warm_arg;
} pl_nvjpeg_open_opts;

/* A decoder on CUDA device `device`: the hardware backend where the device
 * has JPEG engines, else nvJPEG's GPU backend. opts may be NULL.
 * PL_UNSUPPORTED when there is no CUDA device or no nvJPEG (the message
 * says which, and what was tried). */
pl_status pl_nvjpeg_decoder_open(int device, const pl_nvjpeg_open_opts *opts,
                                 pl_gpu_decoder **out, pl_error *err);

#endif /* PL_BACKEND_NVJPEG_H */
