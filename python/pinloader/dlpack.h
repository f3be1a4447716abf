/*
 * The DLPack data structures, written from the DLPack specification
 * (https://dmlc.github.io/dlpack/latest/c_api.html, dlpack.h v1.0) so that
 * the extension needs no third-party header. Only what pinloader produces
 * is here: the ABI of these structs is fixed by the spec and must not change.
 */
#ifndef PINLOADER_DLPACK_H
#define PINLOADER_DLPACK_H

#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

/* DLManagedTensorVersioned.flags bits. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Stored as int32 in DLDevice (a C enum is int-sized on every ABI we use,
 * the spec declares the field as this enum type). */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;

typedef struct {
  uint8_t code;   /* a DLDataTypeCode */
  uint8_t bits;   /* bits per lane: 8, 16, 32, 64 */
  uint16_t lanes; /* 1 for scalars */
} DLDataType;

typedef struct {
  void *data; /* for CUDA: a device pointer */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;   /* ndim entries */
  int64_t *strides; /* ndim entries, in elements; NULL = compact row-major */
  uint64_t byte_offset;
} DLTensor;

/* The unversioned (pre-1.0) managed tensor: PyCapsule name "dltensor",
 * renamed "used_dltensor" by the consumer that takes ownership. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* DLPack 1.0: PyCapsule name "dltensor_versioned", renamed
 * "used_dltensor_versioned" when consumed. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif /* PINLOADER_DLPACK_H */
