/* The split rule of decode_split.h. */
#include "data/decode_split.h"

#include "pinloader.h"

#include <stdio.h>
#include <string.h>

#define SHARE_MIN (PL_SPLIT_ONE / 32)
#define SHARE_MAX (PL_SPLIT_ONE - PL_SPLIT_ONE / 32)

void pl_split_init(pl_decode_split *s, int mode) {
  memset(s, 0, sizeof *s);
  s->mode = mode;
  /* auto starts even: the first batches measure both paths. */
  atomic_init(&s->share, mode == PL_DECODE_GPU ? PL_SPLIT_ONE
                         : mode == PL_DECODE_AUTO ? PL_SPLIT_ONE / 2
                                                  : 0);
}

uint32_t pl_split_gpu_count(pl_decode_split *s, uint32_t n) {
  if (atomic_load_explicit(&s->off, memory_order_relaxed))
    return 0;
  uint64_t share = atomic_load_explicit(&s->share, memory_order_relaxed);
  return (uint32_t)(((uint64_t)n * share + PL_SPLIT_ONE / 2) / PL_SPLIT_ONE);
}

/* Average of the old per-image time and a new one, a quarter weight. */
static void rate_update(atomic_uint_fast64_t *ps, uint32_t n, uint64_t ns) {
  if (!n)
    return;
  uint64_t now = ns * 1000 / n;
  uint64_t old = atomic_load_explicit(ps, memory_order_relaxed);
  atomic_store_explicit(ps, old ? (3 * old + now) / 4 : now,
                        memory_order_relaxed);
}

/* The share where a worker's batch ends soonest. Its time for k of n
 * images on the GPU is b k (begin: its own share waits) + max(c (n - k),
 * (g - b) k): down while b < c, up past the point where both halves end
 * together, k / n = c / (c + g - b). With b >= c, the CPU alone is
 * fastest: the floor (the GPU stays measured). */
static uint64_t rule_share(uint64_t c, uint64_t g, uint64_t b) {
  if (b >= c)
    return SHARE_MIN;
  return (uint64_t)((double)c / ((double)c + (double)(g - b)) * PL_SPLIT_ONE);
}

int pl_split_ahead(uint32_t ready_ahead, uint32_t depth,
                   uint32_t since_wait) {
  /* More than a quarter of the depth, and never one: a batch just
   * published is loaded and not taken while the consumer is starving.
   * And no wait of the consumer's in its last `depth` batches: one slow
   * batch holds those behind it back, and once it is loaded they are all
   * ready at once, a burst, not a lead (16 workers with decode=auto on the
   * H200: 36 batches of 230 leaned to the CPU on such bursts while the
   * consumer waited 83% of its time). */
  return ready_ahead >= 2 && ready_ahead > (depth + 3) / 4 &&
         since_wait > depth;
}

void pl_split_observe(pl_decode_split *s, uint32_t n_cpu, uint64_t cpu_ns,
                      uint32_t n_gpu, uint64_t gpu_ns, uint64_t begin_ns,
                      int ahead) {
  atomic_fetch_add_explicit(&s->cpu_images, n_cpu, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->gpu_images, n_gpu, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->cpu_ns, cpu_ns, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->gpu_ns, gpu_ns, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->begin_ns, begin_ns, memory_order_relaxed);
  rate_update(&s->cpu_ps, n_cpu, cpu_ns);
  rate_update(&s->gpu_ps, n_gpu, gpu_ns);
  rate_update(&s->begin_ps, n_gpu, PL_MIN(begin_ns, gpu_ns));
  if (s->mode != PL_DECODE_AUTO)
    return;
  if (ahead)
    atomic_fetch_add_explicit(&s->ahead, 1, memory_order_relaxed);
  uint64_t c = atomic_load_explicit(&s->cpu_ps, memory_order_relaxed);
  uint64_t g = atomic_load_explicit(&s->gpu_ps, memory_order_relaxed);
  uint64_t b = atomic_load_explicit(&s->begin_ps, memory_order_relaxed);
  if (!ahead && (!c || !g))
    return;
  uint64_t target = ahead ? SHARE_MIN : rule_share(c, g, PL_MIN(b, g));
  uint64_t old = atomic_load_explicit(&s->share, memory_order_relaxed);
  uint64_t next = (3 * old + target) / 4;
  next = PL_MAX(PL_MIN(next, SHARE_MAX), SHARE_MIN);
  atomic_store_explicit(&s->share, (unsigned)next, memory_order_relaxed);
}

void pl_split_count_not_gpu(pl_decode_split *s, uint32_t n) {
  atomic_fetch_add_explicit(&s->not_gpu, n, memory_order_relaxed);
}

void pl_split_count_failed(pl_decode_split *s, uint32_t n) {
  atomic_fetch_add_explicit(&s->gpu_failed, n, memory_order_relaxed);
}

void pl_split_count_warming(pl_decode_split *s, uint32_t n) {
  atomic_fetch_add_explicit(&s->gpu_warming, n, memory_order_relaxed);
}

void pl_split_count_in_place(pl_decode_split *s, uint32_t n) {
  atomic_fetch_add_explicit(&s->in_place, n, memory_order_relaxed);
}

void pl_split_turn_off(pl_decode_split *s, const char *why) {
  if (atomic_exchange_explicit(&s->why_taken, 1, memory_order_relaxed))
    return;
  snprintf(s->why, sizeof s->why, "%s", why ? why : "");
  atomic_store_explicit(&s->off, 1, memory_order_release);
}

void pl_split_counts(pl_decode_split *s, pl_decode_counts *out) {
  out->cpu_images = atomic_load_explicit(&s->cpu_images, memory_order_relaxed);
  out->gpu_images = atomic_load_explicit(&s->gpu_images, memory_order_relaxed);
  out->not_gpu = atomic_load_explicit(&s->not_gpu, memory_order_relaxed);
  out->gpu_failed = atomic_load_explicit(&s->gpu_failed, memory_order_relaxed);
  out->gpu_warming =
      atomic_load_explicit(&s->gpu_warming, memory_order_relaxed);
  out->in_place = atomic_load_explicit(&s->in_place, memory_order_relaxed);
  out->cpu_s =
      atomic_load_explicit(&s->cpu_ns, memory_order_relaxed) / 1e9;
  out->gpu_s =
      atomic_load_explicit(&s->gpu_ns, memory_order_relaxed) / 1e9;
  out->gpu_begin_s =
      atomic_load_explicit(&s->begin_ns, memory_order_relaxed) / 1e9;
  out->ahead = atomic_load_explicit(&s->ahead, memory_order_relaxed);
  out->share = atomic_load_explicit(&s->share, memory_order_relaxed) /
               (double)PL_SPLIT_ONE;
  out->gpu_off = atomic_load_explicit(&s->off, memory_order_acquire);
  snprintf(out->off_why, sizeof out->off_why, "%s", out->gpu_off ? s->why : "");
}
