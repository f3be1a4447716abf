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
#define PL_ERROR_PATH_MAX 4096

typedef struct pl_error {
  pl_status status;
  /* e.g. "train-images-idx3-ubyte: offset 16: image data is 47040000 bytes
   * but the file has 1000 left" or "sample 1234: callback returned -1: ..." */
  char message[PL_ERROR_MESSAGE_MAX];
  /* The same cause as fields, for programs (the message stays the text for
   * people). Each is "none" unless the error names it, and each survives the
   * context that later layers prefix to the message. */
  uint64_t sample_index;        /* the failed sample; UINT64_MAX: none */
  char path[PL_ERROR_PATH_MAX]; /* the file involved; "": none */
  int sys_errno;                /* errno of the failed system call; 0: none */
  int cuda_error;               /* cudaError_t of the failed call; 0: none */
} pl_error;

/* Sets err to { PL_OK, "", no sample, no path, 0, 0 }. */
PL_API void pl_error_clear(pl_error *err);

/* ---------------------------------------------------------------- fields */

/* XX(NAME, name, bytes, format, dlpack): the one dtype table. `format` is
 * the struct-module / buffer-protocol character (0: none, bfloat16), `dlpack`
 * the DLDataType code (0 int, 1 uint, 2 float, 4 bfloat16). The enum, pl_dtype_size, pl_dtype_name and
 * the Python binding's buffer and DLPack types all come from it. */
#define PL_DTYPE_MAP(XX)                                                      \
  XX(UINT8, uint8, 1, 'B', 1)                                                 \
  XX(INT8, int8, 1, 'b', 0)                                                   \
  XX(INT16, int16, 2, 'h', 0)                                                 \
  XX(UINT16, uint16, 2, 'H', 1)                                               \
  XX(INT32, int32, 4, 'i', 0)                                                 \
  XX(UINT32, uint32, 4, 'I', 1)                                               \
  XX(INT64, int64, 8, 'q', 0)                                                 \
  XX(FLOAT16, float16, 2, 'e', 2)                                             \
  XX(FLOAT32, float32, 4, 'f', 2)                                             \
  XX(FLOAT64, float64, 8, 'd', 2)                                             \
  XX(BFLOAT16, bfloat16, 2, 0, 4)

