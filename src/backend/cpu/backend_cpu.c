/* The CPU backend: batches live in ordinary host memory and the workers
 * write the consumer's memory directly, so a batch's span is already in
 * place and submit copies nothing. It stages nothing, so the planner never
 * chunks for it nor copies from dataset memory in place. */
#include "backend/backend.h"
#include "backend/host_pages.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { CPU_ALIGN = 4096 };

pl_backend_caps pl_backend_cpu_caps(void) {
  return (pl_backend_caps){.stages = 0, .spans = 1, .direct = 0,
                           .chunk_bytes = 0};
}

/* pyworkers: with plan.shared_memory, batch buffers are memfds. */
typedef struct cpu_backend {
  pl_backend base;
  int shared;
} cpu_backend;

static void cpu_destroy(pl_backend *be) { free(be); }

static pl_status cpu_buf_alloc_shared(pl_bufmem *m, pl_error *err) {
  int fd = -1;
  m->data = PL_FAULT(PL_FAULT_HOST_ALLOC)
                ? NULL
                : pl_pages_alloc_shared(m->bytes, -1, 1, &fd);
  if (!m->data)
    return pl_errorf(err, PL_NO_MEMORY,
                     "cannot allocate a %llu-byte shared batch buffer "
                     "(memfd_create, mmap)",
                     (unsigned long long)m->bytes);
  m->host_fd = fd;
  m->host_fd_bytes = pl_pages_size(m->bytes);
  m->host_id = pl_fd_id(fd);
  return PL_OK;
}

static pl_status cpu_buf_alloc(pl_backend *be, pl_bufmem *m, pl_error *err) {
  if (((cpu_backend *)be)->shared)
    return cpu_buf_alloc_shared(m, err);
  uint64_t n = pl_align_up(m->bytes, CPU_ALIGN);
  m->data = PL_FAULT(PL_FAULT_HOST_ALLOC) ? NULL : aligned_alloc(CPU_ALIGN, n);
  if (!m->data)
    return pl_errorf(err, PL_NO_MEMORY,
                     "cannot allocate a %llu-byte batch buffer",
                     (unsigned long long)n);
#ifdef MADV_HUGEPAGE
  if (n >= (2u << 20)) /* fewer TLB misses when workers sweep big batches */
    madvise(m->data, n, MADV_HUGEPAGE);
#endif
  return PL_OK;
}

static void cpu_buf_free(pl_backend *be, pl_bufmem *m) {
  if (((cpu_backend *)be)->shared) {
    pl_pages_free_shared(m->data, m->bytes, m->host_fd);
    m->data = NULL;
    m->host_fd = -1;
    return;
  }
  free(m->data);
  m->data = NULL;
}

static pl_status cpu_fill_begin(pl_backend *be, pl_bufmem *m, pl_error *err) {
  m->host = m->data;
  return PL_OK;
}

/* Spans written in place (every span the planner makes for this backend)
 * cost nothing; any other is copied, so the primitive means the same here
 * as on a device. */
static pl_status cpu_submit(pl_backend *be, pl_bufmem *m, const pl_span *sp,
                            int n, int flags, pl_error *err) {
  m->host = NULL;
  for (int i = 0; i < n; i++) {
    PL_TRY(pl_span_check(m, sp, i, err));
    char *dst = (char *)m->data + sp[i].dst_off;
    if (sp[i].src != dst && sp[i].len)
      memmove(dst, sp[i].src, sp[i].len);
  }
  return PL_OK;
}

static void cpu_fill_abort(pl_backend *be, pl_bufmem *m) { m->host = NULL; }

static pl_status cpu_ok(pl_backend *be, pl_bufmem *m, pl_error *err) {
  return PL_OK;
}

static pl_status cpu_wait_stream(pl_backend *be, pl_bufmem *m, void *stream,
                                 pl_error *err) {
  return PL_OK;
}

static void cpu_release(pl_backend *be, pl_bufmem *m, void *stream) {}

static pl_status cpu_read_back(pl_backend *be, pl_bufmem *m, uint64_t offset,
                               void *dst, uint64_t n, pl_error *err) {
  assert(offset <= m->bytes && n <= m->bytes - offset);
  memcpy(dst, (const char *)m->data + offset, n);
  return PL_OK;
}

static pl_status cpu_sync(pl_backend *be, pl_error *err) { return PL_OK; }

static void cpu_stats(pl_backend *be, pl_loader_stats *out) {}

static const pl_backend_vt cpu_vt = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .fill_begin = cpu_fill_begin,
    .submit = cpu_submit,
    .fill_abort = cpu_fill_abort,
    .deliver = cpu_ok,
    .wait_stream = cpu_wait_stream,
    .wait_host = cpu_ok,
    .release = cpu_release,
    .read_back = cpu_read_back,
    .sync = cpu_sync,
    .stats = cpu_stats,
};

pl_status pl_backend_cpu_create(const pl_backend_config *cfg,
                                pl_backend **out, pl_error *err) {
  cpu_backend *cb = pl_calloc(1, sizeof *cb);
  if (!cb)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for the CPU backend");
  cb->shared = cfg->plan && cfg->plan->shared_memory;
  pl_backend *be = &cb->base;
  be->vt = &cpu_vt;
  be->kind = PL_DEVICE_CPU;
  strcpy(be->name, "cpu");
  *out = be;
  return PL_OK;
}
