/* nvJPEG opened at run time (no link dependency): the entry points of
 * nvjpeg_api.h, looked up with dlsym. Tried in order: the file named by
 * PL_NVJPEG_LIB, libnvjpeg.so.13 in `wheel_dir` (the nvidia-nvjpeg wheel's
 * lib folder, which the Python module passes), then libnvjpeg.so.13 and
 * libnvjpeg.so on the loader's search path (the CUDA toolkit's). */
#ifndef PL_NVJPEG_LIB_H
#define PL_NVJPEG_LIB_H

#include "backend/cuda/nvjpeg_api.h"
#include "core/common.h"

/* Fills *lib, or fails (PL_UNSUPPORTED) with every path tried and why. */
pl_status pl_nvjpeg_lib_open(pl_nvjpeg_lib *lib, const char *wheel_dir,
                             pl_error *err);
void pl_nvjpeg_lib_close(pl_nvjpeg_lib *lib);

/* "NVJPEG_STATUS_BAD_JPEG" */
const char *pl_nvjpeg_status_name(pl_nvjpeg_status s);

#endif /* PL_NVJPEG_LIB_H */
