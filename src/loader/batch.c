/* The batch handle the consumer takes and gives back. */
#include "loader/loader_internal.h"

#include <assert.h>

uint32_t pl_batch_size(const pl_batch *b) { return b ? b->size : 0; }
uint64_t pl_batch_epoch(const pl_batch *b) { return b ? b->epoch : 0; }
/* b->index counts from the stream's first batch; a stream restored from a
 * checkpoint starts mid-epoch at global position plan.start, which is
 * start / (batch * world) batches into this rank's epoch. */
uint64_t pl_batch_stream(const pl_batch *b) { return b ? b->gen : 0; }

uint64_t pl_batch_index(const pl_batch *b) {
  if (!b)
    return 0;
  const pl_sampler *s = &b->core->sampler;
  return b->index + b->plan.start / ((uint64_t)s->batch * s->world);
}

uint64_t pl_batch_sample_index(const pl_batch *b, uint32_t i) {
  return (b && i < b->size) ? b->sample_idx[i] : UINT64_MAX;
}

static int field_ok(const pl_batch *b, int field) {
  return b && field >= 0 && field < b->core->ds->nfields;
}

void *pl_batch_data(const pl_batch *b, int field) {
  if (!field_ok(b, field))
    return NULL;
  return (char *)b->mem.data + b->core->layout.out_base +
         b->core->layout.out_off[field];
}

uint64_t pl_batch_bytes(const pl_batch *b, int field) {
  return field_ok(b, field)
             ? (uint64_t)b->size * b->core->layout.out_bytes[field]
             : 0;
}

const pl_field *pl_batch_field(const pl_batch *b, int field) {
  if (!field_ok(b, field))
    return NULL;
  const pl_core *c = b->core;
  return c->layout.xf ? &c->layout.xf->out_fields[field]
                      : &c->ds->fields[field];
}

pl_device_kind pl_batch_device(const pl_batch *b, int *index) {
  if (index)
    *index = b ? b->core->be->device_index : 0;
  return b ? b->core->be->kind : PL_DEVICE_CPU;
}

pl_status pl_batch_wait_stream(pl_batch *b, void *stream, pl_error *err) {
  if (!b)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "batch is NULL");
  if (pl_core_foreign(b->core))
    return pl_core_forked(b->core, err);
  pl_backend *be = b->core->be;
  return be->vt->wait_stream(be, &b->mem, stream, err);
}

pl_status pl_batch_wait_host(pl_batch *b, pl_error *err) {
  if (!b)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "batch is NULL");
  if (pl_core_foreign(b->core))
    return pl_core_forked(b->core, err);
  pl_backend *be = b->core->be;
  return be->vt->wait_host(be, &b->mem, err);
}

pl_status pl_batch_copy_to_host(pl_batch *b, int field, uint64_t offset,
                                void *dst, uint64_t n, pl_error *err) {
  if (!field_ok(b, field) || (!dst && n))
    return pl_errorf(err, PL_INVALID_ARGUMENT, "bad batch, field or dst");
  uint64_t end, have = pl_batch_bytes(b, field);
  if (!pl_add_u64(offset, n, &end) || end > have)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "bytes [%llu, %llu) are outside field %d's %llu bytes",
                     (unsigned long long)offset, (unsigned long long)(offset + n),
                     field, (unsigned long long)have);
  if (pl_core_foreign(b->core))
    return pl_core_forked(b->core, err);
  pl_backend *be = b->core->be;
  return be->vt->read_back(be, &b->mem,
                           b->core->layout.out_base +
                               b->core->layout.out_off[field] + offset,
                           dst, n, err);
}

void pl_batch_release(pl_batch *b, void *stream) {
  if (!b || pl_core_foreign(b->core)) /* a forked child: the parent's */
    return;
  pl_core *c = b->core;
  if (!b->replay_of) /* a kept batch's memory is never written again */
    c->be->vt->release(c->be, &b->mem, stream);
  pthread_mutex_lock(&c->mu);
  assert(b->state == SLOT_HELD); /* released once */
  assert(c->refs > 0);
  pl_timing_released(c, b);
  pl_replay_release(c, b); /* frees a replay handle; else FREE or CACHED */
  int last = --c->refs == 0;
  pl_wake_worker(c);  /* a buffer for one more job */
  pthread_cond_signal(&c->ready_cv); /* a consumer filling it itself */
  pthread_mutex_unlock(&c->mu);
  if (last)
    pl_core_free(c);
}
