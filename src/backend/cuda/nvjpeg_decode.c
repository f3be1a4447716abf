/* The GPU decode path (data/gpu_decode.h) through nvJPEG: per call, one
 * batched decode of each image's region (ROI decode where nvJPEG takes
 * it, else the whole image), the resize and flip of image_crop.cu, and
 * the crops' copies into the caller's host memory, all on a stream of the
 * call's own context, run by that context's thread. A crop bound for
 * device memory (a job's ddst: the batch's own buffer) is written there
 * by the resize itself, after the call's events: no copy at all.
 *
 * A batch nvJPEG refuses (one bad image fails a batched decode whole) is
 * split in halves, and those that fail again, until each refusal is
 * alone: only the images nvJPEG refuses on their own go to the CPU, the
 * rest of the batch stays on the GPU.
 *
 * Why a thread per context: nvJPEG's batched decode with the hardware
 * backend returns only once the images are decoded (measured on the H200:
 * all of a call's time, begin to end, was inside nvjpegDecodeBatched, the
 * process using 3.2 of 16 cores at 19,700 images/s). Called by the worker,
 * its own share of the batch waited for that; decode=auto then ran at
 * 13,600 images/s where the CPU alone ran 7,500 and the GPU alone 19,700.
 * begin now hands the call to the context's thread and returns; the
 * thread blocks in nvJPEG while the worker decodes its share.
 *
 * Contexts (stream, nvJPEG state, device buffers) sit in a pool under
 * `mu`, one taken per call, so concurrent callers never share a state
 * (nvJPEG states are not thread-safe; its handle is). The pool grows to
 * the number of callers at once (the loader's workers) and each context's
 * buffers to the largest batch it met; nothing is freed before destroy.
 *
 * Warm-up (pl_nvjpeg_open_opts): a thread of the decoder's makes the
 * contexts the callers will want, one after another, and in the
 * background mode the handle before them, while the callers go on
 * without the GPU. Made by the callers themselves at their first batch,
 * 16 states took 1.6 s on the H200 (nvJPEG serialises their creation, 0.09
 * s each) and every worker's first batch waited for all of them; the
 * handle of the hardware backend takes 0.5 s more. */
#include "backend/cuda/device.h"
#include "backend/cuda/image_crop_cuda.h"
#include "backend/cuda/nvjpeg_lib.h"
#include "backend/nvjpeg.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nvj_ctx {
  struct nvj_ctx *next;
  cudaStream_t stream;
  pl_nvjpeg_state state;
  uint32_t cap, nparams;
  const unsigned char **data;
  size_t *lens;
  pl_nvjpeg_image *img;
  pl_crop_job *hjobs;
  pl_nvjpeg_params *params;
  pl_crop_job *djobs; /* device, cap */
  uint8_t *dec, *out; /* device */
  size_t dec_cap, out_cap;
  /* Page-locked bounce for destinations that are not (a CPU loader's
   * batches): a cudaMemcpyAsync into pageable memory is synchronous.
   * via_bounce[i]: job i's crop is there until the thread copies it. */
  uint8_t *bounce;
  size_t bounce_cap;
  uint8_t *via_bounce;
  pl_gpu_job *jobs; /* the call's */
  uint32_t n, size;
  void *waits[PL_DEVICE_WAITS]; /* events before a device write (begin's) */
  uint8_t *refused; /* n: nvJPEG refused job i on its own (to the CPU) */
  uint32_t *crop_of; /* the jobs cropped, in order: crop k is job crop_of[k] */
  uint32_t ncrop;
  /* The context's thread (run_main), under run_mu: posted when begin
   * hands it a call, finished when the call's work is complete (the
   * stream synchronized, bounced crops copied), with its status and, in
   * pl_now()'s nanoseconds, when. */
  struct nvj_decoder *d;
  pthread_t runner;
  int has_runner;
  pthread_mutex_t run_mu;
  pthread_cond_t run_cv;
  int posted, finished, quit;
  pl_status run_status;
  pl_error run_err;
  uint64_t done_ns;
} nvj_ctx;

