/* One .npy file held in memory as a whole array (a tar shard's member):
 * the parsing of source_npy.c (dtypes, byte order, refusals), without
 * its first axis taken as samples. */
#ifndef PL_NPY_MEMBER_H
#define PL_NPY_MEMBER_H

#include "core/common.h"

typedef struct pl_npy_view {
  pl_dtype dtype;   /* as source_npy delivers it (bool: uint8, complex:
                       float [..., 2]) */
  int ndim;
  int64_t shape[PL_MAX_DIMS];
  const uint8_t *data;
  uint64_t bytes;
  size_t swap;      /* element bytes to swap (big-endian); 0: none */
} pl_npy_view;

/* p[0..n) as a .npy file (`label` in messages); 0-d arrays refused. */
pl_status pl_npy_view_parse(const char *label, const uint8_t *p, uint64_t n,
                            pl_npy_view *out, pl_error *err);

/* v's bytes into dst, in host order. */
void pl_npy_view_copy(const pl_npy_view *v, void *dst);

#endif /* PL_NPY_MEMBER_H */
