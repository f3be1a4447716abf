/* Dataset objects: creation from a source's vtable, reference counting,
 * field metadata, and reads with the sample index in the error. */
#include "data/dataset.h"
#include "core/memcopy.h"
#include "data/map_guard.h"

#include <stdlib.h>
#include <string.h>

static pl_status check_field(const pl_field *f, int i, pl_error *err) {
  if (!memchr(f->name, '\0', PL_NAME_MAX) || !f->name[0])
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "field %d: name is empty or longer than %d bytes", i,
                     PL_NAME_MAX - 1);
  if (pl_dtype_size(f->dtype) == 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "field '%s': invalid dtype %d",
                     f->name, (int)f->dtype);
  if (f->ndim < 0 || f->ndim > PL_MAX_DIMS)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "field '%s': %d dims (at most %d)", f->name, f->ndim,
                     PL_MAX_DIMS);
  for (int d = 0; d < f->ndim; d++)
    if (f->shape[d] <= 0)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "field '%s': dim %d is %lld (must be positive)",
                       f->name, d, (long long)f->shape[d]);
  if (pl_field_bytes(f) == 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "field '%s': sample size overflows 64 bits", f->name);
  return PL_OK;
}

static pl_status check_fields(const pl_field *fields, int nfields,
                              pl_error *err) {
  if (nfields <= 0 || !fields)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "a dataset needs fields");
  for (int i = 0; i < nfields; i++) {
    PL_TRY(check_field(&fields[i], i, err));
    for (int j = 0; j < i; j++)
      if (!strcmp(fields[i].name, fields[j].name))
        return pl_errorf(err, PL_INVALID_ARGUMENT,
                         "two fields are called '%s'", fields[i].name);
  }
  return PL_OK;
}

pl_status pl_dataset_new(const pl_dataset_vt *vt, void *impl, uint64_t length,
                         const pl_field *fields, int nfields,
                         pl_dataset **out, pl_error *err) {
  *out = NULL;
  PL_TRY(check_fields(fields, nfields, err));
  pl_dataset *ds = calloc(1, sizeof *ds);
  pl_field *f = calloc((size_t)nfields, sizeof *f);
  uint64_t *fb = calloc((size_t)nfields, sizeof *fb);
  if (!ds || !f || !fb) {
    free(ds);
    free(f);
    free(fb);
    return pl_errorf(err, PL_NO_MEMORY, "out of memory creating a dataset");
  }
  memcpy(f, fields, (size_t)nfields * sizeof *f);
  uint64_t total = 0;
  for (int i = 0; i < nfields; i++) {
    fb[i] = pl_field_bytes(&f[i]);
    if (!pl_add_u64(total, fb[i], &total)) {
      free(ds);
      free(f);
      free(fb);
      return pl_errorf(err, PL_INVALID_ARGUMENT, "sample size overflows");
    }
  }
  ds->vt = vt;
  ds->impl = impl;
  atomic_init(&ds->refs, 1);
  ds->length = length;
  ds->nfields = nfields;
  ds->fields = f;
  ds->field_bytes = fb;
  ds->sample_bytes = total;
  *out = ds;
  return PL_OK;
}

double pl_dataset_worker_cpu_s(const pl_dataset *ds) {
  return ds && ds->vt->worker_cpu_s ? ds->vt->worker_cpu_s(ds) : 0;
}

pl_dataset *pl_dataset_retain(pl_dataset *ds) {
  if (ds)
    atomic_fetch_add_explicit(&ds->refs, 1, memory_order_relaxed);
  return ds;
}

void pl_dataset_destroy(pl_dataset *ds) {
  if (!ds || atomic_fetch_sub_explicit(&ds->refs, 1, memory_order_acq_rel) != 1)
    return;
  if (ds->vt->destroy_impl)
    ds->vt->destroy_impl(ds->impl);
  free(ds->fields);
  free(ds->field_bytes);
  free(ds);
}

uint64_t pl_dataset_length(const pl_dataset *ds) { return ds ? ds->length : 0; }
int pl_dataset_num_fields(const pl_dataset *ds) { return ds ? ds->nfields : 0; }
uint64_t pl_dataset_sample_bytes(const pl_dataset *ds) {
  return ds ? ds->sample_bytes : 0;
}

const char *pl_dataset_sample_path(const pl_dataset *ds, uint64_t index,
                                   int64_t *label) {
  if (!ds || !ds->vt->sample_path || index >= ds->length)
    return NULL;
  return ds->vt->sample_path(ds, index, label);
}

void pl_error_path_from(pl_error *err, const char *const *paths, int n) {
  if (!err || err->status == PL_OK || err->path[0] || !paths)
    return;
  for (int i = 0; i < n; i++) {
    size_t len = paths[i] ? strlen(paths[i]) : 0;
    if (len && !strncmp(err->message, paths[i], len) &&
        (err->message[len] == ':' || err->message[len] == ' ')) {
      pl_error_set_path(err, paths[i]);
      return;
    }
  }
}

uint64_t pl_dataset_replaced(const pl_dataset *ds) {
  return ds && ds->vt->replaced ? ds->vt->replaced(ds) : 0;
}

const pl_field *pl_dataset_field(const pl_dataset *ds, int i) {
  return (ds && i >= 0 && i < ds->nfields) ? &ds->fields[i] : NULL;
}

int pl_dataset_field_index(const pl_dataset *ds, const char *name) {
  for (int i = 0; i < ds->nfields; i++)
    if (!strcmp(ds->fields[i].name, name))
      return i;
  return -1;
}

pl_status pl_dataset_read_sample(const pl_dataset *ds, uint64_t index,
                                 const pl_sample_ctx *ctx, void *const *dst,
                                 pl_error *err) {
  pl_status s = ds->vt->read(ds, index, ctx, dst, err);
  if (s != PL_OK) {
    pl_error_prefix(err, "sample %llu", (unsigned long long)index);
    pl_error_set_sample(err, index);
  }
  return s;
}

pl_status pl_dataset_read(const pl_dataset *ds, uint64_t index,
                          void *const *dst, pl_error *err) {
  if (!ds || !dst)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "dataset and dst are required");
  if (index >= ds->length)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "sample %llu is out of range (length %llu)",
                     (unsigned long long)index,
                     (unsigned long long)ds->length);
  static const pl_sample_ctx no_ctx = {0, 0, NULL};
  pl_map_guard g; /* a mapped file may shrink: data/map_guard.h */
  if (pl_map_guard_enter(&g)) {
    pl_status f = pl_map_guard_failed(&g, err);
    pl_error_prefix(err, "sample %llu", (unsigned long long)index);
    pl_error_set_sample(err, index);
    return f;
  }
  pl_status s = pl_dataset_read_sample(ds, index, &no_ctx, dst, err);
  pl_map_guard_leave(&g);
  pl_copy_fence(); /* sources may use streaming stores */
  return s;
}

pl_status pl_dataset_call_get_item(pl_get_item_fn get_item, void *user,
                                   uint64_t index, void *const *dst,
                                   pl_error *err) {
  char msg[PL_ERROR_MESSAGE_MAX - 64];
  msg[0] = '\0';
  int rc = get_item(user, index, dst, msg, sizeof msg);
  if (rc == 0)
    return PL_OK;
  msg[sizeof msg - 1] = '\0';
  return pl_errorf(err, PL_CALLBACK, "callback returned %d%s%s", rc,
                   msg[0] ? ": " : "", msg);
}
