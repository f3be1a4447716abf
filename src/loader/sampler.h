/* The order of samples: which dataset index is the i-th sample of batch b
 * of an epoch, for this rank.
 *
 * An epoch's global order is a pure function of (seed, epoch): the identity,
 * or a keyed bijection over [0, n) (a Feistel network with cycle walking),
 * computed per index so that no permutation is ever materialised and n may
 * be in the billions. It never depends on the world size, the workers or
 * timing.
 *
 * Sharding follows torch's DistributedSampler: rank r of W takes global
 * positions r, r + W, r + 2W, ... Without drop_last each rank gets
 * ceil(rem / W) samples and positions past the end wrap to the start of the
 * epoch's order (the first positions repeat); with drop_last each gets
 * floor(rem / W) and the tail is dropped. `rem` is n minus the global start
 * position: 0 for a fresh epoch, later for one resumed from a checkpoint.
 *
 * A source read in blocks (tar shards: `blocks`) adds streams, so that a
 * rank reads whole shards rather than a 1/W share of every shard: the
 * source's block order (its shards one after another) is cut into C
 * contiguous streams, and global position x is sample x / C of stream
 * x % C (the last row, when C does not divide n, is the first n % C
 * streams' last samples). With C = W, rank r's positions r, r + W, ... are
 * stream r, in order: a contiguous 1/W of the shards. C is the world size
 * at the epoch's start and stays for that epoch: a state records it, and a
 * resume on another world size continues the same epoch (the same global
 * sequence, each sample once; a rank then reads from several streams). The
 * shuffle window applies within each stream. The order of a block source
 * therefore depends on the world size at the epoch's start (a 1-stream
 * order is the rank-interleaved one of earlier versions). */
#ifndef PL_SAMPLER_H
#define PL_SAMPLER_H

#include "core/common.h"

typedef struct pl_sampler {
  uint64_t n;
  int shuffle;
  uint64_t seed;
  uint32_t rank, world;
  uint32_t batch;
  int drop_last;
  const struct pl_dataset *blocks; /* its own block order, or NULL */
  uint64_t window;                 /* with blocks: the shuffle window */
} pl_sampler;

/* The per-epoch shape of one rank's share, starting at global position
 * `start` of the epoch's order. */
typedef struct pl_epoch_plan {
  uint64_t epoch;
  uint64_t start;       /* global position of the rank-0 first sample */
  uint64_t per_rank;    /* samples this rank reads in the epoch */
  uint64_t num_batches; /* batches this rank delivers */
  uint64_t key[2];      /* permutation key of (seed, epoch) */
  uint32_t streams;     /* a block source's streams (C above); else 1 */
} pl_epoch_plan;

/* A fresh plan has the sampler's streams: the world size for a block
 * source, else 1. A resumed epoch sets the saved one (pl_core_restart). */
void pl_sampler_plan(const pl_sampler *s, uint64_t epoch, uint64_t start,
                     pl_epoch_plan *out);

/* Samples in batch b of the plan (batch, or fewer for the last). */
uint32_t pl_sampler_batch_size(const pl_sampler *s, const pl_epoch_plan *p,
                               uint64_t b);

/* Global position of sample i of batch b, and the dataset index there. */
uint64_t pl_sampler_position(const pl_sampler *s, const pl_epoch_plan *p,
                             uint64_t b, uint32_t i);
uint64_t pl_sampler_index(const pl_sampler *s, const pl_epoch_plan *p,
                          uint64_t position);

/* The permutation itself: position -> index over [0, n), keyed. Exposed for
 * tests and the cost benchmark. */
uint64_t pl_permute(uint64_t x, uint64_t n, const uint64_t key[2]);

#endif /* PL_SAMPLER_H */
