/* pinloader/loader.h: the loader (options, create, next, state, timings)
 * and its batches.
 * Part of the public API: include <pinloader.h>, which includes this file
 * (its top describes objects, errors and threads). */
#ifndef PINLOADER_LOADER_H
#define PINLOADER_LOADER_H

#ifndef PINLOADER_H
#error "include <pinloader.h>, not pinloader/loader.h"
#endif

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
 * or ranks: it continues the same global sequence. Right after a failed
 * batch (until the next one is delivered) the position is that batch's
 * own, so a run restarted once the cause is mended retries it and loses
 * nothing. pl_loader_save_state with buf == NULL sets *len to the size
 * needed. */
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
  uint64_t decode_gpu_warming; /* auto: the GPU's share decoded on the CPU
                                  while nvJPEG was starting (in
                                  decode_cpu_images) */
  double decode_gpu_begin_s;   /* of decode_gpu_s, inside the call that
                                  queues the GPU's work (nvJPEG's host
                                  part): the worker's own share waits */
  uint64_t decode_ahead_batches; /* auto: batches whose share leaned to the
                                    CPU, the loader ahead of its consumer */
  uint64_t decode_gpu_in_place; /* of decode_gpu_images, written by the GPU
                                   straight into the batch's device memory
                                   (a loader on the decoder's device): no
                                   host round trip, not copied again */
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

#endif /* PINLOADER_LOADER_H */
