/* The source registry: one row per source that a kind name opens (the
 * CLI's --dataset, pl_dataset_open, Python's datasets). A row says the
 * kind, its usage line, the option keys it takes and its opener; the
 * spec parser, the CLI's help and the Python module read the rows, so a
 * new source is its own file (which defines its opener) and one row in
 * registry.c, with the opener's prototype below. */
#ifndef PL_SOURCES_REGISTRY_H
#define PL_SOURCES_REGISTRY_H

#include "data/dataset.h"
#include "data/dataset_options.h"

#include <stddef.h>

/* Opens the source on `paths` with the parsed options `o` (no options
 * given: an empty set). Checks the number of paths itself. */
typedef pl_status (*pl_source_opener)(const char *const *paths, int npaths,
                                      const pl_options *o, pl_dataset **out,
                                      pl_error *err);

typedef struct pl_source_row {
  pl_source_info info; /* kind, usage, keys, doc: the public view */
  pl_source_opener open;
} pl_source_row;

/* The row of `kind`, or NULL. */
const pl_source_row *pl_source_find(const char *kind);
/* "(want idx:IMAGES,LABELS, ... or images:ROOT)" into buf, for errors. */
const char *pl_source_want(char *buf, size_t n);

/* The openers, one per row (each in its source's file). */
pl_status pl_source_open_idx(const char *const *paths, int npaths,
                             const pl_options *o, pl_dataset **out,
                             pl_error *err);
pl_status pl_source_open_cifar10(const char *const *paths, int npaths,
                                 const pl_options *o, pl_dataset **out,
                                 pl_error *err);
pl_status pl_source_open_tokens(const char *const *paths, int npaths,
                                const pl_options *o, pl_dataset **out,
                                pl_error *err);
pl_status pl_source_open_npy(const char *const *paths, int npaths,
                             const pl_options *o, pl_dataset **out,
                             pl_error *err);
pl_status pl_source_open_images(const char *const *paths, int npaths,
                                const pl_options *o, pl_dataset **out,
                                pl_error *err);

/* The shards row's keys (also parsed by pl_dataset_open_shards_fetch). */
#define PL_SHARDS_KEYS                                                     \
  "size train scale ratio flip_p resize dct_scaling fields cache "         \
  "cache_bytes max_bytes readahead retries backoff_ms timeout_ms "         \
  "shuffle_buffer prefetch"
pl_status pl_source_open_shards(const char *const *paths, int npaths,
                                const pl_options *o, pl_dataset **out,
                                pl_error *err);

/* The images keys (size, train, scale, ...) of `o` into `m` (keys not
 * given keep m's values): the images source's, also read by shards. */
pl_status pl_source_image_options(const pl_options *o, pl_image_options *m,
                                  pl_error *err);

#endif /* PL_SOURCES_REGISTRY_H */
