/* CUDA kernels of the transforms (transform_cuda.h). Memory-bound: a
 * thread makes 8 consecutive output elements (one 16-byte store for
 * bfloat16/float16, two for float32, one 8-byte store for uint8) from byte
 * loads of the staged image, which the L1 cache serves (each input byte is
 * read by one or two neighbouring threads). The per-channel table that turns
 * a uint8 value into the output element (data/transform.c computes it)
 * sits in shared memory, so the arithmetic is a lookup, and the result is
 * the host reference's bit for bit. Geometry: output (c, y, x) reads input
 * (c, y + oy - pad, xs + ox - pad), xs = x or OW - 1 - x when flipped;
 * outside the image it reads the fill value. */
#include "backend/cuda/transform_cuda.h"

namespace {

template <int SZ> struct elem;
template <> struct elem<1> { typedef uint8_t T; };
template <> struct elem<2> { typedef uint16_t T; };
template <> struct elem<4> { typedef uint32_t T; };

constexpr int kPerThread = 8;
constexpr int kThreads = 256;

/* Coordinates of output element e in the field's output order. */
struct coord {
  int32_t c, y, x;
};

__device__ __forceinline__ coord locate(const pl_xform_field &f, uint32_t e) {
  coord k;
  if (f.out_hwc) {
    k.c = (int32_t)(e % (uint32_t)f.C);
    uint32_t p = e / (uint32_t)f.C;
    k.x = (int32_t)(p % (uint32_t)f.OW);
    k.y = (int32_t)(p / (uint32_t)f.OW);
  } else {
    k.x = (int32_t)(e % (uint32_t)f.OW);
    uint32_t r = e / (uint32_t)f.OW;
    k.y = (int32_t)(r % (uint32_t)f.OH);
    k.c = (int32_t)(r / (uint32_t)f.OH);
  }
  return k;
}

__device__ __forceinline__ void advance(const pl_xform_field &f, coord &k) {
  if (f.out_hwc) {
    if (++k.c == f.C) {
      k.c = 0;
      if (++k.x == f.OW)
        k.x = 0, ++k.y;
    }
  } else if (++k.x == f.OW) {
    k.x = 0;
    if (++k.y == f.OH)
      k.y = 0, ++k.c;
  }
}

__device__ __forceinline__ uint32_t input_value(const pl_xform_field &f,
                                                const uint8_t *__restrict__ in,
                                                const pl_xform_params &pr,
                                                const coord &k) {
  int32_t sy = k.y + pr.oy - f.pad;
  int32_t sx = (pr.flip ? f.OW - 1 - k.x : k.x) + pr.ox - f.pad;
  if (sy < 0 || sy >= f.H || sx < 0 || sx >= f.W)
    return f.fill;
  uint32_t i = f.in_hwc ? ((uint32_t)sy * (uint32_t)f.W + (uint32_t)sx) *
                                  (uint32_t)f.C + (uint32_t)k.c
                        : ((uint32_t)k.c * (uint32_t)f.H + (uint32_t)sy) *
                                  (uint32_t)f.W + (uint32_t)sx;
  return __ldg(in + i);
}

template <int SZ>
__device__ __forceinline__ void store8(typename elem<SZ>::T *out,
                                       const typename elem<SZ>::T (&v)[8]) {
  if (SZ == 1) {
    uint2 w;
    w.x = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 |
          (uint32_t)v[3] << 24;
    w.y = (uint32_t)v[4] | (uint32_t)v[5] << 8 | (uint32_t)v[6] << 16 |
          (uint32_t)v[7] << 24;
    *reinterpret_cast<uint2 *>(out) = w;
  } else if (SZ == 2) {
    uint4 w;
    w.x = (uint32_t)v[0] | (uint32_t)v[1] << 16;
    w.y = (uint32_t)v[2] | (uint32_t)v[3] << 16;
    w.z = (uint32_t)v[4] | (uint32_t)v[5] << 16;
    w.w = (uint32_t)v[6] | (uint32_t)v[7] << 16;
    *reinterpret_cast<uint4 *>(out) = w;
  } else {
    uint4 *o = reinterpret_cast<uint4 *>(out);
    o[0] = make_uint4((uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[3]);
    o[1] = make_uint4((uint32_t)v[4], (uint32_t)v[5], (uint32_t)v[6], (uint32_t)v[7]);
  }
}

template <int SZ>
__global__ void __launch_bounds__(kThreads)
image_kernel(const pl_xform_field f, const uint8_t *__restrict__ src,
             uint8_t *__restrict__ dst, const uint8_t *__restrict__ table,
             const pl_xform_params *__restrict__ params, int nparams,
             uint32_t n) {
  typedef typename elem<SZ>::T T;
  extern __shared__ __align__(16) uint8_t smem[];
  T *tab = reinterpret_cast<T *>(smem);
  const T *gtab = reinterpret_cast<const T *>(table);
  for (int i = threadIdx.x; i < 256 * f.C; i += blockDim.x)
    tab[i] = gtab[i];
  __syncthreads();
  const uint32_t per = (uint32_t)f.C * (uint32_t)f.OH * (uint32_t)f.OW;
  const uint32_t chunks = (per + kPerThread - 1) / kPerThread;
  for (uint32_t s = blockIdx.y; s < n; s += gridDim.y) {
    pl_xform_params pr = {0, 0, 0, 0};
    if (f.slot >= 0)
      pr = params[(uint64_t)s * (uint64_t)nparams + (uint64_t)f.slot];
    const uint8_t *in = src + (uint64_t)s * f.in_bytes;
    T *out = reinterpret_cast<T *>(dst + (uint64_t)s * f.out_bytes);
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < chunks;
         k += gridDim.x * blockDim.x) {
      uint32_t e0 = k * kPerThread;
      coord at = locate(f, e0);
      T v[kPerThread];
#pragma unroll
      for (int j = 0; j < kPerThread; j++) {
        v[j] = 0;
        if (e0 + j < per) {
          v[j] = tab[at.c * 256 + (int32_t)input_value(f, in, pr, at)];
          advance(f, at);
        }
      }
      T *o = out + e0;
      const uintptr_t align = SZ == 1 ? 7 : 15;
      if (e0 + kPerThread <= per && ((uintptr_t)o & align) == 0) {
        store8<SZ>(o, v);
      } else {
        for (int j = 0; j < kPerThread && e0 + j < per; j++)
          o[j] = v[j];
      }
    }
  }
}

template <typename I>
__global__ void widen_kernel(const I *__restrict__ src, int64_t *__restrict__ dst,
                             uint64_t total) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total;
       i += (uint64_t)gridDim.x * blockDim.x)
    dst[i] = (int64_t)src[i];
}