typedef enum pl_dtype {
#define PL_DTYPE_ENUM_(NAME, name, bytes, format, dlpack) PL_##NAME,
  PL_DTYPE_MAP(PL_DTYPE_ENUM_)
#undef PL_DTYPE_ENUM_
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

/* ---- Whole-batch datasets (for readers in other processes) ----------- */

/* Where one batch goes, for a pl_read_batch_fn. The batch memory is
 * `buffer`, `buffer_bytes` long; sample i's field f lies at base[f] +
 * i * pl_field_bytes(field f), and base[f] = buffer + offset[f]. When the
 * dataset asked for shared memory (PL_BATCH_SHARED_MEMORY), the buffer is
 * a memfd, `fd` (valid only during the call: dup it to keep it), mapped
 * MAP_SHARED from its byte 0, so that another process can map the fd and
 * write the fields in place; `buffer_id` names the buffer (the same fd
 * and size every time it is seen again) so that a process maps each
 * buffer once. Without shared memory fd is -1 and buffer_id 0. */
typedef struct pl_batch_dst {
  int nfields;
  void *const *base;
  const uint64_t *offset;
  void *buffer;
  uint64_t buffer_bytes;
  int fd;
  uint64_t buffer_id;
  /* With a loader timeout (NULL without): report(dst, index) names the
   * sample the callback is reading now, so that a PL_TIMEOUT names it
   * (thread-safe, cheap; call it as often as you like). */
  void (*report)(const struct pl_batch_dst *dst, uint64_t sample);
  void *report_ctx;
  /* Nonzero once nobody wants this batch any more (a new epoch or order
   * began, or the loader is being destroyed): a callback that reads the
   * batch in parts may stop early and fail it (thread-safe, cheap). Never
   * NULL for a loader's call. */
  int (*abandoned)(const struct pl_batch_dst *dst);
  /* For a dataset made with PL_BATCH_IN_ORDER: the callback calls
   * queued(dst) once it has taken its place (in its own queue, say), and
   * the loader then lets the next batch's call begin; returning counts as
   * calling it. A no-op otherwise, and idempotent. Never NULL for a
   * loader's call. */
  void (*queued)(const struct pl_batch_dst *dst);
} pl_batch_dst;

/* Who asks for a batch: the loader's seed, the epoch, the batch's index in
 * this rank's epoch, and the loader's timeout (0: none) for the call. */
typedef struct pl_batch_info {
  uint64_t seed;
  uint64_t epoch;
  uint64_t batch_index;
  double timeout_s;
  uint64_t stream; /* pl_batch_stream of the batch being filled */
  uint64_t job;    /* its number in that stream: batches are claimed, in
                      order, by increasing job (consecutive in an epoch) */
} pl_batch_info;

/* Fill a whole batch: samples indices[0..n-1] into dst. Called from a
 * loader's worker thread (one call per batch, concurrently with other
 * batches), or with num_workers 0 from the consumer's. Return 0 on
 * success; PL_READ_INTERRUPTED when the consumer's thread was interrupted
 * (a signal it must handle): with num_workers 0 pl_loader_next then
 * returns PL_NOT_READY, nothing lost, and fills the batch again at the next
 * call (on a worker thread it fails the batch). Any other value fails the
 * batch, and the NUL-terminated text in msg (at most msg_len bytes)
 * becomes the error message. A loader over such a dataset fills every batch with one call:
 * no per-sample reads, no chunked gathers, no direct mode. */
typedef int (*pl_read_batch_fn)(void *user, const uint64_t *indices,
                                uint32_t n, const pl_batch_info *info,
                                const pl_batch_dst *dst, char *msg,
                                size_t msg_len);

#define PL_READ_INTERRUPTED (-2)

enum {
  /* Batch memory the callback sees is a memfd another process can map
   * (CPU batch buffers and CUDA staging buffers; CUDA pins it in place). */
  PL_BATCH_SHARED_MEMORY = 1,
  /* The calls take turns in the order the loader claimed their batches
   * (job order within a stream): the call for a batch begins only once the
   * call for the batch claimed before it has called dst->queued or
   * returned. Concurrent loader threads otherwise reach the callback in
   * any order, and a callback that hands batches to processes in arrival
   * order (each process's random state must see its batches in order, as
   * a torch worker's does) would see a later batch first. */
  PL_BATCH_IN_ORDER = 2
};

/* A dataset read a batch at a time by read_batch. get_item may be NULL
 * (pl_dataset_read then fails with PL_UNSUPPORTED); when given it serves
 * pl_dataset_read. flags: PL_BATCH_SHARED_MEMORY and PL_BATCH_IN_ORDER,
 * either, or 0. */
PL_API pl_status pl_dataset_from_batch_callback(
    const pl_field *fields, int nfields, uint64_t length,
    pl_read_batch_fn read_batch, pl_get_item_fn get_item, int flags,
    void *user, void (*free_user)(void *), pl_dataset **out, pl_error *err);

/* CPU seconds that other processes have used for a dataset so far (its
 * worker processes, as python/pinloader's are), called with the dataset's
 * user pointer from any thread: thread-safe, never blocking, never
 * decreasing. The loader adds them to its own process's CPU time where it
 * judges cores: the timings (worker_process_cpu_s), the report's CPU line
 * and the autotuner, which adds no worker once the cores are in use. Only
 * for a dataset of pl_dataset_from_batch_callback (else
 * PL_INVALID_ARGUMENT); NULL removes the clock. */
typedef double (*pl_worker_cpu_fn)(void *user);
PL_API pl_status pl_dataset_set_worker_cpu(pl_dataset *ds,
                                           pl_worker_cpu_fn cpu_s,
                                           pl_error *err);

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

/* Token shards for language models (docs/sources.md): nanoGPT's raw .bin
 * files (uint16, or uint32 with format PL_TOKENS_RAW_U32) and llm.c shards
 * (a 256 x int32 header: magic 20240520 version 1 for uint16 tokens, magic
 * 20240801 version 7 for uint32; then the token count's tokens). Each
 * sample is a window of context + 1 tokens of one shard (never two): field
 * `x` its first `context` tokens, `y` the same shifted by one. */
typedef enum pl_tokens_format {
  PL_TOKENS_AUTO = 0, /* an llm.c header when the magic is there, else raw
                         uint16 */
  PL_TOKENS_RAW_U16,
  PL_TOKENS_RAW_U32,
  PL_TOKENS_LLMC
} pl_tokens_format;

typedef struct pl_tokens_options {
  size_t struct_size;  /* set by _init */
  uint64_t context;    /* T, tokens in x and in y; required (> 0) */
  uint64_t samples;    /* > 0: this many windows per epoch, each at a random
                          offset drawn from (seed, epoch, index) as nanoGPT's
                          get_batch does; 0: windows stride through each
                          shard (dataset length = the windows that fit) */
  uint64_t stride;     /* stride mode: tokens between window starts; 0 means
                          context (non-overlapping x windows) */
  pl_dtype dtype;      /* delivered: PL_INT64 (default: torch's embedding
                          indices), PL_INT32, PL_UINT32, or PL_UINT16 for
                          uint16 shards */
  pl_tokens_format format;
} pl_tokens_options;

PL_API void pl_tokens_options_init(pl_tokens_options *o);
PL_API pl_status pl_dataset_open_tokens(const char *const *paths, int npaths,
                                        const pl_tokens_options *opt,
                                        pl_dataset **out, pl_error *err);

/* NumPy arrays: .npy files (memory-mapped; C order; bool, integers of 8 to
 * 64 bits, float16/32/64, complex64/128; little- or big-endian) zipped as
 * the fields of one dataset over their first axis, in the order given,
 * each field named by its file's stem; a path ending in .npz gives all its
 * members (stored uncompressed, as np.savez writes) as fields, in the
 * archive's order. bool is delivered as uint8 (0/1), uint64 as int64 (the
 * same bytes), complex as float [..., 2] (real, imaginary), big-endian
 * arrays in host order. Refused: Fortran order, object and structured
 * dtypes, compressed members (np.savez_compressed), 0-d arrays, first axes
 * of different lengths. */
PL_API pl_status pl_dataset_open_npy(const char *const *paths, int npaths,
                                     pl_dataset **out, pl_error *err);

/* Image folders (docs/sources.md): torchvision's ImageFolder layout
 * ROOT/CLASS/NAME.jpg|jpeg|png (classes sorted by name, labels their index),
 * or a list file of "PATH LABEL" lines (paths relative to the list file's
 * folder unless absolute). JPEG through libjpeg-turbo, PNG through libpng;
 * grayscale, palette and CMYK become RGB. Fields: `image` uint8 [3, size,
 * size] (CHW), `label` int64 [], and with crop_field `crop` int32 [5]
 * (top, left, height, width, flipped) in the source image's pixels. */
typedef enum pl_image_on_error {
  PL_IMAGE_ERROR_FAIL = 0, /* a bad file fails its batch, naming the file */
  PL_IMAGE_ERROR_SKIP      /* replaced by another sample chosen from the
                              index alone; counted (pl_dataset_replaced) and
                              logged at WARN through the loader's log hook */
} pl_image_on_error;

typedef struct pl_image_options {
  size_t struct_size; /* set by _init */
  uint32_t size;      /* output height and width; default 224 */
  int train;          /* 1 (default): RandomResizedCrop(size, scale, ratio)
                         as torchvision samples it, from (seed, epoch,
                         index), then a horizontal flip with flip_p; 0:
                         Resize(resize) of the shorter side + CenterCrop */
  double scale_min, scale_max; /* crop area share; default 0.08, 1 */
  double ratio_min, ratio_max; /* crop aspect (w/h); default 3/4, 4/3 */
  double flip_p;               /* default 0.5 */
  uint32_t resize;    /* eval: shorter side before the center crop; 0 means
                         size / 0.875 (256 for 224) */
  int dct_scaling;    /* JPEG: decode at 1/2, 1/4, 1/8 scale when the crop
                         stays at least as large as the output; default 1 */
  int crop_field;     /* add the `crop` field (for checks); default 0 */
  pl_image_on_error on_error;
} pl_image_options;

PL_API void pl_image_options_init(pl_image_options *o);
/* PL_UNSUPPORTED when this build has no JPEG/PNG decoder (the message says
 * what to install). */
PL_API pl_status pl_dataset_open_images(const char *root_or_list,
                                        const pl_image_options *opt,
                                        pl_dataset **out, pl_error *err);

/* WebDataset tar shards (docs/sources.md, "Shards"): local paths
 * (memory-mapped) or http(s):// URLs (range requests through libcurl,
 * loaded at run time), and brace patterns "train-{000000..000099}.tar".
 * Members sharing a key (the path up to the first '.' of the file name)
 * form one sample, in tar order; shard after shard. Each shard's member
 * index is built on first open and cached (SHARD.plidx beside a local
 * shard when writable, else in cache_dir). Fields, from `fields`
 * "NAME:EXT[;EXT...][:KIND],...": KIND image (default for jpg, jpeg,
 * png: the images source's decode and transforms, `image` options), npy
 * (default for npy: the whole array, dtype and shape of the first
 * sample's), int (default for cls: an ASCII integer to int64 []), bytes
 * (default for
 * anything else: uint8 [max_bytes] zero-padded, plus NAME_len int64 []).
 * A sample without the member is PL_FORMAT naming the shard, the key and
 * the extension. */
typedef enum pl_shards_readahead {
  PL_SHARDS_WHOLE = 0, /* a remote shard is fetched whole into the cache
                          on its first read, reads are then local */
  PL_SHARDS_RANGES     /* each member is one range request; only the
                          index is kept */
} pl_shards_readahead;

/* A fetcher of one's own (s3torchconnector, fsspec, obstore behind a
 * binding): writes bytes [off, off + len) of `url` (len 0: from off to the
 * end) to sink, in order, and returns 0; else nonzero with a message in
 * msg (msg_cap bytes). A nonzero return of sink means stop (return
 * nonzero then). Called from any thread, several at once. */
typedef int (*pl_shards_sink)(void *sink_user, const void *data, size_t n);
typedef int (*pl_shards_fetch_fn)(void *user, const char *url, uint64_t off,
                                  uint64_t len, pl_shards_sink sink,
                                  void *sink_user, char *msg, size_t msg_cap);

typedef struct pl_shards_options {
  size_t struct_size;       /* set by _init */
  pl_image_options image;   /* for image fields; _init sets its defaults */
  const char *fields;       /* NULL: "image:jpg;jpeg;png,label:cls" */
  const char *cache_dir;    /* remote shards and indexes; NULL:
                               $XDG_CACHE_HOME/pinloader/shards or
                               ~/.cache/pinloader/shards */
  uint64_t cache_bytes;     /* remote whole shards kept at most (least
                               recently read evicted first; shards being
                               read stay); default 4 GiB */
  uint32_t max_bytes;       /* bytes fields' capacity; default 4096 */
  pl_shards_readahead readahead;
  int retries;              /* HTTP attempts after the first; default 4 */
  uint32_t backoff_ms;      /* before the first retry, doubling; 200 */
  uint32_t timeout_ms;      /* connect, and no byte for this long; 30000 */
  uint64_t shuffle_buffer;  /* a loader's shuffled epoch: the shards in an
                               order of (seed, epoch), their samples in tar
                               order, then shuffled within consecutive
                               windows of this many (each sample moves less
                               than it); 0: the loader's permutation of all
                               samples. Default 1000 */
  uint32_t prefetch;        /* readahead whole, a shuffled epoch: fetch
                               the shard being read and this many after it
                               in the epoch's order ahead of the reads, on a
                               thread of the dataset's; 0: on demand only.
                               Default 2 */
  /* NULL, or the fetcher of every path holding "://" (http URLs included:
   * libcurl is then not used). With a fetcher nothing tells a changed
   * object from the same one, so cached indexes and shards of an earlier
   * open are not used (each open fetches and indexes its shards again) and
   * no read is checked for change. fetch_free (may be NULL) is called with
   * fetch_user when the dataset is destroyed, also when the open fails. */
  pl_shards_fetch_fn fetch;
  void *fetch_user;
  void (*fetch_free)(void *fetch_user);
} pl_shards_options;

PL_API void pl_shards_options_init(pl_shards_options *o);
PL_API pl_status pl_dataset_open_shards(const char *const *paths, int npaths,
                                        const pl_shards_options *opt,
                                        pl_dataset **out, pl_error *err);
/* As pl_dataset_open("shards", ...) with "key=value&..." options, and a
 * fetcher (NULL: none). */
PL_API pl_status pl_dataset_open_shards_fetch(const char *const *paths,
                                              int npaths, const char *options,
                                              pl_shards_fetch_fn fetch,
                                              void *fetch_user,
                                              void (*fetch_free)(void *),
                                              pl_dataset **out, pl_error *err);

/* Samples a source replaced (images with PL_IMAGE_ERROR_SKIP); 0 for
 * sources that never replace. */
PL_API uint64_t pl_dataset_replaced(const pl_dataset *ds);

/* The sources that a kind name opens (pl_dataset_open, specs, the CLI's
 * --dataset, Python's datasets), one row each; the CLI's --help and
 * Python's pinloader.sources() are made from these rows. */
typedef struct pl_source_info {
  const char *kind;  /* "tokens" */
  const char *usage; /* "tokens:FILE[,FILE...]?context=T" */
  const char *keys;  /* the option keys, space-separated; "" for none */
  const char *doc;   /* what it reads, one line */
} pl_source_info;
/* Row i (0, 1, ...) of the registry; NULL past the last. Static data:
 * callable from any thread. */
PL_API const pl_source_info *pl_source_at(int i);

/* Any source by kind ("idx", "cifar10", "tokens", "npy", "images"), its
 * files, and "key=value&key=value" options (NULL or "" for none; the keys
 * of each kind are listed in docs/sources.md). */
PL_API pl_status pl_dataset_open(const char *kind, const char *const *paths,
                                 int npaths, const char *options,
                                 pl_dataset **out, pl_error *err);

/* A dataset spec, as the CLI's --dataset: KIND:FILE[,FILE...][?OPTIONS],
 * e.g. "idx:IMAGES,LABELS", "cifar10:FILE[,FILE...]",
 * "tokens:train.bin?context=1024&samples=100000", "npy:x.npy,y.npy",
 * "images:ROOT?size=224". */
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
 * the calling thread. For checks and tools; loaders use it internally.
 *
 * Data files that change: files are memory-mapped. One that shrinks while
 * it is read (truncated, or overwritten by `cp`) fails the read or the
 * batch with PL_IO "FILE: the file changed while it was being read (it is
 * N bytes now, was M)", never a SIGBUS: the library installs a SIGBUS
 * handler while any file is mapped (refcounted; it passes every other
 * SIGBUS on to the handler installed before it). A file replaced by
 * rename (mv) is safe: the old bytes stay mapped. A file rewritten in
 * place at the same size is read as it is now: its new bytes are
 * delivered, undetected (docs/reliability.md). */
