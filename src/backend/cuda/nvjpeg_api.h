/* The few nvJPEG entry points and types the GPU decode path uses, declared
 * here rather than taken from nvjpeg.h: the library is opened at run time
 * (dlopen, nvjpeg_lib.c), so nothing links against it, and a build must not
 * need the header either (CI, the Python sdist and the CUDA toolkit's
 * default install have none). Values and layouts copied from nvjpeg.h of
 * nvJPEG 13 (the nvidia-nvjpeg wheel, 13.3); they are part of its stable
 * C ABI (unchanged since CUDA 11). Only what is dlsym'd is declared. */
#ifndef PL_NVJPEG_API_H
#define PL_NVJPEG_API_H

#include <cuda_runtime.h>
#include <stddef.h>

#define PL_NVJPEG_MAX_COMPONENT 4

typedef enum {
  PL_NVJPEG_STATUS_SUCCESS = 0,
  PL_NVJPEG_STATUS_NOT_INITIALIZED = 1,
  PL_NVJPEG_STATUS_INVALID_PARAMETER = 2,
  PL_NVJPEG_STATUS_BAD_JPEG = 3,
  PL_NVJPEG_STATUS_JPEG_NOT_SUPPORTED = 4,
  PL_NVJPEG_STATUS_ALLOCATOR_FAILURE = 5,
  PL_NVJPEG_STATUS_EXECUTION_FAILED = 6,
  PL_NVJPEG_STATUS_ARCH_MISMATCH = 7,
  PL_NVJPEG_STATUS_INTERNAL_ERROR = 8,
  PL_NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED = 9,
  PL_NVJPEG_STATUS_INCOMPLETE_BITSTREAM = 10
} pl_nvjpeg_status;

typedef enum { PL_NVJPEG_OUTPUT_RGBI = 5 } pl_nvjpeg_output;

typedef enum {
  PL_NVJPEG_BACKEND_DEFAULT = 0,
  PL_NVJPEG_BACKEND_GPU_HYBRID = 2,
  PL_NVJPEG_BACKEND_HARDWARE = 3
} pl_nvjpeg_backend;

typedef struct {
  unsigned char *channel[PL_NVJPEG_MAX_COMPONENT];
  size_t pitch[PL_NVJPEG_MAX_COMPONENT];
} pl_nvjpeg_image;

typedef struct nvjpegHandle *pl_nvjpeg_handle;
typedef struct nvjpegJpegState *pl_nvjpeg_state;
typedef struct nvjpegDecodeParams *pl_nvjpeg_params;

/* The table of entry points, one per X: name, return, arguments. */
#define PL_NVJPEG_FUNCS(X)                                                   \
  X(nvjpegCreateEx, (pl_nvjpeg_backend backend, void *dev_allocator,         \
                     void *pinned_allocator, unsigned int flags,             \
                     pl_nvjpeg_handle *handle))                              \
  X(nvjpegDestroy, (pl_nvjpeg_handle handle))                                \
  X(nvjpegJpegStateCreate, (pl_nvjpeg_handle handle,                         \
                            pl_nvjpeg_state *state))                         \
  X(nvjpegJpegStateDestroy, (pl_nvjpeg_state state))                         \
  X(nvjpegDecodeBatchedInitialize,                                           \
    (pl_nvjpeg_handle handle, pl_nvjpeg_state state, int batch_size,         \
     int max_cpu_threads, pl_nvjpeg_output output_format))                   \
  X(nvjpegDecodeBatched,                                                     \
    (pl_nvjpeg_handle handle, pl_nvjpeg_state state,                         \
     const unsigned char *const *data, const size_t *lengths,                \
     pl_nvjpeg_image *destinations, cudaStream_t stream))                    \
  X(nvjpegDecodeBatchedEx,                                                   \
    (pl_nvjpeg_handle handle, pl_nvjpeg_state state,                         \
     const unsigned char *const *data, const size_t *lengths,                \
     pl_nvjpeg_image *destinations, pl_nvjpeg_params *decode_params,         \
     cudaStream_t stream))                                                   \
  X(nvjpegDecodeParamsCreate, (pl_nvjpeg_handle handle,                      \
                               pl_nvjpeg_params *params))                    \
  X(nvjpegDecodeParamsDestroy, (pl_nvjpeg_params params))                    \
  X(nvjpegDecodeParamsSetOutputFormat, (pl_nvjpeg_params params,             \
                                        pl_nvjpeg_output output_format))     \
  X(nvjpegDecodeParamsSetROI, (pl_nvjpeg_params params, int offset_x,        \
                               int offset_y, int roi_width, int roi_height))

typedef struct pl_nvjpeg_lib {
  void *dl; /* dlopen handle */
  char path[512]; /* what was opened */
#define PL_NVJPEG_PTR_(name, args) pl_nvjpeg_status(*name) args;
  PL_NVJPEG_FUNCS(PL_NVJPEG_PTR_)
#undef PL_NVJPEG_PTR_
} pl_nvjpeg_lib;

#endif /* PL_NVJPEG_API_H */
