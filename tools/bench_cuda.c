/* Raw CUDA runtime baselines for `pinloader bench`: copy bandwidth by size
 * and memory kind, and the seeds' overlap pattern. The only CLI file that
 * calls CUDA directly: these are the numbers the loader is measured
 * against, so they must not go through the loader. Without PL_HAVE_CUDA the
 * functions are stubs that say so. */
#include "bench.h"

#include <string.h>

#ifndef PL_HAVE_CUDA

int bench_cuda_devices(void) { return 0; }

int bench_cuda_bandwidth(const bench_opts *o, bench_bw *bw) {
  (void)o;
  snprintf(bw->note, sizeof bw->note, "this build has no CUDA support");
  return -1;
}

int bench_cuda_overlap(const bench_opts *o, bench_overlap *ov) {
  (void)o;
  snprintf(ov->note, sizeof ov->note, "this build has no CUDA support");
  return -1;
}

#else /* PL_HAVE_CUDA */

#include <cuda_runtime.h>
#include <stdlib.h>

/* On failure: the call and CUDA's message into `note`, then `goto out`. */
#define BENCH_CK(call, note)                                                 \
  do {                                                                       \
    cudaError_t e_ = (call);                                                 \
    if (e_ != cudaSuccess) {                                                 \
      snprintf((note), sizeof(note), "%s: %s", #call,                        \
               cudaGetErrorString(e_));                                      \
      goto out;                                                              \
    }                                                                        \
  } while (0)

int bench_cuda_devices(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* no driver: not an error to keep */
    return 0;
  }
  return n;
}

static int pick_device(const bench_opts *o, char *name, size_t name_len,
                       char *note, size_t note_len) {
  int dev = o->device == PL_DEVICE_CUDA ? o->device_index : 0;
  struct cudaDeviceProp p;
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess)
    e = cudaGetDeviceProperties(&p, dev);
  if (e != cudaSuccess) {
    snprintf(note, note_len, "cuda:%d: %s", dev, cudaGetErrorString(e));
    return -1;
  }
  snprintf(name, name_len, "cuda:%d %.100s", dev, p.name);
  return 0;
}

/* The buffers of the bandwidth experiment, each max_bytes long. */
typedef struct bw_bufs {
  void *pageable, *pinned, *registered, *dev;
  int is_registered;
  cudaStream_t stream;
} bw_bufs;

/* One (kind, size) cell: GB/s over `reps` copies after one warm-up. */
static cudaError_t bw_cell(const bw_bufs *b, bench_bw_kind k, uint64_t n,
                           int reps, double *gbs) {
  int d2h = k >= BW_D2H_PAGEABLE;
  int kk = d2h ? k - BW_D2H_PAGEABLE : k;
  void *host = kk == 0 ? b->pageable : kk == 3 ? b->registered : b->pinned;
  int async = kk >= 2;
  void *dst = d2h ? host : b->dev;
  const void *src = d2h ? b->dev : host;
  enum cudaMemcpyKind dir = d2h ? cudaMemcpyDeviceToHost
                                : cudaMemcpyHostToDevice;
  cudaError_t e = cudaMemcpy(dst, src, n, dir);
  if (e == cudaSuccess)
    e = cudaDeviceSynchronize();
  double t = bench_now();
  for (int r = 0; r < reps && e == cudaSuccess; r++)
    e = async ? cudaMemcpyAsync(dst, src, n, dir, b->stream)
              : cudaMemcpy(dst, src, n, dir);
  if (e == cudaSuccess)
    e = cudaDeviceSynchronize();
  t = bench_now() - t;
  *gbs = (double)n * reps / (t > 0 ? t : 1e-9) / 1e9;
  return e;
}

static int reps_for(uint64_t n, uint64_t budget) {
  uint64_t r = budget / n;
  return r < 3 ? 3 : r > 2000 ? 2000 : (int)r;
}

/* Allocates the buffers and times what pinning costs. */
static int bw_alloc(const bench_opts *o, bw_bufs *b, bench_bw *bw) {
  uint64_t n = o->max_bytes;
  double t;
  BENCH_CK(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking),
           bw->note);
  BENCH_CK(cudaMalloc(&b->dev, n), bw->note);
  t = bench_now();
  BENCH_CK(cudaHostAlloc(&b->pinned, n, cudaHostAllocDefault), bw->note);
  bw->pin_alloc_ms = (bench_now() - t) * 1e3;
  b->pageable = malloc(n);
  b->registered = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (!b->pageable || !b->registered) {
    snprintf(bw->note, sizeof bw->note, "cannot allocate %llu bytes",
             (unsigned long long)n);
    return -1;
  }
  memset(b->pinned, 1, n);
  memset(b->pageable, 1, n);
  memset(b->registered, 1, n); /* registering faulted-in pages, as the
                                  reference measures it */
  t = bench_now();
  BENCH_CK(cudaHostRegister(b->registered, n, cudaHostRegisterDefault),
           bw->note);
  bw->register_ms = (bench_now() - t) * 1e3;
  b->is_registered = 1;
  return 0;
out:
  return -1;
}

static void bw_free(bw_bufs *b, bench_bw *bw) {
  if (b->pinned) {
    double t = bench_now();
    cudaFreeHost(b->pinned);
    bw->pin_free_ms = (bench_now() - t) * 1e3;
  }
  if (b->is_registered)
    cudaHostUnregister(b->registered);
  free(b->registered);
  free(b->pageable);
  if (b->dev)
    cudaFree(b->dev);
  if (b->stream)
    cudaStreamDestroy(b->stream);
}