PL_API pl_status pl_dataset_read(const pl_dataset *ds, uint64_t index,
                                 void *const *dst, pl_error *err);

/* ---------------------------------------------------------------- transforms */

/* Per-sample transforms of a batch's fields, named as torchvision's. With a
 * CUDA loader they run on the GPU, on the loader's own stream right after a
 * batch's copy: the uint8 bytes cross PCIe, the transformed arrays are
 * written into the batch's device buffer, and the consumer's
 * pl_batch_wait_stream covers them. With a CPU loader the workers run the
 * same transforms on the host, with the same results (bit for bit: both use
 * one table computed on the host, see docs/transforms.md).
 *
 * Whatever the list's order, one field's transforms apply in this order:
 *   RANDOM_CROP   pad every side with `padding` pixels of value `fill`, then
 *                 crop size[0] x size[1] at a random offset (torchvision
 *                 RandomCrop(size, padding, fill), padding_mode constant)
 *   RANDOM_HFLIP  mirror the columns with probability p
 *   CONVERT       uint8 x -> x / 255 in `dtype` (float32, bfloat16, float16):
 *                 ConvertImageDtype / ToTensor
 *   NORMALIZE     (x / 255 - mean[c]) / std[c]; implies CONVERT to float32
 *                 unless a CONVERT names another dtype
 *   LAYOUT        the output's memory order: PL_LAYOUT_CHW ([C,H,W], torch's
 *                 contiguous NCHW) or PL_LAYOUT_HWC ([H,W,C], the memory of a
 *                 channels_last tensor); the default output layout is CHW
 *   TO_INT64      an integer field (labels) widened to int64, as torch's
 *                 default collate hands labels out
 * Float values are computed in float32, each operation correctly rounded
 * (what torch computes for ToTensor + Normalize in float32), then rounded
 * once, to nearest even, to the output dtype.
 *
 * Image fields are uint8 [C,H,W], [H,W,C] or [H,W]; `input_layout` (on any
 * of the field's transforms) says which when the shape does not: AUTO takes
 * a 3-d shape as [H,W,C] when its last dimension is 1, 3 or 4 and its first
 * is not, else as [C,H,W].
 *
 * Random parameters (crop offset, flip) of sample `index` are a function of
 * (loader seed, epoch, index, field) alone: the same for any number of
 * workers, on the CPU and on the GPU. pl_batch_field reports the
 * transformed dtype and shape. */
