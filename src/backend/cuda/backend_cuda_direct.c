/* The CUDA backend's copies by spans, used two ways by the loader:
 *
 * Chunked gathers: a large batch is gathered into small staging chunks and
 * each is copied as soon as it is full, while it is still in the host's
 * last-level cache, so the DMA does not read it back from DRAM (see
 * loader.c, fill_chunked).
 *
 * Direct mode: the copy engine reads samples straight out of the
 * dataset's memory (its mapped files, page-locked in place), so a batch of
 * large samples moves from the page cache to the GPU with no CPU gather in
 * between.
 *
 * Why: a gather reads every byte and writes it to a staging buffer, and the
 * DMA reads it again; on the H200 machine host memory bandwidth caps that
 * at about 47 GB/s while PCIe moves 55 (bench/results/gpu-engine-h200-*).
 * One cudaMemcpyBatchAsync per batch, one copy per run of contiguous
 * samples, reaches the plain-copy rate for samples of 64 KiB and more
 * (bench/results/direct-probe-h200-2026-12-01.md); for small samples the
 * per-copy cost loses to a gather, so the loader gathers those fields into
 * a (now small) staging buffer and the same call copies them too.
 *
 * Pinning a file's pages costs budget (the files' bytes count as pinned;
 * a default budget grows to hold them) and time at create (about 0.3 s per
 * GiB), which is why the loader asks for it only when the caller did
 * (direct_copy). */
#include "backend/cuda/backend_cuda.h"
#include "backend/pinned_pool.h"

#include <stdlib.h>

/* ------------------------------------------------------------ regions */

static void unregister_all(void **p, int n) {
  for (int i = 0; i < n; i++)
    cudaHostUnregister(p[i]);
  (void)cudaGetLastError();
}

/* Page-locks the regions. A mapped file's pages are registered read-only
 * (the mapping is PROT_READ); decompressed bytes are ordinary heap. The
 * loader never passes a private file mapping (registering one hangs). */
static pl_status register_regions(const pl_region *r, int n, void **done,
                                  pl_error *err) {
  for (int i = 0; i < n; i++) {
    int file = r[i].kind == PL_REGION_SHARED_FILE;
    if (r[i].kind == PL_REGION_PRIVATE_FILE) { /* would hang: never */
      unregister_all(done, i);
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "a private file mapping cannot be page-locked");
    }
    unsigned flags = file ? cudaHostRegisterReadOnly : cudaHostRegisterDefault;
    cudaError_t rc = PL_FAULT(PL_FAULT_PIN_ALLOC)
                         ? cudaErrorMemoryAllocation
                         : cudaHostRegister((void *)r[i].ptr, r[i].len, flags);
    if (rc != cudaSuccess) {
      unregister_all(done, i);
      pl_status s = pl_cuda_fail(err, rc, file ? "cudaHostRegister(ReadOnly)"
                                               : "cudaHostRegister");
      pl_error_prefix(err, "page-locking %llu bytes of dataset memory",
                      (unsigned long long)r[i].len);
      return s;
    }
    done[i] = (void *)r[i].ptr;
  }
  return PL_OK;
}

static pl_status enable_in(cuda_backend *be, const pl_region *r, int n,
                           uint64_t stage_bytes, pl_error *err) {
  uint64_t bytes = 0, stage = stage_bytes ? pl_pages_size(stage_bytes) : 0,
           stage_total = 0, need = 0;
  for (int i = 0; i < n; i++)
    bytes += r[i].len;
  if (!pl_mul_u64(stage, (uint64_t)be->cfg.staging_buffers, &stage_total) ||
      !pl_add_u64(bytes, stage_total, &need))
    need = UINT64_MAX;
  void **regs = calloc((size_t)(n > 0 ? n : 1), sizeof *regs);
  if (!regs)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pthread_mutex_lock(&be->mu);
  pl_status s = PL_OK;
  uint64_t budget = be->cfg.pinned_budget ? be->cfg.pinned_budget : need;
  if (be->nsources || be->seq || be->pin_reserved)
    s = pl_errorf(err, PL_INVALID_ARGUMENT,
                  "enable_direct after the first fill");
  else if (need > budget)
    s = pl_errorf(err, PL_NO_MEMORY,
                  "the pinned budget of %llu bytes cannot hold the dataset's "
                  "%llu bytes plus %llu bytes of staging buffers",
                  (unsigned long long)budget, (unsigned long long)bytes,
                  (unsigned long long)stage_total);
  else
    be->pin_reserved += bytes, be->budget = budget;
  pthread_mutex_unlock(&be->mu);
  if (s == PL_OK && (s = register_regions(r, n, regs, err)) != PL_OK) {
    pthread_mutex_lock(&be->mu);
    be->pin_reserved -= bytes;
    pthread_mutex_unlock(&be->mu);
  }
  if (s != PL_OK) {
    free(regs);
    return s;
  }
  be->sources = regs;
  be->nsources = n;
  be->stage_bytes = stage;
  atomic_fetch_add(&be->pinned_bytes, bytes);
  return PL_OK;
}

