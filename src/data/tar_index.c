/* Tar headers to a member index; see tar_index.h for what is read. */
#include "data/tar_index.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK 512
#define MAX_NAME 65536 /* a long name or pax path longer than this: refused */
#define CACHE_MAGIC "PLTARIX1"

typedef struct builder {
  pl_tar_index ix;
  uint64_t mcap, scap, ncap;
} builder;

static bool grow(void **p, uint64_t *cap, uint64_t need, size_t elem) {
  if (need <= *cap)
    return true;
  uint64_t c = PL_MAX(*cap * 2, PL_MAX(need, 64));
  void *q = realloc(*p, (size_t)(c * elem));
  if (!q)
    return false;
  *p = q, *cap = c;
  return true;
}

static bool add_name(builder *b, const char *s, size_t n, uint32_t *at) {
  if (b->ix.names_len + n + 1 > UINT32_MAX ||
      !grow((void **)&b->ix.names, &b->ncap, b->ix.names_len + n + 1, 1))
    return false;
  *at = (uint32_t)b->ix.names_len;
  memcpy(b->ix.names + b->ix.names_len, s, n);
  b->ix.names[b->ix.names_len + n] = '\0';
  b->ix.names_len += n + 1;
  return true;
}

/* Adds a regular member named `name` (len bytes); a new sample starts when
 * its key differs from the previous member's. */
static pl_status add_member(builder *b, const char *name, size_t len,
                            uint64_t offset, uint64_t size, pl_error *err) {
  size_t slash = len;
  while (slash && name[slash - 1] != '/')
    slash--;
  const char *dot = memchr(name + slash, '.', len - slash);
  if (!dot)
    return PL_OK; /* webdataset skips members without an extension */
  size_t klen = (size_t)(dot - name);
  /* The sample being built has the last member's key. */
  const char *last =
      b->ix.nmembers ? b->ix.names + b->ix.members[b->ix.nmembers - 1].key
                     : NULL;
  bool same = last && strlen(last) == klen && !memcmp(last, name, klen);
  pl_tar_member m = {.offset = offset, .size = size};
  if (same) {
    m.key = b->ix.members[b->ix.nmembers - 1].key;
  } else if (!add_name(b, name, klen, &m.key)) {
    return pl_errorf(err, PL_NO_MEMORY, "out of memory indexing a tar");
  }
  if (!add_name(b, dot + 1, len - klen - 1, &m.ext) ||
      !grow((void **)&b->ix.members, &b->mcap, b->ix.nmembers + 1,
            sizeof m) ||
      (!same && !grow((void **)&b->ix.first, &b->scap, b->ix.nsamples + 2,
                      sizeof(uint64_t))))
    return pl_errorf(err, PL_NO_MEMORY, "out of memory indexing a tar");
  if (!same)
    b->ix.first[b->ix.nsamples++] = b->ix.nmembers;
  b->ix.members[b->ix.nmembers++] = m;
  return PL_OK;
}

/* An octal field (spaces and NULs around it), or GNU's base-256 form. */
static bool parse_number(const uint8_t *f, size_t n, uint64_t *out) {
  uint64_t v = 0;
  if (f[0] & 0x80) {
    if (f[0] != 0x80 || n < 9)
      return false; /* negative or above 64 bits */
    for (size_t i = 1; i < n; i++) {
      if (v >> 56)
        return false;
      v = v << 8 | f[i];
    }
    *out = v;
    return true;
  }
  size_t i = 0;
  while (i < n && f[i] == ' ')
    i++;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
    if (v >> 61)
      return false;
    v = v * 8 + (f[i] - '0');
  }
  for (; i < n; i++)
    if (f[i] != ' ' && f[i] != '\0')
      return false;
  *out = v;
  return true;
}

static bool checksum_ok(const uint8_t *h) {
  uint64_t want;
  if (!parse_number(h + 148, 8, &want))
    return false;
  uint64_t u = 0;
  int64_t s = 0; /* old tars summed signed chars */
  for (int i = 0; i < BLOCK; i++) {
    uint8_t c = (i >= 148 && i < 156) ? ' ' : h[i];
    u += c;
    s += (int8_t)c;
  }
  return u == want || (uint64_t)s == want;
}

static bool zero_block(const uint8_t *h) {
  for (int i = 0; i < BLOCK; i++)
    if (h[i])
      return false;
  return true;
}

/* The name a ustar header gives: prefix "/" name. */
static size_t header_name(const uint8_t *h, char *out) {
  size_t n = strnlen((const char *)h, 100), p = 0;
  if (!memcmp(h + 257, "ustar\0", 6) && h[345]) {
    p = strnlen((const char *)h + 345, 155);
    memcpy(out, h + 345, p);
    out[p++] = '/';
  }
  memcpy(out + p, h, n);
  out[p + n] = '\0';
  return p + n;
}

