/* The CUDA backend: batches live in device memory; workers write them into
 * page-locked host staging buffers, from which one non-blocking stream per
 * backend copies them asynchronously. Events, not host waits, order the
 * three parties:
 *
 *   worker:   [stream waits buf.released] stage.start . memcpyAsync .
 *             buf.done . stage.done
 *   consumer: deliver (sync mode: wait done) / wait_stream (its stream waits
 *             done) / release (records buf.released on its stream)
 *   worker:   fill_begin takes a staging buffer whose stage.done completed
 *
 * Staging buffers are decoupled from batch buffers: there are only
 * cfg.staging_buffers of them (prefetch + workers, not the pool size), made
 * lazily, pinned once and reused until destroy. Nothing is pinned, unpinned,
 * allocated or freed per batch.
 *
 * Locking: be->mu guards the staging table (state, seq, pin reservation)
 * and is held only for bookkeeping and cudaEventQuery, never across a
 * blocking CUDA call or an allocation. Per-buffer state (cuda_buf) is
 * ordered by the loader, which never runs two calls on one buffer at once
 * except wait_host/read_back/stats, which only read events. Counters are
 * atomics. Every entry point makes the device current first (workers and
 * the releasing thread may never have touched it) and gives the calling
 * thread its own current device back on return.
 *
 * backend_cuda_direct.c adds batches that arrive as several copies
 * (fill_spans): chunked gathers, and direct mode, which copies straight
 * from the dataset's registered memory. */
#include "backend/cuda/backend_cuda.h"
#include "backend/pinned_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pl_status pl_cuda_fail(pl_error *err, cudaError_t rc, const char *call) {
  (void)cudaGetLastError(); /* do not leave it for an unrelated caller */
  pl_status s =
      pl_errorf(err, rc == cudaErrorMemoryAllocation ? PL_NO_MEMORY : PL_CUDA,
                "%s: %s", call, cudaGetErrorString(rc));
  pl_error_set_cuda(err, (int)rc);
  return s;
}

int pl_cuda_dev_enter(cuda_backend *be, pl_status *s, pl_error *err) {
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) {
    (void)cudaGetLastError();
    prev = -1;
  }
  *s = PL_OK;
  if (prev != be->base.device_index) {
    cudaError_t rc = cudaSetDevice(be->base.device_index);
    if (rc != cudaSuccess)
      *s = pl_cuda_fail(err, rc, "cudaSetDevice");
  }
  return prev;
}

void pl_cuda_dev_leave(cuda_backend *be, int prev) {
  if (prev >= 0 && prev != be->base.device_index)
    (void)cudaSetDevice(prev);
}

/* ------------------------------------------------------------ copy time */

void pl_cuda_account(cuda_backend *be, staging *st) {
  if (!st->timing)
    return;
  st->timing = 0;
  float ms = 0;
  if (cudaEventElapsedTime(&ms, st->start, st->done) == cudaSuccess && ms > 0)
    atomic_fetch_add(&be->copy_ns, (uint64_t)((double)ms * 1e6));
  else
    (void)cudaGetLastError();
}

/* Whether st's last copy finished; accounts it if so. [mu] */
static int stage_idle(cuda_backend *be, staging *st) {
  if (!st->copied)
    return 1;
  cudaError_t rc = cudaEventQuery(st->done);
  if (rc == cudaSuccess) {
    pl_cuda_account(be, st);
    return 1;
  }
  if (rc != cudaErrorNotReady) /* an error: a wait will report it */
    (void)cudaGetLastError();
  return 0;
}

/* ------------------------------------------------------------ staging */

/* One warning per backend; later fallbacks only count. */
static void warn_fallback(cuda_backend *be, const char *why) {
  if (atomic_exchange(&be->warned, 1))
    return;
  pl_log(be->cfg.log, PL_LOG_WARN,
         "%s: %s; using pageable staging memory instead (slower copies; "
         "further fallbacks are counted in pinned_fallbacks, not logged)",
         be->base.name, why);
}

/* Page-locks `st` (st->p may already hold pages to register). Returns 0 on
 * success; on failure fills why and leaves any pages in st->p. */
