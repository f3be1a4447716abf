/*
 * pinloader: a parallel batch loader that collates samples into page-locked
 * host memory and copies them asynchronously to a GPU.
 *
 * The one public header. Everything public is prefixed pl_ / PL_.
 *
 * Objects
 *   pl_dataset  a length and named fixed-shape fields; read by index.
 *   pl_loader   workers that fill batches from a dataset, in order, and (with
 *               a CUDA device) copy them to device memory.
 *   pl_batch    one batch, taken from the loader and given back. The memory
 *               it points to belongs to the loader's pool and is never
 *               overwritten while the batch is held.
 *
 * Errors
 *   Every fallible call returns a pl_status and takes an optional
 *   `pl_error *err` (may be NULL) that receives the status and a message
 *   naming the cause (file, byte offset, sample index, CUDA call). The buffer
 *   belongs to the caller, so error reporting is thread-safe by construction.
 *
 * Threads
 *   A pl_dataset is immutable after creation and may be shared by any number
 *   of loaders and threads. A pl_loader is driven by one consumer thread at a
 *   time (pl_loader_next / set_epoch / state calls); pl_batch_release and
 *   pl_batch accessors may be called from any thread. pl_loader_stats is
 *   thread-safe.
 *
 * The library never prints, never exits or aborts: messages go through the
 * log hook in pl_loader_config.
 */
#ifndef PINLOADER_H
#define PINLOADER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PL_STATIC_DEFINE) || !defined(__GNUC__)
#define PL_API
#else
#define PL_API __attribute__((visibility("default")))
#endif

#define PL_VERSION_MAJOR 0
#define PL_VERSION_MINOR 1
#define PL_VERSION_PATCH 0
#define PL_VERSION_HEX \
  ((PL_VERSION_MAJOR << 16) | (PL_VERSION_MINOR << 8) | PL_VERSION_PATCH)

/* The library's version as PL_VERSION_HEX, and as "0.1.0". */
PL_API unsigned pl_version(void);
PL_API const char *pl_version_string(void);

/* ---------------------------------------------------------------- status */

/* XX(NAME, description): the one table the enum and the strings come from. */
#define PL_STATUS_MAP(XX)                                                     \
  XX(OK, "success")                                                           \
  XX(END_OF_EPOCH, "end of epoch")                                            \
  XX(NOT_READY, "no batch ready within the wait")                             \
  XX(INVALID_ARGUMENT, "invalid argument")                                    \
  XX(NO_MEMORY, "out of memory")                                              \
  XX(IO, "I/O error")                                                         \
  XX(FORMAT, "malformed data file")                                           \
  XX(CALLBACK, "sample callback failed")                                      \
  XX(TIMEOUT, "timed out")                                                    \
  XX(EXHAUSTED, "no free batch buffer")                                       \
  XX(NO_DEVICE, "device not available")                                       \
  XX(CUDA, "CUDA error")                                                      \
  XX(BAD_STATE, "invalid loader state")                                       \
  XX(CLOSED, "loader closed")                                                 \
  XX(UNSUPPORTED, "not supported by this build")

typedef enum pl_status {
#define PL_STATUS_ENUM_(name, desc) PL_##name,
  PL_STATUS_MAP(PL_STATUS_ENUM_)
#undef PL_STATUS_ENUM_
  PL_STATUS_COUNT_
} pl_status;

/* "PL_FORMAT" and "malformed data file"; never NULL. */
PL_API const char *pl_status_name(pl_status s);
PL_API const char *pl_status_str(pl_status s);

#define PL_ERROR_MESSAGE_MAX 512

typedef struct pl_error {
  pl_status status;
  /* e.g. "train-images-idx3-ubyte: offset 16: image data is 47040000 bytes
   * but the file has 1000 left" or "sample 1234: callback returned -1: ..." */
  char message[PL_ERROR_MESSAGE_MAX];
} pl_error;