typedef struct pending {
  char *name; /* from a GNU 'L' or pax path (malloc'ed), or NULL */
  size_t name_len;
  bool has_size;
  uint64_t size; /* from a pax size */
} pending;

static pl_status set_name(pending *p, const uint8_t *s, size_t n,
                          pl_error *err) {
  while (n && s[n - 1] == '\0')
    n--;
  char *c = malloc(n + 1);
  if (!c)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory indexing a tar");
  memcpy(c, s, n);
  c[n] = '\0';
  free(p->name);
  p->name = c, p->name_len = n;
  return PL_OK;
}

/* pax records: "LEN key=value\n", LEN counting the whole record. */
static pl_status parse_pax(const uint8_t *d, uint64_t n, pending *p,
                           const char *shard, uint64_t at, pl_error *err) {
  uint64_t i = 0;
  while (i < n && d[i]) {
    uint64_t len = 0, j = i;
    while (j < n && d[j] >= '0' && d[j] <= '9' && len < n)
      len = len * 10 + (d[j++] - '0');
    if (j >= n || d[j] != ' ' || len == 0 || len > n - i || d[i + len - 1] != '\n')
      return pl_errorf(err, PL_FORMAT,
                       "%s: malformed pax header at offset %llu", shard,
                       (unsigned long long)at);
    const uint8_t *kv = d + j + 1, *end = d + i + len - 1;
    const uint8_t *eq = memchr(kv, '=', (size_t)(end - kv));
    if (eq && eq - kv == 4 && !memcmp(kv, "path", 4))
      PL_TRY(set_name(p, eq + 1, (size_t)(end - eq - 1), err));
    else if (eq && eq - kv == 4 && !memcmp(kv, "size", 4)) {
      uint64_t v = 0;
      for (const uint8_t *c = eq + 1; c < end; c++)
        v = v * 10 + (uint64_t)(*c - '0');
      p->has_size = true, p->size = v;
    }
    i += len;
  }
  return PL_OK;
}

static pl_status bad(const char *shard, uint64_t at, const char *why,
                     pl_error *err) {
  return pl_errorf(err, PL_FORMAT, "%s: not a tar file: %s at offset %llu",
                   shard, why, (unsigned long long)at);
}

/* One header at `at`: adds what it names and sets *next to the header
 * after its data; *end when the archive ends here. */
static pl_status one_header(builder *b, const uint8_t *data, uint64_t size,
                            uint64_t at, pending *p, const char *shard,
                            uint64_t *next, bool *end, pl_error *err) {
  const uint8_t *h = data + at;
  if (zero_block(h)) {
    *end = true;
    return PL_OK;
  }
  uint64_t len;
  if (!checksum_ok(h))
    return bad(shard, at, "bad header checksum", err);
  if (!parse_number(h + 124, 12, &len))
    return bad(shard, at, "bad size field", err);
  char type = (char)h[156];
  if (p->has_size && (type == '0' || type == '\0' || type == '7'))
    len = p->size;
  uint64_t body = at + BLOCK;
  if (len > size - body)
    return pl_errorf(err, PL_FORMAT,
                     "%s: member at offset %llu runs past the end (%llu "
                     "bytes, %llu left): a truncated shard?",
                     shard, (unsigned long long)at, (unsigned long long)len,
                     (unsigned long long)(size - body));
  *next = body + (len + BLOCK - 1) / BLOCK * BLOCK;
  if ((type == 'L' || type == 'x') && len > MAX_NAME + 4096)
    return bad(shard, at, "long name or pax header over 64 KiB", err);
  if (type == 'L')
    return set_name(p, data + body, (size_t)len, err);
  if (type == 'x')
    return parse_pax(data + body, len, p, shard, at, err);
  if (type == 'K')
    return PL_OK; /* a GNU long link name: the member is a link, skipped */
  if (type != '0' && type != '\0' && type != '7') {
    free(p->name);
    *p = (pending){0}; /* an extended header applies to the next member */
    return PL_OK;
  }
  char name[400];
  size_t nlen = p->name ? p->name_len : header_name(h, name);
  pl_status s =
      add_member(b, p->name ? p->name : name, nlen, body, len, err);
  free(p->name);
  *p = (pending){0};
  return s;
}

