/* Opening the GPU JPEG decoder (data/gpu_decode.h) of the CUDA backend:
 * nvJPEG, loaded at run time. A build without CUDA has a stand-in that
 * says so (no_cuda.c). */
#ifndef PL_BACKEND_NVJPEG_H
#define PL_BACKEND_NVJPEG_H

#include "core/common.h"
#include "data/gpu_decode.h"

/* A decoder on CUDA device `device`: the hardware backend where the device
 * has JPEG engines, else nvJPEG's GPU backend. wheel_dir: the nvidia-nvjpeg
 * wheel's lib folder, or NULL. PL_UNSUPPORTED when there is no CUDA device
 * or no nvJPEG (the message says which, and what was tried). */
pl_status pl_nvjpeg_decoder_open(int device, const char *wheel_dir,
                                 pl_gpu_decoder **out, pl_error *err);

#endif /* PL_BACKEND_NVJPEG_H */
