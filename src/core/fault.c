/* Test-only fault injection (see fault.h). Empty unless PL_FAULT_INJECTION. */
#include "core/fault.h"

#ifdef PL_FAULT_INJECTION
#include <stdatomic.h>

typedef struct fault_arm {
  atomic_long after; /* hits to let pass first */
  atomic_long count; /* failures left; < 0 forever */
} fault_arm;

static fault_arm faults[PL_FAULT_POINT_COUNT_];

int pl_fault_hit(pl_fault_point p) {
  fault_arm *f = &faults[p];
  if (atomic_load(&f->count) == 0)
    return 0;
  if (atomic_fetch_sub(&f->after, 1) > 0)
    return 0;
  long c = atomic_load(&f->count);
  while (c != 0) {
    if (c < 0 || atomic_compare_exchange_weak(&f->count, &c, c - 1))
      return 1;
  }
  return 0;
}

void pl_fault_arm(pl_fault_point p, long after, long count) {
  atomic_store(&faults[p].count, 0);
  atomic_store(&faults[p].after, after);
  atomic_store(&faults[p].count, count);
}

void pl_fault_reset(void) {
  for (int i = 0; i < PL_FAULT_POINT_COUNT_; i++)
    pl_fault_arm((pl_fault_point)i, 0, 0);
}
#else
typedef int pl_fault_unused_; /* ISO C forbids an empty translation unit */
#endif