static int stage_pin(cuda_backend *be, staging *st, char *why, size_t cap) {
  const char *call = be->method == PIN_HOSTALLOC ? "cudaHostAlloc"
                                                 : "cudaHostRegister";
  cudaError_t rc;
  if (PL_FAULT(PL_FAULT_PIN_ALLOC))
    rc = cudaErrorMemoryAllocation;
  else if (be->method == PIN_HOSTALLOC)
    rc = cudaHostAlloc(&st->p, be->stage_bytes, cudaHostAllocDefault);
  else if (!(st->p = pl_pages_alloc(be->stage_bytes, be->numa_node, 0)))
    rc = cudaErrorMemoryAllocation;
  else
    rc = cudaHostRegister(st->p, be->stage_bytes, cudaHostRegisterDefault);
  if (rc == cudaSuccess) {
    st->pinned = 1;
    st->registered = be->method == PIN_REGISTER;
    atomic_fetch_add(&be->pinned_bytes, be->stage_bytes);
    return 0;
  }
  (void)cudaGetLastError();
  if (be->method == PIN_HOSTALLOC)
    st->p = NULL;
  snprintf(why, cap, "pinning a %llu-byte staging buffer failed (%s: %s)",
           (unsigned long long)be->stage_bytes, call, cudaGetErrorString(rc));
  return -1;
}

/* Allocates staging buffer `st` (all zero but its state), pinned when
 * `pin` (its budget already reserved) and possible, else pageable. Lock not
 * held: only st->state is shared, and it is not touched here. On failure
 * the caller destroys the events. */
static pl_status stage_alloc(cuda_backend *be, staging *st, int pin,
                             int over_budget, pl_error *err) {
  char why[256];
  CUDA_TRY(cudaEventCreate(&st->start), err);
  CUDA_TRY(cudaEventCreate(&st->done), err);
  int fell_back = 0;
  if (pin && stage_pin(be, st, why, sizeof why) != 0)
    fell_back = 1;
  if (over_budget) {
    snprintf(why, sizeof why,
             "the pinned budget of %llu bytes is spent",
             (unsigned long long)be->budget);
    fell_back = 1;
  }
  if (fell_back) {
    atomic_fetch_add(&be->pinned_fallbacks, 1);
    warn_fallback(be, why);
  }
  if (!st->p && !(st->p = pl_pages_alloc(be->stage_bytes, be->numa_node, 0)))
    return pl_errorf(err, PL_NO_MEMORY,
                     "cannot allocate a %llu-byte staging buffer",
                     (unsigned long long)be->stage_bytes);
  return PL_OK;
}

static void stage_free(cuda_backend *be, staging *st) {
  if (st->state == STAGE_EMPTY)
    return;
  if (st->pinned && !st->registered) {
    cudaFreeHost(st->p);
  } else {
    if (st->registered)
      cudaHostUnregister(st->p);
    pl_pages_free(st->p, be->stage_bytes);
  }
  if (st->pinned)
    atomic_fetch_sub(&be->pinned_bytes, be->stage_bytes);
  cudaEventDestroy(st->start);
  cudaEventDestroy(st->done);
  memset(st, 0, sizeof *st);
}

/* Makes a new staging buffer in an EMPTY slot. [mu] held on entry and exit,
 * released while allocating. */
static pl_status stage_grow(cuda_backend *be, staging *st, pl_error *err) {
  int pin = 0, over = 0;
  if (be->cfg.pin_memory) {
    over = be->pin_reserved + be->stage_bytes > be->budget;
    pin = !over;
    if (pin)
      be->pin_reserved += be->stage_bytes;
  }
  st->state = STAGE_BUSY; /* reserve the slot while unlocked */
  pthread_mutex_unlock(&be->mu);
  pl_status s = stage_alloc(be, st, pin, over, err);
  pthread_mutex_lock(&be->mu);
  if (pin && !st->pinned)
    be->pin_reserved -= be->stage_bytes;
  if (s != PL_OK) {
    if (st->start)
      cudaEventDestroy(st->start);
    if (st->done)
      cudaEventDestroy(st->done);
    memset(st, 0, sizeof *st); /* EMPTY */
    pthread_cond_broadcast(&be->cv);
  }
  return s;
}

/* A FREE staging buffer whose last copy has finished, else NULL. [mu] */
static staging *find_idle(cuda_backend *be) {
  for (int i = 0; i < be->cfg.staging_buffers; i++) {
    staging *st = &be->stages[i];
    if (st->state == STAGE_FREE && stage_idle(be, st))
      return st;
  }
  return NULL;
}

