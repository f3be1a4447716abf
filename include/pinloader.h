/*
 * pinloader: a parallel batch loader that collates samples into page-locked
 * host memory and copies them asynchronously to a GPU.
 *
 * The one header to include. Everything public is prefixed pl_ / PL_. The
 * parts after status and fields are in pinloader/ (as libuv keeps uv/),
 * included below in this order:
 *   pinloader/datasets.h    the sources, their options and sample reads
 *   pinloader/transforms.h  per-sample transforms of a batch's fields
 *   pinloader/loader.h      the loader, its options and its batches
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

/* ---------------------------------------------------------------- the parts */

#include "pinloader/datasets.h"
#include "pinloader/transforms.h"
#include "pinloader/loader.h"

#ifdef __cplusplus
}
#endif

#endif /* PINLOADER_H */