#define PL_TRANSFORM_MAX_CHANNELS 16

typedef enum pl_transform_kind {
  PL_TRANSFORM_NONE = 0,
  PL_TRANSFORM_RANDOM_CROP,
  PL_TRANSFORM_RANDOM_HFLIP,
  PL_TRANSFORM_CONVERT,
  PL_TRANSFORM_NORMALIZE,
  PL_TRANSFORM_LAYOUT,
  PL_TRANSFORM_TO_INT64,
  PL_TRANSFORM_KIND_COUNT_
} pl_transform_kind;

typedef enum pl_layout {
  PL_LAYOUT_AUTO = 0,
  PL_LAYOUT_CHW,
  PL_LAYOUT_HWC
} pl_layout;

typedef struct pl_transform {
  pl_transform_kind kind;
  const char *field; /* the field it applies to; NULL: "label" for TO_INT64,
                        else "image". Copied at pl_loader_create */
  pl_layout input_layout; /* how the stored field is laid out; AUTO */
  /* RANDOM_CROP */
  int32_t size[2];   /* output height, width; 0: the input's */
  int32_t padding;   /* pixels added on each side */
  uint8_t fill;      /* value of the padding pixels (before CONVERT) */
  /* RANDOM_HFLIP */
  float p;           /* probability of a flip; pl_transform_init: 0.5 */
  /* CONVERT */
  pl_dtype dtype;    /* PL_FLOAT32, PL_BFLOAT16 or PL_FLOAT16 */
  /* NORMALIZE: per channel, or one value for every channel */
  int num_channels;
  float mean[PL_TRANSFORM_MAX_CHANNELS];
  float std[PL_TRANSFORM_MAX_CHANNELS];
  /* LAYOUT */
  pl_layout layout;  /* PL_LAYOUT_CHW or PL_LAYOUT_HWC (channels_last) */
} pl_transform;

/* Zeroes t and sets its kind and defaults (p = 0.5, dtype float32, layout
 * CHW). */
