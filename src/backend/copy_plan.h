/* The copy plan: how every batch of one loader travels from the dataset to
 * the batch memory the consumer reads. It is decided once, at create, in
 * one place (copy_plan.c):
 *
 *   1. the backend declares what it can do (pl_backend_caps, backend.h);
 *   2. pl_copy_plan_make decides, from those capabilities, the dataset's
 *      fields and what the loader was asked for (pl_plan_request), the
 *      route of every field, the staging layout, how many staging buffers
 *      and how much page-locked memory, and the span capacity;
 *   3. the backend is created with the plan (pl_backend_config.plan) and
 *      the loader's fill follows it. Nothing changes it afterwards.
 *
 * Routes, per field:
 *
 *   GATHER  the worker reads the field's samples into the memory fill_begin
 *           hands out (a staging buffer, or the batch itself when the
 *           backend does not stage) at stage_off; one span per batch.
 *   CHUNK   the same, chunk_samples samples at a time into a small staging
 *           chunk whose span is submitted as soon as it is full: the chunk
 *           is still in the host's last-level cache when the DMA reads it
 *           (docs/gpu-engine.md, "Chunked gathers").
 *   DIRECT  no CPU touches the bytes: one span per run of samples that lie
 *           back to back in the dataset's own memory (plan.regions, which
 *           the backend page-locks in place at create).
 *
 * A plan has one mode, the routes it combines:
 *
 *   WHOLE    every field GATHER; staging is laid out as the batch
 *            (stage_off == batch_off) and a batch is one span.
 *   CHUNKED  every field CHUNK: a staging backend that takes spans, and a
 *            batch of more than twice the chunk size.
 *   DIRECT   large fields DIRECT, the others GATHER into staging memory just
 *            big enough for them; one submit of every span per batch.
 *
 * A whole-batch dataset (pl_dataset_from_batch_callback: Python worker
 * processes write the whole batch into shared staging memory) is WHOLE
 * with chunking and direct mode refused (the loader asks copy_chunk_bytes
 * = UINT64_MAX, direct_copy = 0) and shared_memory set: the pages workers
 * write come from a memfd (host_pages.h), whose fd fill_begin hands out in
 * pl_bufmem.host_fd.
 *
 * Device writes. A whole-batch reader may write some samples' fields in
 * the batch's device memory itself (the image source's GPU decode: its
 * crops; data/dataset.h, pl_device_dst). The request says it may
 * (device_writes); a WHOLE plan of a staging backend that takes spans then
 * copies each batch as the runs of samples the reader left in staging,
 * field by field (pl_copy_plan_spans_except), with room for them. */
#ifndef PL_COPY_PLAN_H
#define PL_COPY_PLAN_H

#include "core/common.h"
#include "data/dataset.h"

typedef enum { PL_ROUTE_GATHER = 0, PL_ROUTE_CHUNK, PL_ROUTE_DIRECT } pl_route;

typedef enum {
  PL_PLAN_WHOLE = 0,
  PL_PLAN_CHUNKED,
  PL_PLAN_DIRECT
} pl_plan_mode;

/* What a backend can do, declared before it exists (the planner needs it
 * to size what the backend is created with). */
typedef struct pl_backend_caps {
  /* Workers write staging memory the backend copies from (CUDA); 0: they
   * write the batch memory itself (CPU), and a batch's span is in place. */
  int stages;
  /* submit takes several spans per call and several calls per batch. */
  int spans;
  /* It can page-lock dataset memory and copy from it in place. */
  int direct;
  /* Chunk size it prefers when copy_chunk_bytes is 0 (0: never chunk). */
  uint64_t chunk_bytes;
} pl_backend_caps;

/* What the loader was asked for (its configuration, resolved). */
typedef struct pl_plan_request {
  const pl_dataset *ds;
  uint32_t batch_size;
  int num_workers;
  int prefetch;              /* >= 1 */
  uint64_t copy_chunk_bytes; /* 0: the backend's preference; UINT64_MAX:
                                never chunk */
  int direct_copy;           /* direct mode asked for */
  int pin_memory;
  uint64_t pinned_budget;    /* 0: what the plan needs */
  int shared_memory;         /* what workers write is a memfd (a worker
                                process writes it: whole-batch datasets) */
  /* Bytes per sample the loader gathers beside the dataset's fields (the
   * transforms' random draws, data/transform.h): planned as one more
   * field, index ds->nfields, never direct. 0: none. */
  uint64_t extra_sample_bytes;
  int device_writes; /* the dataset may write fields on the device itself
                        (read_batch_device) */
} pl_plan_request;

