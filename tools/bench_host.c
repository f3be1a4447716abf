/* Host-side helpers of `pinloader bench`: time, CPU work, units, progress,
 * and host memcpy bandwidth (what a machine without a GPU reports). */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void) { return pl_now_cli(); }

void bench_spin_ms(double ms) {
  double end = bench_now() + ms * 1e-3;
  while (bench_now() < end) {
  }
}

void bench_sleep_ms(double ms) {
  if (ms <= 0)
    return;
  struct timespec t = {(time_t)(ms / 1e3),
                       (long)((ms - (double)(long)(ms / 1e3) * 1e3) * 1e6)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

const char *bench_bytes_str(char *buf, size_t n, uint64_t bytes) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = (double)bytes;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (v == (double)(uint64_t)v)
    snprintf(buf, n, "%llu %s", (unsigned long long)v, unit[u]);
  else
    snprintf(buf, n, "%.1f %s", v, unit[u]);
  return buf;
}

void bench_progress(const bench_opts *o, const char *label, uint64_t done,
                    uint64_t total, double t0) {
  if (o->progress)
    cli_progress(stderr, label, done, total, bench_now() - t0);
}

void bench_progress_end(const bench_opts *o) {
  if (o->progress)
    cli_progress_end(stderr);
}

/* Repetitions so that one size moves about `budget` bytes: enough to time
 * small copies, few enough that 1 GiB stays quick. */
static int reps_for(uint64_t n, uint64_t budget) {
  uint64_t r = budget / n;
  return r < 3 ? 3 : r > 2000 ? 2000 : (int)r;
}

int bench_host_bandwidth(const bench_opts *o, bench_bw *bw) {
  uint8_t *src = malloc(o->max_bytes), *dst = malloc(o->max_bytes);
  if (!src || !dst) {
    free(src);
    free(dst);
    fprintf(stderr, "pinloader bench: cannot allocate 2 x %llu bytes\n",
            (unsigned long long)o->max_bytes);
    return -1;
  }
  /* Fault the pages in first: the table is about copies, not page faults. */
  memset(src, 1, o->max_bytes);
  memset(dst, 2, o->max_bytes);
  double t0 = bench_now();
  for (int i = 0; i < bw->nsizes; i++) {
    uint64_t n = bw->sizes[i];
    int reps = reps_for(n, o->quick ? 64u << 20 : 512u << 20);
    memcpy(dst, src, n); /* warm the caches and TLB as the loop will */
    double t = bench_now();
    for (int r = 0; r < reps; r++) {
      src[r % n] = (uint8_t)r; /* keeps the copies from being merged */
      memcpy(dst, src, n);
    }
    t = bench_now() - t;
    bw->gbs[i][BW_MEMCPY] = (double)n * reps / (t > 0 ? t : 1e-9) / 1e9;
    bench_progress(o, "bandwidth", (uint64_t)i + 1, (uint64_t)bw->nsizes, t0);
  }
  bench_progress_end(o);
  volatile uint8_t sink = dst[0]; /* the copies are observable: not elided */
  (void)sink;
  free(src);
  free(dst);
  bw->ran = 1;
  return 0;
}