PL_API void pl_transform_init(pl_transform *t, pl_transform_kind kind);

/* ---------------------------------------------------------------- loader */

typedef enum pl_device_kind {
  PL_DEVICE_AUTO = 0, /* CUDA device `device_index` (0 unless set, e.g. by
                         pl_loader_config_from_env) when usable, else CPU */
  PL_DEVICE_CPU,
  PL_DEVICE_CUDA
} pl_device_kind;

/* Where the image source (pl_dataset_open_images) decodes JPEGs. */
typedef enum pl_decode_mode {
  PL_DECODE_CPU = 0, /* the workers, libjpeg-turbo (the default) */
  PL_DECODE_GPU,     /* nvJPEG on the loader's CUDA device, every JPEG it
                        takes (the rest on the CPU); PL_UNSUPPORTED at
                        create when there is no device or no nvJPEG */
  PL_DECODE_AUTO     /* both at once, split by measured rates; the CPU
                        alone, with a notice in the log, when the GPU path
                        cannot be opened */
} pl_decode_mode;

typedef enum pl_log_level {
  PL_LOG_DEBUG = 0,
  PL_LOG_INFO,
  PL_LOG_WARN,
  PL_LOG_ERROR
} pl_log_level;

/* Called from any of the loader's threads; must be thread-safe. */
typedef void (*pl_log_fn)(void *user, pl_log_level level, const char *msg);

/* Limits of the loader's options, also stated in PL_OPTION_MAP. */
#define PL_MAX_WORKERS 1024
#define PL_MAX_PREFETCH 4096
#define PL_MAX_BATCH_BUFFERS (1u << 20)
#define PL_MAX_TIMEOUT_S 1e9

/* The loader's options: the one place each is described. Initialisation
 * (pl_loader_config_init), validation (pl_loader_create), the option query
 * (pl_option_info), setting by name (pl_loader_config_set), the CLI's flags
 * and the Python keyword arguments all come from it.
 *
 * XX(name, TYPE, default, min, max, doc): `name` is the pl_loader_config
 * field, TYPE a pl_option_type without its PL_OPT_ prefix, min and max the
 * valid range (inclusive). */
#define PL_OPTION_MAP(XX)                                                     \
  XX(batch_size, U32, 1, 1, UINT32_MAX, "samples per batch")                  \
  XX(shuffle, BOOL, 0, 0, 1,                                                  \
     "shuffle each epoch: a permutation of (seed, epoch)")                    \
  XX(seed, U64, 0, 0, UINT64_MAX, "the shuffle's seed")                       \
  XX(drop_last, BOOL, 0, 0, 1, "drop the short last batch")                   \
  XX(num_workers, AUTO_INT, 0, 0, PL_MAX_WORKERS,                             \
     "worker threads; 0 loads in the consumer's thread; auto: tuned while "   \
     "running, within cpu_budget")                                            \
  XX(prefetch, AUTO_INT, 0, 0, PL_MAX_PREFETCH,                               \
     "batches in flight ahead of the consumer; 0: 2 per worker, at least 2; " \
     "auto: tuned while running")                                             \
  XX(device, DEVICE, PL_DEVICE_AUTO, PL_DEVICE_AUTO, PL_DEVICE_CUDA,          \
     "auto (CUDA when usable, else the CPU), cpu, cuda or cuda:N")            \
  XX(device_index, INT, 0, 0, INT32_MAX, "the CUDA device's ordinal")         \
  XX(pin_memory, BOOL, 1, 0, 1, "stage batches in page-locked memory (CUDA)") \
  XX(non_blocking, BOOL, 1, 0, 1,                                             \
     "copy asynchronously, ordered by events (CUDA)")                         \
  XX(pinned_budget, BYTES, 0, 0, UINT64_MAX,                                  \
     "page-locked bytes the loader may hold; 0: what prefetch needs")         \
  XX(max_batch_buffers, U64, 0, 0, PL_MAX_BATCH_BUFFERS,                      \
     "batch buffers the pool may grow to, counting batches the consumer "     \
     "holds; 0: prefetch + 2 + num_workers")                                  \
  XX(direct_copy, BOOL, 0, 0, 1,                                              \
     "CUDA: copy fields of 64 KiB and more per sample straight from the "     \
     "page-locked data files (IDX, records), with no gather")                 \
  XX(copy_chunk_bytes, BYTES, 0, 0, UINT64_MAX,                               \
     "CUDA: gather batches over twice this size in chunks of about this "     \
     "size; 0: 4 MiB, max (or off): whole batches")                           \
  XX(rank, U32, 0, 0, UINT32_MAX - 1,                                         \
     "this process's shard, below world_size (as torch's "                    \
     "DistributedSampler)")                                                   \
  XX(world_size, U32, 1, 1, UINT32_MAX,                                       \
     "processes the data set is sharded over")                                \
  XX(epoch, U64, 0, 0, UINT64_MAX, "the first epoch to load")                 \
  XX(timeout_s, REAL, 0, 0, PL_MAX_TIMEOUT_S,                                 \
     "seconds a sample may take to load before its batch fails with "         \
     "PL_TIMEOUT; 0: forever (needs num_workers > 0)")                        \
  XX(log_level, LOG_LEVEL, PL_LOG_INFO, PL_LOG_DEBUG, PL_LOG_ERROR,           \
     "least level passed to the log hook: debug, info, warn or error")        \
  XX(timings, BOOL, 1, 0, 1,                                                  \
     "per-stage clocks (pl_loader_timings_get, the report); off only to "     \
     "measure their cost; auto workers or prefetch keep them on")             \
  XX(cpu_budget, REAL, 0, 0, 65536,                                           \
     "cores auto workers may use; 0: the cores this process may run on "      \
     "(affinity, cgroup cpu.max); never more than them")                      \
  XX(replay_batches, U32, 0, 0, 65536,                                        \
     "headroom: after replay_after batches keep this many and hand them out " \
     "again instead of loading (the data repeats: a measurement mode); 0 off") \
  XX(replay_after, U64, 0, 0, UINT64_MAX,                                     \
     "batches loaded and handed out normally before the replay")             \
  XX(explicit_order, BOOL, 0, 0, 1,                                           \
     "every epoch's batches come from pl_loader_set_order: nothing is read "  \
     "before the first")                                                \
  XX(error_ends_epoch, BOOL, 1, 0, 1,                                         \
     "a failed batch ends its epoch (the next call begins the next one); "    \
     "0: only that batch is lost, the next call returns the one after it "    \
     "(as torch's DataLoader)")                                               \
  XX(decode, DECODE, PL_DECODE_CPU, PL_DECODE_CPU, PL_DECODE_AUTO,            \
     "image folders: decode JPEGs on the cpu, the gpu (nvJPEG) or both, "     \
     "split by measured rates (auto)")

