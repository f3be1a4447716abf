/* The CUDA backend's stand-in for builds without the CUDA toolkit. */
#include "backend/backend.h"
#include "backend/nvjpeg.h"

pl_backend_caps pl_backend_cuda_caps(void) {
  return (pl_backend_caps){0, 0, 0, 0}; /* never created */
}

pl_status pl_backend_cuda_create(const pl_backend_config *cfg,
                                 pl_backend **out, pl_error *err) {
  (void)cfg;
  *out = NULL;
  return pl_errorf(err, PL_UNSUPPORTED,
                   "this build of pinloader has no CUDA support");
}

int pl_backend_cuda_built(void) { return 0; }
int pl_backend_cuda_device_count(void) { return 0; }

pl_status pl_nvjpeg_decoder_open(int device, const pl_nvjpeg_open_opts *opts,
                                 pl_gpu_decoder **out, pl_error *err) {
  (void)device, (void)opts;
  *out = NULL;
  return pl_errorf(err, PL_UNSUPPORTED,
                   "GPU decode: this build of pinloader has no CUDA support");
}
