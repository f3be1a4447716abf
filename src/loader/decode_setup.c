/* decode gpu / auto (pl_decode_mode): before the copy plan is made, an
 * image folder's loader opens the GPU decode path (backend/nvjpeg.h) and
 * reads through a view of the folder that splits each batch between the
 * workers and the GPU (data/sources/images_gpu.h). Any other dataset, or
 * decode cpu, is left as it is. */
#include "loader/loader_internal.h"
#include "backend/nvjpeg.h"
#include "data/sources/images_gpu.h"

static const char *mode_name(int mode) {
  return mode == PL_DECODE_GPU ? "gpu" : "auto";
}

void pl_decode_poll(pl_core *c) {
  char why[256];
  if (atomic_load_explicit(&c->decode_off_logged, memory_order_relaxed) ||
      !pl_images_gpu_off(c->ds, why, sizeof why) ||
      atomic_exchange(&c->decode_off_logged, 1))
    return;
  pl_log(&c->log, PL_LOG_WARN,
         "decode: the GPU path is off, decoding on the CPU from now on: %s",
         why);
}

pl_status pl_decode_setup(pl_core *c, pl_error *err) {
  int mode = c->cfg.decode;
  if (mode == PL_DECODE_CPU)
    return PL_OK;
  if (!pl_images_is(c->ds)) {
    if (mode == PL_DECODE_GPU)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "decode=gpu: only image folders decode on the GPU "
                       "(this dataset is '%s')",
                       c->ds->vt->kind);
    return PL_OK; /* auto: nothing to decode */
  }
  pl_gpu_decoder *dec = NULL;
  pl_error why;
  pl_error_clear(&why);
  /* A context per worker made ahead; auto makes the handle in the
   * background too: its batches go to the CPU until nvJPEG is up, so
   * neither create nor the first batch waits for it (2 s with 16 workers
   * on the H200). gpu waits, and meets an error of nvJPEG at create. */
  pl_nvjpeg_open_opts opts = {0};
  opts.contexts = (uint32_t)PL_MAX(c->tune.threads, 1);
  opts.background = mode == PL_DECODE_AUTO;
  pl_status s = pl_nvjpeg_decoder_open(c->cfg.device_index, &opts, &dec, &why);
  if (s != PL_OK && mode == PL_DECODE_GPU) {
    if (err) {
      *err = why;
      pl_error_prefix(err, "decode=gpu");
    }
    return s;
  }
  if (s != PL_OK) {
    pl_log(&c->log, PL_LOG_INFO, "decode=auto: decoding on the CPU only: %s",
           why.message);
    return PL_OK;
  }
  pl_dataset *view = NULL;
  PL_TRY(pl_images_gpu_view(c->ds, dec, mode, &view, err));
  pl_log(&c->log, PL_LOG_INFO, "decode=%s: JPEGs on %s beside the workers",
         mode_name(mode), dec->name);
  pl_dataset_destroy(c->ds); /* the loader's reference, now the view's */
  c->ds = view;
  return PL_OK;
}
