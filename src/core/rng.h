/* Counter-based random numbers: a value is a pure function of a key
 * (seed, epoch, index, stream) and a draw counter, so that per-sample
 * randomness (token windows, crops, flips) is the same for any number of
 * workers and any read order, with no state shared between threads.
 *
 * The mixer is splitmix64's finalizer applied to a key folded with distinct
 * odd constants (as in Steele et al., "Fast splittable pseudorandom number
 * generators", 2014); it passes BigCrush as a counter generator. Not for
 * cryptography. */
#ifndef PL_RNG_H
#define PL_RNG_H

#include <stdint.h>

/* One sample's generator: draws are splitmix(key + counter * gamma). */
typedef struct pl_rng {
  uint64_t key;
  uint64_t counter;
} pl_rng;

/* splitmix64's output function: a bijection of 64-bit values. */
uint64_t pl_mix64(uint64_t x);

/* The generator of (seed, epoch, index) for a purpose `stream` (sources use
 * distinct streams for unrelated draws, e.g. crop vs. error replacement). */
pl_rng pl_rng_for(uint64_t seed, uint64_t epoch, uint64_t index,
                  uint64_t stream);

/* The next 64 random bits. */
uint64_t pl_rng_next(pl_rng *r);

/* Uniform in [0, n) without bias (Lemire's multiply-and-reject); n > 0. */
uint64_t pl_rng_below(pl_rng *r, uint64_t n);

/* Uniform in [0, 1) with 53 random bits. */
double pl_rng_unit(pl_rng *r);

/* Uniform in [lo, hi) (lo when lo == hi). */
double pl_rng_uniform(pl_rng *r, double lo, double hi);

#endif /* PL_RNG_H */
