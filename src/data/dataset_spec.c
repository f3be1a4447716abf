/* Dataset specs, as the CLI's --dataset takes them, and pl_dataset_open,
 * which turns a kind, files and "key=value&..." options into a source:
 *   idx:IMAGES,LABELS
 *   cifar10:FILE[,FILE...]
 *   tokens:FILE[,FILE...]?context=T[&samples=N][&stride=S][&dtype=D][&format=F]
 *   npy:FILE.npy[,FILE.npy...]   npy:FILE.npz
 *   images:ROOT?size=224[&train=0][&scale=A:B][&ratio=A:B][&flip_p=P]...
 *   shards:A.tar[,B.tar|URL|PATTERN...]?fields=image:jpg,label:cls[&size=224]...
 * The kind ends at the first ':', the options begin at the last '?'; the
 * files between are split on ',' (so paths may hold ':' but not ',' or
 * '?'; the C and Python APIs take paths as a list, without these limits).
 * Parsed strictly: no empty paths, no spaces trimmed, unknown options
 * refused. */
#include "data/dataset.h"
#include "data/dataset_options.h"

#include <stdlib.h>
#include <string.h>

#define SPEC_USAGE                                                         \
  "(want idx:IMAGES,LABELS, cifar10:FILE[,FILE...], "                      \
  "tokens:FILE[,FILE...]?context=T, npy:FILE[,FILE...], images:ROOT or "   \
  "shards:TAR[,TAR...])"

#define TOKENS_KEYS "context samples stride dtype format"
/* flip and dct: the deprecated spellings of flip_p and dct_scaling (the
 * names of pl_image_options and of Python's ImageFolder), still taken. */
#define IMAGES_KEYS                                                        \
  "size train scale ratio flip_p resize dct_scaling crop_field on_error "  \
  "flip dct"

/* Splits `list` (modified in place) on ','; *paths is malloc'ed. */
static pl_status split_paths(const char *spec, char *list, char ***paths,
                             int *n, pl_error *err) {
  int count = 1;
  for (const char *p = list; *p; p++)
    count += *p == ',';
  char **v = calloc((size_t)count, sizeof *v);
  if (!v)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  for (int i = 0; i < count; i++) {
    v[i] = list;
    char *comma = strchr(list, ',');
    if (comma) {
      *comma = '\0';
      list = comma + 1;
    }
    if (!v[i][0]) {
      free(v);
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "dataset spec '%s': path %d is empty " SPEC_USAGE,
                       spec, i + 1);
    }
  }
  *paths = v;
  *n = count;
  return PL_OK;
}

static pl_status tokens_from_options(const pl_options *o,
                                     pl_tokens_options *t, pl_error *err) {
  static const pl_dtype dtypes[] = {PL_INT64, PL_INT32, PL_UINT32,
                                    PL_UINT16};
  int dt = 0, fmt = 0;
  PL_TRY(pl_options_u64(o, "context", UINT32_MAX, &t->context, err));
  PL_TRY(pl_options_u64(o, "samples", UINT64_MAX, &t->samples, err));
  PL_TRY(pl_options_u64(o, "stride", UINT32_MAX, &t->stride, err));
  PL_TRY(pl_options_choice(o, "dtype", "int64 int32 uint32 uint16", &dt,
                           err));
  PL_TRY(pl_options_choice(o, "format", "auto raw16 raw32 llmc", &fmt, err));
  t->dtype = dtypes[dt];
  t->format = (pl_tokens_format)fmt;
  if (!pl_options_get(o, "context"))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "tokens: the context option is required "
                     "(tokens:FILE?context=1024)");
  return PL_OK;
}

/* The key an option was given under: its name, or its deprecated alias;
 * both at once are refused. */
static pl_status key_of(const pl_options *o, const char *name,
                        const char *alias, const char **key, pl_error *err) {
  *key = pl_options_get(o, alias) ? alias : name;
  if (pl_options_get(o, alias) && pl_options_get(o, name))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s: options '%s' and '%s' (its deprecated spelling) "
                     "both given",
                     o->kind, name, alias);
  return PL_OK;
}

