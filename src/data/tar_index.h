/* The members of a POSIX tar file, grouped into WebDataset samples.
 *
 * A tar is 512-byte blocks: a header block per member (name, octal size,
 * type, checksum), then the member's bytes padded to a block. Read here:
 * v7 and ustar headers (ustar's 155-byte prefix joined to the name), GNU
 * long names (type 'L': the next member's name is this one's data), pax
 * extended headers (type 'x': "LEN path=..." and "LEN size=..." records for
 * the next member), GNU base-256 sizes. Global pax headers ('g'),
 * directories, links and other special members are skipped. The archive
 * ends at a zero block or at the end of the bytes; a header cut short, a
 * bad checksum or a member that runs past the end is PL_FORMAT naming the
 * shard and the offset.
 *
 * Samples follow WebDataset: a member's key is its path up to the first
 * '.' of its last component, its extension the rest ("a/0001.seg.png":
 * key "a/0001", extension "seg.png"); consecutive members with one key
 * form one sample. Members without a '.' are not part of any sample.
 *
 * An index is immutable once built and may be read from any thread. */
#ifndef PL_TAR_INDEX_H
#define PL_TAR_INDEX_H

#include "core/common.h"

typedef struct pl_tar_member {
  uint64_t offset; /* of the member's bytes in the tar */
  uint64_t size;
  uint32_t key;    /* byte offset of the key in names */
  uint32_t ext;    /* byte offset of the extension in names */
} pl_tar_member;

typedef struct pl_tar_index {
  uint64_t nmembers;
  pl_tar_member *members; /* in tar order, sample members only */
  uint64_t nsamples;
  uint64_t *first;        /* nsamples + 1: sample i's members are
                             [first[i], first[i + 1]) */
  char *names;            /* NUL-terminated keys and extensions */
  uint64_t names_len;
} pl_tar_index;

/* Reads `size` bytes of a tar (`shard` names it in messages). */
pl_status pl_tar_index_build(const uint8_t *data, uint64_t size,
                             const char *shard, pl_tar_index *out,
                             pl_error *err);

/* The index as bytes (*buf malloc'ed), tagged with `tag` (what the shard
 * was when indexed: its size and mtime, or an URL's ETag and length), and
 * back: a cache whose tag differs, or that is damaged, is PL_FORMAT (the
 * caller then rebuilds). */
pl_status pl_tar_index_save(const pl_tar_index *ix, const char *tag,
                            uint8_t **buf, uint64_t *len, pl_error *err);
pl_status pl_tar_index_load(const uint8_t *buf, uint64_t len, const char *tag,
                            pl_tar_index *out, pl_error *err);

void pl_tar_index_free(pl_tar_index *ix);

/* Key and extension of member m. */
static inline const char *pl_tar_key(const pl_tar_index *ix, uint64_t m) {
  return ix->names + ix->members[m].key;
}
static inline const char *pl_tar_ext(const pl_tar_index *ix, uint64_t m) {
  return ix->names + ix->members[m].ext;
}

#endif /* PL_TAR_INDEX_H */
