/* The device backend contract: where batch memory lives and how a filled
 * batch reaches it. Two implementations: backend/cpu/ (host memory; the
 * workers write the consumer's memory directly) and backend/cuda/ (workers
 * write page-locked staging buffers that are copied asynchronously into
 * device memory). The loader knows nothing of CUDA.
 *
 * Creation. The backend's capabilities (pl_backend_caps) are known before
 * it exists; the copy planner (copy_plan.h) turns them and the loader's
 * request into a plan, and the backend is created with that plan: staging
 * size and count, pinned budget, dataset memory to page-lock in place.
 * There is no later negotiation.
 *
 * Life of one batch buffer (pl_bufmem), as the loader drives it:
 *
 *   buf_alloc                       once, when the pool grows
 *   loop:
 *     fill_begin   worker thread    m->host = memory to write into (a
 *                                   staging buffer of plan.stage_bytes, or
 *                                   the batch itself on the CPU). Not
 *                                   called when the plan stages nothing.
 *     (worker writes fields at m->host + plan.fields[f].stage_off)
 *     submit       worker thread    the one copy primitive: spans into
 *                                   m->data, PL_SPANS_FIRST on a batch's
 *                                   first call, PL_SPANS_LAST on its last;
 *                                   a whole batch is one span, one call.
 *                                   Each call gives back the staging buffer
 *                                   fill_begin attached. On a failed batch
 *                                   fill_abort replaces it.
 *     deliver      consumer thread  the batch is handed out (sync mode waits
 *                                   for the copy here)
 *     wait_stream / wait_host       consumer, any number of times
 *     release      any thread       consumer gives the batch back, naming
 *                                   the stream that last used it
 *   buf_free                        when the pool is freed
 *
 * fill_begin of a buffer is never called before its previous release; the
 * backend makes sure a new copy into m->data does not start before the
 * work on the released stream is done (an event the copy stream waits on,
 * not a host wait). All calls on distinct buffers may run concurrently;
 * calls on one buffer are ordered by the loader. */
#ifndef PL_BACKEND_H
#define PL_BACKEND_H

#include "backend/copy_plan.h"
#include "core/common.h"
#include "data/dataset.h"
#include "data/transform.h"

typedef struct pl_backend pl_backend;

typedef struct pl_bufmem {
  void *data; /* consumer-visible batch memory, `bytes` long */
  void *host; /* set by fill_begin: where the worker writes */
  uint64_t bytes;
  uint32_t samples; /* set by the loader before a batch's last submit: its
                       samples (for transforms) */
  void *priv; /* backend's per-buffer state */
  /* With plan.shared_memory, the memfd `host` starts at byte 0 of
   * (host_fd_bytes long) and its id (pl_fd_id), set by fill_begin; host_fd
   * is -1 otherwise. */
  int host_fd;
  uint64_t host_fd_bytes;
  uint64_t host_id;
} pl_bufmem;

enum { PL_SPANS_FIRST = 1, PL_SPANS_LAST = 2 };

/* Whether copy i lies inside the batch buffer: every backend's submit
 * checks it before writing, with the same error. */
static inline pl_status pl_span_check(const pl_bufmem *m, const pl_span *sp,
                                      int i, pl_error *err) {
  if (sp[i].dst_off <= m->bytes && sp[i].len <= m->bytes - sp[i].dst_off)
    return PL_OK;
  return pl_errorf(err, PL_INVALID_ARGUMENT,
                   "copy %d ([%llu, +%llu)) is outside the %llu-byte batch "
                   "buffer",
                   i, (unsigned long long)sp[i].dst_off,
                   (unsigned long long)sp[i].len,
                   (unsigned long long)m->bytes);
}

typedef struct pl_backend_config {
  int device_index;
  int pin_memory;
  int non_blocking;
  /* Read during create only (the backend keeps what it needs): batch and
   * staging sizes, staging count, pinned budget, regions to page-lock. */
  const pl_copy_plan *plan;
  const pl_logger *log; /* outlives the backend */
  /* Device transforms (data/transform.h; NULL: none; outlives the
   * backend): after a batch's last submit a device backend runs the plan
   * on a stream of its own, reading the staged bytes at m->data (laid out
   * as plan->batch_bytes says) and writing the delivered arrays at
   * m->data + xform_out_off; deliver / wait_* then wait for that. Batch
   * buffers are then xform_buf_bytes long. A host backend ignores it (the
   * workers transform). */
  const pl_xform_plan *xform;
  uint64_t xform_out_off, xform_buf_bytes;
} pl_backend_config;