/* The FREE staging buffer whose copy was issued first, else NULL. [mu] */
static staging *find_oldest(cuda_backend *be) {
  staging *best = NULL;
  for (int i = 0; i < be->cfg.staging_buffers; i++) {
    staging *st = &be->stages[i];
    if (st->state == STAGE_FREE && (!best || st->seq < best->seq))
      best = st;
  }
  return best;
}

static staging *find_empty(cuda_backend *be) {
  for (int i = 0; i < be->cfg.staging_buffers; i++)
    if (be->stages[i].state == STAGE_EMPTY)
      return &be->stages[i];
  return NULL;
}

/* Takes a staging buffer for a filler: an idle one, else a new one (up to
 * the count), else the oldest in flight after its copy finishes. Runs in a
 * worker thread, so the host wait is off the consumer's path. */
static pl_status stage_acquire(cuda_backend *be, staging **out,
                               pl_error *err) {
  pthread_mutex_lock(&be->mu);
  staging *st;
  pl_status s = PL_OK;
  for (;;) {
    if ((st = find_idle(be))) {
      st->state = STAGE_BUSY;
      break;
    }
    if ((st = find_empty(be))) {
      s = stage_grow(be, st, err);
      break;
    }
    if ((st = find_oldest(be))) {
      st->state = STAGE_BUSY;
      pthread_mutex_unlock(&be->mu);
      cudaError_t rc = cudaEventSynchronize(st->done);
      pthread_mutex_lock(&be->mu);
      if (rc != cudaSuccess) {
        st->state = STAGE_FREE;
        s = pl_cuda_fail(err, rc, "cudaEventSynchronize");
      } else {
        pl_cuda_account(be, st);
      }
      break;
    }
    pthread_cond_wait(&be->cv, &be->mu); /* all are being filled */
  }
  pthread_mutex_unlock(&be->mu);
  *out = s == PL_OK ? st : NULL;
  return s;
}

void pl_cuda_stage_put(cuda_backend *be, staging *st, int copied) {
  pthread_mutex_lock(&be->mu);
  st->state = STAGE_FREE;
  if (copied) {
    st->copied = 1;
    st->timing = 1;
    st->seq = ++be->seq;
  }
  pthread_cond_signal(&be->cv);
  pthread_mutex_unlock(&be->mu);
}

/* ------------------------------------------------------------ buffers */

static void buf_events_destroy(cuda_buf *cb) {
  if (cb->done)
    cudaEventDestroy(cb->done);
  if (cb->released)
    cudaEventDestroy(cb->released);
}

static pl_status buf_events_create(cuda_buf *cb, pl_error *err) {
  CUDA_TRY(cudaEventCreateWithFlags(&cb->done, cudaEventDisableTiming), err);
  CUDA_TRY(cudaEventCreateWithFlags(&cb->released, cudaEventDisableTiming),
           err);
  return PL_OK;
}

static pl_status device_alloc(pl_bufmem *m, pl_error *err) {
  if (PL_FAULT(PL_FAULT_DEVICE_ALLOC))
    return pl_cuda_fail(err, cudaErrorMemoryAllocation, "cudaMalloc");
  CUDA_TRY(cudaMalloc(&m->data, m->bytes ? m->bytes : 1), err);
  return PL_OK;
}

static pl_status buf_alloc_in(cuda_backend *be, pl_bufmem *m, pl_error *err) {
  cuda_buf *cb = calloc(1, sizeof *cb);
  if (!cb)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = buf_events_create(cb, err);
  if (s == PL_OK)
    s = device_alloc(m, err);
  if (s != PL_OK) {
    buf_events_destroy(cb);
    free(cb);
    m->data = NULL;
    pl_error_prefix(err, "%llu-byte batch buffer on %s",
                    (unsigned long long)m->bytes, be->base.name);
    return s;
  }
  m->priv = cb;
  return PL_OK;
}

static pl_status cuda_buf_alloc(pl_backend *b, pl_bufmem *m, pl_error *err) {
  cuda_backend *be = cb_of(b);
  m->data = m->priv = m->host = NULL;
  if (m->bytes > be->cfg.batch_bytes)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "a %llu-byte batch buffer exceeds the %llu-byte batches "
                     "the backend was made for",
                     (unsigned long long)m->bytes,
                     (unsigned long long)be->cfg.batch_bytes);
  WITH_DEVICE(be, err, buf_alloc_in(be, m, err));
}