static pl_status images_from_options(const pl_options *o,
                                     pl_image_options *m, pl_error *err) {
  uint64_t size = m->size, resize = m->resize, train = 1, dct = 1, crop = 0;
  int on_error = 0;
  const char *flip_key, *dct_key;
  PL_TRY(key_of(o, "flip_p", "flip", &flip_key, err));
  PL_TRY(key_of(o, "dct_scaling", "dct", &dct_key, err));
  PL_TRY(pl_options_u64(o, "size", 65535, &size, err));
  PL_TRY(pl_options_u64(o, "train", 1, &train, err));
  PL_TRY(pl_options_u64(o, "resize", 65535, &resize, err));
  PL_TRY(pl_options_u64(o, dct_key, 1, &dct, err));
  PL_TRY(pl_options_u64(o, "crop_field", 1, &crop, err));
  PL_TRY(pl_options_pair(o, "scale", &m->scale_min, &m->scale_max, err));
  PL_TRY(pl_options_pair(o, "ratio", &m->ratio_min, &m->ratio_max, err));
  PL_TRY(pl_options_double(o, flip_key, 0, 1, &m->flip_p, err));
  PL_TRY(pl_options_choice(o, "on_error", "fail skip", &on_error, err));
  m->size = (uint32_t)size;
  m->resize = (uint32_t)resize;
  m->train = (int)train;
  m->dct_scaling = (int)dct;
  m->crop_field = (int)crop;
  m->on_error = (pl_image_on_error)on_error;
  return PL_OK;
}

/* ---- shards (tar shards: source_shards.c): the image keys, plus its own.
 * One block, with the two dispatch lines marked "shards" below. */
#define SHARDS_KEYS                                                        \
  "size train scale ratio flip_p resize dct_scaling fields cache "         \
  "cache_bytes max_bytes readahead retries backoff_ms timeout_ms "         \
  "shuffle_buffer prefetch"

static pl_status shards_from_options(const pl_options *o,
                                     pl_shards_options *out, pl_error *err) {
  pl_shards_options so = *out;
  uint64_t cache = so.cache_bytes, maxb = so.max_bytes, retries = 4;
  uint64_t backoff = so.backoff_ms, timeout = so.timeout_ms;
  uint64_t prefetch = so.prefetch;
  int ra = 0;
  PL_TRY(images_from_options(o, &so.image, err));
  PL_TRY(pl_options_u64(o, "cache_bytes", UINT64_MAX, &cache, err));
  PL_TRY(pl_options_u64(o, "shuffle_buffer", UINT64_MAX, &so.shuffle_buffer,
                        err));
  PL_TRY(pl_options_u64(o, "max_bytes", UINT32_MAX, &maxb, err));
  PL_TRY(pl_options_u64(o, "retries", 1000, &retries, err));
  PL_TRY(pl_options_u64(o, "backoff_ms", UINT32_MAX, &backoff, err));
  PL_TRY(pl_options_u64(o, "timeout_ms", UINT32_MAX, &timeout, err));
  PL_TRY(pl_options_choice(o, "readahead", "whole ranges", &ra, err));
  PL_TRY(pl_options_u64(o, "prefetch", 1u << 16, &prefetch, err));
  so.prefetch = (uint32_t)prefetch;
  so.fields = pl_options_get(o, "fields");
  so.cache_dir = pl_options_get(o, "cache");
  so.cache_bytes = cache, so.max_bytes = (uint32_t)maxb;
  so.retries = (int)retries, so.backoff_ms = (uint32_t)backoff;
  so.timeout_ms = (uint32_t)timeout;
  so.readahead = (pl_shards_readahead)ra;
  *out = so;
  return PL_OK;
}

/* pl_dataset_open_shards owns so's fetcher: freed here on a bad option. */
static pl_status open_shards_with(const char *const *paths, int n,
                                  const pl_options *o, pl_shards_options so,
                                  pl_dataset **out, pl_error *err) {
  pl_status s = shards_from_options(o, &so, err);
  if (s == PL_OK)
    return pl_dataset_open_shards(paths, n, &so, out, err);
  if (so.fetch_free)
    so.fetch_free(so.fetch_user);
  return s;
}

static pl_status open_shards(const char *const *paths, int n,
                             const pl_options *o, pl_dataset **out,
                             pl_error *err) {
  pl_shards_options so;
  pl_shards_options_init(&so);
  return open_shards_with(paths, n, o, so, out, err);
}

pl_status pl_dataset_open_shards_fetch(const char *const *paths, int npaths,
                                       const char *options,
                                       pl_shards_fetch_fn fetch,
                                       void *fetch_user,
                                       void (*fetch_free)(void *),
                                       pl_dataset **out, pl_error *err) {
  pl_shards_options so;
  pl_shards_options_init(&so);
  so.fetch = fetch, so.fetch_user = fetch_user, so.fetch_free = fetch_free;
  pl_options o;
  pl_status s = pl_options_parse("shards", options, SHARDS_KEYS, &o, err);
  if (s == PL_OK) {
    s = open_shards_with(paths, npaths, &o, so, out, err);
    pl_options_free(&o);
  } else if (fetch_free) {
    fetch_free(fetch_user); /* the open owns it, also when it fails */
  }
  return s;
}
/* ---- end of shards */