/* Sets err to { PL_OK, "" }. */
PL_API void pl_error_clear(pl_error *err);

/* ---------------------------------------------------------------- fields */

typedef enum pl_dtype {
  PL_UINT8 = 0,
  PL_INT8,
  PL_INT16,
  PL_UINT16,
  PL_INT32,
  PL_UINT32,
  PL_INT64,
  PL_FLOAT16,
  PL_FLOAT32,
  PL_FLOAT64,
  PL_DTYPE_COUNT_
} pl_dtype;

/* Bytes per element (0 for an invalid dtype) and "uint8", "float32", ... */
PL_API size_t pl_dtype_size(pl_dtype t);
PL_API const char *pl_dtype_name(pl_dtype t);

#define PL_MAX_DIMS 8
#define PL_NAME_MAX 32

/* One named field of every sample: `image` uint8 [28,28], `label` uint8 []. */
typedef struct pl_field {
  char name[PL_NAME_MAX];
  pl_dtype dtype;
  int ndim;                    /* 0 for a scalar */
  int64_t shape[PL_MAX_DIMS];  /* per sample, without the batch dimension */
} pl_field;

/* Elements and bytes of one sample of this field. */
PL_API uint64_t pl_field_numel(const pl_field *f);
PL_API uint64_t pl_field_bytes(const pl_field *f);

/* ---------------------------------------------------------------- datasets */

typedef struct pl_dataset pl_dataset;

/* The C form of a map-style __getitem__: write sample `index`'s fields into
 * dst[0..nfields-1], each a buffer of pl_field_bytes(field) bytes inside the
 * batch being built (write there directly; no copy follows). Called from
 * worker threads concurrently with other indices. Return 0 on success; any
 * other value fails the sample, and the text written to msg (NUL-terminated,
 * at most msg_len bytes) becomes part of the error message. */
typedef int (*pl_get_item_fn)(void *user, uint64_t index, void *const *dst,
                              char *msg, size_t msg_len);

/* A dataset of `length` samples with the given fields, read by get_item.
 * `user` is passed through; free_user (may be NULL) is called on it when the
 * dataset is finally freed. */
PL_API pl_status pl_dataset_from_callback(const pl_field *fields, int nfields,
                                          uint64_t length,
                                          pl_get_item_fn get_item, void *user,
                                          void (*free_user)(void *),
                                          pl_dataset **out, pl_error *err);

/* MNIST / Fashion-MNIST IDX files (plain or .gz). Fields: `image` with the
 * images file's dtype and dims[1:], then `label` with the labels file's. */
PL_API pl_status pl_dataset_open_idx(const char *images_path,
                                     const char *labels_path,
                                     pl_dataset **out, pl_error *err);

/* CIFAR-10 binary batches: records of 1 label byte + 3072 CHW pixel bytes.
 * Several files form one dataset, in the order given. Fields: `image` uint8
 * [3,32,32], then `label` uint8 []. */
PL_API pl_status pl_dataset_open_cifar10(const char *const *paths, int npaths,
                                         pl_dataset **out, pl_error *err);

/* Fixed-size records in general: each file has `header_bytes` bytes to skip,
 * then records of `record_bytes` bytes; field i lies at offsets[i] within a
 * record. A file whose body is not a whole number of records is an error.
 * Several files form one dataset. Files are memory-mapped, or decompressed
 * once into memory when their name ends in .gz. */
typedef struct pl_record_format {
  uint64_t header_bytes;
  uint64_t record_bytes;
  int nfields;
  const pl_field *fields;
  const uint64_t *offsets;
} pl_record_format;

PL_API pl_status pl_dataset_open_records(const pl_record_format *fmt,
                                         const char *const *paths, int npaths,
                                         pl_dataset **out, pl_error *err);

/* "idx:IMAGES,LABELS" or "cifar10:FILE[,FILE...]", as the CLI's --dataset. */
PL_API pl_status pl_dataset_open_spec(const char *spec, pl_dataset **out,
                                      pl_error *err);

