/* Token shards for language models: nanoGPT's raw .bin files and llm.c's
 * shards, read as windows of context + 1 tokens.
 *
 * llm.c's header (dev/data/data_common.py) is 256 little-endian int32:
 * [0] magic, [1] version, [2] token count; magic 20240520 with version 1
 * holds uint16 tokens (GPT-2), magic 20240801 with version 7 uint32 tokens
 * (Llama 3). A raw file is all tokens.
 *
 * Sample i is a window [start, start + T] of one shard: x = tokens
 * [start, start + T), y = [start + 1, start + T + 1). In stride mode the
 * windows of shard f are start = k * stride for every k that fits, counted
 * across shards in order. In random mode (samples > 0) each window start
 * is drawn uniformly from all (shard, start) positions of every shard, as
 * nanoGPT's get_batch draws torch.randint(len(data) - T), from (seed,
 * epoch, index): the same window for any worker count. */
#include "core/memcopy.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "data/file_map.h"
#include "data/sources/registry.h"

#include <stdlib.h>
#include <string.h>

#define LLMC_HEADER_BYTES 1024u
#define LLMC_MAGIC_U16 20240520u
#define LLMC_MAGIC_U32 20240801u
#define RNG_STREAM_TOKENS 0x746f6b656e73ull /* "tokens" */

typedef struct shard {
  pl_file_map map;
  const uint8_t *tokens;
  uint64_t ntok;
} shard;

typedef struct tokens_impl {
  uint64_t context, stride, samples;
  size_t elem;      /* bytes per token in the files: 2 or 4 */
  pl_dtype out;     /* delivered dtype */
  int nshards;
  shard *shards;
  uint64_t *first; /* nshards + 1 prefix sums: windows (stride mode) or
                      window start positions (random mode) per shard */
} tokens_impl;

void pl_tokens_options_init(pl_tokens_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->dtype = PL_INT64;
  o->format = PL_TOKENS_AUTO;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static bool has_llmc_magic(const pl_file_map *m) {
  if (m->size < LLMC_HEADER_BYTES)
    return false;
  uint32_t magic = le32(m->data);
  return magic == LLMC_MAGIC_U16 || magic == LLMC_MAGIC_U32;
}

static pl_status parse_llmc(shard *s, size_t *elem, pl_error *err) {
  const pl_file_map *m = &s->map;
  if (m->size < LLMC_HEADER_BYTES)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the file is %llu bytes, shorter than llm.c's "
                     "1024-byte header",
                     m->path, (unsigned long long)m->size);
  uint32_t magic = le32(m->data), version = le32(m->data + 4);
  int32_t count = (int32_t)le32(m->data + 8);
  if (magic == LLMC_MAGIC_U16 && version == 1)
    *elem = 2;
  else if (magic == LLMC_MAGIC_U32 && version == 7)
    *elem = 4;
  else if (magic == LLMC_MAGIC_U16 || magic == LLMC_MAGIC_U32)
    return pl_errorf(err, PL_FORMAT,
                     "%s: llm.c shard magic %u with version %u (want "
                     "20240520 version 1, or 20240801 version 7)",
                     m->path, magic, version);
  else
    return pl_errorf(err, PL_FORMAT,
                     "%s: bad llm.c magic %u (want 20240520 or 20240801)",
                     m->path, magic);
  uint64_t body = m->size - LLMC_HEADER_BYTES;
  if (count < 0 || (uint64_t)count * *elem != body)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the header says %d tokens (%lld bytes) but the "
                     "file has %llu bytes after the 1024-byte header",
                     m->path, count, (long long)count * (long long)*elem,
                     (unsigned long long)body);
  s->tokens = m->data + LLMC_HEADER_BYTES;
  s->ntok = (uint64_t)count;
  return PL_OK;
}

static pl_status parse_raw(shard *s, size_t elem, pl_error *err) {
  const pl_file_map *m = &s->map;
  if (m->size % elem)
    return pl_errorf(err, PL_FORMAT,
                     "%s: %llu bytes are not a whole number of %zu-byte "
                     "tokens",
                     m->path, (unsigned long long)m->size, elem);
  s->tokens = m->data;
  s->ntok = m->size / elem;
  return PL_OK;
}

static pl_status open_shard(const char *path, pl_tokens_format fmt,
                            shard *s, size_t *elem, pl_error *err) {
  PL_TRY(pl_file_map_open(path, &s->map, err));
  if (fmt == PL_TOKENS_LLMC ||
      (fmt == PL_TOKENS_AUTO && has_llmc_magic(&s->map)))
    return parse_llmc(s, elem, err);
  *elem = fmt == PL_TOKENS_RAW_U32 ? 4 : 2;
  return parse_raw(s, *elem, err);
}

