/* The CPU backend: batches live in ordinary host memory and the workers
 * write the consumer's memory directly, so a batch's span is already in
 * place and submit copies nothing. It stages nothing, so the planner never
 * chunks for it nor copies from dataset memory in place. */
#include "backend/backend.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { CPU_ALIGN = 4096 };

pl_backend_caps pl_backend_cpu_caps(void) {
  return (pl_backend_caps){.stages = 0, .spans = 1, .direct = 0,
                           .chunk_bytes = 0};
}

static void cpu_destroy(pl_backend *be) { free(be); }

static pl_status cpu_buf_alloc(pl_backend *be, pl_bufmem *m, pl_error *err) {
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
    if (sp[i].dst_off > m->bytes || sp[i].len > m->bytes - sp[i].dst_off)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "copy %d ([%llu, +%llu)) is outside the %llu-byte "
                       "batch buffer",
                       i, (unsigned long long)sp[i].dst_off,
                       (unsigned long long)sp[i].len,
                       (unsigned long long)m->bytes);
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
  pl_backend *be = pl_calloc(1, sizeof *be);
  if (!be)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for the CPU backend");
  be->vt = &cpu_vt;
  be->kind = PL_DEVICE_CPU;
  strcpy(be->name, "cpu");
  *out = be;
  return PL_OK;
}