/* A view of `base` whose field `field` (an integer dtype) is delivered as
 * float32 value * scale (1/255 is torchvision's ToTensor). Converted by the
 * workers straight into the batch. Takes its own reference to base. */
PL_API pl_status pl_dataset_to_float32(pl_dataset *base, const char *field,
                                       float scale, pl_dataset **out,
                                       pl_error *err);

/* Datasets are reference-counted: a loader keeps its dataset alive, so
 * pl_dataset_destroy may be called as soon as the loaders are created.
 * Accepts NULL. */
PL_API void pl_dataset_destroy(pl_dataset *ds);

PL_API uint64_t pl_dataset_length(const pl_dataset *ds);
PL_API int pl_dataset_num_fields(const pl_dataset *ds);
/* NULL if i is out of range. Valid while the dataset lives. */
PL_API const pl_field *pl_dataset_field(const pl_dataset *ds, int i);
/* Bytes of one sample, all fields. */
PL_API uint64_t pl_dataset_sample_bytes(const pl_dataset *ds);

/* Read one sample into caller buffers (dst[i] of pl_field_bytes bytes), in
 * the calling thread. For checks and tools; loaders use it internally. */
PL_API pl_status pl_dataset_read(const pl_dataset *ds, uint64_t index,
                                 void *const *dst, pl_error *err);

/* ---------------------------------------------------------------- loader */

typedef enum pl_device_kind {
  PL_DEVICE_AUTO = 0, /* CUDA device `device_index` (0 unless set, e.g. by
                         pl_loader_config_from_env) when usable, else CPU */
  PL_DEVICE_CPU,
  PL_DEVICE_CUDA
} pl_device_kind;

typedef enum pl_log_level {
  PL_LOG_DEBUG = 0,
  PL_LOG_INFO,
  PL_LOG_WARN,
  PL_LOG_ERROR
} pl_log_level;

/* Called from any of the loader's threads; must be thread-safe. */
typedef void (*pl_log_fn)(void *user, pl_log_level level, const char *msg);

typedef struct pl_loader_config {
  size_t struct_size; /* sizeof(pl_loader_config): set by _init */

  uint32_t batch_size; /* samples per batch; default 1 */
  int shuffle;         /* 0: index order; 1: a permutation of (seed, epoch) */
  uint64_t seed;       /* default 0 */
  int drop_last;       /* drop the short last batch; default 0 */

  int num_workers; /* worker threads; 0 loads in the consumer's thread */
  int prefetch;    /* batches in flight ahead of the consumer (filled or
                      being filled); 0 means 2 per worker, at least 2 */

  pl_device_kind device;
  int device_index;   /* CUDA device ordinal, for PL_DEVICE_CUDA */
  int pin_memory;     /* stage batches in page-locked memory; default 1 */
  int non_blocking;   /* copy asynchronously, order by events; default 1 */
  uint64_t pinned_budget; /* bytes of page-locked memory the loader may hold;
                             0 means what the prefetch depth needs (and, with
                             direct_copy, the data files) */
  uint64_t max_batch_buffers; /* batch buffers the pool may grow to, counting
                                 batches the consumer holds; 0 means
                                 prefetch + 2 + num_workers */
  int direct_copy; /* CUDA: copy fields of 64 KiB or more per sample straight
                      from the data files, page-locked in place at create,
                      with no CPU gather (IDX and records sources; default
                      0). The files count as pinned memory; a pinned_budget
                      too small for them turns it off, and the log says
                      why. docs/gpu-engine.md, "Direct mode" */
  uint64_t copy_chunk_bytes; /* CUDA: a batch of more than twice this is
                                gathered into small staging chunks of about
                                this size, each copied as soon as it is full
                                (while it is still in cache); 0 means 4 MiB,
                                UINT64_MAX whole batches (docs/gpu-engine.md) */

  /* Sharding: this process is `rank` of `world_size` (default 0 of 1). Each
   * epoch's global order is split as torch's DistributedSampler does. */
  uint32_t rank;
  uint32_t world_size;

  uint64_t epoch; /* first epoch to load; default 0 */

  double timeout_s; /* a sample read slower than this fails the batch with
                       PL_TIMEOUT while the consumer waits for it; 0 waits
                       forever. Needs num_workers > 0: with none, the read
                       runs in the consumer's own thread */

  pl_log_fn log; /* NULL: messages are dropped */
  void *log_user;
  pl_log_level log_level; /* least level passed to log; default INFO */
} pl_loader_config;

