/* A dataset read by a user callback: the C form of a map-style
 * __getitem__. The callback writes straight into the batch's buffers. */
#include "data/dataset.h"

#include <stdlib.h>

typedef struct callback_impl {
  pl_get_item_fn get_item;
  void *user;
  void (*free_user)(void *);
} callback_impl;

static pl_status callback_read(const pl_dataset *ds, uint64_t index,
                               const pl_sample_ctx *ctx, void *const *dst,
                               pl_error *err) {
  const callback_impl *cb = ds->impl;
  return pl_dataset_call_get_item(cb->get_item, cb->user, index, dst, err);
}

static void callback_destroy(void *impl) {
  callback_impl *cb = impl;
  if (cb->free_user)
    cb->free_user(cb->user);
  free(cb);
}

static const pl_dataset_vt callback_vt = {
    .kind = "callback",
    .read = callback_read,
    .view = NULL,
    .destroy_impl = callback_destroy,
};

pl_status pl_dataset_from_callback(const pl_field *fields, int nfields,
                                   uint64_t length, pl_get_item_fn get_item,
                                   void *user, void (*free_user)(void *),
                                   pl_dataset **out, pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!get_item)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "get_item is NULL");
  callback_impl *cb = malloc(sizeof *cb);
  if (!cb)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  *cb = (callback_impl){get_item, user, free_user};
  pl_status s = pl_dataset_new(&callback_vt, cb, length, fields, nfields, out,
                               err);
  if (s != PL_OK)
    free(cb); /* user data stays the caller's on failure */
  return s;
}