typedef struct nvj_decoder {
  pl_gpu_decoder pub;
  pl_nvjpeg_lib lib;
  pl_nvjpeg_handle h; /* set before warming ends (background mode) */
  int device;
  atomic_int no_roi; /* ROI decode refused once: whole images since */
  pthread_mutex_t mu;
  nvj_ctx *free;
  /* Warm-up, under mu. */
  pthread_cond_t warmed; /* a context was added, or warming ended */
  pthread_t warm_thread;
  int has_thread;
  int warming;        /* the thread has more to make */
  int stop;           /* destroy: end after the context in hand */
  uint32_t warm_want; /* contexts to make */
  int handle_later;   /* the thread makes the handle first */
  pl_status handle_status; /* its failure: every call's error since */
  pl_error handle_err;
  pl_nvjpeg_open_opts opts;
} nvj_decoder;

static pl_status nvj_fail(pl_error *err, pl_nvjpeg_status st,
                          const char *call) {
  return pl_errorf(err, PL_CUDA, "%s: %s (%d)", call,
                   pl_nvjpeg_status_name(st), (int)st);
}

#define NVJ_TRY(call, name, err)                     \
  do {                                               \
    pl_nvjpeg_status nt_st_ = (call);                \
    if (nt_st_ != PL_NVJPEG_STATUS_SUCCESS)          \
      return nvj_fail(err, nt_st_, name);            \
  } while (0)

/* ------------------------------------------------------------ contexts */

static void runner_stop(nvj_ctx *c) {
  if (!c->has_runner)
    return;
  pthread_mutex_lock(&c->run_mu);
  c->quit = 1;
  pthread_cond_broadcast(&c->run_cv);
  pthread_mutex_unlock(&c->run_mu);
  pthread_join(c->runner, NULL);
  c->has_runner = 0;
}

static void ctx_free(nvj_decoder *d, nvj_ctx *c) {
  if (!c)
    return;
  runner_stop(c); /* idle: every call it ran was finished */
  pthread_mutex_destroy(&c->run_mu);
  pthread_cond_destroy(&c->run_cv);
  if (c->stream)
    cudaStreamSynchronize(c->stream);
  for (uint32_t i = 0; i < c->nparams; i++)
    d->lib.nvjpegDecodeParamsDestroy(c->params[i]);
  if (c->state)
    d->lib.nvjpegJpegStateDestroy(c->state);
  cudaFree(c->djobs);
  cudaFree(c->dec);
  cudaFree(c->out);
  cudaFreeHost(c->bounce);
  if (c->stream)
    cudaStreamDestroy(c->stream);
  (void)cudaGetLastError();
  free(c->data), free(c->lens), free(c->img), free(c->hjobs);
  free(c->params), free(c->via_bounce), free(c->refused), free(c->crop_of);
  free(c);
}

static void *run_main(void *arg);

static pl_status ctx_new(nvj_decoder *d, nvj_ctx **out, pl_error *err) {
  nvj_ctx *c = pl_calloc(1, sizeof *c);
  if (!c)
    return pl_errorf(err, PL_NO_MEMORY, "GPU decode: out of memory");
  *out = c;
  c->d = d;
  pthread_mutex_init(&c->run_mu, NULL);
  pthread_cond_init(&c->run_cv, NULL);
  CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), err);
  NVJ_TRY(d->lib.nvjpegJpegStateCreate(d->h, &c->state),
          "nvjpegJpegStateCreate", err);
  int rc = pthread_create(&c->runner, NULL, run_main, c);
  if (rc != 0)
    return pl_errorf(err, PL_NO_MEMORY,
                     "GPU decode: cannot start a thread (pthread_create: %s)",
                     strerror(rc));
  c->has_runner = 1;
  return PL_OK;
}

/* A free context, else (warming over) a new one. While the warm-up runs,
 * a caller that may wait waits for it; one that may not gets *out NULL. */
static pl_status ctx_take(nvj_decoder *d, int wait, nvj_ctx **out,
                          pl_error *err) {
  *out = NULL;
  pthread_mutex_lock(&d->mu);
  while (wait && !d->free && d->warming)
    pthread_cond_wait(&d->warmed, &d->mu);
  nvj_ctx *c = d->free;
  if (c)
    d->free = c->next;
  int busy = !c && d->warming;
  pl_status hs = d->handle_status;
  if (hs != PL_OK && err)
    *err = d->handle_err;
  pthread_mutex_unlock(&d->mu);
  if (hs != PL_OK || c || busy) {
    *out = c;
    return hs;
  }
  pl_status s = ctx_new(d, &c, err);
  if (s != PL_OK) {
    ctx_free(d, c);
    return s;
  }
  *out = c;
  return PL_OK;
}

