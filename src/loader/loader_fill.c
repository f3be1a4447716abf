/* How a worker fills one batch, following the copy plan made at create
 * (backend/copy_plan.h):
 *
 *   whole    the batch is gathered into the memory fill_begin hands out
 *            (the batch itself on the CPU, a staging buffer for CUDA),
 *            then submitted as one span.
 *   chunked  the batch is gathered chunk_samples samples at a time into a
 *            small staging chunk, each submitted as soon as it is full,
 *            while it is still in the host's last-level cache: a whole 77
 *            MB batch costs three DRAM transfers per byte (read the source,
 *            write staging, DMA reads staging) and stopped near 44 GB/s on
 *            the H200 machine; chunks of 4 MiB reached about 52
 *            (bench/results/chunk-probe-h200-2026-12-01.md).
 *   direct   the copy engine reads large fields from the dataset's own
 *            memory (loader_direct.c).
 */
#include "loader/loader_internal.h"
#include "core/memcopy.h"
#include "data/map_guard.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Whole batches this large are written with streaming stores
 * (memcopy.h): a few of them in flight no longer fit in any last-level
 * cache. Chunks, made to fit, use ordinary stores. */
#define STREAM_BATCH_BYTES (16ull << 20)

static void compute_indices(const pl_core *c, pl_batch *b) {
  if (b->order) { /* an explicit epoch (loader_order.c) */
    pl_order_indices(b->order, b->index, b->sample_idx);
    return;
  }
  uint64_t pos0 = pl_sampler_position(&c->sampler, &b->plan, b->index, 0);
  for (uint32_t i = 0; i < b->size; i++)
    b->sample_idx[i] = pl_sampler_index(
        &c->sampler, &b->plan, pos0 + (uint64_t)i * c->sampler.world);
}

/* Transforms of sample i (of b), read into d: its draws into the plan's
 * extra field; on the CPU (xf_host) the transformed fields straight into
 * the delivered arrays, out_base on. */
static void transform_sample(pl_core *c, pl_batch *b, uint32_t i, void **d) {
  const pl_xform_plan *x = c->layout.xf;
  pl_xform_params *draws = x->nparams ? d[c->ds->nfields] : NULL;
  if (draws)
    pl_xform_draw(x, c->cfg.seed, b->epoch, b->sample_idx[i], draws);
  if (!c->layout.xf_host)
    return; /* the device transforms the batch after its copy */
  uint8_t *out = (uint8_t *)b->mem.data + c->layout.out_base;
  for (int j = 0; j < x->n; j++) {
    int f = x->f[j].field;
    pl_xform_apply(x, &x->f[j], draws, d[f],
                   out + c->layout.out_off[f] +
                       (uint64_t)i * c->layout.out_bytes[f]);
  }
}

/* A batch read whole (read_batch): each sample's transforms, as
 * read_samples_into runs them after each sample (without this the
 * delivered arrays of a transformed loader were never written). bp: each
 * field's staging, sample i at bp[f] + i * bytes[f]. */
static pl_status transform_batch(pl_core *c, pl_batch *b, void *const *bp) {
  const pl_copy_plan *p = &c->layout.copy;
  void *local[64];
  void **d = p->nfields <= 64 ? local
                              : pl_malloc((size_t)p->nfields * sizeof *d);
  if (!d)
    return pl_errorf(&b->err, PL_NO_MEMORY, "out of memory");
  for (uint32_t i = 0; i < b->size; i++) {
    for (int f = 0; f < p->nfields; f++)
      d[f] = (uint8_t *)bp[f] + (uint64_t)i * p->fields[f].bytes;
    transform_sample(c, b, i, d);
  }
  if (d != local)
    free(d);
  return PL_OK;
}

/* Reads samples [i0, i1) of b into base: field f of sample i goes to
 * base + stage_off[f] + (i - i0) * bytes[f]; with transforms, the draws
 * too (transform_sample). d: room for the plan's nfields pointers. */
