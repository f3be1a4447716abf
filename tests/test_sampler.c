/* The sample order's building blocks (src/sampler.h): pl_permute is a
 * bijection of [0, n) for every n, small and huge, without materialising a
 * permutation; different keys give different orders; the orders are spread
 * evenly; and the per-rank plan follows DistributedSampler's arithmetic.
 * Every key here is fixed, so every count below is deterministic: a
 * threshold that passes once passes always (and fails for a broken mix). */
#include "data/dataset.h"
#include "loader/sampler.h"
#include "testutil.h"

#include <stdlib.h>

/* The key a loader uses for (seed, epoch): taken from the plan, so the
 * tests exercise the keys users get. */
static void key_of(uint64_t seed, uint64_t epoch, uint64_t key[2]) {
  pl_sampler s = {.n = 10, .shuffle = 1, .seed = seed, .world = 1, .batch = 1};
  pl_epoch_plan p;
  pl_sampler_plan(&s, epoch, 0, &p);
  key[0] = p.key[0];
  key[1] = p.key[1];
}

/* Every n in 1..2000, for a few keys: all of [0, n) is hit exactly once. */
static void bijection_small(void) {
  enum { NMAX = 2000 };
  static const uint64_t seeds[] = {0, 1, 42, 0xdeadbeefcafef00dull};
  char *seen = malloc(NMAX);
  for (size_t k = 0; k < 4; k++) {
    uint64_t key[2];
    key_of(seeds[k], k, key);
    for (uint64_t n = 1; n <= NMAX; n++) {
      memset(seen, 0, n);
      uint64_t bad = 0;
      for (uint64_t x = 0; x < n; x++) {
        uint64_t y = pl_permute(x, n, key);
        if (y >= n || seen[y])
          bad++;
        else
          seen[y] = 1;
      }
      if (bad) {
        fprintf(stderr, "n=%llu seed=%llu: %llu collisions/out of range\n",
                (unsigned long long)n, (unsigned long long)seeds[k],
                (unsigned long long)bad);
        CHECK(bad == 0);
      }
    }
  }
  free(seen);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Huge n: no permutation can be materialised, so check that 1e5 distinct
 * positions (spread over the whole range, plus both ends) land in range
 * and on 1e5 distinct indices. */
static void bijection_huge(void) {
  static const uint64_t ns[] = {
      1000000000ull,         3000000000ull,        (1ull << 32) - 1,
      1ull << 32,            (1ull << 32) + 1,     4000000000ull,
      (1ull << 63) + 12345,  UINT64_MAX};
  enum { M = 100000 };
  uint64_t *y = malloc(M * sizeof *y);
  uint64_t key[2];
  key_of(7, 3, key);
  for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
    uint64_t n = ns[t], stride = n / M;
    uint64_t out = 0;
    for (uint64_t i = 0; i < M; i++) {
      /* positions 0, stride+1, 2*stride+2, ... and n-1: all distinct, as
       * stride > 997 */
      uint64_t x = i == M - 1 ? n - 1 : i * stride + i % 997;
      y[i] = pl_permute(x, n, key);
      out += y[i] >= n;
    }
    CHECK_EQ_U64(out, 0);
    qsort(y, M, sizeof *y, cmp_u64);
    uint64_t dup = 0;
    for (uint64_t i = 1; i < M; i++)
      dup += y[i] == y[i - 1];
    if (dup)
      fprintf(stderr, "n=%llu: %llu duplicate images\n", (unsigned long long)n,
              (unsigned long long)dup);
    CHECK_EQ_U64(dup, 0);
    /* Images spread over the whole range, not clustered at the bottom:
     * each quarter of [0, n) gets about M/4 of them. */
    uint64_t q[4] = {0};
    for (uint64_t i = 0; i < M; i++) {
      uint64_t j = (uint64_t)((long double)y[i] / (long double)n * 4);
      q[j > 3 ? 3 : j]++;
    }
    for (int j = 0; j < 4; j++)
      CHECK(q[j] > M / 4 - M / 40 && q[j] < M / 4 + M / 40);
  }
  free(y);
}

/* Different seeds, and different epochs of one seed, give different
 * orders: two random permutations of 1000 agree at about 1 position. */
static void keys_differ(void) {
  enum { N = 1000 };
  uint64_t a[2], b[2], c[2];
  key_of(1, 0, a);
  key_of(2, 0, b);
  key_of(1, 1, c);
  CHECK(a[0] != b[0] || a[1] != b[1]);
  CHECK(a[0] != c[0] || a[1] != c[1]);
  uint64_t same_ab = 0, same_ac = 0, fixed = 0;
  for (uint64_t x = 0; x < N; x++) {
    uint64_t ya = pl_permute(x, N, a);
    same_ab += ya == pl_permute(x, N, b);
    same_ac += ya == pl_permute(x, N, c);
    fixed += ya == x;
  }
  CHECK(same_ab < 10);
  CHECK(same_ac < 10);
  CHECK(fixed < 10); /* not the identity, nor close to it */
  /* n = 1 and n = 0 have one (or no) position: always 0. */
  CHECK_EQ_U64(pl_permute(0, 1, a), 0);
  CHECK_EQ_U64(pl_permute(0, 0, a), 0);
}