static void ctx_give(nvj_decoder *d, nvj_ctx *c) {
  pthread_mutex_lock(&d->mu);
  c->next = d->free;
  d->free = c;
  /* Only callers that may wait wait, and only while warming; a broadcast
   * (glibc before 2.41 can lose a signal among several waiters). */
  if (d->warming)
    pthread_cond_broadcast(&d->warmed);
  pthread_mutex_unlock(&d->mu);
}

/* Device memory of at least `need` bytes at *p (contents not kept). */
static pl_status dev_grow(uint8_t **p, size_t *cap, size_t need,
                          pl_error *err) {
  if (need <= *cap)
    return PL_OK;
  cudaFree(*p);
  *p = NULL, *cap = 0;
  CUDA_TRY(cudaMalloc((void **)p, need), err);
  *cap = need;
  return PL_OK;
}

/* Host arrays, device job table and decode parameters for n images. */
static pl_status ctx_reserve(nvj_decoder *d, nvj_ctx *c, uint32_t n,
                             pl_error *err) {
  if (n > c->cap) {
    void *a = realloc(c->data, n * sizeof *c->data);
    if (a)
      c->data = a;
    void *b = a ? realloc(c->lens, n * sizeof *c->lens) : NULL;
    if (b)
      c->lens = b;
    void *i = b ? realloc(c->img, n * sizeof *c->img) : NULL;
    if (i)
      c->img = i;
    void *h = i ? realloc(c->hjobs, n * sizeof *c->hjobs) : NULL;
    if (h)
      c->hjobs = h;
    void *p = h ? realloc(c->params, n * sizeof *c->params) : NULL;
    if (p)
      c->params = p;
    void *v = p ? realloc(c->via_bounce, n) : NULL;
    if (v)
      c->via_bounce = v;
    void *r = v ? realloc(c->refused, n) : NULL;
    if (r)
      c->refused = r;
    void *k = r ? realloc(c->crop_of, n * sizeof *c->crop_of) : NULL;
    if (!k)
      return pl_errorf(err, PL_NO_MEMORY, "GPU decode: out of memory");
    c->crop_of = k;
    cudaFree(c->djobs);
    c->djobs = NULL;
    c->cap = 0;
    CUDA_TRY(cudaMalloc((void **)&c->djobs, n * sizeof *c->djobs), err);
    c->cap = n;
  }
  for (; c->nparams < n; c->nparams++) {
    NVJ_TRY(d->lib.nvjpegDecodeParamsCreate(d->h, &c->params[c->nparams]),
            "nvjpegDecodeParamsCreate", err);
    NVJ_TRY(d->lib.nvjpegDecodeParamsSetOutputFormat(c->params[c->nparams],
                                                     PL_NVJPEG_OUTPUT_RGBI),
            "nvjpegDecodeParamsSetOutputFormat", err);
  }
  return PL_OK;
}

/* ------------------------------------------------------------ decode */

/* Where each image's pixels go: its region (roi) or the whole image. */
static pl_status lay_out(nvj_ctx *c, int roi, pl_error *err) {
  size_t total = 0;
  for (uint32_t i = 0; i < c->n; i++) {
    const pl_gpu_job *j = &c->jobs[i];
    size_t w = roi ? j->rw : j->width, h = roi ? j->rh : j->height;
    total += (w * 3 * h + 255) & ~(size_t)255;
  }
  PL_TRY(dev_grow(&c->dec, &c->dec_cap, total ? total : 1, err));
  size_t off = 0;
  for (uint32_t i = 0; i < c->n; i++) {
    const pl_gpu_job *j = &c->jobs[i];
    size_t w = roi ? j->rw : j->width, h = roi ? j->rh : j->height;
    memset(&c->img[i], 0, sizeof c->img[i]);
    c->img[i].channel[0] = c->dec + off;
    c->img[i].pitch[0] = w * 3;
    c->data[i] = j->data;
    c->lens[i] = j->len;
    off += (w * 3 * h + 255) & ~(size_t)255;
  }
  return PL_OK;
}

/* Whether a batched decode's status is nvJPEG refusing the images it was
 * given (a bitstream it cannot or will not decode, a region or format its
 * backend does not take) rather than failing. A refusal is searched for
 * the images refused, which go to the CPU; a failure (memory, a kernel,
 * the library's state) ends the call: all of its images go to the CPU and
 * the GPU path is turned off with the cause, not paid again each batch. */