template <typename I>
cudaError_t launch_widen(const void *src, void *dst, uint64_t total,
                         cudaStream_t s) {
  uint64_t blocks = (total + kThreads - 1) / kThreads;
  unsigned grid = (unsigned)(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
  widen_kernel<I><<<grid, kThreads, 0, s>>>(static_cast<const I *>(src),
                                             static_cast<int64_t *>(dst), total);
  return cudaGetLastError();
}

cudaError_t widen(const pl_xform_field *f, const void *src, void *dst,
                  uint32_t n, cudaStream_t s) {
  uint64_t total = (uint64_t)n * (uint64_t)f->W;
  switch (f->in_dtype) {
  case PL_UINT8: return launch_widen<uint8_t>(src, dst, total, s);
  case PL_INT8: return launch_widen<int8_t>(src, dst, total, s);
  case PL_UINT16: return launch_widen<uint16_t>(src, dst, total, s);
  case PL_INT16: return launch_widen<int16_t>(src, dst, total, s);
  case PL_UINT32: return launch_widen<uint32_t>(src, dst, total, s);
  case PL_INT32: return launch_widen<int32_t>(src, dst, total, s);
  case PL_INT64: return launch_widen<int64_t>(src, dst, total, s);
  default: return cudaErrorInvalidValue;
  }
}

template <int SZ>
cudaError_t launch_image(const pl_xform_field *f, const uint8_t *table,
                         const void *src, void *dst,
                         const pl_xform_params *params, int nparams,
                         uint32_t n, cudaStream_t s) {
  uint32_t per = (uint32_t)f->C * (uint32_t)f->OH * (uint32_t)f->OW;
  uint32_t chunks = (per + kPerThread - 1) / kPerThread;
  uint32_t bx = (chunks + kThreads - 1) / kThreads;
  dim3 grid(bx < 1024 ? bx : 1024, n < 65535 ? n : 65535);
  size_t shared = 256u * (size_t)f->C * SZ;
  image_kernel<SZ><<<grid, kThreads, shared, s>>>(
      *f, static_cast<const uint8_t *>(src), static_cast<uint8_t *>(dst),
      table, params, nparams, n);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t pl_cuda_xform_field(const pl_xform_field *f,
                                           const void *dev_table,
                                           const void *src, void *dst,
                                           const pl_xform_params *params,
                                           int nparams, uint32_t n,
                                           cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  if (f->op == PL_XF_COPY) /* n samples' arrays are contiguous */
    return cudaMemcpyAsync(dst, src, (size_t)n * (size_t)f->in_bytes,
                           cudaMemcpyDeviceToDevice, stream);
  if (f->op == PL_XF_WIDEN)
    return widen(f, src, dst, n, stream);
  if (f->slot >= 0 && !params)
    return cudaErrorInvalidValue;
  const uint8_t *table = static_cast<const uint8_t *>(dev_table) + f->table_off;
  switch (f->out_size) {
  case 1: return launch_image<1>(f, table, src, dst, params, nparams, n, stream);
  case 2: return launch_image<2>(f, table, src, dst, params, nparams, n, stream);
  case 4: return launch_image<4>(f, table, src, dst, params, nparams, n, stream);
  default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t pl_cuda_xform_batch(const pl_xform_plan *p,
                                           const void *dev_table,
                                           const void *raw, void *out,
                                           uint32_t n, cudaStream_t stream) {
  const uint8_t *r = static_cast<const uint8_t *>(raw);
  uint8_t *o = static_cast<uint8_t *>(out);
  const pl_xform_params *params =
      p->nparams ? reinterpret_cast<const pl_xform_params *>(r + p->params_off)
                 : nullptr;
  for (int i = 0; i < p->n; i++) {
    const pl_xform_field *f = &p->f[i];
    cudaError_t rc = pl_cuda_xform_field(f, dev_table, r + f->in_off,
                                         o + f->out_off, params, p->nparams,
                                         n, stream);
    if (rc != cudaSuccess)
      return rc;
  }
  return cudaSuccess;
}
