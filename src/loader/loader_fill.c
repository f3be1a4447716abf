/* How a worker fills one batch. The way is chosen once, at create:
 *
 *   whole    the batch is gathered into one buffer the backend hands out
 *            (the batch itself on the CPU, a staging buffer for CUDA),
 *            then fill_end queues one copy of it.
 *   chunked  CUDA, batches of more than twice copy_chunk_bytes: the batch
 *            is gathered chunk_samples samples at a time into a small
 *            staging buffer, and each chunk's copy is queued as soon as it
 *            is full. The chunk is then still in the host's last-level
 *            cache, so the DMA does not read it back from DRAM: a whole
 *            77 MB batch costs three DRAM transfers per byte (read the
 *            source, write staging, DMA reads staging) and stopped near
 *            44 GB/s on the H200 machine; chunks of 4 MiB reached about
 *            52 (bench/results/chunk-probe-h200-2026-12-01.md). It also
 *            pins chunks, not whole batches.
 *   direct   the copy engine reads large fields from the dataset's own
 *            memory (loader_direct.c).
 */
#include "loader/loader_internal.h"
#include "core/memcopy.h"

#include <stdlib.h>

/* Whole batches this large are written with streaming stores
 * (memcopy.h): a few of them in flight no longer fit in any last-level
 * cache. Chunks, made to fit, use ordinary stores. */
#define STREAM_BATCH_BYTES (16ull << 20)

static void compute_indices(const pl_core *c, pl_batch *b) {
  uint64_t pos0 = pl_sampler_position(&c->sampler, &b->plan, b->index, 0);
  for (uint32_t i = 0; i < b->size; i++)
    b->sample_idx[i] = pl_sampler_index(
        &c->sampler, &b->plan, pos0 + (uint64_t)i * c->sampler.world);
}

/* Reads samples [i0, i1) of b: field f of sample i goes to
 * base + off[f] + (i - i0) * field_bytes[f]. */
static pl_status read_samples(pl_core *c, pl_batch *b, uint32_t i0,
                              uint32_t i1, uint8_t *base,
                              const uint64_t *off) {
  void *dst[64];
  void **d = c->nfields <= 64 ? dst : malloc((size_t)c->nfields * sizeof *d);
  if (!d)
    return pl_errorf(&b->err, PL_NO_MEMORY, "out of memory");
  int timed = c->cfg.timeout_s > 0;
  const pl_sample_ctx ctx = {c->cfg.seed, b->epoch, &c->log};
  pl_status s = PL_OK;
  for (uint32_t i = i0; i < i1 && s == PL_OK; i++) {
    for (int f = 0; f < c->nfields; f++)
      d[f] = base + off[f] + (uint64_t)(i - i0) * c->field_bytes[f];
    if (timed) {
      atomic_store_explicit(&b->cur_sample, b->sample_idx[i],
                            memory_order_relaxed);
      atomic_store_explicit(&b->cur_t0, pl_now(), memory_order_release);
    }
    s = pl_dataset_read_sample(c->ds, b->sample_idx[i], &ctx, d, &b->err);
    if (s == PL_OK && pl_core_abandoned(c, b))
      s = pl_errorf(&b->err, PL_CLOSED, "batch abandoned");
  }
  /* Waits for staging or copies that follow are not a stalled sample. */
  if (timed)
    atomic_store_explicit(&b->cur_t0, 0.0, memory_order_release);
  if (d != dst)
    free(d);
  return s;
}

static pl_status fill_whole(pl_core *c, pl_batch *b) {
  const pl_backend_vt *bv = c->be->vt;
  pl_copy_set_streaming(c->buf_bytes >= STREAM_BATCH_BYTES);
  PL_TRY(bv->fill_begin(c->be, &b->mem, &b->err));
  pl_status s = read_samples(c, b, 0, b->size, b->mem.host, c->field_off);
  pl_copy_fence(); /* the sources' streaming stores land before the DMA */
  if (s != PL_OK) {
    bv->fill_abort(c->be, &b->mem);
    return s;
  }
  return bv->fill_end(c->be, &b->mem, c->buf_bytes, &b->err);
}

static pl_status fill_chunked(pl_core *c, pl_batch *b) {
  const pl_backend_vt *bv = c->be->vt;
  pl_copy_set_streaming(0);
  for (uint64_t k0 = 0; k0 < b->size; k0 += c->chunk_samples) {
    uint32_t i0 = (uint32_t)k0,
             i1 = (uint32_t)PL_MIN(k0 + c->chunk_samples, (uint64_t)b->size);
    PL_TRY(bv->fill_begin(c->be, &b->mem, &b->err));
    uint8_t *host = b->mem.host;
    pl_status s = read_samples(c, b, i0, i1, host, c->chunk_off);
    if (s != PL_OK) {
      bv->fill_abort(c->be, &b->mem);
      return s;
    }
    int n = 0;
    for (int f = 0; f < c->nfields; f++)
      if (c->field_bytes[f])
        b->spans[n++] = (pl_span){host + c->chunk_off[f],
                                  c->field_off[f] + i0 * c->field_bytes[f],
                                  (uint64_t)(i1 - i0) * c->field_bytes[f]};
    int flags = (i0 == 0 ? PL_SPANS_FIRST : 0) |
                (i1 == b->size ? PL_SPANS_LAST : 0);
    PL_TRY(bv->fill_spans(c->be, &b->mem, b->spans, n, flags, &b->err));
  }
  return PL_OK;
}

void pl_fill(pl_core *c, pl_batch *b) {
  double t0 = pl_now();
  compute_indices(c, b);
  pl_status s = c->direct          ? pl_direct_fill(c, b)
                : c->chunk_samples ? fill_chunked(c, b)
                                   : fill_whole(c, b);
  if (s != PL_OK && b->err.status == PL_OK)
    pl_errorf(&b->err, s, "%s", pl_status_str(s));
  atomic_fetch_add_explicit(&c->worker_busy_ns,
                            (uint64_t)((pl_now() - t0) * 1e9),
                            memory_order_relaxed);
}

void pl_chunk_plan(pl_core *c, uint64_t chunk_bytes, uint64_t *stage_bytes) {
  c->chunk_samples = 0;
  *stage_bytes = 0;
  if (!chunk_bytes || chunk_bytes == UINT64_MAX ||
      c->buf_bytes / 2 <= chunk_bytes)
    return;
  uint64_t per = 0;
  for (int f = 0; f < c->nfields; f++)
    per += c->field_bytes[f];
  uint64_t k = PL_MAX(chunk_bytes / PL_MAX(per, 1), 1);
  k = PL_MIN(k, (uint64_t)c->cfg.batch_size);
  uint64_t end = 0;
  for (int f = 0; f < c->nfields; f++) {
    c->chunk_off[f] = pl_align_up(end, 64);
    end = c->chunk_off[f] + k * c->field_bytes[f];
  }
  c->chunk_samples = (uint32_t)k;
  *stage_bytes = PL_MAX(end, 1);
}