static int nvj_refusal(pl_nvjpeg_status st) {
  switch (st) {
  case PL_NVJPEG_STATUS_BAD_JPEG:
  case PL_NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
  case PL_NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
  case PL_NVJPEG_STATUS_INVALID_PARAMETER:
  case PL_NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
    return 1;
  default:
    return 0;
  }
}

/* A batched decode's status st (of `call`): *ok where nvJPEG took the
 * images, an error where it failed (nvj_refusal). */
static pl_status decode_status(pl_nvjpeg_status st, const char *call,
                               int *ok, pl_error *err) {
  *ok = st == PL_NVJPEG_STATUS_SUCCESS;
  if (!*ok && !nvj_refusal(st))
    return nvj_fail(err, st, call);
  return PL_OK;
}

/* The status of a batched decode `call`, or one made on purpose (the
 * fault-injection build): a refusal, BAD_JPEG, as of one bad image; a
 * failure, EXECUTION_FAILED. The call is not made then. */
#define NVJ_BATCHED(call)                                                  \
  (PL_FAULT(PL_FAULT_NVJPEG_REFUSE) ? PL_NVJPEG_STATUS_BAD_JPEG            \
   : PL_FAULT(PL_FAULT_NVJPEG_FAIL) ? PL_NVJPEG_STATUS_EXECUTION_FAILED    \
                                    : (call))

/* One batched decode of jobs [lo, hi) as whole images (laid out by
 * lay_out(c, 0)); *ok: nvJPEG took it. */
static pl_status decode_whole(nvj_decoder *d, nvj_ctx *c, uint32_t lo,
                              uint32_t hi, int *ok, pl_error *err) {
  NVJ_TRY(d->lib.nvjpegDecodeBatchedInitialize(d->h, c->state, (int)(hi - lo),
                                               1, PL_NVJPEG_OUTPUT_RGBI),
          "nvjpegDecodeBatchedInitialize", err);
  pl_nvjpeg_status st = NVJ_BATCHED(d->lib.nvjpegDecodeBatched(
      d->h, c->state, c->data + lo, c->lens + lo, c->img + lo, c->stream));
  return decode_status(st, "nvjpegDecodeBatched", ok, err);
}

/* Jobs [lo, hi), whose batched decode nvJPEG refused: each half decoded
 * again, and a half refused split again, so that only the images refused
 * on their own are marked (at most 2 log2(n) calls per such image). A
 * half decoded is waited for before the next call reuses the decode
 * state: only the hardware backend is known to return when done. */
static pl_status find_refused(nvj_decoder *d, nvj_ctx *c, uint32_t lo,
                              uint32_t hi, pl_error *err) {
  if (hi - lo == 1) {
    c->refused[lo] = 1;
    return PL_OK;
  }
  uint32_t mid = lo + (hi - lo) / 2, ends[3] = {lo, mid, hi};
  for (int h = 0; h < 2; h++) {
    int ok = 0;
    PL_TRY(decode_whole(d, c, ends[h], ends[h + 1], &ok, err));
    if (!ok)
      PL_TRY(find_refused(d, c, ends[h], ends[h + 1], err));
    else
      CUDA_TRY(cudaStreamSynchronize(c->stream), err);
  }
  return PL_OK;
}

/* The batch's decode: ROI first (unless refused before), else whole
 * images; a whole-image batch refused is searched for the images nvJPEG
 * refuses (find_refused), one it failed (nvj_refusal) ends the call with
 * the error. *roi says which happened. Any status of the ROI call but
 * success is decided by the whole-image call after it: ROI is given up
 * for good only when the same images decode whole (a refusal of one bad
 * image is no refusal of ROI decode). */
