/* Direct mode, the loader's half: fields whose samples are large are
 * copied by the GPU's copy engine straight out of the dataset's memory (a
 * mapped file, page-locked in place by the backend), one copy per run of
 * samples that lie back to back; the small fields of the same batch are
 * gathered as usual into a staging buffer just big enough for them, and
 * queued in the same call. No CPU touches the large fields' bytes.
 *
 * When: the caller asked (direct_copy: page-locking a whole data set is
 * the caller's decision, never a default), a device backend that supports
 * it (CUDA), pin_memory on, a pinned budget that holds the files (the
 * default one grows to), a source that can say where its bytes live (IDX,
 * records) in files that could be mapped shared, a view for every field,
 * and at least one field of DIRECT_MIN_SAMPLE bytes or more. Anything else
 * gathers as before, and the log says why. */
#include "loader/loader_internal.h"

#include <stdlib.h>
#include <string.h>

/* Per-copy cost makes small copies lose to a CPU gather: a copy of this
 * size or more runs at the plain-copy rate when queued in one
 * cudaMemcpyBatchAsync (3 KiB copies reach about 6 GB/s that way;
 * bench/results/direct-probe-h200-2026-12-01.md). */
#define DIRECT_MIN_SAMPLE (64u << 10)
#define MAX_REGIONS 64

static void direct_off(pl_core *c, const char *why) {
  pl_log(&c->log, PL_LOG_INFO,
         "copies straight from the dataset's memory are off: %s", why);
}

/* Adds field f's regions to r (n so far), skipping ones already there.
 * Returns the new count, or -1 with *why set. */
static int add_regions(const pl_dataset *ds, int f, pl_region *r, int n,
                       const char **why) {
  pl_region mine[MAX_REGIONS];
  int k = ds->vt->regions(ds, f, mine, MAX_REGIONS);
  *why = "the source is spread over too many files";
  if (k < 0 || k > MAX_REGIONS)
    return -1;
  for (int i = 0; i < k; i++) {
    int seen = 0;
    for (int j = 0; j < n && !seen; j++)
      seen = r[j].ptr == mine[i].ptr;
    if (seen || mine[i].len == 0)
      continue;
    if (mine[i].kind == PL_REGION_PRIVATE_FILE) {
      *why = "a data file's file system refused a shared mapping, and a "
             "private one cannot be page-locked in place";
      return -1;
    }
    if (n == MAX_REGIONS)
      return -1;
    r[n++] = mine[i];
  }
  *why = NULL;
  return n;
}

/* Which fields go direct, and the staging layout of the others. 0: none
 * qualifies (why says why). */
static int plan_fields(pl_core *c, const char **why) {
  const pl_dataset *ds = c->ds;
  int ndirect = 0;
  uint64_t off = 0;
  for (int f = 0; f < c->nfields; f++) {
    if (!ds->vt->view(ds, 0, f)) {
      *why = "a field has no view into the source's memory (a converted "
             "or byte-swapped field)";
      return 0;
    }
    c->field_direct[f] = c->field_bytes[f] >= DIRECT_MIN_SAMPLE;
    ndirect += c->field_direct[f];
    if (c->field_direct[f])
      continue;
    c->stage_off[f] = pl_align_up(off, 64);
    off = c->stage_off[f] + (uint64_t)c->cfg.batch_size * c->field_bytes[f];
  }
  if (!ndirect)
    *why = "no field has samples of 64 KiB or more";
  c->stage_bytes = off;
  return ndirect;
}