/* Windows (stride mode) or window starts (random mode) in one shard. */
static uint64_t shard_units(const tokens_impl *t, const shard *s) {
  if (s->ntok < t->context + 1)
    return 0;
  uint64_t starts = s->ntok - t->context; /* start + T + 1 <= ntok */
  return t->samples ? starts : (starts - 1) / t->stride + 1;
}

/* The shard holding unit u: the last f with first[f] <= u. */
static int shard_of(const tokens_impl *t, uint64_t u) {
  return pl_part_of(t->first, t->nshards, u);
}

static const uint8_t *window_at(const tokens_impl *t, uint64_t index,
                                const pl_sample_ctx *ctx) {
  uint64_t u = index;
  if (t->samples) {
    pl_rng r = pl_rng_for(ctx->seed, ctx->epoch, index, RNG_STREAM_TOKENS);
    u = pl_rng_below(&r, t->first[t->nshards]);
  }
  int f = shard_of(t, u);
  uint64_t k = u - t->first[f];
  uint64_t start = t->samples ? k : k * t->stride;
  return t->shards[f].tokens + start * t->elem;
}

static uint32_t token_at(const uint8_t *p, size_t elem, uint64_t i) {
  const uint8_t *q = p + i * elem;
  return elem == 2 ? (uint32_t)q[0] | (uint32_t)q[1] << 8 : le32(q);
}

/* T tokens from p into dst as t->out. */
static void convert(const tokens_impl *t, const uint8_t *p, void *dst) {
  uint64_t n = t->context;
  bool little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
  if (little && pl_dtype_size(t->out) == t->elem) {
    memcpy(dst, p, n * t->elem); /* uint16/uint32/int32 as they are */
    return;
  }
  switch (t->out) {
  case PL_INT64: {
    int64_t *d = dst;
    for (uint64_t i = 0; i < n; i++)
      d[i] = token_at(p, t->elem, i);
    break;
  }
  case PL_UINT16: {
    uint16_t *d = dst;
    for (uint64_t i = 0; i < n; i++)
      d[i] = (uint16_t)token_at(p, t->elem, i);
    break;
  }
  default: { /* int32 / uint32 from uint16, or on a big-endian host */
    uint32_t *d = dst;
    for (uint64_t i = 0; i < n; i++)
      d[i] = token_at(p, t->elem, i);
    break;
  }
  }
}

static pl_status tokens_read(const pl_dataset *ds, uint64_t index,
                             const pl_sample_ctx *ctx, void *const *dst,
                             pl_error *err) {
  const tokens_impl *t = ds->impl;
  const uint8_t *w = window_at(t, index, ctx);
  convert(t, w, dst[0]);
  convert(t, w + t->elem, dst[1]);
  return PL_OK;
}

/* Views exist where the file's bytes are the field's bytes and the window
 * does not depend on the epoch (stride mode). */
static bool tokens_viewable(const tokens_impl *t) {
  return !t->samples && pl_dtype_size(t->out) == t->elem &&
         __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
}

static const void *tokens_view(const pl_dataset *ds, uint64_t index,
                               int field) {
  const tokens_impl *t = ds->impl;
  if (!tokens_viewable(t))
    return NULL;
  static const pl_sample_ctx none = {0, 0, NULL};
  return window_at(t, index, &none) + (field ? t->elem : 0);
}

static int tokens_regions(const pl_dataset *ds, int field, pl_region *out,
                          int max) {
  const tokens_impl *t = ds->impl;
  int n = 0;
  (void)field;
  if (!tokens_viewable(t))
    return 0;
  for (int f = 0; f < t->nshards; f++) {
    const pl_file_map *m = &t->shards[f].map;
    if (m->size == 0)
      continue;
    if (n < max)
      out[n] = (pl_region){m->data, m->size, PL_FILE_MAP_REGION(m)};
    n++;
  }
  return n;
}

static void tokens_destroy(void *p) {
  tokens_impl *t = p;
  if (!t)
    return;
  for (int f = 0; f < t->nshards; f++)
    pl_file_map_close(&t->shards[f].map);
  free(t->shards);
  free(t->first);
  free(t);
}

static const pl_dataset_vt tokens_vt = {
    .kind = "tokens",
    .read = tokens_read,
    .view = tokens_view,
    .regions = tokens_regions,
    .destroy_impl = tokens_destroy,
};

static pl_status check_options(const pl_tokens_options *o, pl_error *err) {
  if (o->struct_size != sizeof *o)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "tokens: options not initialised with "
                     "pl_tokens_options_init");
  if (o->context == 0 || o->context > ((uint64_t)1 << 31))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "tokens: context must be from 1 to 2^31 tokens, not "
                     "%llu",
                     (unsigned long long)o->context);
  if (o->dtype != PL_INT64 && o->dtype != PL_INT32 &&
      o->dtype != PL_UINT32 && o->dtype != PL_UINT16)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "tokens: dtype %s is not a token dtype (want int64, "
                     "int32, uint32 or uint16)",
                     pl_dtype_name(o->dtype));
  if ((unsigned)o->format > PL_TOKENS_LLMC)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "tokens: bad format %d",
                     (int)o->format);
  return PL_OK;
}