static pl_status decode_all(nvj_decoder *d, nvj_ctx *c, int *roi,
                            pl_error *err) {
  memset(c->refused, 0, c->n);
  *roi = !atomic_load_explicit(&d->no_roi, memory_order_relaxed);
  if (*roi) {
    PL_TRY(lay_out(c, 1, err));
    for (uint32_t i = 0; i < c->n; i++) {
      const pl_gpu_job *j = &c->jobs[i];
      NVJ_TRY(d->lib.nvjpegDecodeParamsSetROI(c->params[i], (int)j->rx,
                                              (int)j->ry, (int)j->rw,
                                              (int)j->rh),
              "nvjpegDecodeParamsSetROI", err);
    }
    NVJ_TRY(d->lib.nvjpegDecodeBatchedInitialize(d->h, c->state, (int)c->n,
                                                 1, PL_NVJPEG_OUTPUT_RGBI),
            "nvjpegDecodeBatchedInitialize", err);
    if (NVJ_BATCHED(d->lib.nvjpegDecodeBatchedEx(
            d->h, c->state, c->data, c->lens, c->img, c->params,
            c->stream)) == PL_NVJPEG_STATUS_SUCCESS)
      return PL_OK;
    /* Whatever the refused call queued is done before the state and
     * the decode buffer (lay_out) are used again. */
    CUDA_TRY(cudaStreamSynchronize(c->stream), err);
  }
  int was_roi = *roi, ok = 0;
  *roi = 0;
  PL_TRY(lay_out(c, 0, err));
  PL_TRY(decode_whole(d, c, 0, c->n, &ok, err));
  if (!ok)
    return find_refused(d, c, 0, c->n, err);
  if (was_roi)
    atomic_store_explicit(&d->no_roi, 1, memory_order_relaxed);
  return PL_OK;
}

/* Whether host memory p is page-locked (pinned or registered). */
static int page_locked(const void *p) {
  struct cudaPointerAttributes a;
  cudaError_t rc = cudaPointerGetAttributes(&a, p);
  (void)cudaGetLastError(); /* older drivers: an error for plain memory */
  return rc == cudaSuccess && a.type == cudaMemoryTypeHost;
}

/* The copies of the crops bound for host memory: straight into
 * page-locked memory, else through the bounce (run_call moves them). The
 * bounce is grown before any copy is queued (nothing of this context is
 * in flight: its last call was finished). */
static pl_status copy_out(nvj_ctx *c, size_t plane3, pl_error *err) {
  int any = 0;
  for (uint32_t k = 0; k < c->ncrop; k++) {
    const pl_gpu_job *j = &c->jobs[c->crop_of[k]];
    any |= c->via_bounce[k] = !j->ddst && !page_locked(j->dst);
  }
  if (any && c->bounce_cap < plane3 * c->ncrop) {
    cudaFreeHost(c->bounce);
    c->bounce = NULL, c->bounce_cap = 0;
    CUDA_TRY(cudaMallocHost((void **)&c->bounce, plane3 * c->ncrop), err);
    c->bounce_cap = plane3 * c->ncrop;
  }
  for (uint32_t k = 0; k < c->ncrop; k++) {
    const pl_gpu_job *j = &c->jobs[c->crop_of[k]];
    if (j->ddst)
      continue; /* the resize wrote it in place */
    uint8_t *to = c->via_bounce[k] ? c->bounce + plane3 * k : j->dst;
    CUDA_TRY(cudaMemcpyAsync(to, c->out + plane3 * k, plane3,
                             cudaMemcpyDeviceToHost, c->stream),
             err);
  }
  return PL_OK;
}

/* The resize jobs of the images decoded (after the call's events, when a
 * crop goes to device memory) and the copies out of the rest. */
static pl_status crop_all(nvj_ctx *c, int roi, uint32_t size,
                          pl_error *err) {
  size_t plane3 = (size_t)3 * size * size;
  int device_dst = 0;
  c->ncrop = 0;
  for (uint32_t i = 0; i < c->n; i++)
    if (!c->refused[i])
      c->crop_of[c->ncrop++] = i;
  if (c->ncrop == 0)
    return PL_OK;
  PL_TRY(dev_grow(&c->out, &c->out_cap, plane3 * c->ncrop, err));
  for (uint32_t k = 0; k < c->ncrop; k++) {
    uint32_t i = c->crop_of[k];
    const pl_gpu_job *j = &c->jobs[i];
    double ox = roi ? 0 : j->rx, oy = roi ? 0 : j->ry;
    device_dst |= j->ddst != NULL;
    c->hjobs[k] = (pl_crop_job){
        c->img[i].channel[0], (uint32_t)c->img[i].pitch[0], (int32_t)ox,
        (int32_t)oy, (int32_t)j->rw, (int32_t)j->rh,
        (float)(j->x0 - j->rx), (float)(j->y0 - j->ry),
        (float)(j->x1 - j->rx), (float)(j->y1 - j->ry), j->flip,
        j->ddst ? j->ddst : c->out + plane3 * k};
  }
  /* From pageable memory: returns once hjobs is staged, so it may be
   * rewritten by the next call. */
  CUDA_TRY(cudaMemcpyAsync(c->djobs, c->hjobs, c->ncrop * sizeof *c->hjobs,
                           cudaMemcpyHostToDevice, c->stream),
           err);
  for (int w = 0; device_dst && w < PL_DEVICE_WAITS; w++)
    if (c->waits[w]) /* the buffer's last readers are done with it */
      CUDA_TRY(cudaStreamWaitEvent(c->stream, (cudaEvent_t)c->waits[w], 0),
               err);
  CUDA_TRY(pl_cuda_crop_batch(c->djobs, c->ncrop, size, c->stream), err);
  return copy_out(c, plane3, err);
}