/* Defaults, as documented field by field above. */
PL_API void pl_loader_config_init(pl_loader_config *cfg);

/* Fills rank, world_size and (for CUDA) device_index from torchrun's RANK,
 * WORLD_SIZE and LOCAL_RANK, or MPI's OMPI_COMM_WORLD_* / PMI_* when set.
 * Returns PL_INVALID_ARGUMENT if a variable is set but malformed. */
PL_API pl_status pl_loader_config_from_env(pl_loader_config *cfg,
                                           pl_error *err);

typedef struct pl_loader pl_loader;
typedef struct pl_batch pl_batch;

/* Validates the configuration, picks the device, starts the workers. The
 * loader keeps a reference to ds. */
PL_API pl_status pl_loader_create(pl_dataset *ds, const pl_loader_config *cfg,
                                  pl_loader **out, pl_error *err);

/* Stops the workers (abandoning a partly loaded epoch) and frees the loader.
 * Batches still held stay valid until released: the memory pool is freed
 * when the last of them is released. Accepts NULL. Never hangs on a worker
 * stuck in a callback for longer than that callback runs. */
PL_API void pl_loader_destroy(pl_loader *ld);

/* Batches per epoch for this rank, and the samples they hold. */
PL_API uint64_t pl_loader_num_batches(const pl_loader *ld);
PL_API uint64_t pl_loader_num_samples(const pl_loader *ld);

/* The next batch, in order. At the end of an epoch returns PL_END_OF_EPOCH
 * once (with *out = NULL); the following call begins the next epoch. A
 * failed sample returns its error and ends the epoch: the following call
 * begins the next epoch. PL_EXHAUSTED: every batch buffer the pool may have
 * is held by the consumer, so waiting would never end. */
PL_API pl_status pl_loader_next(pl_loader *ld, pl_batch **out, pl_error *err);

/* As pl_loader_next, but waits at most `wait_s` seconds (< 0: forever):
 * PL_NOT_READY (*out = NULL, nothing lost) when no batch was ready by then,
 * so that a caller can check for signals and call again. */
PL_API pl_status pl_loader_next_timed(pl_loader *ld, double wait_s,
                                      pl_batch **out, pl_error *err);

/* Abandon the current epoch and make the next pl_loader_next begin `epoch`
 * at its first batch. */
PL_API pl_status pl_loader_set_epoch(pl_loader *ld, uint64_t epoch,
                                     pl_error *err);

/* The epoch that the next batch belongs to. */
PL_API uint64_t pl_loader_epoch(const pl_loader *ld);

/* Resumable position: a small versioned blob naming (dataset length, seed,
 * shuffle, epoch, global samples consumed, batch size, drop_last). Restore
 * into a loader over the same dataset and seed, with any number of workers
 * or ranks: it continues the same global sequence. pl_loader_save_state with
 * buf == NULL sets *len to the size needed. */
PL_API pl_status pl_loader_save_state(const pl_loader *ld, void *buf,
                                      size_t *len, pl_error *err);
PL_API pl_status pl_loader_load_state(pl_loader *ld, const void *buf,
                                      size_t len, pl_error *err);

