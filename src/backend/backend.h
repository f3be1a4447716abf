/* The device backend contract: where batch memory lives and how a filled
 * batch reaches it. Two implementations: backend_cpu.c (host memory, the
 * workers write the consumer's memory directly) and backend_cuda.c
 * (workers write page-locked staging buffers that are copied
 * asynchronously into device memory). The loader knows nothing of CUDA.
 *
 * Life of one batch buffer (pl_bufmem), as the loader drives it:
 *
 *   buf_alloc                       once, when the pool grows
 *   loop:
 *     fill_begin   worker thread    m->host = memory to write the batch into
 *     (worker writes the fields at m->host + layout offsets)
 *     fill_end     worker thread    make the bytes reach m->data (async copy
 *                                   + event for CUDA; nothing for CPU). On a
 *                                   failed batch fill_abort is called instead.
 *     deliver      consumer thread  the batch is handed out (sync mode waits
 *                                   for the copy here)
 *     wait_stream / wait_host       consumer, any number of times
 *     release      any thread       consumer gives the batch back, naming
 *                                   the stream that last used it
 *   buf_free                        when the pool is freed
 *
 * fill_begin of a buffer is never called before its previous release; the
 * backend must make sure a new copy into m->data does not start before the
 * work on the released stream is done (an event the copy stream waits on,
 * not a host wait). All calls on distinct buffers may run concurrently;
 * calls on one buffer are ordered by the loader. */
#ifndef PL_BACKEND_H
#define PL_BACKEND_H

#include "core/common.h"
#include "data/dataset.h"

typedef struct pl_backend pl_backend;

typedef struct pl_bufmem {
  void *data; /* consumer-visible batch memory, `bytes` long */
  void *host; /* set by fill_begin: where the worker writes */
  uint64_t bytes;
  void *priv; /* backend's per-buffer state */
  /* pyworkers: with pl_backend_config.shared_memory, the memfd `host`
   * starts at byte 0 of (host_fd_bytes long) and its id (pl_fd_id), set by
   * fill_begin; host_fd is -1 otherwise. */
  int host_fd;
  uint64_t host_fd_bytes;
  uint64_t host_id;
} pl_bufmem;

/* One copy into a batch buffer: `len` bytes from `src` (dataset memory
 * given to enable_direct, or the staging memory fill_begin handed out) to
 * m->data + dst_off. */
typedef struct pl_span {
  const void *src;
  uint64_t dst_off;
  uint64_t len;
} pl_span;

enum { PL_SPANS_FIRST = 1, PL_SPANS_LAST = 2 };

typedef struct pl_backend_config {
  int device_index;
  int pin_memory;
  int non_blocking;
  uint64_t pinned_budget;  /* 0: staging_buffers * batch_bytes */
  uint64_t batch_bytes;    /* bytes of one batch buffer (all fields) */
  uint64_t stage_bytes;    /* one staging buffer: a whole batch, or a chunk
                              of one (0: batch_bytes) */
  int staging_buffers;     /* staging buffers the workers need at once */
  const pl_logger *log;    /* outlives the backend */
  int shared_memory;       /* pyworkers: host memory the workers write is a
                              memfd (see pl_bufmem.host_fd) */
} pl_backend_config;

typedef struct pl_backend_vt {
  const char *name; /* "cpu", "cuda" */
  void (*destroy)(pl_backend *be);
  pl_status (*buf_alloc)(pl_backend *be, pl_bufmem *m, pl_error *err);
  void (*buf_free)(pl_backend *be, pl_bufmem *m);
  pl_status (*fill_begin)(pl_backend *be, pl_bufmem *m, pl_error *err);
  /* `used` bytes from the start of m->host hold the batch. */
  pl_status (*fill_end)(pl_backend *be, pl_bufmem *m, uint64_t used,
                        pl_error *err);
  void (*fill_abort)(pl_backend *be, pl_bufmem *m);
  pl_status (*deliver)(pl_backend *be, pl_bufmem *m, pl_error *err);
  pl_status (*wait_stream)(pl_backend *be, pl_bufmem *m, void *stream,
                           pl_error *err);
  pl_status (*wait_host)(pl_backend *be, pl_bufmem *m, pl_error *err);
  void (*release)(pl_backend *be, pl_bufmem *m, void *stream);
  /* Host copy of [offset, offset + n) of m->data, after the batch's copy. */
  pl_status (*read_back)(pl_backend *be, pl_bufmem *m, uint64_t offset,
                         void *dst, uint64_t n, pl_error *err);
  /* Optional (NULL: not supported). Direct mode: the copy engine reads
   * the dataset's memory in place. Makes the n regions readable by it
   * until destroy (page-locked, counted as pinned) and shrinks staging
   * buffers to `stage_bytes`, what the fields still gathered need (0:
   * none). Called at most once, before the first fill; fails with nothing
   * changed (the pinned budget cannot hold it, registration failed), and
   * the loader then gathers as before. */
  pl_status (*enable_direct)(pl_backend *be, const pl_region *r, int n,
                             uint64_t stage_bytes, pl_error *err);
  /* Optional: fill_end for a batch that arrives as pieces (chunked
   * gathers, direct mode). Queues the n copies into m->data and gives back
   * the staging buffer if fill_begin attached one (direct mode may not
   * have). A batch is one or more calls: the one with PL_SPANS_FIRST is
   * ordered after the consumer's release, as fill_end's copy is; the one
   * with PL_SPANS_LAST completes the batch (its copies, and all before,
   * are what deliver / wait_* wait for). Worker thread. */
  pl_status (*fill_spans)(pl_backend *be, pl_bufmem *m, const pl_span *spans,
                          int n, int flags, pl_error *err);
  /* Optional: waits on the host until every copy queued so far is done. */
  pl_status (*sync)(pl_backend *be, pl_error *err);
  /* Adds the backend's counters (copies, pinned bytes, fallbacks, copy
   * time) into out. Thread-safe. */
  void (*stats)(pl_backend *be, pl_loader_stats *out);
} pl_backend_vt;

struct pl_backend {
  const pl_backend_vt *vt;
  pl_device_kind kind;
  int device_index;
  char name[96]; /* "cpu", "cuda:0 NVIDIA H200" */
};

pl_status pl_backend_cpu_create(const pl_backend_config *cfg,
                                pl_backend **out, pl_error *err);

/* PL_UNSUPPORTED when built without CUDA; PL_NO_DEVICE when no driver or no
 * such device. The CUDA backend lives in backend_cuda.c; a build without
 * CUDA compiles backend_cuda_none.c instead. */
pl_status pl_backend_cuda_create(const pl_backend_config *cfg,
                                 pl_backend **out, pl_error *err);
int pl_backend_cuda_built(void);
int pl_backend_cuda_device_count(void);

#endif /* PL_BACKEND_H */