/* Uniformity: over 20,000 (seed, epoch) keys, each position of a 10-element
 * order holds each index about 2,000 times, and the index at position 0 of
 * a 1000-element order is spread evenly over ten buckets of 100. With
 * binomial sd ~42, the bounds are > 7 sd wide: only a biased mix fails. */
static void uniform(void) {
  enum { KEYS = 20000, N = 10 };
  static uint32_t hits[N][N], bucket[10];
  memset(hits, 0, sizeof hits);
  for (uint64_t k = 0; k < KEYS; k++) {
    uint64_t key[2];
    key_of(k / 4, k % 4, key); /* seeds and epochs both vary */
    for (uint64_t x = 0; x < N; x++)
      hits[x][pl_permute(x, N, key)]++;
    bucket[pl_permute(0, 1000, key) / 100]++;
  }
  uint32_t lo = UINT32_MAX, hi = 0;
  for (int x = 0; x < N; x++)
    for (int y = 0; y < N; y++) {
      lo = hits[x][y] < lo ? hits[x][y] : lo;
      hi = hits[x][y] > hi ? hits[x][y] : hi;
    }
  if (lo < 1700 || hi > 2300)
    fprintf(stderr, "position/index counts span %u..%u (want ~2000)\n", lo, hi);
  CHECK(lo >= 1700 && hi <= 2300);
  for (int j = 0; j < 10; j++) {
    if (bucket[j] < 1700 || bucket[j] > 2300)
      fprintf(stderr, "bucket %d: %u (want ~2000)\n", j, bucket[j]);
    CHECK(bucket[j] >= 1700 && bucket[j] <= 2300);
  }
}

/* The plan's arithmetic: DistributedSampler's per-rank count, batches,
 * positions r, r+W, ..., and the wrap of padding positions. */
static void plan_rules(void) {
  pl_sampler s = {.n = 10, .shuffle = 0, .world = 4, .rank = 3, .batch = 2};
  pl_epoch_plan p;
  pl_sampler_plan(&s, 5, 0, &p);
  CHECK_EQ_U64(p.epoch, 5);
  CHECK_EQ_U64(p.per_rank, 3); /* ceil(10 / 4) */
  CHECK_EQ_U64(p.num_batches, 2);
  CHECK_EQ_U64(pl_sampler_batch_size(&s, &p, 0), 2);
  CHECK_EQ_U64(pl_sampler_batch_size(&s, &p, 1), 1);
  CHECK_EQ_U64(pl_sampler_position(&s, &p, 0, 0), 3);
  CHECK_EQ_U64(pl_sampler_position(&s, &p, 0, 1), 7);
  CHECK_EQ_U64(pl_sampler_position(&s, &p, 1, 0), 11);
  CHECK_EQ_U64(pl_sampler_index(&s, &p, 11), 1); /* padding wraps */
  s.drop_last = 1;
  pl_sampler_plan(&s, 5, 0, &p);
  CHECK_EQ_U64(p.per_rank, 2); /* floor(10 / 4) */
  CHECK_EQ_U64(p.num_batches, 1);
  /* Resumed mid-epoch at global position 6: 4 left over 4 ranks. */
  s.drop_last = 0;
  pl_sampler_plan(&s, 5, 6, &p);
  CHECK_EQ_U64(p.per_rank, 1);
  CHECK_EQ_U64(pl_sampler_position(&s, &p, 0, 0), 9);
  /* Past the end: nothing left. */
  pl_sampler_plan(&s, 5, 10, &p);
  CHECK_EQ_U64(p.per_rank, 0);
  CHECK_EQ_U64(p.num_batches, 0);
  /* The key depends on seed and epoch only, never on rank or world. */
  pl_epoch_plan q;
  s.shuffle = 1;
  s.seed = 9;
  pl_sampler_plan(&s, 2, 0, &p);
  s.rank = 0;
  s.world = 7;
  s.batch = 5;
  pl_sampler_plan(&s, 2, 4, &q);
  CHECK(p.key[0] == q.key[0] && p.key[1] == q.key[1]);
}

/* A block source whose block order reverses the indices: the sampler's
 * positions land in it unchanged (block_index is applied last). Asked
 * for an unshuffled epoch (key NULL), it must give c itself; the last
 * such call is kept (the read-ahead hint of tar shards). */
static uint64_t last_c = UINT64_MAX, last_end = UINT64_MAX;

