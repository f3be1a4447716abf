/* A data file's bytes in memory, read-only: memory-mapped, or (for a name
 * ending in .gz) decompressed once at open. Sources read samples with memcpy
 * from `data`; nothing goes through stdio after open.
 *
 * A pl_file_map is immutable once open and may be read from any thread. */
#ifndef PL_FILE_MAP_H
#define PL_FILE_MAP_H

#include "core/common.h"

/* The most a .gz file may decompress to unless the caller says otherwise:
 * a guard against decompression bombs, well above any real dataset file. */
#define PL_GZ_MAX_BYTES (64ull << 30)

typedef struct pl_file_map {
  const uint8_t *data; /* size bytes; never NULL once open (even if empty) */
  uint64_t size;
  char *path; /* a copy of the path given, for messages */
  /* What close gives back: */
  void *mapping;
  size_t mapping_len;
  bool shared; /* mapped MAP_SHARED (else MAP_PRIVATE: see file_map.c) */
  void *owned; /* the decompressed bytes of a .gz file */
} pl_file_map;

/* Opens `path`. Errors: PL_IO for open/stat/mmap failures (message: the
 * path and strerror), PL_FORMAT for a corrupt or truncated gzip stream (the
 * path and the compressed offset) or one that decompresses to more than
 * PL_GZ_MAX_BYTES, PL_NO_MEMORY. On failure *out is zeroed. */
pl_status pl_file_map_open(const char *path, pl_file_map *out, pl_error *err);

/* As pl_file_map_open, with the decompressed size of a .gz limited to
 * max_gz_bytes (callers that know the size to expect pass it plus slack). */
pl_status pl_file_map_open_limit(const char *path, uint64_t max_gz_bytes,
                                 pl_file_map *out, pl_error *err);

/* Releases the mapping or buffer; accepts a zeroed map. */
void pl_file_map_close(pl_file_map *m);

/* Whether `path` names a gzip file (ends in ".gz"). */
bool pl_file_map_is_gz(const char *path);

#endif /* PL_FILE_MAP_H */