static pl_status read_samples_into(pl_core *c, pl_batch *b, uint32_t i0,
                                   uint32_t i1, uint8_t *base, void **d) {
  const pl_copy_plan *p = &c->layout.copy;
  int timed = c->cfg.timeout_s > 0;
  const pl_sample_ctx ctx = {c->cfg.seed, b->epoch, &c->log};
  pl_status s = PL_OK;
  for (uint32_t i = i0; i < i1 && s == PL_OK; i++) {
    for (int f = 0; f < p->nfields; f++)
      d[f] = base + p->fields[f].stage_off +
             (uint64_t)(i - i0) * p->fields[f].bytes;
    if (timed) {
      atomic_store_explicit(&b->cur_sample, b->sample_idx[i],
                            memory_order_relaxed);
      atomic_store_explicit(&b->cur_t0, pl_now(), memory_order_release);
    }
    s = pl_dataset_read_sample(c->ds, b->sample_idx[i], &ctx, d, &b->err);
    if (s == PL_OK && c->layout.xf)
      transform_sample(c, b, i, d);
    if (s == PL_OK && pl_core_abandoned(c, b))
      s = pl_errorf(&b->err, PL_CLOSED, "batch abandoned");
  }
  return s;
}

static pl_status read_guarded(pl_core *c, pl_batch *b, uint32_t i0,
                              uint32_t i1, uint8_t *base, void **d) {
  pl_map_guard g;
  if (pl_map_guard_enter(&g))
    return pl_map_guard_failed(&g, &b->err);
  pl_status s = read_samples_into(c, b, i0, i1, base, d);
  pl_map_guard_leave(&g);
  return s;
}

/* The reads of a batch (or chunk) run under one guard (data/map_guard.h):
 * a data file that shrinks meanwhile fails the batch with PL_IO, no
 * signal; one sigsetjmp per batch, not per sample. */
static pl_status read_samples(pl_core *c, pl_batch *b, uint32_t i0,
                              uint32_t i1, uint8_t *base) {
  const pl_copy_plan *p = &c->layout.copy;
  void *dst[64];
  void **d = p->nfields <= 64 ? dst : pl_malloc((size_t)p->nfields * sizeof *d);
  if (!d)
    return pl_errorf(&b->err, PL_NO_MEMORY, "out of memory");
  double t_read = pl_stage_now(&c->tm); /* one clock per call, not sample */
  pl_status s = read_guarded(c, b, i0, i1, base, d);
  if (t_read > 0)
    b->read_ns += (uint64_t)((pl_now() - t_read) * 1e9);
  /* Waits for staging or copies that follow are not a stalled sample. */
  if (c->cfg.timeout_s > 0)
    atomic_store_explicit(&b->cur_t0, 0.0, memory_order_release);
  if (d != dst)
    free(d);
  return s;
}

static pl_status fill_whole(pl_core *c, pl_batch *b) {
  const pl_backend_vt *bv = c->be->vt;
  const pl_copy_plan *p = &c->layout.copy;
  pl_copy_set_streaming(p->batch_bytes >= STREAM_BATCH_BYTES);
  PL_TRY(bv->fill_begin(c->be, &b->mem, &b->err));
  pl_status s = read_samples(c, b, 0, b->size, b->mem.host);
  pl_copy_fence(); /* the sources' streaming stores land before the DMA */
  if (s != PL_OK) {
    bv->fill_abort(c->be, &b->mem);
    return s;
  }
  /* Staging is laid out as the batch (stage_off == batch_off). */
  b->spans[0] = (pl_span){b->mem.host, 0, p->batch_bytes};
  return bv->submit(c->be, &b->mem, b->spans, 1,
                    PL_SPANS_FIRST | PL_SPANS_LAST, &b->err);
}

/* pl_batch_dst.report: the stall clock names the sample being read. */
static void report_sample(const pl_batch_dst *dst, uint64_t sample) {
  pl_batch *b = dst->report_ctx;
  atomic_store_explicit(&b->cur_sample, sample, memory_order_relaxed);
  atomic_store_explicit(&b->cur_t0, pl_now(), memory_order_release);
}

/* pl_batch_dst.abandoned: the batch's stream is over (or destroy began). */
static int dst_abandoned(const pl_batch_dst *dst) {
  pl_batch *b = dst->report_ctx;
  return pl_core_abandoned(b->core, b);
}

/* Turns. A dataset made with PL_BATCH_IN_ORDER sees its read_batch calls
 * begin in claim order: each claim waits for its turn before fill_begin,
 * and passes it on once the callback has taken its place (dst->queued) or
 * has returned, or when the fill fails before the call. Every claim fills
 * (a worker claims then fills; so does the consumer with no workers), so
 * each turn comes, and a skipped job (an error ending the epoch) is never
 * claimed, so it holds nobody: the order is exact, with no clock in it. */
static int dataset_in_order(const pl_core *c) {
  return c->ds->vt->in_order && c->ds->vt->in_order(c->ds);
}

static void wait_turn(pl_core *c, pl_batch *b) {
  pthread_mutex_lock(&c->mu);
  while (c->turn != b->claim_seq)
    pthread_cond_wait(&c->turn_cv, &c->mu);
  b->turn_held = 1;
  pthread_mutex_unlock(&c->mu);
}

