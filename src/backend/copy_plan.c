/* The copy planner (see copy_plan.h): one function decides every route. */
#include "backend/copy_plan.h"
#include "backend/host_pages.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

enum {
  FIELD_ALIGN = 256, /* a field's array in a batch buffer */
  STAGE_ALIGN = 64,  /* a field's array in a chunk or small staging buffer */
  MAX_REGIONS = 64,
};

/* Fields one after the other, each aligned, batch_size samples each. */
static void layout_batch(pl_copy_plan *p, const pl_plan_request *req) {
  uint64_t end = 0;
  for (int f = 0; f < p->nfields; f++) {
    pl_field_plan *fp = &p->fields[f];
    fp->bytes = f < req->ds->nfields ? req->ds->field_bytes[f]
                                     : req->extra_sample_bytes;
    fp->batch_off = pl_align_up(end, FIELD_ALIGN);
    fp->stage_off = fp->batch_off;
    fp->route = PL_ROUTE_GATHER;
    end = fp->batch_off + (uint64_t)p->batch_size * fp->bytes;
  }
  p->batch_bytes = PL_MAX(end, 1);
}

static uint64_t chunk_size(const pl_backend_caps *caps,
                           const pl_plan_request *req) {
  if (!caps->stages || !caps->spans)
    return 0; /* gathered in place, or copied only as one span */
  uint64_t chunk = req->copy_chunk_bytes ? req->copy_chunk_bytes
                                         : caps->chunk_bytes;
  return chunk == UINT64_MAX ? 0 : chunk;
}

/* Batches of more than twice `chunk` are gathered chunk by chunk, each
 * chunk holding as many whole samples as fit (at least one). */
static void plan_chunks(pl_copy_plan *p, uint64_t chunk) {
  uint64_t per = 0, end = 0;
  for (int f = 0; f < p->nfields; f++)
    per += p->fields[f].bytes;
  uint64_t k = PL_MAX(chunk / PL_MAX(per, 1), 1);
  k = PL_MIN(k, (uint64_t)p->batch_size);
  for (int f = 0; f < p->nfields; f++) {
    pl_field_plan *fp = &p->fields[f];
    fp->route = PL_ROUTE_CHUNK;
    fp->stage_off = pl_align_up(end, STAGE_ALIGN);
    end = fp->stage_off + k * fp->bytes;
  }
  p->mode = PL_PLAN_CHUNKED;
  p->chunk_samples = (uint32_t)k;
  p->stage_bytes = PL_MAX(end, 1);
  p->max_spans = (uint64_t)p->nfields;
}

/* The gather routes: whole batches, or chunks for large ones; staging
 * buffers prefetch-deep for whole batches, two per worker for chunks (one
 * gathered while the other is copied). */
static void plan_gather(pl_copy_plan *p, const pl_backend_caps *caps,
                        const pl_plan_request *req) {
  int w = PL_MAX(req->num_workers, 1);
  uint64_t chunk = chunk_size(caps, req);
  p->mode = PL_PLAN_WHOLE;
  p->chunk_samples = p->batch_size;
  p->stage_bytes = p->batch_bytes;
  p->max_spans = 1;
  if (chunk && p->batch_bytes / 2 > chunk)
    plan_chunks(p, chunk);
  p->staging_buffers = p->mode == PL_PLAN_CHUNKED
                           ? 2 * w + 2
                           : PL_MIN(req->prefetch, w) + 2;
  if (!caps->stages) { /* workers write the batch itself */
    p->stage_bytes = 0;
    p->staging_buffers = 0;
  }
  uint64_t need;
  if (!pl_mul_u64(pl_pages_size(p->stage_bytes),
                  (uint64_t)p->staging_buffers, &need))
    need = UINT64_MAX;
  p->pinned_budget = req->pinned_budget ? req->pinned_budget : need;
}

/* ------------------------------------------------------------ direct */