static void cuda_buf_free(pl_backend *b, pl_bufmem *m) {
  cuda_backend *be = cb_of(b);
  cuda_buf *cb = m->priv;
  pl_status s;
  int prev = pl_cuda_dev_enter(be, &s, NULL);
  if (cb) {
    /* Neither our copies nor the consumer's last work may still use it.
     * The stream, not just `done`: a batch that failed halfway through its
     * chunks queued copies that no `done` covers. */
    cudaStreamSynchronize(be->stream);
    cudaEventSynchronize(cb->done);
    if (cb->has_released)
      cudaEventSynchronize(cb->released);
    if (cb->stage)
      pl_cuda_stage_put(be, cb->stage, 0);
    pl_cuda_direct_buf_free(be, cb);
    buf_events_destroy(cb);
    free(cb);
  }
  if (m->data)
    cudaFree(m->data);
  (void)cudaGetLastError();
  pl_cuda_dev_leave(be, prev);
  m->data = m->priv = m->host = NULL;
}

/* ------------------------------------------------------------ filling */

static pl_status fill_begin_in(cuda_backend *be, pl_bufmem *m,
                               pl_error *err) {
  cuda_buf *cb = m->priv;
  staging *st;
  if (be->stage_bytes == 0) /* direct mode with every field direct */
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "fill_begin: this backend has no staging buffers");
  PL_TRY(stage_acquire(be, &st, err));
  cb->stage = st;
  m->host = st->p;
  return PL_OK;
}

static pl_status cuda_fill_begin(pl_backend *b, pl_bufmem *m, pl_error *err) {
  cuda_backend *be = cb_of(b);
  WITH_DEVICE(be, err, fill_begin_in(be, m, err));
}

/* Queues the copy of the staged batch; returns with the staging buffer
 * still attached (the caller gives it back). */
static pl_status issue_copy(cuda_backend *be, pl_bufmem *m, uint64_t used,
                            pl_error *err) {
  cuda_buf *cb = m->priv;
  cudaStream_t s = be->stream;
  if (cb->has_released) { /* the consumer's stream is done with m->data */
    CUDA_TRY(cudaStreamWaitEvent(s, cb->released, 0), err);
    cb->has_released = 0;
  }
  if (PL_FAULT(PL_FAULT_COPY))
    return pl_cuda_fail(err, cudaErrorInvalidValue, "cudaMemcpyAsync");
  CUDA_TRY(cudaEventRecord(cb->stage->start, s), err);
  CUDA_TRY(cudaMemcpyAsync(m->data, cb->stage->p, used,
                           cudaMemcpyHostToDevice, s),
           err);
  CUDA_TRY(cudaEventRecord(cb->done, s), err);
  CUDA_TRY(cudaEventRecord(cb->stage->done, s), err);
  return PL_OK;
}

static pl_status fill_end_in(cuda_backend *be, pl_bufmem *m, uint64_t used,
                             pl_error *err) {
  cuda_buf *cb = m->priv;
  staging *st = cb->stage;
  pl_status s = used > m->bytes || used > be->stage_bytes
                    ? pl_errorf(err, PL_INVALID_ARGUMENT,
                                "%llu bytes used of a %llu-byte buffer",
                                (unsigned long long)used,
                                (unsigned long long)PL_MIN(m->bytes,
                                                           be->stage_bytes))
                    : issue_copy(be, m, used, err);
  cb->stage = NULL;
  m->host = NULL;
  if (s != PL_OK) {
    /* A partly queued copy may still read the staging buffer. */
    cudaStreamSynchronize(be->stream);
    (void)cudaGetLastError();
    pl_cuda_stage_put(be, st, 0);
    pl_error_prefix(err, "copy of a %llu-byte batch to %s",
                    (unsigned long long)used, be->base.name);
    return s;
  }
  atomic_fetch_add(&be->batches_copied, 1);
  atomic_fetch_add(&be->bytes_copied, used);
  pl_cuda_stage_put(be, st, 1);
  return PL_OK;
}

