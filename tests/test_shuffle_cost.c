/* The cost of a shuffled order: pl_permute's nanoseconds per index for
 * data sets of 1e3 to 4e9 samples (and the worst case of cycle walking,
 * n = 2^(2k) + 1, where the walk's domain is 4n), next to materialising a permutation with Fisher-Yates as a
 * reference. Prints the table recorded in
 * bench/results/shuffle-cost-2026-12-01.md; asserts only correctness (a
 * bijection spot check per n), never timing, so it cannot be flaky.
 *
 *   ./test_shuffle_cost            2e6 calls per n
 *   PL_SHUFFLE_COST_CALLS=20000000 ./test_shuffle_cost */
#include "loader/sampler.h"
#include "testutil.h"

#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink_;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Positions 0..m-1 map to m distinct indices below n. Exhaustive when
 * m == n. */
static void spot_check(uint64_t n, const uint64_t key[2]) {
  uint64_t m = n < 200000 ? n : 200000;
  uint64_t *y = malloc(m * sizeof *y);
  uint64_t bad = 0;
  for (uint64_t i = 0; i < m; i++) {
    /* spread over [0, n): i * (n / m) + (i % 7) stays distinct */
    uint64_t x = m == n ? i : i * (n / m) + i % 7;
    y[i] = pl_permute(x, n, key);
    bad += y[i] >= n;
  }
  qsort(y, m, sizeof *y, cmp_u64);
  for (uint64_t i = 1; i < m; i++)
    bad += y[i] == y[i - 1];
  if (bad)
    fprintf(stderr, "n=%llu: %llu bad images\n", (unsigned long long)n,
            (unsigned long long)bad);
  CHECK_EQ_U64(bad, 0);
  free(y);
}

/* Mean Feistel passes per index: the cycle walk's domain over n. */
static double walk_factor(uint64_t n) {
  unsigned bits = 64 - (unsigned)__builtin_clzll(n - 1);
  unsigned half = (bits + 1) / 2;
  return (double)(1ull << (2 * half)) / (double)n;
}

static double permute_ns(uint64_t n, const uint64_t key[2], uint64_t calls,
                         uint64_t *sink) {
  uint64_t s = 0, stride = n > calls ? n / calls : 1;
  double t0 = now();
  for (uint64_t i = 0; i < calls; i++)
    s += pl_permute((i * stride) % n, n, key);
  double t = now() - t0;
  *sink += s;
  return t * 1e9 / (double)calls;
}

/* The materialised alternative (torch.randperm's approach): n words of
 * memory, built before the first index is known. */
static double fisher_yates_ns(uint64_t n, uint64_t *sink) {
  uint64_t *p = malloc(n * sizeof *p);
  if (!p)
    return -1;
  double t0 = now();
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (uint64_t i = 0; i < n; i++)
    p[i] = i;
  for (uint64_t i = n - 1; i > 0; i--) {
    r ^= r << 13; /* xorshift64: the reference needs speed, not quality */
    r ^= r >> 7;
    r ^= r << 17;
    uint64_t j = r % (i + 1), t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
  double t = now() - t0;
  *sink += p[n / 2];
  free(p);
  return t * 1e9 / (double)n;
}

int main(void) {
  static const uint64_t ns[] = {1000ull, 1000000ull, 1000000000ull,
                                4000000000ull, (1ull << 30) + 1};
  uint64_t calls = 2000000;
  const char *e = getenv("PL_SHUFFLE_COST_CALLS");
  if (e && atoll(e) > 0)
    calls = (uint64_t)atoll(e);
  uint64_t key[2];
  pl_sampler s = {.n = 1, .shuffle = 1, .seed = 1, .world = 1, .batch = 1};
  pl_epoch_plan p;
  pl_sampler_plan(&s, 0, 0, &p);
  key[0] = p.key[0];
  key[1] = p.key[1];

  uint64_t sink = 0;
  printf("pl_permute cost, %llu calls per n (identity order: ~0 ns)\n",
         (unsigned long long)calls);
  printf("%14s  %10s  %14s  %s\n", "n", "ns/index", "feistel passes",
         "memory");
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    spot_check(ns[i], key);
    permute_ns(ns[i], key, calls / 10 + 1, &sink); /* warm up */
    double t = permute_ns(ns[i], key, calls, &sink);
    printf("%14llu  %10.1f  %14.2f  0 bytes\n", (unsigned long long)ns[i], t,
           walk_factor(ns[i]));
  }
  double fy = fisher_yates_ns(1000000, &sink);
  printf("Fisher-Yates (materialised), n = 1e6: %.1f ns/index, 8 bytes/index"
         "\n", fy);
  sink_ = sink; /* keeps the timed loops from being optimised away */
  return pl_test_finish("test_shuffle_cost");
}