typedef struct pl_field_plan {
  uint64_t bytes;     /* one sample */
  uint64_t batch_off; /* its array in a batch buffer */
  uint64_t stage_off; /* GATHER / CHUNK: its array in what fill_begin hands
                         out (a staging buffer or chunk, or the batch) */
  pl_route route;
} pl_field_plan;

typedef struct pl_copy_plan {
  pl_plan_mode mode;
  uint32_t batch_size;
  int nfields; /* the dataset's, plus one for extra_sample_bytes */
  pl_field_plan *fields;
  uint64_t batch_bytes;   /* one batch buffer, all fields (>= 1) */
  uint32_t chunk_samples; /* CHUNKED: samples per chunk; else batch_size */
  /* One staging buffer as laid out (the backend rounds it up to pages);
   * 0: none at all (a backend that does not stage, or every field DIRECT). */
  uint64_t stage_bytes;
  int staging_buffers;    /* staging buffers the workers need at once */
  /* Page-locked bytes the backend may hold in all: staging buffers plus
   * the regions. The request's, or what the plan needs. */
  uint64_t pinned_budget;
  uint64_t max_spans;     /* spans one submit carries at most (>= 1) */
  /* DIRECT: the dataset memory to page-lock in place, distinct, none empty,
   * none a private file mapping; copies never run across two of them. */
  pl_region *regions;
  int nregions;
  uint64_t region_bytes;
  /* Direct mode was asked for and refused: why (else ""). */
  char why_not_direct[256];
  /* The memory workers write (CPU batch buffers, CUDA staging buffers) is
   * a memfd mapped shared (pl_bufmem.host_fd), for a dataset whose batches
   * another process writes (pl_dataset_from_batch_callback). */
  int shared_memory;
  /* WHOLE, staging with spans, and the request's device_writes: batches
   * are copied as pl_copy_plan_spans_except says (max_spans holds them). */
  int device_writes;
} pl_copy_plan;

/* One copy into a batch buffer: `len` bytes from `src` (dataset memory in
 * plan.regions, or the memory fill_begin handed out) to m->data + dst_off.
 * A span whose src is m->data + dst_off is already in place. */
typedef struct pl_span {
  const void *src;
  uint64_t dst_off;
  uint64_t len;
} pl_span;

/* Fills *out (overwritten; release it with pl_copy_plan_free). Fails only
 * for want of memory (PL_NO_MEMORY); a direct mode that cannot be had is a
 * plan without it and a reason in why_not_direct. */
pl_status pl_copy_plan_make(const pl_backend_caps *caps,
                            const pl_plan_request *req, pl_copy_plan *out,
                            pl_error *err);
/* A device_writes plan's copies of a batch of n samples gathered at
 * `host` (staging laid out as the batch), of which the reader wrote some
 * fields on the device (bit f of written[i]: field f of sample i, f < 8;
 * NULL: none): one span per run of samples of a field left in staging,
 * fields in order, runs in sample order. Returns how many (<= max_spans;
 * 0 when the reader wrote everything). */
int pl_copy_plan_spans_except(const pl_copy_plan *p, const uint8_t *written,
                              uint32_t n, const void *host, pl_span *out);

/* Frees what the plan holds; it may then be made again. NULL-safe. */
void pl_copy_plan_free(pl_copy_plan *p);

/* Fields' bytes per sample at or above which direct mode copies a field
 * in place: smaller copies lose to a CPU gather (3 KiB copies reach about
 * 6 GB/s in one cudaMemcpyBatchAsync; bench/results/direct-probe-h200-*). */
#define PL_DIRECT_MIN_SAMPLE (64u << 10)

#endif /* PL_COPY_PLAN_H */