static void pass_turn(pl_core *c, pl_batch *b) {
  pthread_mutex_lock(&c->mu);
  if (b->turn_held) {
    b->turn_held = 0;
    c->turn++;
    pthread_cond_broadcast(&c->turn_cv);
  }
  pthread_mutex_unlock(&c->mu);
}

/* pl_batch_dst.queued */
static void dst_queued(const pl_batch_dst *dst) {
  pl_batch *b = dst->report_ctx;
  pass_turn(b->core, b);
}

/* Device writes (copy_plan.h): the batch's device memory for a reader
 * that writes fields there itself, when the plan and the backend allow;
 * 0 otherwise (the reader writes staging alone). */
static int device_dst(pl_core *c, pl_batch *b, void **base,
                      pl_device_dst *dev) {
  const pl_copy_plan *p = &c->layout.copy;
  const pl_backend_vt *bv = c->be->vt;
  pl_error e;
  if (!p->device_writes || !bv->device_dst || b->mem.host_fd >= 0 ||
      bv->device_dst(c->be, &b->mem, &dev->device, dev->events, &e) != PL_OK)
    return 0; /* (an error here: the reader writes staging) */
  for (int f = 0; f < c->ds->nfields; f++) /* staging laid out as the batch */
    base[f] = (uint8_t *)b->mem.data + p->fields[f].stage_off;
  dev->base = base;
  dev->written = b->written;
  memset(b->written, 0, b->size);
  return 1;
}

/* The batch's copies: one span, or with fields the reader wrote on the
 * device, the runs of samples it left in staging. */
static pl_status submit_batch(pl_core *c, pl_batch *b, int device) {
  const pl_copy_plan *p = &c->layout.copy;
  int n = 1;
  int any = 0;
  for (uint32_t i = 0; device && i < b->size; i++)
    any |= b->written[i];
  if (any)
    n = pl_copy_plan_spans_except(p, b->written, b->size, b->mem.host,
                                  b->spans);
  else
    b->spans[0] = (pl_span){b->mem.host, 0, p->batch_bytes};
  return c->be->vt->submit(c->be, &b->mem, b->spans, n,
                           PL_SPANS_FIRST | PL_SPANS_LAST, &b->err);
}

/* pyworkers: a whole-batch dataset (source_batch_callback.c) writes the
 * batch in one call, at the plan's offsets of the memory fill_begin hands
 * out (the batch itself on the CPU, a staging buffer for CUDA: WHOLE plan,
 * staging laid out as the batch), then it is submitted as one span. The
 * image source's GPU view may write its crops in the batch's device
 * memory (device_dst), and only the rest is copied. */
static pl_status fill_by_batch(pl_core *c, pl_batch *b) {
  const pl_backend_vt *bv = c->be->vt;
  const pl_copy_plan *p = &c->layout.copy;
  const int in_order = dataset_in_order(c);
  if (in_order)
    wait_turn(c, b);
  pl_status s = bv->fill_begin(c->be, &b->mem, &b->err);
  if (s != PL_OK) {
    if (in_order)
      pass_turn(c, b);
    return s;
  }
  void *base[64], *dbase[64];
  uint64_t off[64];
  int nf = p->nfields;
  void **bp = nf <= 64 ? base : pl_malloc((size_t)nf * sizeof *bp);
  uint64_t *op = nf <= 64 ? off : pl_malloc((size_t)nf * sizeof *op);
  void **dp = nf <= 64 ? dbase : pl_malloc((size_t)nf * sizeof *dp);
  pl_device_dst dev;
  int device = 0;
  if (!bp || !op || !dp)
    s = pl_errorf(&b->err, PL_NO_MEMORY, "out of memory");
  else
    device = device_dst(c, b, dp, &dev);
  for (int f = 0; s == PL_OK && f < nf; f++) {
    op[f] = p->fields[f].stage_off;
    bp[f] = (uint8_t *)b->mem.host + op[f];
  }
  if (s == PL_OK) {
    const int shared = b->mem.host_fd >= 0;
    const int timed = c->cfg.timeout_s > 0;
    const pl_batch_dst dst = {nf,
                              bp,
                              op,
                              b->mem.host,
                              shared ? b->mem.host_fd_bytes : p->batch_bytes,
                              b->mem.host_fd,
                              shared ? b->mem.host_id : 0,
                              timed ? report_sample : NULL,
                              b,
                              dst_abandoned,
                              dst_queued};
    /* The batch's index in its epoch (pl_batch_index), also in a stream
     * resumed mid-epoch: the consumer finds its extras by it. */
    const pl_batch_info info = {c->cfg.seed,      b->epoch,
                                pl_batch_index(b), c->cfg.timeout_s,
                                b->gen,           b->job,
                                b->ready_ahead,   b->depth,
                                b->since_wait};
    if (timed) {
      atomic_store_explicit(&b->cur_sample, b->sample_idx[0],
                            memory_order_relaxed);
      atomic_store_explicit(&b->cur_t0, pl_now(), memory_order_release);
    }
    double t_read = pl_stage_now(&c->tm); /* the read stage, for report */
    s = device ? c->ds->vt->read_batch_device(c->ds, b->sample_idx, b->size,
                                              &info, &dst, &dev, &b->err)
               : c->ds->vt->read_batch(c->ds, b->sample_idx, b->size, &info,
                                       &dst, &b->err);
    if (t_read > 0)
      b->read_ns += (uint64_t)((pl_now() - t_read) * 1e9);
    if (timed)
      atomic_store_explicit(&b->cur_t0, 0.0, memory_order_release);
  }
  if (in_order)
    pass_turn(c, b); /* (returned without calling queued, or never called) */
  if (s == PL_OK && c->layout.xf)
    s = transform_batch(c, b, bp);
  if (bp != base)
    free(bp);
  if (op != off)
    free(op);
  if (dp != dbase)
    free(dp);
  if (s != PL_OK) {
    bv->fill_abort(c->be, &b->mem);
    return s;
  }
  return submit_batch(c, b, device);
}

