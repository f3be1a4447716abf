/* The CUDA backend through its contract (src/backend/backend.h), created
 * with hand-made whole-batch copy plans: device bytes equal
 * the staged bytes; the copy waits for the consumer's release on the GPU
 * (not the host) and consumers' streams wait for the copy; the pinned pool
 * keeps its budget and falls back to pageable memory with one warning.
 * Exits 77 (skip) without CUDA or a usable GPU. */
#include "testutil.h"

#ifndef PL_HAVE_CUDA
int main(void) {
  printf("test_gpu_backend: built without CUDA, skipped\n");
  return 77;
}
#else

#include "backend/backend.h"
#include "backend/host_pages.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* ---------------------------------------------------------------- log */


static pl_test_log g_log = PL_TEST_LOG_INIT;
static const pl_logger g_logger = {pl_test_capture_log, &g_log, PL_LOG_DEBUG};

static void log_reset(void) {
  pthread_mutex_lock(&g_log.mu);
  g_log.warnings = 0;
  g_log.last[0] = '\0';
  pthread_mutex_unlock(&g_log.mu);
}

/* ---------------------------------------------------------------- helpers */

/* A whole-batch plan, as the planner makes for one field of batch_bytes:
 * staging laid out as the batch, `staging` buffers, a budget of exactly
 * those. The tests run one backend at a time; the plans live here. */
static pl_copy_plan g_plans[4];
static int g_next_plan;

static pl_backend_config config(uint64_t batch_bytes, int staging, int pin,
                                int non_blocking) {
  pl_copy_plan *p = &g_plans[g_next_plan++ % 4];
  *p = (pl_copy_plan){
      .mode = PL_PLAN_WHOLE,
      .batch_bytes = batch_bytes,
      .stage_bytes = batch_bytes,
      .staging_buffers = staging,
      .pinned_budget = pl_pages_size(batch_bytes) * (uint64_t)staging,
      .max_spans = 1,
  };
  pl_backend_config c = {
      .device_index = 0,
      .pin_memory = pin,
      .non_blocking = non_blocking,
      .plan = p,
      .log = &g_logger,
  };
  return c;
}

static void set_budget(pl_backend_config *c, uint64_t budget) {
  ((pl_copy_plan *)c->plan)->pinned_budget = budget;
}

/* A whole staged batch is one span, submitted first and last at once. */
static pl_status submit_whole(pl_backend *be, pl_bufmem *m, uint64_t used,
                              pl_error *err) {
  pl_span all = {m->host, 0, used};
  return be->vt->submit(be, m, &all, 1, PL_SPANS_FIRST | PL_SPANS_LAST, err);
}

static pl_backend *make(const pl_backend_config *c) {
  pl_backend *be = NULL;
  pl_error err;
  CHECK_OK(pl_backend_cuda_create(c, &be, &err), &err);
  return be;
}

static pl_status alloc_buf(pl_backend *be, pl_bufmem *m, uint64_t bytes) {
  memset(m, 0, sizeof *m);
  m->bytes = bytes;
  pl_error err;
  pl_status s = be->vt->buf_alloc(be, m, &err);
  CHECK_OK(s, &err);
  return s;
}

static void pattern(uint8_t *p, uint64_t n, uint64_t tag) {
  for (uint64_t j = 0; j < n; j++)
    p[j] = pl_test_byte(tag, j);
}

/* Index of the first byte of p[0..n) that is not pattern `tag`, or n. */
static uint64_t mismatch(const uint8_t *p, uint64_t n, uint64_t tag) {
  for (uint64_t j = 0; j < n; j++)
    if (p[j] != pl_test_byte(tag, j))
      return j;
  return n;
}

/* fill_begin + write pattern `tag` into `used` bytes + submit. */
static pl_status fill(pl_backend *be, pl_bufmem *m, uint64_t used,
                      uint64_t tag) {
  pl_error err;
  pl_status s = be->vt->fill_begin(be, m, &err);
  CHECK_OK(s, &err);
  if (s != PL_OK)
    return s;
  CHECK(m->host != NULL);
  pattern(m->host, used, tag);
  s = submit_whole(be, m, used, &err);
  CHECK_OK(s, &err);
  return s;
}