/* What an option holds, and how pl_loader_config_set reads its text. */
typedef enum pl_option_type {
  PL_OPT_BOOL,      /* int 0 or 1; text 1/0, true/false, yes/no, on/off */
  PL_OPT_INT,       /* int; text: decimal digits */
  PL_OPT_U32,       /* uint32_t; text: decimal digits or "max" */
  PL_OPT_U64,       /* uint64_t; text: decimal digits or "max" */
  PL_OPT_BYTES,     /* uint64_t; text: digits with an optional K, M, G or T
                       (powers of 1024) suffix, or "max" / "off" */
  PL_OPT_REAL,      /* double; text: a finite decimal number */
  PL_OPT_DEVICE,    /* pl_device_kind; text: auto, cpu, cuda or cuda:N (which
                       also sets device_index) */
  PL_OPT_LOG_LEVEL, /* pl_log_level; text: debug, info, warn or error */
  PL_OPT_AUTO_INT,  /* int; text: decimal digits, or auto (PL_AUTO, -1) */
  PL_OPT_DECODE     /* pl_decode_mode; text: cpu, gpu or auto */
} pl_option_type;

typedef struct pl_loader_config {
  size_t struct_size; /* sizeof(pl_loader_config): set by _init */

  /* The options of PL_OPTION_MAP, which describes each. */
  uint32_t batch_size;
  int shuffle;
  uint64_t seed;
  int drop_last;
  int num_workers;
  int prefetch;
  pl_device_kind device;
  int device_index;
  int pin_memory;
  int non_blocking;
  uint64_t pinned_budget;     /* the files count too, with direct_copy: a
                                 budget too small for them turns it off, and
                                 the log says why (docs/gpu-engine.md) */
  uint64_t max_batch_buffers;
  int direct_copy;
  uint64_t copy_chunk_bytes;
  uint32_t rank; /* epochs' global orders split as DistributedSampler does */
  uint32_t world_size;
  uint64_t epoch;
  double timeout_s; /* a sample read slower than this is stuck: the batch
                       fails with PL_TIMEOUT while the consumer waits for
                       it, and while every worker is stuck each
                       pl_loader_next returns PL_TIMEOUT ("all N workers
                       are stuck") instead of waiting; the other workers
                       go on loading. A stuck callback is never
                       interrupted: its worker stays in it, and
                       pl_loader_destroy detaches it after timeout_s (see
                       there). 0 waits forever. Needs num_workers >= 1
                       (PL_INVALID_ARGUMENT otherwise: with no workers
                       the read runs in the caller's own thread) */

  pl_log_fn log; /* NULL: messages are dropped */
  void *log_user;
  pl_log_level log_level;

  /* New fields are only ever appended here: a caller built against an older
   * header passes its smaller struct_size, and pl_loader_create gives the
   * fields past it their defaults. */
  int timings;             /* issue 15: see PL_OPTION_MAP and docs/report.md */
  double cpu_budget;
  uint32_t replay_batches;
  uint64_t replay_after;

  /* Per-sample transforms (see "transforms" above); copied at create, so
   * the array may be freed after pl_loader_create. Default none. */
  const pl_transform *transforms;
  int num_transforms;

  /* Orders from the caller only (a sampler of its own): the loader's own
   * order is never used, so that no worker reads a batch the caller will
   * not take. At create and after pl_loader_set_epoch the stream is an
   * explicit epoch of no batches (PL_END_OF_EPOCH at once) until
   * pl_loader_set_order gives one; pl_loader_load_state is refused. */
  int explicit_order;

  /* 1 (default): a failed batch (pl_loader_next returned its error) ends
   * its epoch. 0: only that batch is lost and the epoch goes on, as an
   * iterator of torch's DataLoader goes on past a batch that raised. */
  int error_ends_epoch;

  /* Image folders' JPEG decoding (pl_decode_mode). With gpu or auto the
   * nvJPEG library is looked for at create: the file PL_NVJPEG_LIB names,
   * then libnvjpeg.so.13 / libnvjpeg.so on the library path. */
  pl_decode_mode decode;
} pl_loader_config;

/* num_workers / prefetch PL_AUTO ("auto"): tuned at run time from measured
 * stalls and CPU use, within cpu_budget; each change goes to the log with
 * its reason (docs/report.md). */
#define PL_AUTO (-1)

/* The smallest struct_size pl_loader_create accepts: the first published
 * layout ends with log_level. */
#define PL_LOADER_CONFIG_MIN_SIZE \
  (offsetof(pl_loader_config, log_level) + sizeof(pl_log_level))

/* Defaults, as PL_OPTION_MAP gives them; log and log_user NULL. */
PL_API void pl_loader_config_init(pl_loader_config *cfg);

/* One option of PL_OPTION_MAP, for tools and bindings. */
typedef struct pl_option_info {
  const char *name;    /* "batch_size": the pl_loader_config field */
  pl_option_type type;
  const char *doc;     /* one line */
  const char *values;  /* DEVICE, LOG_LEVEL: "auto|cpu|cuda|cuda:N"; else
                          NULL */
  /* Integer, BOOL, DEVICE and LOG_LEVEL options (enums as their values). */
  uint64_t def, min, max;
  /* REAL options; for the others, the integer range as doubles. */
  double def_real, min_real, max_real;
} pl_option_info;

