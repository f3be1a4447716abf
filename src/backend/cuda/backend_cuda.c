/* The CUDA backend's lifetime: its capabilities, create (the device, the
 * stream, the staging pool and direct mode's page-locked regions, all as
 * the copy plan says), destroy and stats, and the vtable that joins the
 * other files (see cuda_backend.h for who does what). Batches live in
 * device memory; workers write them into page-locked staging buffers (or,
 * in direct mode, the copy engine reads the dataset's memory in place),
 * copied asynchronously on one non-blocking stream per backend. */
#include "backend/cuda/cuda_backend.h"
#include "backend/host_pages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Chunks of this size fit a last-level cache many times over with two per
 * worker, yet are copied at nearly the full PCIe rate
 * (bench/results/chunk-probe-h200-2026-12-01.md). */
#define CUDA_CHUNK_BYTES (4ull << 20)

pl_backend_caps pl_backend_cuda_caps(void) {
  return (pl_backend_caps){.stages = 1, .spans = 1, .direct = 1,
                           .chunk_bytes = CUDA_CHUNK_BYTES};
}

static void cuda_stats(pl_backend *b, pl_loader_stats *out) {
  cuda_backend *be = cb_of(b);
  /* Fold in finished copies that no filler has looked at yet. The device
   * is made current first, as at every entry point: stats may be read from
   * a thread that never used CUDA, which would otherwise get a context on
   * device 0. */
  int prev;
  if (pl_cuda_enter(cuda_dev(be), &prev, NULL) == PL_OK)
    pl_stage_pool_poll(&be->pool);
  pl_cuda_leave(cuda_dev(be), prev);
  out->batches_copied += atomic_load(&be->batches_copied);
  out->bytes_copied += atomic_load(&be->bytes_copied);
  out->pinned_bytes += atomic_load(&be->pool.pinned_bytes) + be->source_bytes;
  out->pinned_fallbacks += atomic_load(&be->pool.fallbacks);
  out->copy_s += (double)(atomic_load(&be->copy_ns) +
                          atomic_load(&be->pool.copy_ns)) *
                 1e-9;
}

static void cuda_destroy(pl_backend *b) {
  cuda_backend *be = cb_of(b);
  int prev;
  (void)pl_cuda_enter(cuda_dev(be), &prev, NULL);
  if (be->stream)
    cudaStreamSynchronize(be->stream);
  pl_stage_pool_destroy(&be->pool);
  pl_cuda_regions_unregister(be); /* the stream is synchronized */
  pl_cuda_xform_destroy(be);
  if (be->stream)
    cudaStreamDestroy(be->stream);
  (void)cudaGetLastError();
  pl_cuda_leave(cuda_dev(be), prev);
  free(be);
}

static const pl_backend_vt cuda_vt = {
    .name = "cuda",
    .destroy = cuda_destroy,
    .buf_alloc = pl_cuda_buf_alloc,
    .buf_free = pl_cuda_buf_free,
    .fill_begin = pl_cuda_fill_begin,
    .submit = pl_cuda_submit,
    .fill_abort = pl_cuda_fill_abort,
    .device_dst = pl_cuda_device_dst,
    .deliver = pl_cuda_deliver,
    .wait_stream = pl_cuda_wait_stream,
    .wait_host = pl_cuda_wait_host,
    .release = pl_cuda_release,
    .read_back = pl_cuda_read_back,
    .sync = pl_cuda_sync,
    .stats = cuda_stats,
    .link_rate = pl_cuda_link_rate,
};

int pl_backend_cuda_built(void) { return 1; }

int pl_backend_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/* Why cudaGetDeviceCount failed, in the words a user acts on: the
 * runtime's "CUDA driver version is insufficient" also means "there is no
 * driver at all" (then cudaDriverGetVersion reports 0), and sends users to
 * upgrade a driver they do not have. The CUDA name goes to the debug log. */
static pl_status no_device_words(cudaError_t rc, const pl_logger *log,
                                 pl_error *err) {
  int drv = 0, rt = 0;
  (void)cudaDriverGetVersion(&drv);
  (void)cudaRuntimeGetVersion(&rt);
  (void)cudaGetLastError();
  pl_log(log, PL_LOG_DEBUG, "cudaGetDeviceCount: %s (%s); driver CUDA %d, "
         "runtime CUDA %d", cudaGetErrorName(rc), cudaGetErrorString(rc),
         drv, rt);
  if (rc == cudaErrorNoDevice || (rc == cudaErrorInsufficientDriver && !drv))
    return pl_errorf(err, PL_NO_DEVICE, rc == cudaErrorNoDevice
                                            ? "no NVIDIA GPU found"
                                            : "no NVIDIA driver found");
  if (rc == cudaErrorInsufficientDriver)
    return pl_errorf(err, PL_NO_DEVICE,
                     "the NVIDIA driver supports CUDA %d.%d, older than this "
                     "build's CUDA %d.%d runtime: update the driver",
                     drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
  return pl_errorf(err, PL_NO_DEVICE, "no usable NVIDIA GPU: "
                   "cudaGetDeviceCount: %s", cudaGetErrorString(rc));
}

static pl_status no_device(cudaError_t rc, const pl_logger *log,
                           pl_error *err) {
  no_device_words(rc, log, err);
  pl_error_set_cuda(err, (int)rc); /* the CUDA code stays in the error */
  return PL_NO_DEVICE;
}

static pl_status pick_device(int index, const pl_logger *log, pl_error *err) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess)
    return no_device(rc, log, err);
  if (index < 0 || index >= n)
    return pl_errorf(err, PL_NO_DEVICE,
                     "CUDA device %d does not exist (%d device%s found)",
                     index, n, n == 1 ? "" : "s");
  return PL_OK;
}