/* read_back of the first n bytes equals pattern `tag`. */
static void check_device(pl_backend *be, pl_bufmem *m, uint64_t n,
                         uint64_t tag) {
  uint8_t *h = malloc(n ? n : 1);
  pl_error err;
  CHECK_OK(be->vt->read_back(be, m, 0, h, n, &err), &err);
  uint64_t at = mismatch(h, n, tag);
  if (at != n)
    fprintf(stderr, "tag %llu: device byte %llu of %llu differs\n",
            (unsigned long long)tag, (unsigned long long)at,
            (unsigned long long)n);
  CHECK_EQ_U64(at, n);
  free(h);
}

static void check_dev_ptr(const void *dev, uint64_t n, uint64_t tag) {
  uint8_t *h = malloc(n);
  CHECK(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK_EQ_U64(mismatch(h, n, tag), n);
  free(h);
}

static pl_loader_stats stats(pl_backend *be) {
  pl_loader_stats s;
  memset(&s, 0, sizeof s);
  be->vt->stats(be, &s);
  return s;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void CUDART_CB sleep_fn(void *ms) {
  struct timespec ts = {0, (long)(intptr_t)ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* Queues a host-side sleep on `s`: the GPU work queued after it on that
 * stream starts only after it. */
static void stall(cudaStream_t s, int ms) {
  CHECK(cudaLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)ms) == cudaSuccess);
}

/* ---------------------------------------------------------------- tests */

static void test_no_such_device(int count) {
  pl_backend_config c = config(4096, 2, 1, 1);
  c.device_index = count;
  pl_backend *be = (pl_backend *)1;
  pl_error err;
  CHECK_STATUS(pl_backend_cuda_create(&c, &be, &err), PL_NO_DEVICE, &err);
  CHECK(be == NULL);
  char want[64];
  snprintf(want, sizeof want, "CUDA device %d does not exist", count);
  CHECK_MSG(&err, want);
  c.device_index = -1;
  CHECK_STATUS(pl_backend_cuda_create(&c, &be, &err), PL_NO_DEVICE, &err);
  CHECK_MSG(&err, "CUDA device -1 does not exist");
}

static void test_identity(void) {
  pl_backend_config c = config(4096, 2, 1, 1);
  pl_backend *be = make(&c);
  if (!be)
    return;
  CHECK(be->kind == PL_DEVICE_CUDA);
  CHECK(be->device_index == 0);
  CHECK(strncmp(be->name, "cuda:0 ", 7) == 0);
  CHECK(strlen(be->name) > 7);
  printf("device: %s\n", be->name);
  be->vt->destroy(be);
}

/* Sequential batches through 3 buffers, odd sizes, partial `used`. */
static void test_roundtrip(int pin, int non_blocking) {
  const uint64_t bytes = (1u << 20) + 13;
  log_reset();
  pl_backend_config c = config(bytes, 2, pin, non_blocking);
  pl_backend *be = make(&c);
  if (!be)
    return;
  pl_bufmem m[3];
  for (int i = 0; i < 3; i++)
    alloc_buf(be, &m[i], bytes);
  uint64_t copied = 0;
  for (uint64_t it = 0; it < 12; it++) {
    pl_bufmem *b = &m[it % 3];
    uint64_t used = it == 5 ? 1000 : bytes;
    pl_error err;
    if (fill(be, b, used, it) != PL_OK)
      break;
    copied += used;
    CHECK_OK(be->vt->deliver(be, b, &err), &err);
    CHECK_OK(be->vt->wait_host(be, b, &err), &err);
    check_device(be, b, used, it);
    be->vt->release(be, b, NULL);
  }
  pl_loader_stats s = stats(be);
  CHECK_EQ_U64(s.batches_copied, 12);
  CHECK_EQ_U64(s.bytes_copied, copied);
  /* One staging buffer was enough: each was idle again before the next. */
  CHECK_EQ_U64(s.pinned_bytes, pin ? pl_pages_size(bytes) : 0);
  CHECK_EQ_U64(s.pinned_fallbacks, 0);
  CHECK(s.copy_s > 0); /* measured: a time, so no bound on it here */
  CHECK(g_log.warnings == 0);
  /* A range outside the buffer is refused. */
  uint8_t one;
  pl_error err;
  CHECK_STATUS(be->vt->read_back(be, &m[0], bytes, &one, 1, &err),
               PL_INVALID_ARGUMENT, &err);
  for (int i = 0; i < 3; i++) {
    be->vt->buf_free(be, &m[i]);
    CHECK(m[i].data == NULL && m[i].priv == NULL);
  }
  be->vt->destroy(be);
}

/* The copy into a released buffer waits, on the GPU, for the work queued
 * on the releasing stream; a consumer stream that waits on the batch sees
 * the new bytes, not the old. The host never blocks for either. */
static void test_stream_order(int non_blocking) {
  const uint64_t n = 8u << 20;
  pl_backend_config c = config(n, 2, 1, non_blocking);
  pl_backend *be = make(&c);
  if (!be)
    return;
  pl_bufmem m;
  alloc_buf(be, &m, n);
  cudaStream_t s1, s2;
  void *dst1, *dst2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaMalloc(&dst1, n) == cudaSuccess);
  CHECK(cudaMalloc(&dst2, n) == cudaSuccess);
  pl_error err;

  fill(be, &m, n, 101);
  CHECK_OK(be->vt->deliver(be, &m, &err), &err);
  CHECK_OK(be->vt->wait_stream(be, &m, s1, &err), &err);
  stall(s1, 300); /* the consumer is slow to read the batch */
  CHECK(cudaMemcpyAsync(dst1, m.data, n, cudaMemcpyDeviceToDevice, s1) ==
        cudaSuccess);
  be->vt->release(be, &m, s1);

  /* The copy must not overwrite m before s1's copy ran. */
  CHECK_OK(be->vt->fill_begin(be, &m, &err), &err);
  pattern(m.host, n, 202);
  double t0 = now_s();
  CHECK_OK(submit_whole(be, &m, n, &err), &err);
  double t_fill = now_s() - t0;
  t0 = now_s();
  CHECK_OK(be->vt->deliver(be, &m, &err), &err);
  double t_deliver = now_s() - t0;
  CHECK_OK(be->vt->wait_stream(be, &m, s2, &err), &err);
  CHECK(cudaMemcpyAsync(dst2, m.data, n, cudaMemcpyDeviceToDevice, s2) ==
        cudaSuccess);
  CHECK(cudaStreamSynchronize(s2) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s1) == cudaSuccess);
  check_dev_ptr(dst1, n, 101); /* s1 read the old batch, intact */
  check_dev_ptr(dst2, n, 202); /* s2 waited for the new one */
  check_device(be, &m, n, 202);
  /* Ordering happened on the GPU: submit did not wait for the stall;
   * deliver waits only in blocking mode. */
  printf("stream order (non_blocking %d): submit %.1f ms, deliver %.1f ms\n",
         non_blocking, t_fill * 1e3, t_deliver * 1e3);
  CHECK(t_fill < 0.15);
  if (non_blocking)
    CHECK(t_deliver < 0.15);
  else
    CHECK(t_deliver > 0.15);

  /* The same through the legacy default stream (release(NULL)). */
  CHECK_OK(be->vt->wait_stream(be, &m, NULL, &err), &err);
  stall(0, 300);
  CHECK(cudaMemcpyAsync(dst1, m.data, n, cudaMemcpyDeviceToDevice, 0) ==
        cudaSuccess);
  be->vt->release(be, &m, NULL);
  fill(be, &m, n, 303);
  CHECK_OK(be->vt->deliver(be, &m, &err), &err);
  CHECK_OK(be->vt->wait_host(be, &m, &err), &err);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  check_dev_ptr(dst1, n, 202);
  check_device(be, &m, n, 303);
  be->vt->release(be, &m, NULL);

  cudaFree(dst1);
  cudaFree(dst2);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  be->vt->buf_free(be, &m);
  be->vt->destroy(be);
}

