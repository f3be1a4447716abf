/* An explicit epoch (order.c, pl_loader_set_order): batch k is
 * indices[starts[k] .. starts[k+1]). Immutable once made; refcounted: the
 * stream holds one reference and each batch claimed from it another, so a
 * worker computing its indices never reads an order that set_order or
 * set_epoch replaced meanwhile. */
#ifndef PL_LOADER_ORDER_H
#define PL_LOADER_ORDER_H

#include "core/common.h"

#include <stdatomic.h>

typedef struct pl_order {
  atomic_int refs;
  uint64_t *indices;
  uint64_t *starts;
  uint64_t nbatches;
} pl_order;

/* Checks an explicit order against the loader (indices below `length`,
 * batches of 1 to batch_size samples) and copies it, with one reference. */
pl_status pl_order_new(uint64_t length, uint32_t batch_size,
                       const uint64_t *indices, const uint64_t *starts,
                       uint64_t nb, pl_order **out, pl_error *err);
pl_order *pl_order_ref(pl_order *o);
void pl_order_unref(pl_order *o); /* accepts NULL */
uint32_t pl_order_batch_size(const pl_order *o, uint64_t batch);
void pl_order_indices(const pl_order *o, uint64_t batch, uint64_t *out);

#endif /* PL_LOADER_ORDER_H */