static pl_status run_batch(nvj_decoder *d, nvj_ctx *c, uint32_t size,
                           pl_error *err) {
  int roi = 0;
  PL_TRY(ctx_reserve(d, c, c->n, err));
  c->ncrop = 0;
  PL_TRY(decode_all(d, c, &roi, err));
  return crop_all(c, roi, size, err);
}

/* One call, on the context's thread: the decode and crops queued, the
 * stream waited for (an error of run_batch too: nothing of the call may
 * run on once finish returns), and the crops that went through the bounce
 * moved to their destinations. */
static pl_status run_call(nvj_ctx *c, pl_error *err) {
  pl_status s = run_batch(c->d, c, c->size, err);
  cudaError_t rc = cudaStreamSynchronize(c->stream);
  if (s != PL_OK) {
    (void)cudaGetLastError();
    return s;
  }
  if (rc != cudaSuccess)
    return pl_cuda_fail(err, rc, "cudaStreamSynchronize");
  size_t plane3 = (size_t)3 * c->size * c->size;
  for (uint32_t k = 0; k < c->ncrop; k++)
    if (c->via_bounce[k])
      memcpy(c->jobs[c->crop_of[k]].dst, c->bounce + plane3 * k, plane3);
  return PL_OK;
}

static void *run_main(void *arg) {
  nvj_ctx *c = arg;
  int prev = -1, entered = 0;
  pl_error enter_err;
  pthread_mutex_lock(&c->run_mu);
  for (;;) {
    while (!c->posted && !c->quit)
      pthread_cond_wait(&c->run_cv, &c->run_mu);
    if (c->quit)
      break;
    pthread_mutex_unlock(&c->run_mu);
    pl_error e;
    pl_error_clear(&e);
    if (!entered) /* once: the thread is the context's alone */
      entered = pl_cuda_enter(c->d->device, &prev, &enter_err) == PL_OK;
    pl_status s = entered ? run_call(c, &e) : (e = enter_err, e.status);
    uint64_t now = (uint64_t)(pl_now() * 1e9);
    pthread_mutex_lock(&c->run_mu);
    c->run_status = s, c->run_err = e, c->done_ns = now;
    c->posted = 0, c->finished = 1;
    pthread_cond_broadcast(&c->run_cv);
  }
  pthread_mutex_unlock(&c->run_mu);
  if (entered)
    pl_cuda_leave(c->d->device, prev);
  return NULL;
}

static pl_status nvj_begin(pl_gpu_decoder *pub, pl_gpu_job *jobs, uint32_t n,
                           uint32_t size, int wait, void *const *events,
                           void **ticket, pl_error *err) {
  nvj_decoder *d = (nvj_decoder *)pub;
  int prev;
  *ticket = NULL;
  PL_TRY(pl_cuda_enter(d->device, &prev, err));
  nvj_ctx *c = NULL;
  pl_status s = ctx_take(d, wait, &c, err);
  pl_cuda_leave(d->device, prev);
  if (s != PL_OK || !c)
    return s;
  pthread_mutex_lock(&c->run_mu);
  c->jobs = jobs, c->n = n, c->size = size;
  for (int w = 0; w < PL_DEVICE_WAITS; w++)
    c->waits[w] = events ? events[w] : NULL;
  c->posted = 1, c->finished = 0;
  pthread_cond_broadcast(&c->run_cv);
  pthread_mutex_unlock(&c->run_mu);
  *ticket = c;
  return PL_OK;
}

