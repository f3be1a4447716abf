/* A dataset filled a whole batch at a time by a user callback: the C side
 * of Python worker processes, which write a batch's samples straight into
 * shared batch memory (python/pinloader/procset.c). */
#include "data/dataset.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct batch_cb_impl {
  pl_read_batch_fn read_batch;
  pl_get_item_fn get_item; /* may be NULL */
  int flags;
  void *user;
  void (*free_user)(void *);
  _Atomic(pl_worker_cpu_fn) cpu_s; /* may be NULL */
} batch_cb_impl;

static pl_status batch_cb_read_batch(const pl_dataset *ds,
                                     const uint64_t *indices, uint32_t n,
                                     const pl_batch_info *info,
                                     const pl_batch_dst *dst, pl_error *err) {
  const batch_cb_impl *cb = ds->impl;
  char msg[PL_ERROR_MESSAGE_MAX - 32];
  msg[0] = '\0';
  int rc = cb->read_batch(cb->user, indices, n, info, dst, msg, sizeof msg);
  if (rc == 0)
    return PL_OK;
  msg[sizeof msg - 1] = '\0';
  if (rc == PL_READ_INTERRUPTED)
    return pl_errorf(err, PL_NOT_READY, "the batch read was interrupted");
  return pl_errorf(err, PL_CALLBACK, "%s", msg[0] ? msg : "batch callback failed");
}

static pl_status batch_cb_read(const pl_dataset *ds, uint64_t index,
                               const pl_sample_ctx *ctx, void *const *dst,
                               pl_error *err) {
  const batch_cb_impl *cb = ds->impl;
  (void)ctx;
  if (!cb->get_item)
    return pl_errorf(err, PL_UNSUPPORTED,
                     "this dataset is read a batch at a time only");
  return pl_dataset_call_get_item(cb->get_item, cb->user, index, dst, err);
}

static int batch_cb_shared(const pl_dataset *ds) {
  const batch_cb_impl *cb = ds->impl;
  return (cb->flags & PL_BATCH_SHARED_MEMORY) != 0;
}

static int batch_cb_in_order(const pl_dataset *ds) {
  const batch_cb_impl *cb = ds->impl;
  return (cb->flags & PL_BATCH_IN_ORDER) != 0;
}

static double batch_cb_worker_cpu(const pl_dataset *ds) {
  batch_cb_impl *cb = ds->impl;
  pl_worker_cpu_fn f = atomic_load_explicit(&cb->cpu_s, memory_order_acquire);
  return f ? f(cb->user) : 0;
}

static void batch_cb_destroy(void *impl) {
  batch_cb_impl *cb = impl;
  if (cb->free_user)
    cb->free_user(cb->user);
  free(cb);
}

static const pl_dataset_vt batch_cb_vt = {
    .kind = "batch_callback",
    .read = batch_cb_read,
    .read_batch = batch_cb_read_batch,
    .shared_memory = batch_cb_shared,
    .in_order = batch_cb_in_order,
    .worker_cpu_s = batch_cb_worker_cpu,
    .destroy_impl = batch_cb_destroy,
};

pl_status pl_dataset_from_batch_callback(
    const pl_field *fields, int nfields, uint64_t length,
    pl_read_batch_fn read_batch, pl_get_item_fn get_item, int flags,
    void *user, void (*free_user)(void *), pl_dataset **out, pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!read_batch)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "read_batch is NULL");
  if (flags & ~(PL_BATCH_SHARED_MEMORY | PL_BATCH_IN_ORDER))
    return pl_errorf(err, PL_INVALID_ARGUMENT, "unknown flags 0x%x", flags);
  batch_cb_impl *cb = malloc(sizeof *cb);
  if (!cb)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  *cb = (batch_cb_impl){read_batch, get_item, flags, user, free_user, NULL};
  pl_status s = pl_dataset_new(&batch_cb_vt, cb, length, fields, nfields,
                               out, err);
  if (s != PL_OK)
    free(cb); /* user data stays the caller's on failure */
  return s;
}

pl_status pl_dataset_set_worker_cpu(pl_dataset *ds, pl_worker_cpu_fn cpu_s,
                                    pl_error *err) {
  if (!ds)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "dataset is NULL");
  if (ds->vt != &batch_cb_vt)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "a %s dataset has no worker processes: only one made "
                     "by pl_dataset_from_batch_callback takes a worker CPU "
                     "clock",
                     ds->vt->kind);
  batch_cb_impl *cb = ds->impl;
  atomic_store_explicit(&cb->cpu_s, cpu_s, memory_order_release);
  return PL_OK;
}
