/* The core's lifetime (loader_internal.h, "Ownership"): its last
 * reference frees it, whoever lets go last; and the error for a core used
 * from a forked child. */
#include "loader/loader_internal.h"

#include <assert.h>
#include <stdlib.h>

void pl_core_free(pl_core *c) {
  for (int i = 0; i < c->pool.nslots; i++)
    pl_pool_slot_free(c, c->pool.slots[i]);
  if (c->be)
    c->be->vt->destroy(c->be);
  pl_dataset_destroy(c->ds);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->work_cv);
  pthread_cond_destroy(&c->park_cv);
  pthread_cond_destroy(&c->ready_cv);
  pthread_cond_destroy(&c->turn_cv);
  free(c->pool.slots);
  free(c->workers);
  pl_order_unref(c->stream.order);
  pl_order_unref(c->stream.then);
  pl_replay_free(c);
  pl_copy_plan_free(&c->layout.copy);
  pl_xform_plan_free(c->layout.xf);
  free(c->layout.out_off);
  free(c->layout.out_bytes);
  free(c);
}

void pl_core_unref(pl_core *c) {
  pthread_mutex_lock(&c->mu);
  assert(c->refs > 0);
  int last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last)
    pl_core_free(c);
}

pl_status pl_core_forked(const pl_core *c, pl_error *err) {
  return pl_errorf(err, PL_BAD_STATE,
                   "this loader was created in process %d; a forked child "
                   "(process %d) cannot use it: create a new loader",
                   (int)c->pid, (int)getpid());
}
