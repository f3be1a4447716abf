/* Host memory for staging buffers, the CUDA-independent half of pinning.
 *
 * Page-locking ordinary memory (cudaHostRegister) is much cheaper than
 * cudaHostAlloc when the pages already exist, and creating them (the first
 * write to each page) is the expensive part, which spreads well over
 * threads. So backend_cuda.c asks this file for pages that are mapped,
 * placed on the GPU's NUMA node when known, and already faulted in by
 * several threads, then registers them with CUDA itself.
 *
 * Everything here is plain POSIX (no CUDA), best effort where placement is
 * concerned: a failed mbind or an unknown node only loses locality. */
#ifndef PL_PINNED_POOL_H
#define PL_PINNED_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Anonymous private pages, `bytes` rounded up to the page size, preferring
 * NUMA node `node` (-1: no preference), every page written once by up to
 * `threads` threads (0: chosen by size). NULL when out of memory. */
void *pl_pages_alloc(uint64_t bytes, int node, int threads);
void pl_pages_free(void *p, uint64_t bytes);

/* Bytes pl_pages_alloc really maps for `bytes`. */
uint64_t pl_pages_size(uint64_t bytes);

/* Writes one byte of every page of [p, p + bytes) with up to `threads`
 * threads (0: chosen by size), so that later work on it does not fault. */
void pl_pages_touch(void *p, uint64_t bytes, int threads);

/* NUMA node of the PCI device "0000:1b:00.0" (any case; an 8-digit domain
 * as CUDA may print it is accepted), from sysfs. -1 when unknown. */
int pl_pci_numa_node(const char *bus_id);

#endif /* PL_PINNED_POOL_H */
