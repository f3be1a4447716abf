/* Explicit orders: an epoch whose batches the caller lists (a Python
 * sampler or batch sampler decides the order; the loader still fills,
 * prefetches and copies). The object itself (order.h); the loader's calls
 * that give one are loader_order.c. */
#include "loader/order.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pl_order_unref(pl_order *o) {
  if (o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1) {
    free(o->indices);
    free(o->starts);
    free(o);
  }
}

pl_order *pl_order_ref(pl_order *o) {
  if (o)
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
  return o;
}

static pl_status order_check(uint64_t length, uint32_t batch_size,
                             const uint64_t *indices, const uint64_t *starts,
                             uint64_t nb, pl_error *err) {
  if (nb && (!indices || !starts))
    return pl_errorf(err, PL_INVALID_ARGUMENT, "indices and starts are NULL");
  if (nb && starts[0] != 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "starts[0] is %llu, not 0",
                     (unsigned long long)starts[0]);
  for (uint64_t k = 0; k < nb; k++) {
    if (starts[k + 1] <= starts[k] || starts[k + 1] - starts[k] > batch_size)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "batch %llu has %lld samples (1 to batch_size %u)",
                       (unsigned long long)k,
                       (long long)(starts[k + 1] - starts[k]), batch_size);
  }
  uint64_t n = nb ? starts[nb] : 0;
  for (uint64_t i = 0; i < n; i++) {
    if (indices[i] < length)
      continue;
    /* Above INT64_MAX: a binding's negative index (Python's -1 as uint64
     * is 18446744073709551615), printed as the user wrote it. */
    char idx[24];
    if (indices[i] > INT64_MAX)
      snprintf(idx, sizeof idx, "-%llu", (unsigned long long)(0 - indices[i]));
    else
      snprintf(idx, sizeof idx, "%llu", (unsigned long long)indices[i]);
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "sample index %s (position %llu) is out of range "
                     "for %llu samples",
                     idx, (unsigned long long)i, (unsigned long long)length);
  }
  return PL_OK;
}

static pl_status order_copy(const uint64_t *indices, const uint64_t *starts,
                            uint64_t nb, pl_order **out, pl_error *err) {
  uint64_t n = nb ? starts[nb] : 0;
  pl_order *o = calloc(1, sizeof *o);
  if (o) {
    o->indices = malloc((size_t)PL_MAX(n, 1) * sizeof *o->indices);
    o->starts = malloc((size_t)(nb + 1) * sizeof *o->starts);
  }
  if (!o || !o->indices || !o->starts) {
    if (o) {
      free(o->indices);
      free(o->starts);
    }
    free(o);
    return pl_errorf(err, PL_NO_MEMORY,
                     "out of memory for an order of %llu "
                     "samples",
                     (unsigned long long)n);
  }
  if (n)
    memcpy(o->indices, indices, (size_t)n * sizeof *indices);
  if (nb)
    memcpy(o->starts, starts, (size_t)(nb + 1) * sizeof *starts);
  else
    o->starts[0] = 0;
  o->nbatches = nb;
  atomic_init(&o->refs, 1);
  *out = o;
  return PL_OK;
}

pl_status pl_order_new(uint64_t length, uint32_t batch_size,
                       const uint64_t *indices, const uint64_t *starts,
                       uint64_t nb, pl_order **out, pl_error *err) {
  PL_TRY(order_check(length, batch_size, indices, starts, nb, err));
  return order_copy(indices, starts, nb, out, err);
}

uint32_t pl_order_batch_size(const pl_order *o, uint64_t batch) {
  return (uint32_t)(o->starts[batch + 1] - o->starts[batch]);
}

void pl_order_indices(const pl_order *o, uint64_t batch, uint64_t *out) {
  uint64_t s = o->starts[batch];
  memcpy(out, o->indices + s, (size_t)(o->starts[batch + 1] - s) * sizeof *out);
}
