/* How the image source splits each batch's JPEGs between the CPU path
 * (the calling worker, libjpeg-turbo) and the GPU path (data/gpu_decode.h),
 * and what it counts for the report.
 *
 * The rule: a worker hands k of a batch's n GPU-able images to the GPU,
 * decodes the other n - k itself meanwhile, then waits for the GPU's. Both
 * halves end together when k / n = c / (c + g - b), with c and g the
 * seconds per image each path took in recent batches (the GPU's from
 * begin to the moment its work was complete, as the decoder saw it,
 * queueing behind other workers included; not to the return of finish,
 * which comes after the worker's own half), and b the part of g spent
 * inside begin, before the worker's own half can start (nvJPEG's host
 * part). So the share follows measured rates and moves when they do
 * (another job on the GPU, fewer cores). Where b >= c the CPU alone is
 * fastest. Mode gpu pins the share at 1; auto keeps it within [1/32,
 * 31/32] so that both rates stay measured.
 *
 * Speed only where it is wanted: while the loader is ahead of its consumer
 * (more than a quarter of its prefetch depth, and at least 2 batches,
 * loaded and ready for the consumer to take in order when the batch was
 * claimed, and the consumer did not wait for any of its last `depth`
 * batches), auto leans to the
 * CPU, its share moving toward the floor instead, so that the GPU decodes
 * only as much as the consumer needs, and a model training on that GPU is
 * not slowed for nothing (ResNet-50 on the H200 ran at 91.9% of its
 * synthetic rate fed with auto before this rule, at 99.9% with the CPU
 * alone, which decodes 8,000 images/s to its 4,700; at 99.3% with the
 * rule). The threshold is above what a starving consumer leaves ready:
 * the batch a worker just published (the rule's first form, a quarter or
 * more, counted it, and one worker with a fast consumer fell to the CPU
 * floor: 0.5 s per batch where the GPU alone took 0.022 s), those
 * finished out of order behind the one it waits for (not counted), and
 * the burst that follows once that one is loaded (the wait condition).
 *
 * Threads: any number of workers call at once. The rates and the share
 * are single words updated without a lock (a lost update only delays the
 * average); the counters are atomic adds. */
#ifndef PL_DECODE_SPLIT_H
#define PL_DECODE_SPLIT_H

#include "core/common.h"

#include <stdatomic.h>

#define PL_SPLIT_ONE 65536u /* the share's fixed point */

typedef struct pl_decode_counts {
  uint64_t cpu_images;  /* decoded by the CPU path as its share: every
                           image but the GPU's (gpu_failed not included) */
  uint64_t gpu_images;  /* decoded by the GPU path */
  uint64_t not_gpu;     /* not for the GPU: PNG, progressive, CMYK, ... */
  uint64_t gpu_failed;  /* given to the GPU, refused, decoded on the CPU */
  uint64_t gpu_warming; /* given to the GPU while it was starting (auto):
                           decoded on the CPU as its share */
  uint64_t in_place;    /* of gpu_images, written by the GPU straight into
                           the batch's device memory (pl_device_dst) */
  double cpu_s;         /* CPU-path seconds (summed over workers) */
  double gpu_s;         /* GPU calls' seconds, begin to finish (summed) */
  double gpu_begin_s;   /* of which in begin, the worker held (nvJPEG's
                           host part: the worker's own share waits) */
  uint64_t ahead;       /* batches whose share leaned to the CPU (auto,
                           the loader ahead of its consumer) */
  double share;         /* the GPU's share of GPU-able images now */
  int gpu_off;          /* the GPU path stopped after a decoder error */
  char off_why[256];    /* that error's message */
} pl_decode_counts;

typedef struct pl_decode_split {
  int mode; /* pl_decode_mode */
  atomic_uint share;        /* of PL_SPLIT_ONE */
  atomic_uint_fast64_t cpu_ps, gpu_ps; /* picoseconds per image, 0 unknown */
  atomic_uint_fast64_t begin_ps;       /* of gpu_ps, inside begin */
  atomic_int off, why_taken;
  char why[256]; /* written once, by who took why_taken, before off */
  atomic_uint_fast64_t cpu_images, gpu_images, not_gpu, gpu_failed;
  atomic_uint_fast64_t gpu_warming, in_place;
  atomic_uint_fast64_t cpu_ns, gpu_ns, begin_ns, ahead;
} pl_decode_split;

void pl_split_init(pl_decode_split *s, int mode);

/* How many of n GPU-able images go to the GPU (0 once it is off). */
uint32_t pl_split_gpu_count(pl_decode_split *s, uint32_t n);

/* One batch measured: n_cpu images in cpu_ns on this worker, n_gpu in
 * gpu_ns (the GPU path's time, begin_ns of it inside begin). Either count
 * may be 0 (that rate is then kept). Moves the share a quarter of the way
 * to the rule's, or, with ahead (the loader was ahead of its consumer),
 * to the floor. */
void pl_split_observe(pl_decode_split *s, uint32_t n_cpu, uint64_t cpu_ns,
                      uint32_t n_gpu, uint64_t gpu_ns, uint64_t begin_ns,
                      int ahead);

/* Whether a batch claimed with ready_ahead of depth loaded and not taken
 * (in the consumer's order), since_wait batches taken since the consumer
 * last waited, finds the loader ahead of its consumer. */
int pl_split_ahead(uint32_t ready_ahead, uint32_t depth,
                   uint32_t since_wait);

/* Counts for the report; fallbacks with a reason. */
void pl_split_count_not_gpu(pl_decode_split *s, uint32_t n);
void pl_split_count_failed(pl_decode_split *s, uint32_t n);
void pl_split_count_warming(pl_decode_split *s, uint32_t n);
void pl_split_count_in_place(pl_decode_split *s, uint32_t n);
/* A decoder error: the GPU path is off for good (the first message is
 * kept for the report). */
void pl_split_turn_off(pl_decode_split *s, const char *why);
void pl_split_counts(pl_decode_split *s, pl_decode_counts *out);

#endif /* PL_DECODE_SPLIT_H */