static void refuse(pl_copy_plan *p, const char *why) {
  snprintf(p->why_not_direct, sizeof p->why_not_direct, "%s", why);
}

/* Why the request, the backend or the source rule direct mode out; NULL
 * when they allow it. */
static const char *direct_refused(const pl_backend_caps *caps,
                                  const pl_plan_request *req) {
  const pl_dataset *ds = req->ds;
  if (!caps->direct)
    return "they need a CUDA device (these batches live in host memory)";
  if (!req->pin_memory)
    return "pin_memory is off";
  if (!ds->vt->regions || !ds->vt->view)
    return "this source cannot say where its bytes live (only IDX and "
           "records sources can)";
  for (int f = 0; f < ds->nfields; f++)
    if (!ds->vt->view(ds, 0, f))
      return "a field has no view into the source's memory (a converted or "
             "byte-swapped field)";
  for (int f = 0; f < ds->nfields; f++)
    if (ds->field_bytes[f] >= PL_DIRECT_MIN_SAMPLE)
      return NULL;
  return "no field has samples of 64 KiB or more";
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

static int is_direct(const pl_field_plan *fp) {
  return fp->bytes >= PL_DIRECT_MIN_SAMPLE;
}

/* Staging a direct plan needs: the gathered fields packed, aligned. */
static uint64_t direct_stage_bytes(const pl_copy_plan *p) {
  uint64_t off = 0;
  for (int f = 0; f < p->nfields; f++)
    if (!is_direct(&p->fields[f]))
      off = pl_align_up(off, STAGE_ALIGN) +
            (uint64_t)p->batch_size * p->fields[f].bytes;
  return off;
}

/* Makes p a direct plan: fields of PL_DIRECT_MIN_SAMPLE bytes or more in
 * place, the others packed into a small staging buffer. Only once direct
 * mode is certain: it rewrites the fields' routes and offsets. */
static void route_direct(pl_copy_plan *p) {
  uint64_t off = 0;
  p->max_spans = 0;
  for (int f = 0; f < p->nfields; f++) {
    pl_field_plan *fp = &p->fields[f];
    int direct = is_direct(fp);
    fp->route = direct ? PL_ROUTE_DIRECT : PL_ROUTE_GATHER;
    /* A direct field: one span per sample at worst; a gathered one: one. */
    p->max_spans += direct ? p->batch_size : 1;
    if (direct) {
      fp->stage_off = 0;
      continue;
    }
    fp->stage_off = pl_align_up(off, STAGE_ALIGN);
    off = fp->stage_off + (uint64_t)p->batch_size * fp->bytes;
  }
  p->mode = PL_PLAN_DIRECT;
  p->chunk_samples = p->batch_size;
  p->stage_bytes = off;
  assert(off == direct_stage_bytes(p));
}

/* Turns the gather plan p into a direct one when everything allows it,
 * else leaves it and says why. The staging buffer count stays the gather
 * plan's. PL_NO_MEMORY only for want of memory. */
static pl_status plan_direct(pl_copy_plan *p, const pl_backend_caps *caps,
                             const pl_plan_request *req, pl_error *err) {
  const pl_dataset *ds = req->ds;
  const char *why = direct_refused(caps, req);
  if (why) {
    refuse(p, why);
    return PL_OK;
  }
  pl_region *r = pl_calloc(MAX_REGIONS, sizeof *r);
  if (!r)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for the copy plan");
  int n = 0;
  for (int f = 0; f < ds->nfields && !why; f++)
    if (ds->field_bytes[f] >= PL_DIRECT_MIN_SAMPLE)
      n = add_regions(ds, f, r, n, &why);
  uint64_t bytes = 0, stage_total = 0, need = 0;
  for (int i = 0; !why && i < n; i++)
    bytes += r[i].len;
  uint64_t small = direct_stage_bytes(p);
  uint64_t stage = small ? pl_pages_size(small) : 0;
  if (!pl_mul_u64(stage, (uint64_t)p->staging_buffers, &stage_total) ||
      !pl_add_u64(bytes, stage_total, &need))
    need = UINT64_MAX;
  uint64_t budget = req->pinned_budget ? req->pinned_budget : need;
  char msg[sizeof p->why_not_direct];
  if (!why && need > budget) {
    snprintf(msg, sizeof msg,
             "the pinned budget of %llu bytes cannot hold the dataset's %llu "
             "bytes plus %llu bytes of staging buffers",
             (unsigned long long)budget, (unsigned long long)bytes,
             (unsigned long long)stage_total);
    why = msg;
  }
  if (why) { /* the fields keep their gather routes: p is unchanged */
    free(r);
    refuse(p, why);
    return PL_OK;
  }
  route_direct(p);
  p->regions = r;
  p->nregions = n;
  p->region_bytes = bytes;
  p->pinned_budget = budget;
  return PL_OK;
}

/* ------------------------------------------------------------ device writes */

/* A reader that writes fields on the device: a WHOLE plan copies the runs
 * it left in staging, at most one per sample of each field. */
static void plan_device_writes(pl_copy_plan *p, const pl_backend_caps *caps,
                               const pl_plan_request *req) {
  if (!req->device_writes || !caps->stages || !caps->spans ||
      p->mode != PL_PLAN_WHOLE)
    return;
  p->device_writes = 1;
  p->max_spans = PL_MAX((uint64_t)p->nfields * p->batch_size, 1);
}

static int written_at(const uint8_t *written, uint32_t i, int f) {
  return written && f < 8 && (written[i] >> f & 1);
}

int pl_copy_plan_spans_except(const pl_copy_plan *p, const uint8_t *written,
                              uint32_t n, const void *host, pl_span *out) {
  int k = 0;
  for (int f = 0; f < p->nfields; f++) {
    const pl_field_plan *fp = &p->fields[f];
    for (uint32_t i = 0; fp->bytes && i < n;) {
      if (written_at(written, i, f)) {
        i++;
        continue;
      }
      uint32_t i0 = i;
      while (i < n && !written_at(written, i, f))
        i++;
      uint64_t off = fp->batch_off + (uint64_t)i0 * fp->bytes;
      assert((uint64_t)k < p->max_spans);
      out[k++] = (pl_span){(const uint8_t *)host + fp->stage_off +
                               (uint64_t)i0 * fp->bytes,
                           off, (uint64_t)(i - i0) * fp->bytes};
    }
  }
  return k;
}

/* ------------------------------------------------------------ the plan */

pl_status pl_copy_plan_make(const pl_backend_caps *caps,
                            const pl_plan_request *req, pl_copy_plan *out,
                            pl_error *err) {
  const pl_dataset *ds = req->ds;
  memset(out, 0, sizeof *out);
  out->batch_size = req->batch_size;
  out->shared_memory = req->shared_memory;
  out->nfields = ds->nfields + (req->extra_sample_bytes ? 1 : 0);
  out->fields = pl_calloc((size_t)PL_MAX(out->nfields, 1), sizeof *out->fields);
  if (!out->fields)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for the copy plan");
  layout_batch(out, req);
  plan_gather(out, caps, req);
  pl_status s = PL_OK;
  if (req->direct_copy && ds->length > 0)
    s = plan_direct(out, caps, req, err);
  if (s != PL_OK) {
    pl_copy_plan_free(out);
    return s;
  }
  plan_device_writes(out, caps, req);
  assert(out->max_spans >= 1);
  assert(out->stage_bytes <= out->batch_bytes);
  assert(out->mode != PL_PLAN_DIRECT || out->region_bytes <= out->pinned_budget);
  return PL_OK;
}

void pl_copy_plan_free(pl_copy_plan *p) {
  if (!p)
    return;
  free(p->fields);
  free(p->regions);
  p->fields = NULL;
  p->regions = NULL;
  p->nfields = p->nregions = 0;
}