static uint64_t reversed(const pl_dataset *ds, const uint64_t key[2],
                         uint64_t c, uint64_t c_end) {
  CHECK(c < c_end && c_end <= ds->length);
  if (!key) {
    last_c = c, last_end = c_end;
    return c;
  }
  return ds->length - 1 - c;
}

/* Streams of a block source (sampler.h): with C = W, rank r reads stream
 * r, a contiguous run of the block order, in order (no shuffle) or within
 * windows of it (shuffle); the first n % C streams are one longer; the
 * epoch is each sample once; a resumed plan keeps the saved C. */
static void block_streams(void) {
  static const pl_dataset_vt vt = {.kind = "blocks", .block_index = reversed};
  pl_dataset ds = {.vt = &vt, .length = 10};
  pl_sampler s = {.n = 10, .world = 3, .batch = 2, .blocks = &ds, .window = 2};
  pl_epoch_plan p;
  pl_sampler_plan(&s, 0, 0, &p);
  CHECK_EQ_U64(p.streams, 3);
  /* No shuffle: streams [0, 4), [4, 7), [7, 10) of the block order, read
   * in the identity's order (block_index is only told, key NULL, each
   * place and its stream's end); positions 0..9 are 0 4 7 1 5 8 2 6 9 3. */
  static const uint64_t at[10] = {0, 4, 7, 1, 5, 8, 2, 6, 9, 3};
  static const uint64_t end[10] = {4, 7, 10, 4, 7, 10, 4, 7, 10, 4};
  for (uint64_t x = 0; x < 10; x++) {
    CHECK_EQ_U64(pl_sampler_index(&s, &p, x), at[x]);
    CHECK_EQ_U64(last_c, at[x]);
    CHECK_EQ_U64(last_end, end[x]);
  }
  /* Rank r of 3 takes positions r, r + 3, ...: its own stream, then the
   * padding wraps to the epoch's first positions. */
  static const uint64_t rank_reads[3][4] = {
      {0, 1, 2, 3}, {4, 5, 6, 0}, {7, 8, 9, 4}};
  for (uint32_t r = 0; r < 3; r++) {
    s.rank = r;
    pl_sampler_plan(&s, 0, 0, &p);
    CHECK_EQ_U64(p.per_rank, 4);
    for (uint32_t i = 0; i < 4; i++)
      CHECK_EQ_U64(pl_sampler_index(&s, &p, pl_sampler_position(
                                                 &s, &p, i / 2, i % 2)),
                   rank_reads[r][i]);
  }
  /* Shuffled: each window of 2 of a stream permuted on its own, then the
   * block order (reversed). Stream 1 is block places 4..6: windows {4, 5}
   * and {6}, so positions 1, 4 (its first window) are places 4 and 5 in
   * some order and position 7 is place 6, that is index 10 - 1 - 6 = 3. */
  s.shuffle = 1;
  s.seed = 5;
  s.rank = 0;
  pl_sampler_plan(&s, 1, 0, &p);
  uint64_t a = pl_sampler_index(&s, &p, 1), b = pl_sampler_index(&s, &p, 4);
  CHECK((a == 5 && b == 4) || (a == 4 && b == 5));
  CHECK_EQ_U64(pl_sampler_index(&s, &p, 7), 3);
  /* Each sample once, for every n up to 40, C up to 9, windows 1..5. */
  for (uint64_t n = 1; n <= 40; n++)
    for (uint32_t c = 1; c <= 9; c++)
      for (uint64_t w = 1; w <= 5; w++) {
        pl_dataset d = {.vt = &vt, .length = n};
        pl_sampler t = {.n = n, .shuffle = 1, .seed = n * 31 + c,
                        .world = c, .batch = 1, .blocks = &d, .window = w};
        pl_epoch_plan q;
        pl_sampler_plan(&t, 0, 0, &q);
        uint64_t seen = 0;
        for (uint64_t x = 0; x < n; x++)
          seen |= 1ull << pl_sampler_index(&t, &q, x);
        CHECK_EQ_U64(seen, (1ull << n) - 1);
      }
  /* One stream is the rank-interleaved order of a single window run: the
   * windows of positions themselves. */
  s.world = 1;
  pl_sampler_plan(&s, 1, 0, &p);
  CHECK_EQ_U64(p.streams, 1);
  for (uint64_t x = 0; x < 10; x += 2) {
    uint64_t u = 9 - pl_sampler_index(&s, &p, x);
    uint64_t v = 9 - pl_sampler_index(&s, &p, x + 1);
    CHECK(u / 2 == x / 2 && v / 2 == x / 2 && u != v);
  }
  /* A map-style sampler has no streams. */
  pl_sampler m = {.n = 10, .world = 3, .batch = 2};
  pl_sampler_plan(&m, 0, 0, &p);
  CHECK_EQ_U64(p.streams, 1);
}

int main(void) {
  block_streams();
  bijection_small();
  bijection_huge();
  keys_differ();
  uniform();
  plan_rules();
  return pl_test_finish("test_sampler");
}