/* One span per field of samples [i0, i1), gathered at host. */
static int chunk_spans(const pl_copy_plan *p, pl_batch *b, uint32_t i0,
                       uint32_t i1, const uint8_t *host) {
  int n = 0;
  for (int f = 0; f < p->nfields; f++) {
    const pl_field_plan *fp = &p->fields[f];
    if (!fp->bytes)
      continue;
    assert(fp->stage_off + (uint64_t)(i1 - i0) * fp->bytes <= p->stage_bytes);
    b->spans[n++] = (pl_span){host + fp->stage_off,
                              fp->batch_off + (uint64_t)i0 * fp->bytes,
                              (uint64_t)(i1 - i0) * fp->bytes};
  }
  assert((uint64_t)n <= p->max_spans);
  return n;
}

static pl_status fill_chunked(pl_core *c, pl_batch *b) {
  const pl_backend_vt *bv = c->be->vt;
  const pl_copy_plan *p = &c->layout.copy;
  pl_copy_set_streaming(0);
  for (uint64_t k0 = 0; k0 < b->size; k0 += p->chunk_samples) {
    uint32_t i0 = (uint32_t)k0,
             i1 = (uint32_t)PL_MIN(k0 + p->chunk_samples, (uint64_t)b->size);
    PL_TRY(bv->fill_begin(c->be, &b->mem, &b->err));
    uint8_t *host = b->mem.host;
    pl_status s = read_samples(c, b, i0, i1, host);
    if (s != PL_OK) {
      bv->fill_abort(c->be, &b->mem);
      return s;
    }
    int n = chunk_spans(p, b, i0, i1, host);
    int flags = (i0 == 0 ? PL_SPANS_FIRST : 0) |
                (i1 == b->size ? PL_SPANS_LAST : 0);
    PL_TRY(bv->submit(c->be, &b->mem, b->spans, n, flags, &b->err));
  }
  return PL_OK;
}

void pl_fill(pl_core *c, pl_batch *b) {
  double t0 = pl_now();
  b->read_ns = 0;
  compute_indices(c, b);
  b->mem.samples = b->size;
  pl_status s;
  if (c->ds->vt->read_batch) {
    s = fill_by_batch(c, b);
    goto done;
  }
  switch (c->layout.copy.mode) {
  case PL_PLAN_DIRECT:
    s = pl_direct_fill(c, b);
    break;
  case PL_PLAN_CHUNKED:
    s = fill_chunked(c, b);
    break;
  default:
    s = fill_whole(c, b);
    break;
  }
done:
  if (s != PL_OK && b->err.status == PL_OK)
    pl_errorf(&b->err, s, "%s", pl_status_str(s));
  uint64_t busy = (uint64_t)((pl_now() - t0) * 1e9);
  atomic_fetch_add_explicit(&c->count.worker_busy_ns, busy,
                            memory_order_relaxed);
  pl_timing_filled(&c->tm, b->read_ns, busy);
}