void pl_direct_setup(pl_core *c) {
  const pl_backend_vt *bv = c->be->vt;
  const pl_dataset *ds = c->ds;
  if (!c->cfg.direct_copy || ds->length == 0)
    return;
  if (c->xf && c->xf->nparams) {
    direct_off(c, "random transforms (crop, flip) need their per-sample "
                  "draws gathered with every field");
    return;
  }
  if (!bv->enable_direct || !bv->fill_spans) {
    direct_off(c, "they need a CUDA device (these batches live in host "
                  "memory)");
    return;
  }
  if (!c->cfg.pin_memory) {
    direct_off(c, "pin_memory is off");
    return;
  }
  if (!ds->vt->regions || !ds->vt->view) {
    direct_off(c, "this source cannot say where its bytes live (only IDX "
                  "and records sources can)");
    return;
  }
  c->field_direct = calloc((size_t)c->nfields, 1);
  c->stage_off = calloc((size_t)c->nfields, sizeof *c->stage_off);
  pl_region *r = calloc(MAX_REGIONS, sizeof *r);
  const char *why = "out of memory";
  int n = 0;
  if (c->field_direct && c->stage_off && r && plan_fields(c, &why)) {
    why = NULL;
    for (int f = 0; f < c->nfields && !why; f++)
      if (c->field_direct[f])
        n = add_regions(ds, f, r, n, &why);
  }
  uint64_t bytes = 0;
  for (int i = 0; !why && i < n; i++)
    bytes += r[i].len;
  pl_error e;
  double t0 = pl_now();
  if (!why && bv->enable_direct(c->be, r, n, c->stage_bytes, &e) != PL_OK)
    why = e.message;
  if (why) {
    direct_off(c, why);
    free(r);
    pl_direct_free(c);
    return;
  }
  c->regions = r; /* copies never run across two of them */
  c->nregions = n;
  c->direct = 1;
  pl_log(&c->log, PL_LOG_INFO,
         "%llu bytes of dataset memory page-locked in place (%d region%s, "
         "%.2f s): samples of 64 KiB and more are copied from it, with no "
         "gather",
         (unsigned long long)bytes, n, n == 1 ? "" : "s", pl_now() - t0);
}

void pl_direct_free(pl_core *c) {
  free(c->field_direct);
  free(c->stage_off);
  free(c->regions);
  c->field_direct = NULL;
  c->stage_off = NULL;
  c->regions = NULL;
  c->nregions = 0;
}

/* Whether p is where a region begins: two files may be mapped back to
 * back, but one copy must not run from one registration into another. */
static int region_start(const pl_core *c, const uint8_t *p) {
  for (int i = 0; i < c->nregions; i++)
    if ((const uint8_t *)c->regions[i].ptr == p)
      return 1;
  return 0;
}

/* One copy per run of samples of field f that lie back to back both in
 * the dataset and in the batch. Returns the new span count. */
static int field_spans(pl_core *c, pl_batch *b, int f, int n) {
  const pl_dataset *ds = c->ds;
  uint64_t fb = c->field_bytes[f];
  for (uint32_t i = 0; i < b->size; i++) {
    const uint8_t *src = ds->vt->view(ds, b->sample_idx[i], f);
    uint64_t dst = c->field_off[f] + (uint64_t)i * fb;
    pl_span *last = i ? &b->spans[n - 1] : NULL;
    if (last && (const uint8_t *)last->src + last->len == src &&
        last->dst_off + last->len == dst && !region_start(c, src)) {
      last->len += fb;
      continue;
    }
    b->spans[n++] = (pl_span){src, dst, fb};
  }
  return n;
}

/* The small fields, through their views into staging memory; one copy
 * each. Returns the new span count, or -1 if the batch was abandoned. */
static int gather_small(pl_core *c, pl_batch *b, int n) {
  const pl_dataset *ds = c->ds;
  uint8_t *host = b->mem.host;
  for (uint32_t i = 0; i < b->size; i++) {
    for (int f = 0; f < c->nfields; f++)
      if (!c->field_direct[f])
        memcpy(host + c->stage_off[f] + (uint64_t)i * c->field_bytes[f],
               ds->vt->view(ds, b->sample_idx[i], f), c->field_bytes[f]);
    if ((i & 1023) == 1023 && pl_core_abandoned(c, b))
      return -1;
  }
  for (int f = 0; f < c->nfields; f++)
    if (!c->field_direct[f] && c->field_bytes[f])
      b->spans[n++] = (pl_span){host + c->stage_off[f], c->field_off[f],
                                (uint64_t)b->size * c->field_bytes[f]};
  return n;
}

pl_status pl_direct_fill(pl_core *c, pl_batch *b) {
  const pl_backend_vt *bv = c->be->vt;
  int n = 0;
  for (int f = 0; f < c->nfields; f++)
    if (c->field_direct[f])
      n = field_spans(c, b, f, n);
  if (c->stage_bytes) {
    PL_TRY(bv->fill_begin(c->be, &b->mem, &b->err));
    if ((n = gather_small(c, b, n)) < 0) {
      bv->fill_abort(c->be, &b->mem);
      return pl_errorf(&b->err, PL_CLOSED, "batch abandoned");
    }
  }
  PL_TRY(bv->fill_spans(c->be, &b->mem, b->spans, n,
                        PL_SPANS_FIRST | PL_SPANS_LAST, &b->err));
  atomic_fetch_add_explicit(&c->batches_direct, 1, memory_order_relaxed);
  return PL_OK;
}