static pl_status cuda_fill_end(pl_backend *b, pl_bufmem *m, uint64_t used,
                               pl_error *err) {
  cuda_backend *be = cb_of(b);
  if (!((cuda_buf *)m->priv)->stage)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "fill_end without fill_begin");
  WITH_DEVICE(be, err, fill_end_in(be, m, used, err));
}

static void cuda_fill_abort(pl_backend *b, pl_bufmem *m) {
  cuda_buf *cb = m->priv;
  if (cb->stage)
    pl_cuda_stage_put(cb_of(b), cb->stage, 0);
  cb->stage = NULL;
  m->host = NULL;
}

/* ------------------------------------------------------------ consumer */

static pl_status wait_copy(cuda_backend *be, cuda_buf *cb, pl_error *err) {
  cudaError_t rc = cudaEventSynchronize(cb->done);
  if (rc != cudaSuccess)
    return pl_cuda_fail(err, rc, "cudaEventSynchronize");
  return PL_OK;
}

static pl_status cuda_deliver(pl_backend *b, pl_bufmem *m, pl_error *err) {
  cuda_backend *be = cb_of(b);
  if (be->cfg.non_blocking)
    return PL_OK; /* the consumer orders its stream with wait_stream */
  WITH_DEVICE(be, err, wait_copy(be, m->priv, err));
}

static pl_status stream_wait(cuda_buf *cb, void *stream, pl_error *err) {
  CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)stream, cb->done, 0), err);
  return PL_OK;
}

static pl_status cuda_wait_stream(pl_backend *b, pl_bufmem *m, void *stream,
                                  pl_error *err) {
  cuda_backend *be = cb_of(b);
  WITH_DEVICE(be, err, stream_wait(m->priv, stream, err));
}

static pl_status cuda_wait_host(pl_backend *b, pl_bufmem *m, pl_error *err) {
  cuda_backend *be = cb_of(b);
  WITH_DEVICE(be, err, wait_copy(be, m->priv, err));
}

static void cuda_release(pl_backend *b, pl_bufmem *m, void *stream) {
  cuda_backend *be = cb_of(b);
  cuda_buf *cb = m->priv;
  pl_status s;
  int prev = pl_cuda_dev_enter(be, &s, NULL);
  /* NULL is the legacy default stream of this (now current) device. */
  cudaError_t rc = s == PL_OK ? cudaEventRecord(cb->released,
                                                (cudaStream_t)stream)
                              : cudaErrorInvalidDevice;
  if (rc == cudaSuccess) {
    cb->has_released = 1;
    pl_cuda_dev_leave(be, prev);
    return;
  }
  /* No event to order the next copy by (a bad stream handle, say): wait
   * for all work on the device instead, so m->data is safe to overwrite. */
  (void)cudaGetLastError();
  cb->has_released = 0;
  cudaDeviceSynchronize();
  (void)cudaGetLastError();
  pl_cuda_dev_leave(be, prev);
  pl_log(be->cfg.log, PL_LOG_WARN,
         "%s: releasing a batch: cudaEventRecord: %s; synchronized the device "
         "instead",
         be->base.name, cudaGetErrorString(rc));
}

static pl_status read_back_in(cuda_backend *be, pl_bufmem *m,
                              uint64_t offset, void *dst, uint64_t n,
                              pl_error *err) {
  PL_TRY(wait_copy(be, m->priv, err));
  if (n == 0)
    return PL_OK;
  CUDA_TRY(cudaMemcpy(dst, (const char *)m->data + offset, n,
                      cudaMemcpyDeviceToHost),
           err);
  return PL_OK;
}

static pl_status cuda_read_back(pl_backend *b, pl_bufmem *m, uint64_t offset,
                                void *dst, uint64_t n, pl_error *err) {
  cuda_backend *be = cb_of(b);
  if (offset > m->bytes || n > m->bytes - offset)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "bytes [%llu, +%llu) are outside the %llu-byte buffer",
                     (unsigned long long)offset, (unsigned long long)n,
                     (unsigned long long)m->bytes);
  WITH_DEVICE(be, err, read_back_in(be, m, offset, dst, n, err));
}