/* Staging buffers are separate from batch buffers: several batches are
 * staged at once in distinct buffers, never more than the count. */
static void test_staging_count(void) {
  const uint64_t bytes = 3u << 20;
  pl_backend_config c = config(bytes, 2, 1, 1);
  pl_backend *be = make(&c);
  if (!be)
    return;
  pl_bufmem m[4];
  for (int i = 0; i < 4; i++)
    alloc_buf(be, &m[i], bytes);
  pl_error err;
  CHECK_OK(be->vt->fill_begin(be, &m[0], &err), &err);
  CHECK_OK(be->vt->fill_begin(be, &m[1], &err), &err);
  CHECK(m[0].host && m[1].host && m[0].host != m[1].host);
  CHECK(m[0].host != m[0].data);
  pattern(m[0].host, bytes, 10);
  pattern(m[1].host, bytes, 11);
  CHECK_OK(submit_whole(be, &m[1], bytes, &err), &err);
  CHECK_OK(submit_whole(be, &m[0], bytes, &err), &err);
  for (int k = 2; k < 4; k++)
    fill(be, &m[k], bytes, 10 + (uint64_t)k);
  /* An aborted fill gives its staging buffer back. */
  CHECK_OK(be->vt->fill_begin(be, &m[0], &err), &err);
  be->vt->fill_abort(be, &m[0]);
  CHECK(m[0].host == NULL);
  for (int k = 0; k < 4; k++) {
    CHECK_OK(be->vt->deliver(be, &m[k], &err), &err);
    check_device(be, &m[k], bytes, 10 + (uint64_t)k);
    be->vt->release(be, &m[k], NULL);
  }
  pl_loader_stats s = stats(be);
  CHECK_EQ_U64(s.pinned_bytes, 2 * pl_pages_size(bytes));
  CHECK_EQ_U64(s.batches_copied, 4);
  for (int i = 0; i < 4; i++)
    be->vt->buf_free(be, &m[i]);
  be->vt->destroy(be);
}