/* The number of options; option i (NULL unless 0 <= i < count), in the
 * table's order, valid for the program's life; the index of `name` or -1. */
PL_API int pl_option_count(void);
PL_API const pl_option_info *pl_option_info_at(int i);
PL_API int pl_option_find(const char *name);

/* Sets option `name` of cfg from text, as a command line or a binding has
 * it ("256", "64M", "cuda:1", "true"; see pl_option_type), range-checked.
 * Text a person would not mean as a number is refused (" 1", "+1", "1e3"
 * for an integer, "0x10"). Errors name the option and its range:
 * "batch_size must be in [1, 4294967295], got 0"; an unknown name says
 * "unknown option 'x'". cfg is left unchanged on error. */
PL_API pl_status pl_loader_config_set(pl_loader_config *cfg, const char *name,
                                      const char *value, pl_error *err);

/* Every option of cfg against its range in the table, and rank below
 * world_size: the checks pl_loader_create makes before it looks at the
 * dataset (cfg's struct_size is checked first, as there). The error names
 * the option and its range. Thread-safe. */
PL_API pl_status pl_loader_config_check(const pl_loader_config *cfg,
                                        pl_error *err);

/* Option `name` of cfg as text that pl_loader_config_set accepts ("1",
 * "auto", "0.5"), into buf (NUL-terminated, at most len bytes). */
PL_API pl_status pl_loader_config_get(const pl_loader_config *cfg,
                                      const char *name, char *buf, size_t len,
                                      pl_error *err);

/* Sharding from the launchers' environment: torchrun's RANK, WORLD_SIZE
 * and LOCAL_RANK, or MPI's OMPI_COMM_WORLD_* / PMI_RANK / PMI_SIZE.
 *
 * The rule, field by field: a field the caller set explicitly (named in
 * `keep`, PL_KEEP_*) wins over the environment.
 *   - Neither rank nor world_size kept: both come from the environment when
 *     set (else they stay as cfg has them).
 *   - world_size kept, rank not: the environment's rank is taken when the
 *     environment's world size agrees with cfg->world_size (or is not set);
 *     when it disagrees, PL_INVALID_ARGUMENT naming both: under torchrun,
 *     an explicit world_size = 2 with WORLD_SIZE = 2 and RANK = 1 loads
 *     rank 1's shard, not rank 0's.
 *   - rank kept, world_size not: the environment's world size is taken.
 *   - both kept: the environment is not read for them.
 * device_index comes from LOCAL_RANK unless PL_KEEP_DEVICE_INDEX.
 * Sharding taken from the environment is announced once through cfg's log
 * hook (INFO): "sharding from the environment: rank 1 of 2 (RANK,
 * WORLD_SIZE)". A variable that is set but not a plain decimal number, or a
 * rank not below the world size, is PL_INVALID_ARGUMENT naming the
 * variables. cfg is left unchanged on error. */
#define PL_KEEP_RANK 1u
#define PL_KEEP_WORLD_SIZE 2u
#define PL_KEEP_DEVICE_INDEX 4u
PL_API pl_status pl_loader_config_shard_env(pl_loader_config *cfg,
                                            unsigned keep, pl_error *err);

/* pl_loader_config_shard_env(cfg, 0, err): everything from the environment
 * where it is set. */
PL_API pl_status pl_loader_config_from_env(pl_loader_config *cfg,
                                           pl_error *err);

typedef struct pl_loader pl_loader;
typedef struct pl_batch pl_batch;

/* Validates the configuration (every option against its range in
 * PL_OPTION_MAP; cfg->struct_size between PL_LOADER_CONFIG_MIN_SIZE and
 * sizeof(pl_loader_config)), picks the device, starts the workers. cfg may
 * be NULL for the defaults. The loader keeps a reference to ds. */
PL_API pl_status pl_loader_create(pl_dataset *ds, const pl_loader_config *cfg,
                                  pl_loader **out, pl_error *err);

/* Stops the workers (abandoning a partly loaded epoch) and frees the loader.
 * Batches still held stay valid until released: the memory pool is freed
 * when the last of them is released. Accepts NULL.
 *
 * Each worker finishes the sample it is reading. With timeout_s set, a
 * worker still inside a callback timeout_s later is detached instead of
 * joined, so destroy returns in bounded time: the thread keeps a reference
 * to the loader's memory and the dataset (so both stay valid) and exits as
 * soon as its callback returns; the callback's user data must stay valid
 * until then (the dataset's free_user runs when the last reference goes).
 * The process can exit meanwhile. With timeout_s 0 destroy waits for every
 * callback to return.
 *
 * Fork: a loader belongs to the process that created it. In a forked
 * child, every call on an inherited loader or batch returns PL_BAD_STATE
 * ("this loader was created in process P; a forked child cannot use it:
 * create a new loader"), pl_batch_release does nothing, and
 * pl_loader_destroy frees only the handle (the rest is the parent's: its
 * threads and locks do not exist in the child). Datasets may be used in a
 * child, and a new loader created there works. */
PL_API void pl_loader_destroy(pl_loader *ld);

/* Batches per epoch for this rank, and the samples they hold. */
PL_API uint64_t pl_loader_num_batches(const pl_loader *ld);
PL_API uint64_t pl_loader_num_samples(const pl_loader *ld);

/* The next batch, in order. At the end of an epoch returns PL_END_OF_EPOCH
 * once (with *out = NULL); the following call begins the next epoch. A
 * failed sample returns its error and ends the epoch: the following call
 * begins the next epoch (with error_ends_epoch 0 it returns the batch after
 * the failed one). PL_EXHAUSTED: every batch buffer the pool may have
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

/* An order given by the caller (a Python sampler, a batch sampler): make
 * the next pl_loader_next begin `epoch` made of exactly these batches,
 * batch k being indices[starts[k] .. starts[k+1]) (nbatches + 1 starts,
 * starts[0] = 0, each batch 1 to batch_size samples, each index below the
 * dataset's length). The loader copies the arrays. No sharding is applied
 * (the caller's order is this rank's). The stream ends with this epoch
 * (pl_loader_next returns PL_END_OF_EPOCH after its last batch, and again
 * after that) unless another explicit epoch is queued after it
 * (pl_loader_queue_order) or the stream is restarted (set_order,
 * set_epoch, load_state). State blobs cannot describe such an epoch:
 * pl_loader_save_state fails during it. */
