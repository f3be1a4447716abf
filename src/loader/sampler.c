/* Sample order: Feistel permutation, DistributedSampler-style sharding,
 * batching. See sampler.h for the rules. */
#include "loader/sampler.h"
#include "data/dataset.h"

static uint64_t mix64(uint64_t x) {
  /* splitmix64's finaliser: a strong 64-bit mix in three multiplies. */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

enum { FEISTEL_ROUNDS = 6 };

/* One pass of a balanced Feistel network over 2 * half_bits bits: a
 * bijection of [0, 2^(2*half_bits)). */
static uint64_t feistel(uint64_t x, unsigned half_bits, const uint64_t key[2]) {
  uint64_t mask = (half_bits >= 32) ? 0xffffffffull : ((1ull << half_bits) - 1);
  uint64_t l = (x >> half_bits) & mask, r = x & mask;
  for (unsigned k = 0; k < FEISTEL_ROUNDS; k++) {
    uint64_t f = mix64(r ^ key[k & 1] ^ ((uint64_t)k << 58)) & mask;
    uint64_t t = l ^ f;
    l = r;
    r = t;
  }
  return (l << half_bits) | r;
}

uint64_t pl_permute(uint64_t x, uint64_t n, const uint64_t key[2]) {
  if (n <= 1)
    return 0;
  unsigned bits = 64 - (unsigned)__builtin_clzll(n - 1); /* 2^bits >= n */
  unsigned half = (bits + 1) / 2;
  /* Cycle walking: the domain is < 4n, so few steps on average; every
   * step stays a bijection, so the walk ends inside [0, n). */
  do
    x = feistel(x, half, key);
  while (x >= n);
  return x;
}

void pl_sampler_plan(const pl_sampler *s, uint64_t epoch, uint64_t start,
                     pl_epoch_plan *out) {
  uint64_t rem = start < s->n ? s->n - start : 0;
  out->epoch = epoch;
  out->start = start;
  out->per_rank = s->drop_last ? rem / s->world
                               : (rem + s->world - 1) / s->world;
  out->num_batches = s->drop_last ? out->per_rank / s->batch
                                  : (out->per_rank + s->batch - 1) / s->batch;
  out->key[0] = mix64(s->seed ^ 0x70696e6c6f61ull);
  out->key[1] = mix64(out->key[0] + epoch * 0x9e3779b97f4a7c15ull + 1);
  out->streams = s->blocks ? s->world : 1;
}

uint32_t pl_sampler_batch_size(const pl_sampler *s, const pl_epoch_plan *p,
                               uint64_t b) {
  uint64_t first = b * s->batch;
  uint64_t left = p->per_rank > first ? p->per_rank - first : 0;
  return (uint32_t)PL_MIN(left, (uint64_t)s->batch);
}

uint64_t pl_sampler_position(const pl_sampler *s, const pl_epoch_plan *p,
                             uint64_t b, uint32_t i) {
  uint64_t k = b * s->batch + i; /* position within this rank's share */
  return p->start + k * s->world + s->rank;
}

/* A block source's stream of global position x (sampler.h): the stream's
 * first place in the block order, its length, and x's offset in it. The
 * first n % C streams are one longer; a row of C positions takes one
 * sample of each stream, the last (short) row one of each longer one. */
typedef struct stream_place {
  uint64_t first, len, offset;
} stream_place;

static stream_place stream_of(uint64_t x, uint64_t n, uint64_t streams) {
  uint64_t q = n / streams, r = n % streams, g, o;
  if (x < streams * q)
    g = x % streams, o = x / streams;
  else
    g = x - streams * q, o = q;
  return (stream_place){g * q + PL_MIN(g, r), q + (g < r), o};
}

static uint64_t block_order_index(const pl_sampler *s, const pl_epoch_plan *p,
                                  uint64_t x) {
  stream_place sp = stream_of(x, s->n, p->streams ? p->streams : 1);
  if (!s->shuffle) /* the block order is the index order: the source's
                      read-ahead hint alone (tar shards over HTTP) */
    return s->blocks->vt->block_index(s->blocks, NULL, sp.first + sp.offset,
                                      sp.first + sp.len);
  /* A bounded shuffle: each window of a stream permuted on its own, so
   * that the samples near in the order stay near in the source's blocks. */
  uint64_t base = sp.offset / s->window * s->window;
  uint64_t len = PL_MIN(s->window, sp.len - base);
  uint64_t at = sp.first + base;
  uint64_t wkey[2] = {mix64(p->key[0] ^ (at + 1)), p->key[1]};
  uint64_t c = at + pl_permute(sp.offset - base, len, wkey);
  return s->blocks->vt->block_index(s->blocks, p->key, c, sp.first + sp.len);
}

uint64_t pl_sampler_index(const pl_sampler *s, const pl_epoch_plan *p,
                          uint64_t position) {
  uint64_t x = position % s->n; /* padding wraps to the epoch's start */
  if (s->blocks)
    return block_order_index(s, p, x);
  return s->shuffle ? pl_permute(x, s->n, p->key) : x;
}