static pl_status open_with_options(const char *kind, const char *const *paths,
                                   int n, const pl_options *o,
                                   pl_dataset **out, pl_error *err) {
  if (!strcmp(kind, "tokens")) {
    pl_tokens_options t;
    pl_tokens_options_init(&t);
    PL_TRY(tokens_from_options(o, &t, err));
    return pl_dataset_open_tokens(paths, n, &t, out, err);
  }
  if (!strcmp(kind, "shards")) /* shards */
    return open_shards(paths, n, o, out, err);
  if (n != 1)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images takes 1 path (a folder or a list file), got %d",
                     n);
  pl_image_options m;
  pl_image_options_init(&m);
  PL_TRY(images_from_options(o, &m, err));
  return pl_dataset_open_images(paths[0], &m, out, err);
}

static pl_status open_plain(const char *kind, const char *const *paths,
                            int n, pl_dataset **out, pl_error *err) {
  if (!strcmp(kind, "idx")) {
    if (n != 2)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "idx takes 2 files (images, labels), got %d", n);
    return pl_dataset_open_idx(paths[0], paths[1], out, err);
  }
  if (!strcmp(kind, "npy"))
    return pl_dataset_open_npy(paths, n, out, err);
  return pl_dataset_open_cifar10(paths, n, out, err);
}

pl_status pl_dataset_open(const char *kind, const char *const *paths,
                          int npaths, const char *options, pl_dataset **out,
                          pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!kind || !paths || npaths <= 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "a kind and at least one path are required");
  const char *keys = !strcmp(kind, "tokens")   ? TOKENS_KEYS
                     : !strcmp(kind, "images") ? IMAGES_KEYS
                     : !strcmp(kind, "shards") ? SHARDS_KEYS /* shards */
                                               : "";
  if (!keys[0] && strcmp(kind, "idx") && strcmp(kind, "cifar10") &&
      strcmp(kind, "npy"))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "unknown dataset kind '%s' " SPEC_USAGE, kind);
  if (!keys[0] && options && options[0])
    return pl_errorf(err, PL_INVALID_ARGUMENT, "%s takes no options",
                     kind);
  if (!keys[0])
    return open_plain(kind, paths, npaths, out, err);
  pl_options o;
  PL_TRY(pl_options_parse(kind, options, keys, &o, err));
  pl_status s = open_with_options(kind, paths, npaths, &o, out, err);
  pl_options_free(&o);
  return s;
}

static pl_status check_kind(const char *spec, const char *kind, bool files,
                            pl_error *err) {
  if (strcmp(kind, "idx") && strcmp(kind, "cifar10") &&
      strcmp(kind, "tokens") && strcmp(kind, "npy") && strcmp(kind, "images") &&
      strcmp(kind, "shards") /* shards */)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "dataset spec '%s': unknown kind '%s' " SPEC_USAGE, spec,
                     kind);
  if (!files)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "dataset spec '%s': no files after '%s:' " SPEC_USAGE,
                     spec, kind);
  return PL_OK;
}

pl_status pl_dataset_open_spec(const char *spec, pl_dataset **out,
                               pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!spec)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "dataset spec is NULL");
  const char *colon = strchr(spec, ':');
  if (!colon)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "dataset spec '%s': no 'KIND:' prefix " SPEC_USAGE,
                     spec);
  char *copy = strdup(spec);
  if (!copy)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  char *kind = copy, *list = copy + (colon - spec) + 1;
  copy[colon - spec] = '\0';
  char *q = strrchr(list, '?');
  const char *options = NULL;
  if (q) {
    *q = '\0';
    options = q + 1;
  }
  char **paths = NULL;
  int n = 0;
  pl_status s = check_kind(spec, kind, list[0] != '\0', err);
  if (s == PL_OK)
    s = split_paths(spec, list, &paths, &n, err);
  if (s == PL_OK) {
    s = pl_dataset_open(kind, (const char *const *)paths, n, options, out,
                        err);
    if (s != PL_OK)
      pl_error_prefix(err, "dataset spec '%s'", spec);
  }
  free(paths);
  free(copy);
  return s;
}