PL_API pl_status pl_loader_set_order(pl_loader *ld, uint64_t epoch,
                                     const uint64_t *indices,
                                     const uint64_t *starts,
                                     uint64_t nbatches, pl_error *err);

/* The explicit epoch after the current one, given before the current one
 * is consumed, so that workers go on into it instead of waiting at the
 * epoch's end: its batches follow the current explicit epoch's in the same
 * stream (after its PL_END_OF_EPOCH), filled as the prefetch depth allows.
 * The arrays are as in pl_loader_set_order; neither epoch may be empty.
 * `epoch` must be the one after the stream's current explicit epoch; one
 * epoch may be queued at a time, and queueing the next one, once every
 * batch before the queued epoch has been taken, drops the epoch before it.
 * PL_BAD_STATE: the stream is not an explicit epoch, or an epoch is queued
 * already and the consumer has not reached it. A caller who finds the
 * queued epoch unwanted restarts the stream (pl_loader_set_order): the
 * batches already filled are discarded. */
PL_API pl_status pl_loader_queue_order(pl_loader *ld, uint64_t epoch,
                                       const uint64_t *indices,
                                       const uint64_t *starts,
                                       uint64_t nbatches, pl_error *err);

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

/* Where the time goes, stage by stage (config.timings). Steady state: sums
 * run from the first batch handed out (startup_s is the wait for it) to the
 * last, or to the start of the replay (replay_batches). Worker stages are
 * summed over the workers; a worker's time is idle, waiting for a buffer,
 * reading, transforming or staging. Fields are only ever added at the end;
 * pl_loader_timings_get writes the first `size` bytes (pass sizeof *out),
 * so that a caller built against an older header keeps working. */
typedef struct pl_loader_timings {
  double wall_s;          /* steady state: first batch out to the last */
  double startup_s;       /* from the first pl_loader_next to its batch */
  uint64_t batches;       /* loaded batches handed out in wall_s */
  uint64_t samples;
  int workers;            /* active workers now (PL_AUTO: tuned) */
  int worker_threads;     /* threads started; those beyond `workers` park */
  int prefetch;           /* depth now (PL_AUTO: tuned) */
  int cpus;               /* cores this process may use (affinity, cgroup) */
  double cpu_budget;      /* cores the workers may use (PL_AUTO workers) */
  double read_s;          /* workers reading and decoding samples */
  double transform_s;     /* host transforms (0 while there are none) */
  double buffer_wait_s;   /* workers with a job to do but no free batch
                             buffer (the consumer holds them) */
  double stage_s;         /* workers getting a staging buffer and queueing
                             copies (CUDA: waits for the copy engine) */
  double idle_s;          /* workers with nothing to do: prefetch is full */
  double copy_s;          /* device time of host-to-device copies */
  uint64_t bytes_copied;  /* in those copies */
  double device_transform_s; /* device transforms (0 while there are none) */
  double consumer_wait_s; /* the consumer inside pl_loader_next */
  double consumer_hold_s; /* summed: batch handed out -> released */
  uint64_t batches_released;
  double link_bytes_per_s; /* host-to-device rate of a pinned copy measured
                              at create (CUDA); 0: unknown */
  uint64_t replayed;      /* cached batches handed out again */
  double replay_s;        /* wall time of the replay, first to last */
  double replay_wait_s;   /* consumer waits during the replay */
  double process_cpu_s;   /* CPU time of the whole process in wall_s */
  double worker_process_cpu_s; /* and of the dataset's worker processes
                                  (pl_dataset_set_worker_cpu; 0: none) */
  /* Image folders with decode gpu or auto, since create (0 otherwise). */
  int decode_gpu;              /* 1: the GPU path is open */
  uint64_t decode_cpu_images;  /* decoded on the CPU, fallbacks included */
  uint64_t decode_gpu_images;  /* decoded on the GPU */
  uint64_t decode_not_gpu;     /* not for the GPU: PNG, progressive, CMYK */
  uint64_t decode_gpu_failed;  /* refused by nvJPEG, decoded on the CPU */
  double decode_cpu_s;         /* CPU-path time, summed over workers */
  double decode_gpu_s;         /* GPU calls, begin to end, summed */
  double decode_gpu_share;     /* the GPU's share of GPU-able JPEGs now */
} pl_loader_timings;

PL_API void pl_loader_timings_get(const pl_loader *ld, pl_loader_timings *out,
                                  size_t size);

/* The bottleneck report: which stage bounds throughput and by how much,
 * each line with the measurement it rests on. Text, or a JSON object with
 * PL_REPORT_JSON ({"bound": "consumer" | "workers" | "copy" | "buffers" |
 * "prefetch" | "device_transforms" | "unknown", "findings": [...], ...}).
 * *len is the buffer's size on entry and the length needed (without the
 * NUL) on return; PL_INVALID_ARGUMENT when buf is too small (buf NULL
 * asks for the size; while the loader runs the numbers, and so the size,
 * may still change: allow a margin). Thread-safe. */
#define PL_REPORT_JSON 1
PL_API pl_status pl_loader_report(const pl_loader *ld, char *buf, size_t *len,
                                  int flags, pl_error *err);

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
/* The job stream the batch came from: a number that changes whenever
 * set_epoch, set_order or load_state restart the loader's stream, so that
 * (stream, epoch, index) names one fill (what a pl_batch_info said). */
PL_API uint64_t pl_batch_stream(const pl_batch *b);
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
