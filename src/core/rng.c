/* Counter-based random numbers (see rng.h). */
#include "core/rng.h"

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ull

uint64_t pl_mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Each key part goes through the mixer before it is folded in, so that
 * nearby (seed, epoch, index) triples give unrelated keys. */
pl_rng pl_rng_for(uint64_t seed, uint64_t epoch, uint64_t index,
                  uint64_t stream) {
  uint64_t k = pl_mix64(seed ^ 0x6A09E667F3BCC908ull);
  k = pl_mix64(k ^ epoch * 0xD1B54A32D192ED03ull);
  k = pl_mix64(k ^ index * 0xABC98388FB8FAC03ull);
  k = pl_mix64(k ^ stream * 0x8CB92BA72F3D8DD7ull);
  return (pl_rng){k, 0};
}

uint64_t pl_rng_next(pl_rng *r) {
  r->counter++;
  return pl_mix64(r->key + r->counter * GOLDEN_GAMMA);
}

uint64_t pl_rng_below(pl_rng *r, uint64_t n) {
  unsigned __int128 m = (unsigned __int128)pl_rng_next(r) * n;
  uint64_t low = (uint64_t)m;
  if (low < n) {
    uint64_t threshold = -n % n; /* 2^64 mod n */
    while (low < threshold) {
      m = (unsigned __int128)pl_rng_next(r) * n;
      low = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}

double pl_rng_unit(pl_rng *r) {
  return (double)(pl_rng_next(r) >> 11) * 0x1.0p-53;
}

double pl_rng_uniform(pl_rng *r, double lo, double hi) {
  return lo + (hi - lo) * pl_rng_unit(r);
}