int bench_cuda_bandwidth(const bench_opts *o, bench_bw *bw) {
  bw_bufs b;
  memset(&b, 0, sizeof b);
  int rc = -1;
  if (pick_device(o, bw->device, sizeof bw->device, bw->note,
                  sizeof bw->note) || bw_alloc(o, &b, bw))
    goto out;
  double t0 = bench_now();
  int cells = bw->nsizes * BW_MEMCPY, done = 0;
  for (int i = 0; i < bw->nsizes; i++) {
    uint64_t n = bw->sizes[i];
    int reps = reps_for(n, o->quick ? 64u << 20 : 256u << 20);
    for (int k = 0; k < BW_MEMCPY; k++) {
      BENCH_CK(bw_cell(&b, (bench_bw_kind)k, n, reps, &bw->gbs[i][k]),
               bw->note);
      bench_progress(o, "bandwidth", (uint64_t)++done, (uint64_t)cells, t0);
    }
  }
  bw->on_gpu = 1;
  bw->ran = 1;
  rc = 0;
out:
  bench_progress_end(o);
  bw_free(&b, bw);
  return rc;
}

/* ------------------------------------------------------------- overlap */

typedef struct ov_bufs {
  void *host[2]; /* [0] pageable, [1] pinned */
  void *dev, *dev2;
  cudaStream_t stream;
} ov_bufs;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* What each part takes alone, and the pattern as a whole. `what`: 0 copy,
 * 1 CPU work, 2 GPU work, 3 the pattern. Milliseconds, median of reps. */
static cudaError_t ov_time(const ov_bufs *b, const bench_overlap *ov,
                           int pinned, int non_blocking, int what,
                           double *ms) {
  double v[64];
  int reps = ov->reps < 64 ? ov->reps : 64;
  cudaError_t e = cudaSuccess;
  for (int r = -1; r < reps && e == cudaSuccess; r++) { /* r < 0: warm-up */
    double t = bench_now();
    if (what == 0 || what == 3)
      e = cudaMemcpyAsync(b->dev, b->host[pinned], ov->copy_bytes,
                          cudaMemcpyHostToDevice, b->stream);
    if (e == cudaSuccess && what == 3 && !non_blocking)
      e = cudaStreamSynchronize(b->stream); /* .cuda(non_blocking=False) */
    if (what == 1 || what == 3)
      bench_spin_ms(ov->work_ms);
    if (e == cudaSuccess && (what == 2 || what == 3)) /* uses the copy */
      e = cudaMemcpyAsync(b->dev2, b->dev, ov->copy_bytes,
                          cudaMemcpyDeviceToDevice, b->stream);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(b->stream);
    if (r >= 0)
      v[r] = (bench_now() - t) * 1e3;
  }
  *ms = median(v, reps);
  return e;
}

static int ov_row(const ov_bufs *b, bench_overlap *ov, bench_overlap_row *row,
                  int pinned, int non_blocking) {
  row->pinned = pinned;
  row->non_blocking = non_blocking;
  BENCH_CK(ov_time(b, ov, pinned, non_blocking, 0, &row->copy_ms), ov->note);
  BENCH_CK(ov_time(b, ov, pinned, non_blocking, 1, &row->cpu_ms), ov->note);
  BENCH_CK(ov_time(b, ov, pinned, non_blocking, 2, &row->gpu_ms), ov->note);
  BENCH_CK(ov_time(b, ov, pinned, non_blocking, 3, &row->iter_ms), ov->note);
  row->saved_ms = row->copy_ms + row->cpu_ms + row->gpu_ms - row->iter_ms;
  row->max_saved_ms = row->copy_ms < row->cpu_ms ? row->copy_ms : row->cpu_ms;
  row->saved_pct = row->max_saved_ms > 0
                       ? 100.0 * row->saved_ms / row->max_saved_ms
                       : 0;
  return 0;
out:
  return -1;
}

int bench_cuda_overlap(const bench_opts *o, bench_overlap *ov) {
  ov_bufs b;
  char name[128];
  memset(&b, 0, sizeof b);
  int rc = -1;
  ov->copy_bytes = o->overlap_bytes;
  ov->work_ms = o->overlap_work_ms;
  ov->reps = o->quick ? 5 : 20;
  if (pick_device(o, name, sizeof name, ov->note, sizeof ov->note))
    goto out;
  BENCH_CK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking),
           ov->note);
  BENCH_CK(cudaMalloc(&b.dev, ov->copy_bytes), ov->note);
  BENCH_CK(cudaMalloc(&b.dev2, ov->copy_bytes), ov->note);
  BENCH_CK(cudaHostAlloc(&b.host[1], ov->copy_bytes, cudaHostAllocDefault),
           ov->note);
  if (!(b.host[0] = malloc(ov->copy_bytes))) {
    snprintf(ov->note, sizeof ov->note, "cannot allocate %llu bytes",
             (unsigned long long)ov->copy_bytes);
    goto out;
  }
  memset(b.host[0], 3, ov->copy_bytes);
  memset(b.host[1], 3, ov->copy_bytes);
  double t0 = bench_now();
  for (int i = 0; i < 4; i++) {
    if (ov_row(&b, ov, &ov->rows[i], !(i & 2), !(i & 1)))
      goto out;
    bench_progress(o, "overlap", (uint64_t)i + 1, 4, t0);
  }
  ov->ran = 1;
  rc = 0;
out:
  bench_progress_end(o);
  free(b.host[0]);
  if (b.host[1])
    cudaFreeHost(b.host[1]);
  if (b.dev)
    cudaFree(b.dev);
  if (b.dev2)
    cudaFree(b.dev2);
  if (b.stream)
    cudaStreamDestroy(b.stream);
  return rc;
}

#endif /* PL_HAVE_CUDA */