/* A budget of one staging buffer: the other two are pageable, counted,
 * warned about once, and the data is still right. */
static void test_budget(void) {
  const uint64_t bytes = 1u << 20;
  log_reset();
  pl_backend_config c = config(bytes, 3, 1, 1);
  set_budget(&c, pl_pages_size(bytes) + 100);
  pl_backend *be = make(&c);
  if (!be)
    return;
  pl_bufmem m[3];
  pl_error err;
  for (int i = 0; i < 3; i++) {
    alloc_buf(be, &m[i], bytes);
    CHECK_OK(be->vt->fill_begin(be, &m[i], &err), &err);
  }
  for (int i = 0; i < 3; i++) {
    pattern(m[i].host, bytes, 40 + (uint64_t)i);
    CHECK_OK(submit_whole(be, &m[i], bytes, &err), &err);
  }
  for (int i = 0; i < 3; i++) {
    CHECK_OK(be->vt->deliver(be, &m[i], &err), &err);
    check_device(be, &m[i], bytes, 40 + (uint64_t)i);
    be->vt->release(be, &m[i], NULL);
  }
  pl_loader_stats s = stats(be);
  CHECK(s.pinned_bytes <= c.plan->pinned_budget);
  CHECK_EQ_U64(s.pinned_bytes, pl_pages_size(bytes));
  CHECK_EQ_U64(s.pinned_fallbacks, 2);
  CHECK(g_log.warnings == 1);
  CHECK(strstr(g_log.last, "pinned budget") != NULL);
  CHECK(strstr(g_log.last, "pageable") != NULL);
  for (int i = 0; i < 3; i++)
    be->vt->buf_free(be, &m[i]);
  be->vt->destroy(be);
}

/* Many threads, few staging buffers: fillers wait for one, nothing mixes. */
typedef struct stress_arg {
  pl_backend *be;
  int id;
} stress_arg;

static void *stress_main(void *p) {
  stress_arg *a = p;
  pl_backend *be = a->be;
  const uint64_t bytes = 256u << 10;
  pl_bufmem m[2];
  for (int i = 0; i < 2; i++)
    if (alloc_buf(be, &m[i], bytes) != PL_OK)
      return NULL;
  for (uint64_t it = 0; it < 40; it++) {
    pl_bufmem *b = &m[it % 2];
    uint64_t tag = (uint64_t)a->id * 1000 + it;
    pl_error err;
    if (fill(be, b, bytes, tag) != PL_OK)
      break;
    CHECK_OK(be->vt->deliver(be, b, &err), &err);
    check_device(be, b, bytes, tag);
    be->vt->release(be, b, NULL);
  }
  for (int i = 0; i < 2; i++)
    be->vt->buf_free(be, &m[i]);
  return NULL;
}

static void test_threads(int pin) {
  pl_backend_config c = config(256u << 10, 2, pin, 1);
  pl_backend *be = make(&c);
  if (!be)
    return;
  pthread_t t[6];
  stress_arg a[6];
  for (int i = 0; i < 6; i++) {
    a[i] = (stress_arg){be, i};
    CHECK(pthread_create(&t[i], NULL, stress_main, &a[i]) == 0);
  }
  for (int i = 0; i < 6; i++)
    pthread_join(t[i], NULL);
  pl_loader_stats s = stats(be);
  CHECK_EQ_U64(s.batches_copied, 6 * 40);
  CHECK(s.pinned_bytes <= 2 * pl_pages_size(256u << 10));
  be->vt->destroy(be);
}

