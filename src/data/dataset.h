/* The dataset contract every source implements.
 *
 * A source fills a pl_dataset (fields, length) and supplies `read`, which
 * writes one sample's fields into caller buffers, and optionally `view`,
 * which returns a pointer to a field's bytes inside memory the source
 * already holds (a mapped or decompressed file), so that wrappers such as
 * the float32 conversion read without an intermediate copy.
 *
 * Datasets are immutable after creation; read and view are called
 * concurrently from worker threads. */
#ifndef PL_DATASET_H
#define PL_DATASET_H

#include "core/common.h"

#include <stdatomic.h>

/* Memory a source reads its samples from: a file mapped read-only, shared
 * or (where the file system refuses that) private, or the decompressed
 * bytes of a .gz file (heap memory). Only the first and the last can be
 * page-locked in place: registering a private file mapping hangs. */
typedef enum {
  PL_REGION_HEAP = 0,
  PL_REGION_SHARED_FILE,
  PL_REGION_PRIVATE_FILE
} pl_region_kind;

typedef struct pl_region {
  const void *ptr;
  uint64_t len;
  pl_region_kind kind;
} pl_region;

/* The region kind of a file map's bytes. */
#define PL_FILE_MAP_REGION(m)                                              \
  (!(m)->mapping ? PL_REGION_HEAP                                          \
   : (m)->shared ? PL_REGION_SHARED_FILE                                   \
                 : PL_REGION_PRIVATE_FILE)

/* Who asks for a sample: the loader's seed and the epoch being loaded. A
 * source with per-sample randomness (crops, token windows, a Python
 * dataset's generator) draws it from (seed, epoch, index) alone, so that
 * it is the same for any number of workers. pl_dataset_read passes
 * {0, 0, NULL}. */
typedef struct pl_sample_ctx {
  uint64_t seed;
  uint64_t epoch;
  const pl_logger *log; /* the loader's log hook, for warnings (may be
                           NULL) */
} pl_sample_ctx;

/* A batch's device memory, for a whole-batch reader that writes some
 * samples there itself (the image source's GPU decode writes its crops
 * with the GPU): a loader gives it (read_batch_device) when its batches
 * live on a CUDA device. Field f of sample i lies at base[f] + i *
 * field_bytes[f] on `device` (base[f] NULL: not offered). The reader sets
 * bit f of written[i] (f < 8; the loader zeroes them) for each field it
 * wrote there, and the loader copies only the rest from the staging
 * memory dst hands out. Its device writes wait for `events`
 * (cudaEvent_t, NULL: none; the buffer's last readers) and are complete
 * when read_batch_device returns. */
#define PL_DEVICE_WAITS 2
typedef struct pl_device_dst {
  int device;
  void *const *base;
  void *events[PL_DEVICE_WAITS];
  uint8_t *written;
} pl_device_dst;