pl_status pl_cuda_enable_direct(pl_backend *b, const pl_region *r, int n,
                                uint64_t stage_bytes, pl_error *err) {
  cuda_backend *be = cb_of(b);
  WITH_DEVICE(be, err, enable_in(be, r, n, stage_bytes, err));
}

void pl_cuda_direct_destroy(cuda_backend *be) {
  unregister_all(be->sources, be->nsources); /* the stream is synchronized */
  free(be->sources);
  be->sources = NULL;
  be->nsources = 0;
}

/* ------------------------------------------------------------ copies */

/* Copy time of a batch with no staging buffer: the buffer's own events,
 * read when the buffer is filled again or freed (by then long finished;
 * one still running is skipped rather than waited for). */
static void buf_account(cuda_backend *be, cuda_buf *cb) {
  if (!cb->timing || cudaEventQuery(cb->t_done) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  cb->timing = 0;
  float ms = 0;
  if (cudaEventElapsedTime(&ms, cb->t_start, cb->t_done) == cudaSuccess &&
      ms > 0)
    atomic_fetch_add(&be->copy_ns, (uint64_t)((double)ms * 1e6));
  (void)cudaGetLastError();
}

void pl_cuda_direct_buf_free(cuda_backend *be, cuda_buf *cb) {
  if (cb->t_done) {
    cudaEventSynchronize(cb->t_done);
    buf_account(be, cb);
    cudaEventDestroy(cb->t_start);
    cudaEventDestroy(cb->t_done);
  }
  free(cb->dsts);
  free(cb->srcs);
  free(cb->sizes);
}

/* The timed events around this copy: the staging buffer's when one is
 * attached (pl_cuda_account reads them), else the buffer's own. */
static pl_status timing_events(cuda_backend *be, cuda_buf *cb,
                               cudaEvent_t *start, cudaEvent_t *done,
                               pl_error *err) {
  if (cb->stage) {
    *start = cb->stage->start;
    *done = cb->stage->done;
    return PL_OK;
  }
  if (!cb->t_done) {
    CUDA_TRY(cudaEventCreate(&cb->t_start), err);
    if (cudaEventCreate(&cb->t_done) != cudaSuccess) {
      cudaEventDestroy(cb->t_start);
      cb->t_start = NULL;
      return pl_cuda_fail(err, cudaErrorMemoryAllocation, "cudaEventCreate");
    }
  }
  buf_account(be, cb);
  *start = cb->t_start;
  *done = cb->t_done;
  return PL_OK;
}

static pl_status grow_arrays(cuda_buf *cb, int n, pl_error *err) {
  if (n <= cb->cap)
    return PL_OK;
  void **d = realloc(cb->dsts, (size_t)n * sizeof *d);
  if (d)
    cb->dsts = d;
  const void **s = d ? realloc(cb->srcs, (size_t)n * sizeof *s) : NULL;
  if (s)
    cb->srcs = s;
  size_t *z = s ? realloc(cb->sizes, (size_t)n * sizeof *z) : NULL;
  if (z)
    cb->sizes = z;
  if (!z)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for %d copies", n);
  cb->cap = n;
  return PL_OK;
}

/* Whether cudaMemcpyBatchAsync is missing (an older driver): then the
 * copies go one cudaMemcpyAsync each, correct but slower. */
static int batch_api_missing(cudaError_t rc) {
  return rc == cudaErrorNotSupported || rc == cudaErrorCallRequiresNewerDriver ||
         rc == cudaErrorNotYetImplemented;
}

/* One cudaMemcpyBatchAsync of n copies. The call appeared in CUDA 12.8
 * with a failure-index argument that CUDA 13 dropped; older toolkits have
 * none, and their builds always take the loop. Stream order: a source may
 * be staging memory that a later fill rewrites once this copy's events say
 * it is done. */
static cudaError_t batch_copy(cuda_buf *cb, int n, cudaStream_t s) {
#if CUDART_VERSION >= 12080
  struct cudaMemcpyAttributes at = {
      .srcAccessOrder = cudaMemcpySrcAccessOrderStream};
  size_t zero = 0;
#if CUDART_VERSION >= 13000
  return cudaMemcpyBatchAsync(cb->dsts, cb->srcs, cb->sizes, (size_t)n, &at,
                              &zero, 1, s);
#else
  size_t fail_idx = 0;
  return cudaMemcpyBatchAsync(cb->dsts, cb->srcs, cb->sizes, (size_t)n, &at,
                              &zero, 1, &fail_idx, s);
#endif
#else
  (void)cb, (void)n, (void)s;
  return cudaErrorNotSupported;
#endif
}

static pl_status copy_all(cuda_backend *be, cuda_buf *cb, int n,
                          pl_error *err) {
  cudaStream_t s = be->stream;
  if (n > 1 && !atomic_load(&be->no_batch_api)) {
    cudaError_t rc = batch_copy(cb, n, s);
    if (rc == cudaSuccess)
      return PL_OK;
    if (!batch_api_missing(rc))
      return pl_cuda_fail(err, rc, "cudaMemcpyBatchAsync");
    (void)cudaGetLastError();
    atomic_store(&be->no_batch_api, 1);
  }
  for (int i = 0; i < n; i++)
    CUDA_TRY(cudaMemcpyAsync(cb->dsts[i], cb->srcs[i], cb->sizes[i],
                             cudaMemcpyHostToDevice, s),
             err);
  return PL_OK;
}

static pl_status issue_spans(cuda_backend *be, pl_bufmem *m,
                             const pl_span *sp, int n, int flags,
                             uint64_t *total, pl_error *err) {
  cuda_buf *cb = m->priv;
  *total = 0;
  PL_TRY(grow_arrays(cb, n, err));
  for (int i = 0; i < n; i++) {
    if (sp[i].dst_off > m->bytes || sp[i].len > m->bytes - sp[i].dst_off)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "copy %d ([%llu, +%llu)) is outside the %llu-byte "
                       "batch buffer",
                       i, (unsigned long long)sp[i].dst_off,
                       (unsigned long long)sp[i].len,
                       (unsigned long long)m->bytes);
    cb->dsts[i] = (char *)m->data + sp[i].dst_off;
    cb->srcs[i] = sp[i].src;
    cb->sizes[i] = (size_t)sp[i].len;
    *total += sp[i].len;
  }
  cudaEvent_t start = NULL, done = NULL;
  PL_TRY(timing_events(be, cb, &start, &done, err));
  cudaStream_t s = be->stream;
  if ((flags & PL_SPANS_FIRST) && cb->has_released) {
    /* the consumer's stream is done with m->data */
    CUDA_TRY(cudaStreamWaitEvent(s, cb->released, 0), err);
    cb->has_released = 0;
  }
  if (flags & PL_SPANS_FIRST)
    PL_TRY(pl_cuda_xform_before_copy(be, cb, err));
  if (PL_FAULT(PL_FAULT_COPY))
    return pl_cuda_fail(err, cudaErrorInvalidValue, "cudaMemcpyBatchAsync");
  CUDA_TRY(cudaEventRecord(start, s), err);
  PL_TRY(copy_all(be, cb, n, err));
  /* One stream: the last piece's event also covers the earlier pieces. */
  if (flags & PL_SPANS_LAST) /* records cb->done, after any transforms */
    PL_TRY(pl_cuda_xform_complete(be, m, err));
  CUDA_TRY(cudaEventRecord(done, s), err);
  cb->timing = cb->stage == NULL;
  return PL_OK;
}

static pl_status spans_in(cuda_backend *be, pl_bufmem *m, const pl_span *sp,
                          int n, int flags, pl_error *err) {
  cuda_buf *cb = m->priv;
  staging *st = cb->stage;
  uint64_t total;
  pl_status s = issue_spans(be, m, sp, n, flags, &total, err);
  cb->stage = NULL;
  m->host = NULL;
  if (s != PL_OK) {
    /* A partly queued copy may still read the staging buffer. */
    cudaStreamSynchronize(be->stream);
    (void)cudaGetLastError();
    if (st)
      pl_cuda_stage_put(be, st, 0);
    pl_error_prefix(err, "%d copies into a batch on %s", n, be->base.name);
    return s;
  }
  if (flags & PL_SPANS_LAST)
    atomic_fetch_add(&be->batches_copied, 1);
  atomic_fetch_add(&be->bytes_copied, total);
  if (st)
    pl_cuda_stage_put(be, st, 1);
  return PL_OK;
}

pl_status pl_cuda_fill_spans(pl_backend *b, pl_bufmem *m, const pl_span *sp,
                             int n, int flags, pl_error *err) {
  cuda_backend *be = cb_of(b);
  WITH_DEVICE(be, err, spans_in(be, m, sp, n, flags, err));
}
