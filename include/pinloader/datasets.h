/* pinloader/datasets.h: the sources, their options and sample reads.
 * Part of the public API: include <pinloader.h>, which includes this file
 * (its top describes objects, errors and threads). */
#ifndef PINLOADER_DATASETS_H
#define PINLOADER_DATASETS_H

#ifndef PINLOADER_H
#error "include <pinloader.h>, not pinloader/datasets.h"
#endif

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
  /* How far the loader is ahead of its consumer when this batch was
   * claimed: batches loaded that the consumer can take in its order
   * without waiting (from the one it takes next; those loaded behind one
   * still in work do not count), of at most `depth` (the prefetch
   * depth). Many loaded: the consumer is the slower side, and a
   * faster path that costs it something (decoding on its GPU) can wait;
   * none: the consumer waits for batches (with num_workers 0 the consumer
   * fills each batch when it wants it: 0). */
  uint32_t ready_ahead;
  uint32_t depth;
  /* Batches the consumer took since it last waited for one (UINT32_MAX:
   * it has not waited yet in this stream). A burst of batches ready at
   * once (one slow batch held the others back) is no lead while the
   * consumer waited a few batches ago. */
  uint32_t since_wait;
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

#endif /* PINLOADER_DATASETS_H */
