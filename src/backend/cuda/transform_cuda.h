/* The CUDA implementation of the transforms (transform.cu): kernels that
 * read a staged uint8 batch in device memory and write the transformed
 * arrays, one kernel per field, queued on the caller's stream. The
 * description they implement, and the host reference they must equal, are
 * in data/transform.h. C-callable; no library state, no allocation. */
#ifndef PL_TRANSFORM_CUDA_H
#define PL_TRANSFORM_CUDA_H

#include "data/transform.h"

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One field of n samples: src holds n * f->in_bytes bytes (the field's
 * array in the staged batch), dst receives n * f->out_bytes. dev_table is
 * the plan's table (p->table, p->table_bytes) in device memory; params the
 * batch's draws in device memory, nparams per sample (NULL when the field
 * has no random transform). Returns the launch's error. */
cudaError_t pl_cuda_xform_field(const pl_xform_field *f, const void *dev_table,
                                const void *src, void *dst,
                                const pl_xform_params *params, int nparams,
                                uint32_t n, cudaStream_t stream);

/* Every field of the plan: field i reads raw + f[i].in_off and writes
 * out + f[i].out_off; the draws lie at raw + p->params_off. */
cudaError_t pl_cuda_xform_batch(const pl_xform_plan *p, const void *dev_table,
                                const void *raw, void *out, uint32_t n,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* PL_TRANSFORM_CUDA_H */