/* A batch in pieces: two submits (FIRST, then LAST) of two spans each, in
 * reverse order within the buffer; and a span outside the buffer refused
 * with the staging buffer given back (the next fill works). */
static void test_spans(void) {
  const uint64_t bytes = 64u << 10, half = bytes / 2, q = bytes / 4;
  pl_backend_config c = config(bytes, 1, 1, 1);
  pl_backend *be = make(&c);
  if (!be)
    return;
  pl_bufmem m;
  alloc_buf(be, &m, bytes);
  pl_error err;
  uint8_t *want = malloc(bytes);
  pattern(want, bytes, 55);
  for (int piece = 0; piece < 2; piece++) {
    CHECK_OK(be->vt->fill_begin(be, &m, &err), &err);
    uint8_t *h = m.host;
    uint64_t base = piece ? 0 : half; /* the second half goes first */
    memcpy(h, want + base + q, q);
    memcpy(h + q, want + base, q);
    pl_span sp[2] = {{h, base + q, q}, {h + q, base, q}};
    CHECK_OK(be->vt->submit(be, &m, sp, 2, piece ? PL_SPANS_LAST : PL_SPANS_FIRST,
                            &err),
             &err);
    CHECK(m.host == NULL);
  }
  CHECK_OK(be->vt->deliver(be, &m, &err), &err);
  check_device(be, &m, bytes, 55);
  be->vt->release(be, &m, NULL);
  pl_loader_stats st = stats(be);
  CHECK_EQ_U64(st.batches_copied, 1);
  CHECK_EQ_U64(st.bytes_copied, bytes);

  CHECK_OK(be->vt->fill_begin(be, &m, &err), &err);
  pl_span bad = {m.host, bytes - 10, 11};
  CHECK_STATUS(be->vt->submit(be, &m, &bad, 1, PL_SPANS_FIRST | PL_SPANS_LAST,
                              &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "is outside the 65536-byte batch buffer");
  CHECK(m.host == NULL);
  fill(be, &m, bytes, 56); /* the one staging buffer came back */
  check_device(be, &m, bytes, 56);
  be->vt->release(be, &m, NULL);
  free(want);
  be->vt->buf_free(be, &m);
  be->vt->destroy(be);
}

/* The caller's current device is left as it was. */
static void test_device_kept(void) {
  int before = -1, after = -2;
  CHECK(cudaGetDevice(&before) == cudaSuccess);
  pl_backend_config c = config(4096, 1, 1, 1);
  pl_backend *be = make(&c);
  if (!be)
    return;
  pl_bufmem m;
  alloc_buf(be, &m, 4096);
  fill(be, &m, 4096, 7);
  check_device(be, &m, 4096, 7);
  be->vt->release(be, &m, NULL);
  be->vt->buf_free(be, &m);
  be->vt->destroy(be);
  CHECK(cudaGetDevice(&after) == cudaSuccess);
  CHECK(before == after);
}

#ifdef PL_FAULT_INJECTION
#include "core/fault.h"

static void test_faults(void) {
  const uint64_t bytes = 64u << 10;
  pl_error err;
  log_reset();
  pl_fault_reset();
  pl_backend_config c = config(bytes, 2, 1, 1);
  pl_backend *be = make(&c);
  if (!be)
    return;
  pl_bufmem m;
  /* Device allocation failure: a clear error, nothing allocated. */
  pl_fault_arm(PL_FAULT_DEVICE_ALLOC, 0, 1);
  memset(&m, 0, sizeof m);
  m.bytes = bytes;
  CHECK_STATUS(be->vt->buf_alloc(be, &m, &err), PL_NO_MEMORY, &err);
  CHECK_MSG(&err, "cudaMalloc: out of memory");
  CHECK(m.data == NULL && m.priv == NULL);
  alloc_buf(be, &m, bytes);
  CHECK(g_log.warnings == 0);

  /* Bookkeeping allocations and events, failed one at a time: each a
   * clean PL_NO_MEMORY with nothing left allocated, until none is hit. */
  int k;
  for (k = 0; k < 16; k++) {
    pl_bufmem t = {.bytes = bytes};
    pl_fault_arm(PL_FAULT_ALLOC, k, 1);
    pl_status st = be->vt->buf_alloc(be, &t, &err);
    pl_fault_reset();
    if (st == PL_OK) {
      be->vt->buf_free(be, &t);
      break;
    }
    CHECK_STATUS(st, PL_NO_MEMORY, &err);
    CHECK(t.data == NULL && t.priv == NULL);
  }
  CHECK(k >= 3 && k < 16); /* its state and two events */

  /* Copy submission failure: reported, the staging buffer comes back. */
  pl_fault_arm(PL_FAULT_COPY, 0, 1);
  CHECK_OK(be->vt->fill_begin(be, &m, &err), &err);
  CHECK_STATUS(submit_whole(be, &m, bytes, &err), PL_CUDA, &err);
  CHECK_MSG(&err, "cudaMemcpyAsync: ");
  for (uint64_t it = 0; it < 4; it++) { /* and the buffer works on */
    fill(be, &m, bytes, 80 + it);
    check_device(be, &m, bytes, 80 + it);
    be->vt->release(be, &m, NULL);
  }
  pl_loader_stats s = stats(be);
  CHECK_EQ_U64(s.batches_copied, 4);
  CHECK(g_log.warnings == 0); /* a failed copy is an error, not a warning */
  pl_fault_reset();
  be->vt->buf_free(be, &m);
  be->vt->destroy(be);
}

/* Pinning failure: pageable staging instead, one warning, correct data.
 * The pool makes its first staging buffer at create (the first batch must
 * not wait for it), so the fault is armed before the backend is made: a
 * fault armed after create would find that buffer already pinned. */
static void test_pin_fallback(void) {
  const uint64_t bytes = 64u << 10;
  log_reset();
  pl_fault_reset();
  pl_fault_arm(PL_FAULT_PIN_ALLOC, 0, -1);
  pl_backend_config c = config(bytes, 2, 1, 1);
  pl_backend *be = make(&c);
  if (!be) {
    pl_fault_reset();
    return;
  }
  pl_bufmem m;
  alloc_buf(be, &m, bytes);
  for (uint64_t it = 0; it < 3; it++) {
    fill(be, &m, bytes, 77 + it);
    check_device(be, &m, bytes, 77 + it);
    be->vt->release(be, &m, NULL);
  }
  pl_loader_stats s = stats(be);
  CHECK_EQ_U64(s.pinned_fallbacks, 1); /* the one buffer, made once */
  CHECK_EQ_U64(s.pinned_bytes, 0);
  CHECK_EQ_U64(s.batches_copied, 3);
  CHECK(g_log.warnings == 1);
  CHECK(strstr(g_log.last, "pinning a") != NULL);
  CHECK(strstr(g_log.last, "cudaHost") != NULL);
  pl_fault_reset();
  be->vt->buf_free(be, &m);
  be->vt->destroy(be);
}
#endif

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0); /* progress survives a crash */
  int count = pl_backend_cuda_device_count();
  CHECK(pl_backend_cuda_built() == 1);
  if (count == 0) {
    pl_backend_config c = config(4096, 2, 1, 1);
    pl_backend *be = (pl_backend *)1;
    pl_error err;
    CHECK_STATUS(pl_backend_cuda_create(&c, &be, &err), PL_NO_DEVICE, &err);
    CHECK(be == NULL);
    CHECK_MSG(&err, "NVIDIA"); /* plain words ("no NVIDIA driver found") */
    CHECK(err.cuda_error != 0);  /* and the CUDA code as a field */
    printf("test_gpu_backend: no usable GPU (%s), skipped\n", err.message);
    return pl_test_failures ? 1 : 77;
  }
  test_no_such_device(count);
  test_identity();
  for (int pin = 0; pin < 2; pin++)
    for (int nb = 0; nb < 2; nb++)
      test_roundtrip(pin, nb);
  test_stream_order(1);
  test_stream_order(0);
  test_staging_count();
  test_budget();
  test_threads(1);
  test_threads(0);
  test_spans();
  test_device_kept();
#ifdef PL_FAULT_INJECTION
  test_faults();
  test_pin_fallback();
#endif
  return pl_test_finish("test_gpu_backend");
}
#endif