static pl_status open_shards(tokens_impl *t, const char *const *paths,
                             int npaths, pl_tokens_format fmt,
                             pl_error *err) {
  for (int f = 0; f < npaths; f++) {
    size_t elem = 0;
    if (!paths[f])
      return pl_errorf(err, PL_INVALID_ARGUMENT, "tokens: path %d is NULL",
                       f);
    t->nshards = f + 1; /* so that destroy closes it */
    PL_TRY(open_shard(paths[f], fmt, &t->shards[f], &elem, err));
    if (f > 0 && elem != t->elem)
      return pl_errorf(err, PL_FORMAT,
                       "%s has %zu-byte tokens but %s has %zu-byte tokens",
                       paths[f], elem, paths[0], t->elem);
    t->elem = elem;
  }
  return PL_OK;
}

static pl_status count_units(tokens_impl *t, const char *first_path,
                             pl_error *err) {
  t->first[0] = 0;
  for (int f = 0; f < t->nshards; f++)
    if (!pl_add_u64(t->first[f], shard_units(t, &t->shards[f]),
                    &t->first[f + 1]))
      return pl_errorf(err, PL_FORMAT, "tokens: too many windows");
  if (t->first[t->nshards] == 0)
    return pl_errorf(err, PL_FORMAT,
                     "%s%s: no shard has context + 1 = %llu tokens",
                     first_path, t->nshards > 1 ? " and the others" : "",
                     (unsigned long long)(t->context + 1));
  if (t->elem == 4 && t->out == PL_UINT16)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s: uint32 tokens cannot be delivered as uint16",
                     first_path);
  return PL_OK;
}

pl_status pl_dataset_open_tokens(const char *const *paths, int npaths,
                                 const pl_tokens_options *opt,
                                 pl_dataset **out, pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!paths || npaths <= 0 || !opt)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "tokens: options and at least one file are required");
  PL_TRY(check_options(opt, err));
  tokens_impl *t = calloc(1, sizeof *t);
  if (t) {
    t->shards = calloc((size_t)npaths, sizeof *t->shards);
    t->first = calloc((size_t)npaths + 1, sizeof *t->first);
  }
  if (!t || !t->shards || !t->first) {
    tokens_destroy(t);
    return pl_errorf(err, PL_NO_MEMORY, "out of memory opening tokens");
  }
  t->context = opt->context;
  t->stride = opt->stride ? opt->stride : opt->context;
  t->samples = opt->samples;
  t->out = opt->dtype;
  pl_status s = open_shards(t, paths, npaths, opt->format, err);
  if (s == PL_OK)
    s = count_units(t, paths[0], err);
  if (s == PL_OK) {
    pl_field fields[2] = {
        {.name = "x", .dtype = t->out, .ndim = 1, .shape = {(int64_t)t->context}},
        {.name = "y", .dtype = t->out, .ndim = 1, .shape = {(int64_t)t->context}},
    };
    uint64_t length = t->samples ? t->samples : t->first[t->nshards];
    s = pl_dataset_new(&tokens_vt, t, length, fields, 2, out, err);
  }
  if (s != PL_OK) {
    pl_error_path_from(err, paths, npaths);
    tokens_destroy(t);
  }
  return s;
}

static pl_status tokens_from_options(const pl_options *o, pl_tokens_options *t,
                                     pl_error *err) {
  static const pl_dtype dtypes[] = {PL_INT64, PL_INT32, PL_UINT32, PL_UINT16};
  int dt = 0, fmt = 0;
  PL_TRY(pl_options_u64(o, "context", UINT32_MAX, &t->context, err));
  PL_TRY(pl_options_u64(o, "samples", UINT64_MAX, &t->samples, err));
  PL_TRY(pl_options_u64(o, "stride", UINT32_MAX, &t->stride, err));
  PL_TRY(pl_options_choice(o, "dtype", "int64 int32 uint32 uint16", &dt, err));
  PL_TRY(pl_options_choice(o, "format", "auto raw16 raw32 llmc", &fmt, err));
  t->dtype = dtypes[dt];
  t->format = (pl_tokens_format)fmt;
  if (!pl_options_get(o, "context"))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "tokens: the context option is required "
                     "(tokens:FILE?context=1024)");
  return PL_OK;
}

pl_status pl_source_open_tokens(const char *const *paths, int npaths,
                                const pl_options *o, pl_dataset **out,
                                pl_error *err) {
  pl_tokens_options t;
  pl_tokens_options_init(&t);
  PL_TRY(tokens_from_options(o, &t, err));
  return pl_dataset_open_tokens(paths, npaths, &t, out, err);
}