static pl_status nvj_finish(pl_gpu_decoder *pub, void *ticket,
                            double *done_at, pl_error *err) {
  nvj_decoder *d = (nvj_decoder *)pub;
  nvj_ctx *c = ticket;
  pthread_mutex_lock(&c->run_mu);
  while (!c->finished)
    pthread_cond_wait(&c->run_cv, &c->run_mu);
  pl_status s = c->run_status;
  if (s != PL_OK && err)
    *err = c->run_err;
  *done_at = c->done_ns / 1e9;
  c->finished = 0;
  pthread_mutex_unlock(&c->run_mu);
  /* refused was set for every job of this call by its decode_all (or the
   * call failed before: then all fail, whatever refused holds). */
  for (uint32_t i = 0; i < c->n; i++)
    c->jobs[i].failed = s != PL_OK || c->refused[i];
  c->jobs = NULL;
  ctx_give(d, c);
  return s;
}

/* ------------------------------------------------------------ life */

static void warm_stop(nvj_decoder *d) {
  if (!d->has_thread)
    return;
  pthread_mutex_lock(&d->mu);
  d->stop = 1;
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->warm_thread, NULL);
  d->has_thread = 0;
}

static void nvj_destroy(pl_gpu_decoder *pub) {
  nvj_decoder *d = (nvj_decoder *)pub;
  if (!d)
    return;
  warm_stop(d);
  int prev;
  pl_error e;
  int entered = pl_cuda_enter(d->device, &prev, &e) == PL_OK;
  while (d->free) {
    nvj_ctx *c = d->free;
    d->free = c->next;
    ctx_free(d, c);
  }
  if (d->h)
    d->lib.nvjpegDestroy(d->h);
  if (entered)
    pl_cuda_leave(d->device, prev);
  pl_nvjpeg_lib_close(&d->lib);
  pthread_cond_destroy(&d->warmed);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

/* The hardware backend where the device has JPEG engines (nvJPEG refuses
 * to create it elsewhere), then the GPU one, then nvJPEG's default. The
 * name is the decoder's only in the synchronous mode: in the background
 * one it was set at open, and may be read meanwhile. */
static pl_status create_handle(nvj_decoder *d, int set_name, pl_error *err) {
  static const pl_nvjpeg_backend order[] = {PL_NVJPEG_BACKEND_HARDWARE,
                                            PL_NVJPEG_BACKEND_GPU_HYBRID,
                                            PL_NVJPEG_BACKEND_DEFAULT};
  static const char *const names[] = {"hardware", "GPU", "default"};
  pl_nvjpeg_status st = PL_NVJPEG_STATUS_SUCCESS;
  for (int i = 0; i < 3; i++) {
    pl_nvjpeg_handle h = NULL;
    st = d->lib.nvjpegCreateEx(order[i], NULL, NULL, 0, &h);
    if (st != PL_NVJPEG_STATUS_SUCCESS)
      continue;
    int hardware = order[i] == PL_NVJPEG_BACKEND_HARDWARE;
    /* ROI decode only on the hardware backend, which documents it for
     * batches; elsewhere a batch decodes whole images (a backend that
     * ignored the ROI would write a whole image into a region's buffer).
     * PL_NVJPEG_NO_ROI=1 turns it off there too (a check of the ROI
     * path). */
    const char *no_roi = getenv("PL_NVJPEG_NO_ROI");
    int roi = hardware && !(no_roi && no_roi[0] == '1');
    if (!roi)
      atomic_store_explicit(&d->no_roi, 1, memory_order_relaxed);
    if (set_name) {
      d->pub.hardware = hardware;
      snprintf(d->pub.name, sizeof d->pub.name, "nvJPEG %s, cuda:%d%s",
               names[i], d->device, roi ? ", ROI decode" : "");
    }
    d->h = h;
    return PL_OK;
  }
  return nvj_fail(err, st, "nvjpegCreateEx");
}

/* The handle made on this thread, now. */
static pl_status handle_now(nvj_decoder *d, int set_name, pl_error *err) {
  int prev;
  PL_TRY(pl_cuda_enter(d->device, &prev, err));
  pl_status s = create_handle(d, set_name, err);
  pl_cuda_leave(d->device, prev);
  return s;
}

/* One step of the warm-up, under mu on entry and return: the handle (in
 * the background mode), else one more context. 0 when there is no more
 * to do. */
static int warm_step(nvj_decoder *d) {
  if (d->stop || d->handle_status != PL_OK)
    return 0;
  pl_error e;
  pl_error_clear(&e);
  if (d->handle_later) {
    pthread_mutex_unlock(&d->mu);
    pl_status s = create_handle(d, 0, &e);
    pthread_mutex_lock(&d->mu);
    d->handle_later = 0;
    if (s != PL_OK) {
      d->handle_status = s;
      d->handle_err = e;
      return 0;
    }
    return 1;
  }
  if (d->warm_want == 0)
    return 0;
  pthread_mutex_unlock(&d->mu);
  nvj_ctx *c = NULL;
  pl_status s = ctx_new(d, &c, &e);
  if (s != PL_OK)
    ctx_free(d, c);
  pthread_mutex_lock(&d->mu);
  if (s != PL_OK)
    return 0; /* the callers make theirs, and meet the error themselves */
  d->warm_want--;
  c->next = d->free;
  d->free = c;
  pthread_cond_broadcast(&d->warmed);
  return 1;
}

static void *warm_main(void *arg) {
  nvj_decoder *d = arg;
  if (d->opts.before_warm)
    d->opts.before_warm(d->opts.before_warm_arg);
  int prev = -1;
  pl_error e;
  int entered = pl_cuda_enter(d->device, &prev, &e) == PL_OK;
  pthread_mutex_lock(&d->mu);
  if (!entered && d->handle_later) {
    d->handle_status = e.status != PL_OK ? e.status : PL_CUDA;
    d->handle_err = e;
  }
  while (entered && warm_step(d))
    ;
  d->warming = 0;
  pthread_cond_broadcast(&d->warmed);
  pthread_mutex_unlock(&d->mu);
  if (entered)
    pl_cuda_leave(d->device, prev);
  return NULL;
}

/* The warm-up thread, when there is something for it to do; without one
 * (it could not start) the handle is made here and the contexts by their
 * callers. */
static pl_status warm_start(nvj_decoder *d, pl_error *err) {
  if (!d->handle_later && d->warm_want == 0)
    return PL_OK;
  d->warming = 1;
  if (pthread_create(&d->warm_thread, NULL, warm_main, d) == 0) {
    d->has_thread = 1;
    return PL_OK;
  }
  d->warming = 0, d->warm_want = 0;
  if (!d->handle_later)
    return PL_OK;
  d->handle_later = 0;
  return handle_now(d, 0, err);
}

static pl_status open_on_device(nvj_decoder *d, pl_error *err) {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (rc != cudaSuccess || count == 0)
    return pl_errorf(err, PL_UNSUPPORTED,
                     "GPU decode: no CUDA device (cudaGetDeviceCount: %s)",
                     rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
  if (d->device >= count)
    return pl_errorf(err, PL_UNSUPPORTED,
                     "GPU decode: no CUDA device %d (%d found)", d->device,
                     count);
  PL_TRY(pl_nvjpeg_lib_open(&d->lib, d->opts.wheel_dir, err));
  if (d->opts.background) {
    snprintf(d->pub.name, sizeof d->pub.name, "nvJPEG (starting), cuda:%d",
             d->device);
    d->handle_later = 1;
  } else {
    PL_TRY(handle_now(d, 1, err));
  }
  d->warm_want = d->opts.contexts;
  return warm_start(d, err);
}

pl_status pl_nvjpeg_decoder_open(int device, const pl_nvjpeg_open_opts *opts,
                                 pl_gpu_decoder **out, pl_error *err) {
  *out = NULL;
  nvj_decoder *d = pl_calloc(1, sizeof *d);
  if (!d)
    return pl_errorf(err, PL_NO_MEMORY, "GPU decode: out of memory");
  d->device = device;
  d->pub.device = device;
  if (opts)
    d->opts = *opts;
  d->pub.begin = nvj_begin;
  d->pub.finish = nvj_finish;
  d->pub.destroy = nvj_destroy;
  atomic_init(&d->no_roi, 0);
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->warmed, NULL);
  pl_status s = open_on_device(d, err);
  if (s != PL_OK) {
    nvj_destroy(&d->pub);
    return s;
  }
  *out = &d->pub;
  return PL_OK;
}