/* The device's name, and its NUMA node and the pinning method for the
 * staging pool. */
static pl_status describe_device(cuda_backend *be, pl_stage_pool_config *pc,
                                 pl_error *err) {
  int dev = cuda_dev(be);
  struct cudaDeviceProp prop;
  CUDA_TRY(cudaGetDeviceProperties(&prop, dev), err);
  prop.name[sizeof prop.name - 1] = '\0';
  snprintf(be->base.name, sizeof be->base.name, "cuda:%d %.80s", dev,
           prop.name);
  char bus[32];
  pc->numa_node = -1;
  if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) == cudaSuccess)
    pc->numa_node = pl_pci_numa_node(bus);
  (void)cudaGetLastError();
  /* Registering pre-faulted pages beats cudaHostAlloc (docs/gpu-engine.md);
   * PL_CUDA_PIN=hostalloc selects the other way, for measurements. */
  const char *m = getenv("PL_CUDA_PIN");
  pc->method = m && !strcmp(m, "hostalloc") ? PIN_HOSTALLOC : PIN_REGISTER;
  return PL_OK;
}

static void log_setup(const cuda_backend *be, const pl_copy_plan *plan) {
  const pl_stage_pool_config *pc = &be->pool.cfg;
  pl_log(be->log, PL_LOG_DEBUG,
         "%s: %d staging buffers of %llu bytes, %s, pinned budget %llu bytes "
         "(%llu of dataset memory locked in place), NUMA node %d",
         be->base.name, pc->count, (unsigned long long)pc->bytes,
         !pc->pin                      ? "pageable"
         : pc->method == PIN_REGISTER ? "pinned by cudaHostRegister"
                                      : "pinned by cudaHostAlloc",
         (unsigned long long)plan->pinned_budget,
         (unsigned long long)be->source_bytes, pc->numa_node);
}

/* Everything the plan asks for; the device is current. */
static pl_status cuda_setup(cuda_backend *be, const pl_backend_config *cfg,
                            pl_error *err) {
  const pl_copy_plan *plan = cfg->plan;
  pl_stage_pool_config pc = {
      .bytes = plan->stage_bytes,
      .count = plan->staging_buffers,
      /* what direct mode's regions leave (the planner made them fit) */
      .budget = plan->pinned_budget - PL_MIN(plan->region_bytes,
                                             plan->pinned_budget),
      .pin = cfg->pin_memory,
      .shared = plan->shared_memory,
      .log = cfg->log,
      .name = be->base.name,
  };
  PL_TRY(describe_device(be, &pc, err));
  PL_TRY(pl_stage_pool_init(&be->pool, &pc, err));
  CUDA_TRY(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking),
           err);
  PL_TRY(pl_cuda_xform_setup(be, err));
  PL_TRY(pl_cuda_regions_register(be, plan->regions, plan->nregions, err));
  log_setup(be, plan);
  pl_stage_pool_first(&be->pool);
  return PL_OK;
}

pl_status pl_backend_cuda_create(const pl_backend_config *cfg,
                                 pl_backend **out, pl_error *err) {
  if (!out || !cfg || !cfg->plan)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "cfg, its plan and out are required");
  *out = NULL;
  PL_TRY(pick_device(cfg->device_index, cfg->log, err));
  cuda_backend *be = pl_calloc(1, sizeof *be);
  if (!be)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  be->base.vt = &cuda_vt;
  be->base.kind = PL_DEVICE_CUDA;
  be->base.device_index = cfg->device_index;
  snprintf(be->base.name, sizeof be->base.name, "cuda:%d", cfg->device_index);
  be->non_blocking = cfg->non_blocking;
  be->batch_bytes = cfg->xform ? cfg->xform_buf_bytes : cfg->plan->batch_bytes;
  be->xf = cfg->xform;
  be->xf_out_off = cfg->xform_out_off;
  be->log = cfg->log;
  int prev;
  pl_status s = pl_cuda_enter(cuda_dev(be), &prev, err);
  if (s != PL_OK) { /* the device exists but cannot be used */
    pl_error_prefix(err, "cuda:%d", cfg->device_index);
    s = PL_NO_DEVICE;
    if (err)
      err->status = s;
  } else {
    s = cuda_setup(be, cfg, err);
  }
  pl_cuda_leave(cuda_dev(be), prev);
  if (s != PL_OK) {
    cuda_destroy(&be->base);
    return s;
  }
  *out = &be->base;
  return PL_OK;
}