typedef struct pl_dataset_vt {
  const char *kind; /* "callback", "idx", "cifar10", "records", ... */
  /* index < length is guaranteed by the caller. On failure the message
   * names the cause; the caller adds the sample index. */
  pl_status (*read)(const pl_dataset *ds, uint64_t index,
                    const pl_sample_ctx *ctx, void *const *dst,
                    pl_error *err);
  /* May be NULL; returns NULL for a field it cannot view, and then for
   * every index (whether a field has views is a property of the field). */
  const void *(*view)(const pl_dataset *ds, uint64_t index, int field);
  /* May be NULL: writes up to `max` regions that every `view` pointer of
   * `field` lies in and returns how many there are (more than max: the
   * caller asks again, or gives up). The memory stays put for the
   * dataset's life, so a device backend may register it and copy samples
   * straight out of it, with no gather. */
  int (*regions)(const pl_dataset *ds, int field, pl_region *out, int max);
  /* May be NULL. A whole-batch source (source_batch_callback.c): a loader
   * fills each batch with one call of read_batch instead of per-sample
   * reads; the message names the cause. */
  pl_status (*read_batch)(const pl_dataset *ds, const uint64_t *indices,
                          uint32_t n, const pl_batch_info *info,
                          const pl_batch_dst *dst, pl_error *err);
  /* May be NULL (then read_batch is NULL or takes no device memory): the
   * same call with the batch's device memory (pl_device_dst; NULL: none,
   * as read_batch). */
  pl_status (*read_batch_device)(const pl_dataset *ds,
                                 const uint64_t *indices, uint32_t n,
                                 const pl_batch_info *info,
                                 const pl_batch_dst *dst,
                                 const pl_device_dst *dev, pl_error *err);
  /* May be NULL: nonzero when read_batch needs batch memory that another
   * process can map (a memfd: PL_BATCH_SHARED_MEMORY). */
  int (*shared_memory)(const pl_dataset *ds);
  /* May be NULL: nonzero when read_batch calls take turns in claim order
   * (PL_BATCH_IN_ORDER; loader_fill.c, "Turns"). */
  int (*in_order)(const pl_dataset *ds);
  /* May be NULL: samples replaced so far (on_error=skip sources). */
  uint64_t (*replaced)(const pl_dataset *ds);
  /* May be NULL: the file sample `index` is read from and its label
   * (images: torchvision's ImageFolder.samples); NULL path: none. */
  const char *(*sample_path)(const pl_dataset *ds, uint64_t index,
                             int64_t *label);
  /* May be NULL: CPU seconds the dataset's worker processes have used so
   * far (pl_dataset_set_worker_cpu); any thread, never blocks. */
  double (*worker_cpu_s)(const pl_dataset *ds);
  /* Both NULL, or both set: a source whose reads favour locality (tar
   * shards: source_shards.c) orders a shuffled epoch in blocks. The loader
   * shuffles positions within consecutive windows of shuffle_window(ds)
   * positions (0: no block order, the usual permutation), then maps each
   * position c of the epoch's block order to a dataset index with
   * block_index, a bijection of [0, length) for each epoch key (the
   * sampler's permutation key of (seed, epoch)); key NULL: an unshuffled
   * epoch, whose block order is the index order (block_index returns c,
   * and a source that reads ahead takes the call as its hint). c_end:
   * where the reader's run of the block order ends (its stream,
   * loader/sampler.h): a source that reads ahead reads no further. Any
   * thread. */
  uint64_t (*shuffle_window)(const pl_dataset *ds);
  uint64_t (*block_index)(const pl_dataset *ds, const uint64_t key[2],
                          uint64_t c, uint64_t c_end);
  /* Frees impl (not the pl_dataset itself). */
  void (*destroy_impl)(void *impl);
} pl_dataset_vt;

struct pl_dataset {
  const pl_dataset_vt *vt;
  void *impl;
  atomic_int refs;
  uint64_t length;
  int nfields;
  pl_field *fields;
  uint64_t *field_bytes; /* pl_field_bytes of each field */
  uint64_t sample_bytes;
};

/* Allocates a dataset with refs = 1, copies and validates `fields` (names
 * unique and non-empty, dtypes valid, dims positive, sizes without
 * overflow). On failure, impl is NOT freed: the caller still owns it. */
pl_status pl_dataset_new(const pl_dataset_vt *vt, void *impl, uint64_t length,
                         const pl_field *fields, int nfields,
                         pl_dataset **out, pl_error *err);

pl_dataset *pl_dataset_retain(pl_dataset *ds);

/* CPU seconds of the dataset's worker processes so far; 0 when it has
 * none (every source but a batch callback's, and one without the hook). */
double pl_dataset_worker_cpu_s(const pl_dataset *ds);
/* pl_dataset_destroy is the release. */

/* Reads sample `index`, and on failure prefixes "sample N: ". */
pl_status pl_dataset_read_sample(const pl_dataset *ds, uint64_t index,
                                 const pl_sample_ctx *ctx, void *const *dst,
                                 pl_error *err);

/* Calls a C __getitem__ (pl_get_item_fn) for one sample; a non-zero
 * return is PL_CALLBACK "callback returned RC: MESSAGE". */
pl_status pl_dataset_call_get_item(pl_get_item_fn get_item, void *user,
                                   uint64_t index, void *const *dst,
                                   pl_error *err);

/* The file of sample `index` and its label (vt->sample_path); NULL when
 * the source has none or index is out of range. */
const char *pl_dataset_sample_path(const pl_dataset *ds, uint64_t index,
                                   int64_t *label);

/* A failed open whose message begins with one of `paths` (the message
 * names the file) and whose error names no path yet gets that one, so
 * that programs read it from pl_error.path. */
void pl_error_path_from(pl_error *err, const char *const *paths, int n);

/* Index of the field called `name`, or -1. */
int pl_dataset_field_index(const pl_dataset *ds, const char *name);

#endif /* PL_DATASET_H */
