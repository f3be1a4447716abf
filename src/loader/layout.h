/* Where a batch's bytes go (pl_core.layout), fixed at create
 * (loader_create.c). The copy plan (backend/copy_plan.h) lays out the
 * staged bytes: the dataset's fields, then the transforms' draws as plan
 * field ds->nfields. With transforms (data/transform.h) the delivered
 * arrays follow in the same buffer, from out_base: out_off / out_bytes per
 * field. The CUDA backend transforms after the copy; on the CPU (xf_host)
 * the workers transform each sample as soon as it is read. Without
 * transforms the delivered arrays are the staged ones (out_base 0, the
 * plan's offsets). */
#ifndef PL_LOADER_LAYOUT_H
#define PL_LOADER_LAYOUT_H

#include "backend/copy_plan.h"
#include "data/transform.h"

typedef struct pl_batch_layout {
  pl_copy_plan copy; /* made before the backend, fixed after */
  pl_xform_plan *xf; /* NULL: no transforms */
  int xf_host;
  uint64_t out_base;
  uint64_t *out_off;
  uint64_t *out_bytes;
  uint64_t mem_bytes; /* one batch buffer */
} pl_batch_layout;

#endif /* PL_LOADER_LAYOUT_H */
