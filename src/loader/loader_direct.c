/* Direct mode, the loader's half: fields whose samples are large are
 * copied by the GPU's copy engine straight out of the dataset's memory (a
 * mapped file, page-locked in place by the backend at create), one copy
 * per run of samples that lie back to back; the small fields of the same
 * batch are gathered as usual into a staging buffer just big enough for
 * them, and submitted in the same call. No CPU touches the large fields'
 * bytes. When it is on, and why not otherwise, the copy planner decides
 * (backend/copy_plan.c). */
#include "loader/loader_internal.h"
#include "data/map_guard.h"

#include <assert.h>
#include <string.h>

/* Whether p is where a region begins: two files may be mapped back to
 * back, but one copy must not run from one registration into another. */
static int region_start(const pl_copy_plan *p, const uint8_t *src) {
  for (int i = 0; i < p->nregions; i++)
    if ((const uint8_t *)p->regions[i].ptr == src)
      return 1;
  return 0;
}

/* One copy per run of samples of field f that lie back to back both in
 * the dataset and in the batch. Returns the new span count. */
static int field_spans(pl_core *c, pl_batch *b, int f, int n) {
  const pl_dataset *ds = c->ds;
  const pl_copy_plan *p = &c->layout.copy;
  uint64_t fb = p->fields[f].bytes;
  for (uint32_t i = 0; i < b->size; i++) {
    const uint8_t *src = ds->vt->view(ds, b->sample_idx[i], f);
    uint64_t dst = p->fields[f].batch_off + (uint64_t)i * fb;
    pl_span *last = i ? &b->spans[n - 1] : NULL;
    if (last && (const uint8_t *)last->src + last->len == src &&
        last->dst_off + last->len == dst && !region_start(p, src)) {
      last->len += fb;
      continue;
    }
    assert((uint64_t)n < p->max_spans);
    b->spans[n++] = (pl_span){src, dst, fb};
  }
  return n;
}

/* The small fields, through their views into staging memory; one copy
 * each. Returns the new span count, or -1 if the batch was abandoned. */
static int gather_small(pl_core *c, pl_batch *b, int n) {
  const pl_dataset *ds = c->ds;
  const pl_copy_plan *p = &c->layout.copy;
  uint8_t *host = b->mem.host;
  for (uint32_t i = 0; i < b->size; i++) {
    for (int f = 0; f < p->nfields; f++) {
      const pl_field_plan *fp = &p->fields[f];
      uint8_t *dst = host + fp->stage_off + (uint64_t)i * fp->bytes;
      if (fp->route != PL_ROUTE_DIRECT && f < ds->nfields)
        memcpy(dst, ds->vt->view(ds, b->sample_idx[i], f), fp->bytes);
      else if (fp->route != PL_ROUTE_DIRECT) /* the transforms' draws */
        pl_xform_draw(c->layout.xf, c->cfg.seed, b->epoch, b->sample_idx[i],
                      (pl_xform_params *)(void *)dst);
    }
    if ((i & 1023) == 1023 && pl_core_abandoned(c, b))
      return -1;
  }
  for (int f = 0; f < p->nfields; f++) {
    const pl_field_plan *fp = &p->fields[f];
    if (fp->route == PL_ROUTE_DIRECT || !fp->bytes)
      continue;
    assert((uint64_t)n < p->max_spans);
    b->spans[n++] = (pl_span){host + fp->stage_off, fp->batch_off,
                              (uint64_t)b->size * fp->bytes};
  }
  return n;
}

/* Reads the last byte of each of the first n spans (the direct ones),
 * which faults if the file no longer reaches it. Why: a truncation cannot
 * free the page-locked pages, but the kernel zeroes what lies past the new
 * end inside a large folio that it cannot split while it is pinned; the
 * copy engine would then read zeros, silently. A file only shrinks from its
 * end, so a span whose last byte is still there is whole. */
static void touch_direct_ends(const pl_batch *b, int n) {
  for (int i = 0; i < n; i++) {
    const volatile uint8_t *end =
        (const volatile uint8_t *)b->spans[i].src + b->spans[i].len - 1;
    (void)*end;
  }
}

/* The views read mapped files, which may shrink: data/map_guard.h. The
 * direct spans' ends are read here too, just before their copies are
 * submitted: a file cut before that fails the batch with PL_IO naming it.
 * (One cut while a copy is in flight, microseconds, is not seen:
 * docs/reliability.md.) */
static pl_status guarded_reads(pl_core *c, pl_batch *b, int *n) {
  pl_map_guard g;
  if (pl_map_guard_enter(&g))
    return pl_map_guard_failed(&g, &b->err);
  touch_direct_ends(b, *n);
  int k = c->layout.copy.stage_bytes ? gather_small(c, b, *n) : *n;
  pl_map_guard_leave(&g);
  if (k < 0)
    return pl_errorf(&b->err, PL_CLOSED, "batch abandoned");
  *n = k;
  return PL_OK;
}

pl_status pl_direct_fill(pl_core *c, pl_batch *b) {
  const pl_backend_vt *bv = c->be->vt;
  const pl_copy_plan *p = &c->layout.copy;
  int n = 0;
  for (int f = 0; f < p->nfields; f++)
    if (p->fields[f].route == PL_ROUTE_DIRECT)
      n = field_spans(c, b, f, n);
  if (p->stage_bytes)
    PL_TRY(bv->fill_begin(c->be, &b->mem, &b->err));
  pl_status s = guarded_reads(c, b, &n);
  if (s != PL_OK) {
    if (p->stage_bytes)
      bv->fill_abort(c->be, &b->mem);
    return s;
  }
  PL_TRY(bv->submit(c->be, &b->mem, b->spans, n,
                    PL_SPANS_FIRST | PL_SPANS_LAST, &b->err));
  atomic_fetch_add_explicit(&c->count.batches_direct, 1, memory_order_relaxed);
  return PL_OK;
}