typedef struct pl_backend_vt {
  const char *name; /* "cpu", "cuda" */
  void (*destroy)(pl_backend *be);
  pl_status (*buf_alloc)(pl_backend *be, pl_bufmem *m, pl_error *err);
  void (*buf_free)(pl_backend *be, pl_bufmem *m);
  pl_status (*fill_begin)(pl_backend *be, pl_bufmem *m, pl_error *err);
  /* Queues the n copies (n <= plan.max_spans) into m->data and gives back
   * the staging buffer if fill_begin attached one. The call with
   * PL_SPANS_FIRST is ordered after the consumer's last release; the one
   * with PL_SPANS_LAST completes the batch (its copies, and all before,
   * are what deliver / wait_* wait for, and it counts one batch copied).
   * A span outside the buffer is PL_INVALID_ARGUMENT. Worker thread. */
  pl_status (*submit)(pl_backend *be, pl_bufmem *m, const pl_span *spans,
                      int n, int flags, pl_error *err);
  void (*fill_abort)(pl_backend *be, pl_bufmem *m);
  /* Optional (a device backend; NULL elsewhere): for a reader that writes
   * samples in m->data itself (pl_device_dst, data/dataset.h), the device
   * m->data is on and the events (cudaEvent_t) its stream must wait for
   * before writing: the consumer's last use of the buffer and the last
   * transform that read it. Worker thread, after fill_begin and before the
   * batch's first submit; the writes are complete before that submit. */
  pl_status (*device_dst)(pl_backend *be, pl_bufmem *m, int *device,
                          void **events, pl_error *err);
  pl_status (*deliver)(pl_backend *be, pl_bufmem *m, pl_error *err);
  pl_status (*wait_stream)(pl_backend *be, pl_bufmem *m, void *stream,
                           pl_error *err);
  pl_status (*wait_host)(pl_backend *be, pl_bufmem *m, pl_error *err);
  void (*release)(pl_backend *be, pl_bufmem *m, void *stream);
  /* Host copy of [offset, offset + n) of m->data, after the batch's copy. */
  pl_status (*read_back)(pl_backend *be, pl_bufmem *m, uint64_t offset,
                         void *dst, uint64_t n, pl_error *err);
  /* Waits on the host until every copy queued so far is done. */
  pl_status (*sync)(pl_backend *be, pl_error *err);
  /* Adds the backend's counters (copies, pinned bytes, fallbacks, copy
   * time) into out. Thread-safe. */
  void (*stats)(pl_backend *be, pl_loader_stats *out);
  /* Optional: the host-to-device rate of a pinned copy, bytes/s, measured
   * once (the first call; later calls return it); 0 when unknown. For the
   * report's "N% of this link's rate". Consumer thread, before the first
   * fill. */
  double (*link_rate)(pl_backend *be);
} pl_backend_vt;

struct pl_backend {
  const pl_backend_vt *vt;
  pl_device_kind kind;
  int device_index;
  char name[96]; /* "cpu", "cuda:0 NVIDIA H200" */
};

pl_backend_caps pl_backend_cpu_caps(void);
pl_status pl_backend_cpu_create(const pl_backend_config *cfg,
                                pl_backend **out, pl_error *err);

/* PL_UNSUPPORTED when built without CUDA; PL_NO_DEVICE when no driver or no
 * such device. The CUDA backend lives in backend/cuda/; a build without
 * CUDA compiles backend/no_cuda.c instead. A failure to page-lock the
 * plan's regions is PL_CUDA or PL_NO_MEMORY with the cause named: the
 * loader then plans again without direct mode. */
pl_backend_caps pl_backend_cuda_caps(void);
pl_status pl_backend_cuda_create(const pl_backend_config *cfg,
                                 pl_backend **out, pl_error *err);
int pl_backend_cuda_built(void);
int pl_backend_cuda_device_count(void);

#endif /* PL_BACKEND_H */