pl_status pl_tar_index_build(const uint8_t *data, uint64_t size,
                             const char *shard, pl_tar_index *out,
                             pl_error *err) {
  memset(out, 0, sizeof *out);
  builder b = {0};
  pending p = {0};
  pl_status s = PL_OK;
  uint64_t at = 0;
  bool end = false;
  while (s == PL_OK && !end && at < size) {
    if (size - at < BLOCK) {
      s = bad(shard, at, "a header cut short", err);
      break;
    }
    s = one_header(&b, data, size, at, &p, shard, &at, &end, err);
  }
  free(p.name);
  if (s == PL_OK && !b.ix.first &&
      !(b.ix.first = calloc(1, sizeof(uint64_t))))
    s = pl_errorf(err, PL_NO_MEMORY, "out of memory indexing a tar");
  if (s != PL_OK) {
    pl_tar_index_free(&b.ix);
    return s;
  }
  b.ix.first[b.ix.nsamples] = b.ix.nmembers;
  *out = b.ix;
  return PL_OK;
}

void pl_tar_index_free(pl_tar_index *ix) {
  if (!ix)
    return;
  free(ix->members);
  free(ix->first);
  free(ix->names);
  memset(ix, 0, sizeof *ix);
}

/* ---------------------------------------------------------------- cache
 * Layout (host byte order: a cache is of this machine): magic, tag length
 * and tag, then nmembers, nsamples, names_len, then the arrays. */

static void put(uint8_t **p, const void *v, size_t n) {
  if (n) /* an empty index's arrays may be NULL */
    memcpy(*p, v, n);
  *p += n;
}

pl_status pl_tar_index_save(const pl_tar_index *ix, const char *tag,
                            uint8_t **buf, uint64_t *len, pl_error *err) {
  uint64_t tl = strlen(tag);
  uint64_t n = 8 + 8 + tl + 24 + ix->nmembers * sizeof *ix->members +
               (ix->nsamples + 1) * 8 + ix->names_len;
  uint8_t *b = malloc((size_t)n), *p = b;
  if (!b)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory saving a tar index");
  put(&p, CACHE_MAGIC, 8);
  put(&p, &tl, 8);
  put(&p, tag, tl);
  put(&p, &ix->nmembers, 8);
  put(&p, &ix->nsamples, 8);
  put(&p, &ix->names_len, 8);
  put(&p, ix->members, ix->nmembers * sizeof *ix->members);
  put(&p, ix->first, (ix->nsamples + 1) * 8);
  put(&p, ix->names, ix->names_len);
  *buf = b, *len = n;
  return PL_OK;
}

static bool take(const uint8_t **p, const uint8_t *end, void *v, uint64_t n) {
  if ((uint64_t)(end - *p) < n)
    return false;
  if (n)
    memcpy(v, *p, (size_t)n);
  *p += n;
  return true;
}

static bool load_arrays(const uint8_t **p, const uint8_t *end,
                        pl_tar_index *ix) {
  ix->members = malloc((size_t)PL_MAX(ix->nmembers, 1) * sizeof *ix->members);
  ix->first = malloc((size_t)(ix->nsamples + 1) * 8);
  ix->names = malloc((size_t)PL_MAX(ix->names_len, 1));
  if (!ix->members || !ix->first || !ix->names ||
      !take(p, end, ix->members, ix->nmembers * sizeof *ix->members) ||
      !take(p, end, ix->first, (ix->nsamples + 1) * 8) ||
      !take(p, end, ix->names, ix->names_len) || *p != end)
    return false;
  if (ix->first[ix->nsamples] != ix->nmembers ||
      (ix->names_len && ix->names[ix->names_len - 1]))
    return false;
  for (uint64_t i = 0; i < ix->nmembers; i++)
    if (ix->members[i].key >= ix->names_len ||
        ix->members[i].ext >= ix->names_len)
      return false;
  for (uint64_t i = 0; i < ix->nsamples; i++)
    if (ix->first[i] >= ix->first[i + 1])
      return false;
  return true;
}

pl_status pl_tar_index_load(const uint8_t *buf, uint64_t len, const char *tag,
                            pl_tar_index *out, pl_error *err) {
  memset(out, 0, sizeof *out);
  const uint8_t *p = buf, *end = buf + len;
  char magic[8];
  uint64_t tl;
  if (!take(&p, end, magic, 8) || memcmp(magic, CACHE_MAGIC, 8) ||
      !take(&p, end, &tl, 8) || tl != strlen(tag) ||
      (uint64_t)(end - p) < tl || memcmp(p, tag, (size_t)tl))
    return pl_errorf(err, PL_FORMAT, "tar index cache: stale or foreign");
  p += tl;
  pl_tar_index ix = {0};
  bool ok = take(&p, end, &ix.nmembers, 8) && take(&p, end, &ix.nsamples, 8) &&
            take(&p, end, &ix.names_len, 8) &&
            ix.nmembers <= len && ix.nsamples <= len && ix.names_len <= len &&
            load_arrays(&p, end, &ix);
  if (!ok) {
    pl_tar_index_free(&ix);
    return pl_errorf(err, PL_FORMAT, "tar index cache: damaged");
  }
  *out = ix;
  return PL_OK;
}