static void cuda_stats(pl_backend *b, pl_loader_stats *out) {
  cuda_backend *be = cb_of(b);
  /* Fold in finished copies that no filler has looked at yet. The device
   * is made current first, as at every entry point: stats may be read from
   * a thread that never used CUDA, which would otherwise get a context on
   * device 0. */
  pl_status s;
  int prev = pl_cuda_dev_enter(be, &s, NULL);
  pthread_mutex_lock(&be->mu);
  for (int i = 0; s == PL_OK && i < be->cfg.staging_buffers; i++)
    if (be->stages[i].state == STAGE_FREE)
      (void)stage_idle(be, &be->stages[i]);
  pthread_mutex_unlock(&be->mu);
  pl_cuda_dev_leave(be, prev);
  out->batches_copied += atomic_load(&be->batches_copied);
  out->bytes_copied += atomic_load(&be->bytes_copied);
  out->pinned_bytes += atomic_load(&be->pinned_bytes);
  out->pinned_fallbacks += atomic_load(&be->pinned_fallbacks);
  out->copy_s += (double)atomic_load(&be->copy_ns) * 1e-9;
}

static pl_status sync_in(cuda_backend *be, pl_error *err) {
  CUDA_TRY(cudaStreamSynchronize(be->stream), err);
  return PL_OK;
}

static pl_status cuda_sync(pl_backend *b, pl_error *err) {
  cuda_backend *be = cb_of(b);
  WITH_DEVICE(be, err, sync_in(be, err));
}

/* ------------------------------------------------------------ lifetime */

static void cuda_destroy(pl_backend *b) {
  cuda_backend *be = cb_of(b);
  pl_status s;
  int prev = pl_cuda_dev_enter(be, &s, NULL);
  if (be->stream)
    cudaStreamSynchronize(be->stream);
  for (int i = 0; be->stages && i < be->cfg.staging_buffers; i++)
    stage_free(be, &be->stages[i]);
  pl_cuda_direct_destroy(be);
  if (be->stream)
    cudaStreamDestroy(be->stream);
  (void)cudaGetLastError();
  pl_cuda_dev_leave(be, prev);
  free(be->stages);
  pthread_mutex_destroy(&be->mu);
  pthread_cond_destroy(&be->cv);
  free(be);
}

static const pl_backend_vt cuda_vt = {
    .name = "cuda",
    .destroy = cuda_destroy,
    .buf_alloc = cuda_buf_alloc,
    .buf_free = cuda_buf_free,
    .fill_begin = cuda_fill_begin,
    .fill_end = cuda_fill_end,
    .fill_abort = cuda_fill_abort,
    .deliver = cuda_deliver,
    .wait_stream = cuda_wait_stream,
    .wait_host = cuda_wait_host,
    .release = cuda_release,
    .read_back = cuda_read_back,
    .enable_direct = pl_cuda_enable_direct,
    .fill_spans = pl_cuda_fill_spans,
    .sync = cuda_sync,
    .stats = cuda_stats,
};

int pl_backend_cuda_built(void) { return 1; }

int pl_backend_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/* Why cudaGetDeviceCount failed, in the words a user acts on: the
 * runtime's "CUDA driver version is insufficient" also means "there is no
 * driver at all" (then cudaDriverGetVersion reports 0), and sends users to
 * upgrade a driver they do not have. The CUDA name goes to the debug log. */
static pl_status no_device_words(cudaError_t rc, const pl_logger *log,
                                 pl_error *err) {
  int drv = 0, rt = 0;
  (void)cudaDriverGetVersion(&drv);
  (void)cudaRuntimeGetVersion(&rt);
  (void)cudaGetLastError();
  pl_log(log, PL_LOG_DEBUG, "cudaGetDeviceCount: %s (%s); driver CUDA %d, "
         "runtime CUDA %d", cudaGetErrorName(rc), cudaGetErrorString(rc),
         drv, rt);
  if (rc == cudaErrorNoDevice || (rc == cudaErrorInsufficientDriver && !drv))
    return pl_errorf(err, PL_NO_DEVICE, rc == cudaErrorNoDevice
                                            ? "no NVIDIA GPU found"
                                            : "no NVIDIA driver found");
  if (rc == cudaErrorInsufficientDriver)
    return pl_errorf(err, PL_NO_DEVICE,
                     "the NVIDIA driver supports CUDA %d.%d, older than this "
                     "build's CUDA %d.%d runtime: update the driver",
                     drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
  return pl_errorf(err, PL_NO_DEVICE, "no usable NVIDIA GPU: "
                   "cudaGetDeviceCount: %s", cudaGetErrorString(rc));
}

static pl_status no_device(cudaError_t rc, const pl_logger *log,
                           pl_error *err) {
  no_device_words(rc, log, err);
  pl_error_set_cuda(err, (int)rc); /* the CUDA code stays in the error */
  return PL_NO_DEVICE;
}

static pl_status pick_device(int index, const pl_logger *log, pl_error *err) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess)
    return no_device(rc, log, err);
  if (index < 0 || index >= n)
    return pl_errorf(err, PL_NO_DEVICE,
                     "CUDA device %d does not exist (%d device%s found)",
                     index, n, n == 1 ? "" : "s");
  return PL_OK;
}

