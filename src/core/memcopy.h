/* Copies into batch memory.
 *
 * A sample's bytes go once from the mapped file into the batch, and the CPU
 * does not read them again: a CUDA batch's staging buffer is read only by
 * the copy engine. Ordinary stores first read each destination cache line
 * (read-for-ownership), so a gather costs three memory transfers per byte,
 * plus the DMA's read: the host's memory bandwidth, shared with the copy
 * engine, becomes the limit (measured on the H200 box: 77 MB batches of
 * 150 KB images reached 36 GB/s with the copy engine able to do 55).
 * Non-temporal stores skip that read and leave the caches alone.
 *
 * With them, 77 MB batches went from 36 to 46 GB/s and 96 MB batches of CIFAR
 * images from 27 to 36 GB/s. But when the few staging buffers in use fit in
 * the last-level cache, ordinary stores let the copy engine read the bytes
 * from the cache without touching DRAM (for 3 MB batches the two measured
 * the same, within run-to-run noise). So streaming is a per-thread switch
 * that the loader turns on for its workers when a batch buffer is large
 * (loader/loader_fill.c); bench/results/gpu-engine-h200-2026-12-01.md has the
 * numbers.
 *
 * Non-temporal stores are weakly ordered: whoever used pl_copy_stream must
 * call pl_copy_fence before the bytes are handed to another agent (the
 * loader does it once per batch, before the copy to the device). */
#ifndef PL_MEMCOPY_H
#define PL_MEMCOPY_H

#include <stddef.h>

/* Copies n bytes, with streaming stores if this thread turned them on. */
void pl_copy_stream(void *dst, const void *src, size_t n);
/* Per thread; off until turned on. */
void pl_copy_set_streaming(int on);
void pl_copy_fence(void);

#endif /* PL_MEMCOPY_H */
