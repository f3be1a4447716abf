/* A data file's bytes in memory, read-only: memory-mapped, or (for a name
 * ending in .gz) decompressed once at open. Sources read samples with memcpy
 * from `data`; nothing goes through stdio after open.
 *
 * Only regular files open: anything else (a FIFO, a device, a directory)
 * is refused before a byte is read, and the open itself cannot block
 * (O_NONBLOCK). A file whose size reads 0 but that has bytes (/proc,
 * sysfs) is refused too. A mapping is registered with map_guard.h: a read
 * of `data` must run under a guard, since the file may shrink.
 *
 * A pl_file_map is immutable once open and may be read from any thread. */
#ifndef PL_FILE_MAP_H
#define PL_FILE_MAP_H

#include "core/common.h"

/* The most a .gz file may decompress to unless the caller says otherwise;
 * the machine's memory (physical pages, and the cgroup's memory.max where
 * readable) lowers it further at open. */
#define PL_GZ_MAX_BYTES (64ull << 30)

/* What a source knows about its own header: called while a .gz file is
 * being decompressed, each time more bytes exist (`have` of them at
 * `head`). Returns an error as soon as the bytes seen are wrong (a bad
 * magic number fails after 4 bytes, not after the whole file), sets
 * *total to the size the header declares once it can (0: not yet), and
 * decompression then stops at that size (a file that decompresses to
 * more fails at once, naming both sizes). */
typedef pl_status (*pl_file_expect_fn)(void *user, const char *path,
                                       const uint8_t *head, uint64_t have,
                                       uint64_t *total, pl_error *err);

typedef struct pl_file_map_opts {
  uint64_t max_gz_bytes; /* 0: PL_GZ_MAX_BYTES */
  pl_file_expect_fn expect; /* may be NULL */
  void *user;
} pl_file_map_opts;

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
 * max_gz_bytes (0: PL_GZ_MAX_BYTES), and never above the machine's memory. */
pl_status pl_file_map_open_limit(const char *path, uint64_t max_gz_bytes,
                                 pl_file_map *out, pl_error *err);

/* As pl_file_map_open with options (NULL: the defaults). */
pl_status pl_file_map_open_opts(const char *path, const pl_file_map_opts *o,
                                pl_file_map *out, pl_error *err);

/* The most a .gz may decompress to on this machine: physical memory, or
 * the memory limit of this process's cgroup (v2 memory.max, v1
 * memory.limit_in_bytes) if lower. */
uint64_t pl_file_map_memory_limit(void);

/* Releases the mapping or buffer; accepts a zeroed map. */
void pl_file_map_close(pl_file_map *m);

/* Whether `path` names a gzip file (ends in ".gz"). */
bool pl_file_map_is_gz(const char *path);

#endif /* PL_FILE_MAP_H */