typedef struct pl_loader_stats {
  uint64_t batches_delivered;
  uint64_t samples_delivered;
  uint64_t bytes_delivered;     /* sample bytes handed to the consumer */
  uint64_t batches_copied;      /* host-to-device copies completed */
  uint64_t bytes_copied;
  uint64_t pinned_bytes;        /* page-locked bytes held now */
  uint64_t pinned_fallbacks;    /* staging buffers that fell back to pageable */
  uint64_t batch_buffers;       /* batch buffers allocated in the pool */
  double consumer_wait_s;       /* time pl_loader_next spent waiting */
  double worker_busy_s;         /* summed over workers: time filling batches */
  double copy_s;                /* summed device time of host-to-device copies */
  uint64_t batches_direct;      /* batches whose large fields were copied
                                   straight from the data files, with no
                                   gather (see direct_copy) */
} pl_loader_stats;

PL_API void pl_loader_stats_get(const pl_loader *ld, pl_loader_stats *out);

/* Waits on the host until every host-to-device copy the loader has queued
 * so far has finished (the CPU backend has none: returns at once). For a
 * consumer that times its loop, or needs the copies done without naming a
 * batch; errors name the CUDA call. */
PL_API pl_status pl_loader_sync(pl_loader *ld, pl_error *err);

/* Where batches live: PL_DEVICE_CPU or PL_DEVICE_CUDA (after AUTO resolved),
 * the device ordinal, and a short description ("cpu", "cuda:0 NVIDIA H200"). */
PL_API pl_device_kind pl_loader_device(const pl_loader *ld, int *index);
PL_API const char *pl_loader_device_name(const pl_loader *ld);

/* ---------------------------------------------------------------- batches */

/* Samples in this batch (batch_size, or fewer for a short last batch). */
PL_API uint32_t pl_batch_size(const pl_batch *b);
/* The epoch and the batch's index within this rank's epoch. */
PL_API uint64_t pl_batch_epoch(const pl_batch *b);
PL_API uint64_t pl_batch_index(const pl_batch *b);
/* The dataset index of the batch's i-th sample. */
PL_API uint64_t pl_batch_sample_index(const pl_batch *b, uint32_t i);

/* Field i's array, [size, ...shape] contiguous, in sample order: host memory
 * for a CPU loader, device memory for a CUDA loader. NULL if i is out of
 * range. Valid until pl_batch_release. */
PL_API void *pl_batch_data(const pl_batch *b, int field);
PL_API uint64_t pl_batch_bytes(const pl_batch *b, int field);
PL_API const pl_field *pl_batch_field(const pl_batch *b, int field);
PL_API pl_device_kind pl_batch_device(const pl_batch *b, int *index);

/* Copy `n` bytes of field `field`, from byte `offset` of its array, into host
 * memory `dst`, waiting for the batch's copy first. Works for CPU and CUDA
 * batches alike (for CUDA this reads device memory back: for checks). */
PL_API pl_status pl_batch_copy_to_host(pl_batch *b, int field, uint64_t offset,
                                       void *dst, uint64_t n, pl_error *err);

/* CUDA batches: make `stream` (a cudaStream_t; NULL is the legacy default
 * stream) wait for the batch's copy, without blocking the host. CPU
 * batches: a no-op. */
PL_API pl_status pl_batch_wait_stream(pl_batch *b, void *stream,
                                      pl_error *err);
/* Block the host until the batch's data is in place. */
PL_API pl_status pl_batch_wait_host(pl_batch *b, pl_error *err);

/* Give the batch back. `stream` names the CUDA stream that last used the
 * batch's device memory (NULL: the legacy default stream; ignored for CPU
 * batches): the memory is reused only after work queued there so far is
 * done. Callable from any thread, also after pl_loader_destroy. Accepts
 * NULL. */
PL_API void pl_batch_release(pl_batch *b, void *stream);

/* Whether this build has the CUDA backend, and the number of usable CUDA
 * devices now (0 without a driver or a GPU). */
PL_API int pl_cuda_available(void);
PL_API int pl_cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif /* PINLOADER_H */