/* Name, NUMA node and pinning method of the chosen device. */
static pl_status describe_device(cuda_backend *be, pl_error *err) {
  int dev = be->base.device_index;
  struct cudaDeviceProp prop;
  CUDA_TRY(cudaGetDeviceProperties(&prop, dev), err);
  prop.name[sizeof prop.name - 1] = '\0';
  snprintf(be->base.name, sizeof be->base.name, "cuda:%d %.80s", dev,
           prop.name);
  char bus[32];
  be->numa_node = -1;
  if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) == cudaSuccess)
    be->numa_node = pl_pci_numa_node(bus);
  (void)cudaGetLastError();
  /* Registering pre-faulted pages beats cudaHostAlloc (docs/gpu-engine.md);
   * PL_CUDA_PIN=hostalloc selects the other way, for measurements. */
  const char *m = getenv("PL_CUDA_PIN");
  be->method = m && !strcmp(m, "hostalloc") ? PIN_HOSTALLOC : PIN_REGISTER;
  return PL_OK;
}

static pl_status cuda_setup(cuda_backend *be, const pl_backend_config *cfg,
                            pl_error *err) {
  be->cfg = *cfg;
  if (be->cfg.staging_buffers < 1)
    be->cfg.staging_buffers = 1;
  be->stage_bytes = pl_pages_size(cfg->stage_bytes ? cfg->stage_bytes
                                                   : cfg->batch_bytes);
  if (cfg->pinned_budget)
    be->budget = cfg->pinned_budget;
  else if (!pl_mul_u64(be->stage_bytes, (uint64_t)be->cfg.staging_buffers,
                       &be->budget))
    be->budget = UINT64_MAX;
  be->stages = calloc((size_t)be->cfg.staging_buffers, sizeof *be->stages);
  if (!be->stages)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  PL_TRY(describe_device(be, err));
  CUDA_TRY(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking),
           err);
  pl_log(cfg->log, PL_LOG_DEBUG,
         "%s: %d staging buffers of %llu bytes, %s, pinned budget %llu bytes, "
         "NUMA node %d",
         be->base.name, be->cfg.staging_buffers,
         (unsigned long long)be->stage_bytes,
         !cfg->pin_memory             ? "pageable"
         : be->method == PIN_REGISTER ? "pinned by cudaHostRegister"
                                      : "pinned by cudaHostAlloc",
         (unsigned long long)be->budget, be->numa_node);
  return PL_OK;
}

pl_status pl_backend_cuda_create(const pl_backend_config *cfg,
                                 pl_backend **out, pl_error *err) {
  if (!out || !cfg)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "cfg and out are required");
  *out = NULL;
  PL_TRY(pick_device(cfg->device_index, cfg->log, err));
  cuda_backend *be = calloc(1, sizeof *be);
  if (!be)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  be->base.vt = &cuda_vt;
  be->base.kind = PL_DEVICE_CUDA;
  be->base.device_index = cfg->device_index;
  snprintf(be->base.name, sizeof be->base.name, "cuda:%d", cfg->device_index);
  pthread_mutex_init(&be->mu, NULL);
  pthread_cond_init(&be->cv, NULL);
  pl_status s;
  int prev = pl_cuda_dev_enter(be, &s, err);
  if (s != PL_OK) { /* the device exists but cannot be used */
    pl_error_prefix(err, "cuda:%d", cfg->device_index);
    s = PL_NO_DEVICE;
    if (err)
      err->status = s;
  } else
    s = cuda_setup(be, cfg, err);
  pl_cuda_dev_leave(be, prev);
  if (s != PL_OK) {
    cuda_destroy(&be->base);
    return s;
  }
  *out = &be->base;
  return PL_OK;
}
