/* NumPy arrays: .npy files, and the stored members of .npz archives,
 * memory-mapped and zipped as the fields of one dataset over their first
 * axis.
 *
 * .npy (numpy/lib/format.py): "\x93NUMPY", major, minor, a header length
 * (uint16 LE for version 1, uint32 LE for 2 and 3), then a Python dict
 * literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...), },
 * then the array's bytes. .npz is a zip archive of .npy members; np.savez
 * stores them uncompressed, so each member's array lies at a fixed offset
 * of the mapped archive and is read in place like a .npy file. */
#include "core/memcopy.h"
#include "data/dataset.h"
#include "data/file_map.h"
#include "data/sources/registry.h"
#include "data/npy_member.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_FIELDS 64
#define LABEL_MAX 320

typedef struct npy_array {
  const uint8_t *data;
  uint64_t count;        /* first axis */
  uint64_t sample_bytes;
  size_t swap;           /* element bytes to swap per sample; 0: none */
  pl_field field;
} npy_array;

typedef struct npy_impl {
  int nfiles;
  pl_file_map *maps;
  int narrays;
  npy_array arrays[NPY_MAX_FIELDS];
} npy_impl;

/* Where an array lives, for messages: "x.npy" or "d.npz: member 'x.npy'" */
typedef struct npy_src {
  const char *label;
  const uint8_t *p;
  uint64_t n;
} npy_src;

static uint16_t le16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t le32(const uint8_t *p) {
  return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16;
}
static uint64_t le64(const uint8_t *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* ---------------------------------------------------------------- header */

typedef struct dict_scan {
  const char *p, *end;
} dict_scan;

static void skip_space(dict_scan *d) {
  while (d->p < d->end && (*d->p == ' ' || *d->p == '\n' || *d->p == '\t'))
    d->p++;
}

static bool eat(dict_scan *d, char c) {
  skip_space(d);
  if (d->p < d->end && *d->p == c) {
    d->p++;
    return true;
  }
  return false;
}

/* A quoted string into out (at most cap - 1 bytes). */
static bool scan_string(dict_scan *d, char *out, size_t cap) {
  skip_space(d);
  if (d->p >= d->end || (*d->p != '\'' && *d->p != '"'))
    return false;
  char q = *d->p++;
  size_t n = 0;
  while (d->p < d->end && *d->p != q) {
    if (n + 1 >= cap)
      return false;
    out[n++] = *d->p++;
  }
  out[n] = '\0';
  return d->p++ < d->end;
}

static bool scan_word(dict_scan *d, const char *w) {
  skip_space(d);
  size_t n = strlen(w);
  if ((size_t)(d->end - d->p) < n || strncmp(d->p, w, n))
    return false;
  d->p += n;
  return true;
}

typedef struct npy_header {
  char descr[32];
  bool descr_seen, order_seen, shape_seen, fortran, structured;
  int ndim;
  uint64_t shape[PL_MAX_DIMS + 2];
} npy_header;

static bool scan_shape(dict_scan *d, npy_header *h) {
  if (!eat(d, '('))
    return false;
  h->ndim = 0;
  while (!eat(d, ')')) {
    skip_space(d);
    uint64_t v = 0;
    if (d->p >= d->end || *d->p < '0' || *d->p > '9')
      return false;
    while (d->p < d->end && *d->p >= '0' && *d->p <= '9') {
      if (v > (UINT64_MAX - 9) / 10)
        return false;
      v = v * 10 + (uint64_t)(*d->p++ - '0');
    }
    if (h->ndim == PL_MAX_DIMS + 2)
      return false;
    h->shape[h->ndim++] = v;
    if (!eat(d, ',')) {
      if (!eat(d, ')'))
        return false;
      break;
    }
  }
  return true;
}

static bool scan_value(dict_scan *d, const char *key, npy_header *h) {
  if (!strcmp(key, "descr")) {
    h->descr_seen = true;
    skip_space(d);
    if (d->p < d->end && *d->p == '[') { /* a structured dtype */
      h->structured = true;
      d->p = d->end;
      return true;
    }
    return scan_string(d, h->descr, sizeof h->descr);
  }
  if (!strcmp(key, "fortran_order")) {
    h->order_seen = true;
    if (scan_word(d, "True"))
      return h->fortran = true;
    return scan_word(d, "False");
  }
  if (!strcmp(key, "shape")) {
    h->shape_seen = true;
    return scan_shape(d, h);
  }
  return false;
}

static pl_status parse_dict(const npy_src *s, const char *text, size_t len,
                            npy_header *h, pl_error *err) {
  dict_scan d = {text, text + len};
  memset(h, 0, sizeof *h);
  bool ok = eat(&d, '{');
  while (ok && !eat(&d, '}')) {
    char key[32];
    ok = scan_string(&d, key, sizeof key) && eat(&d, ':') &&
         scan_value(&d, key, h);
    if (h->structured)
      break;
    if (ok && !eat(&d, ',')) {
      ok = eat(&d, '}');
      break;
    }
  }
  if (h->structured)
    return pl_errorf(err, PL_FORMAT,
                     "%s: structured dtypes are not supported (save each "
                     "field as its own array)", s->label);
  if (!ok || !h->descr_seen || !h->order_seen || !h->shape_seen)
    return pl_errorf(err, PL_FORMAT,
                     "%s: malformed .npy header (want a dict of 'descr', "
                     "'fortran_order' and 'shape')", s->label);
  return PL_OK;
}

/* ---------------------------------------------------------------- dtypes */

/* '<f4' -> float32 (elem 4); complex adds a trailing [2]. */
static pl_status map_descr(const npy_src *s, const char *descr, pl_dtype *dt,
                           size_t *elem, bool *complex_, bool *big,
                           pl_error *err) {
  char order = descr[0], kind = descr[1];
  const char *digits = descr + 2;
  int size = atoi(digits);
  *complex_ = false;
  *big = order == '>' && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
  if (order == '<' && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
    *big = true; /* "not host order" */
  bool known = (order == '<' || order == '>' || order == '|' || order == '=');
  *elem = (size_t)size;
  switch (known ? kind : 0) {
  case 'b': if (size == 1) { *dt = PL_UINT8; return PL_OK; } break;
  case 'i':
    if (size == 1) { *dt = PL_INT8; return PL_OK; }
    if (size == 2) { *dt = PL_INT16; return PL_OK; }
    if (size == 4) { *dt = PL_INT32; return PL_OK; }
    if (size == 8) { *dt = PL_INT64; return PL_OK; }
    break;
  case 'u':
    if (size == 1) { *dt = PL_UINT8; return PL_OK; }
    if (size == 2) { *dt = PL_UINT16; return PL_OK; }
    if (size == 4) { *dt = PL_UINT32; return PL_OK; }
    if (size == 8) { *dt = PL_INT64; return PL_OK; }
    break;
  case 'f':
    if (size == 2) { *dt = PL_FLOAT16; return PL_OK; }
    if (size == 4) { *dt = PL_FLOAT32; return PL_OK; }
    if (size == 8) { *dt = PL_FLOAT64; return PL_OK; }
    break;
  case 'c':
    *complex_ = true;
    *elem = (size_t)size / 2;
    if (size == 8) { *dt = PL_FLOAT32; return PL_OK; }
    if (size == 16) { *dt = PL_FLOAT64; return PL_OK; }
    break;
  case 'O':
    return pl_errorf(err, PL_FORMAT,
                     "%s: object arrays (dtype '%s') hold Python objects and "
                     "cannot be memory-mapped", s->label, descr);
  }
  return pl_errorf(err, PL_FORMAT, "%s: unsupported dtype '%s'", s->label,
                   descr);
}

/* ---------------------------------------------------------------- arrays */

static pl_status npy_preamble(const npy_src *s, uint64_t *hdr_end,
                              const char **text, size_t *len,
                              pl_error *err) {
  if (s->n < 10 || memcmp(s->p, NPY_MAGIC, 6))
    return pl_errorf(err, PL_FORMAT,
                     "%s: not a .npy file (no \\x93NUMPY magic)", s->label);
  uint8_t major = s->p[6];
  uint64_t hl, start;
  if (major == 1) {
    hl = le16(s->p + 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (s->n < 12)
      return pl_errorf(err, PL_FORMAT, "%s: truncated .npy header",
                       s->label);
    hl = le32(s->p + 8);
    start = 12;
  } else {
    return pl_errorf(err, PL_FORMAT,
                     "%s: .npy format version %u.%u is not supported (want "
                     "1, 2 or 3)", s->label, major, s->p[7]);
  }
  if (hl > s->n - start)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the .npy header claims %llu bytes but the file "
                     "has %llu after the preamble (truncated)",
                     s->label, (unsigned long long)hl,
                     (unsigned long long)(s->n - start));
  *text = (const char *)s->p + start;
  *len = (size_t)hl;
  *hdr_end = start + hl;
  return PL_OK;
}

static pl_status npy_shape(const npy_src *s, const npy_header *h,
                           npy_array *a, bool complex_, size_t elem,
                           pl_error *err) {
  if (h->ndim == 0)
    return pl_errorf(err, PL_FORMAT,
                     "%s: a 0-d array has no first axis to index", s->label);
  int per = h->ndim - 1 + (complex_ ? 1 : 0);
  if (per > PL_MAX_DIMS)
    return pl_errorf(err, PL_FORMAT,
                     "%s: %d dims per sample (at most %d)", s->label, per,
                     PL_MAX_DIMS);
  uint64_t bytes = elem * (complex_ ? 2 : 1);
  for (int d = 1; d < h->ndim; d++) {
    if (h->shape[d] == 0 || h->shape[d] > INT64_MAX)
      return pl_errorf(err, PL_FORMAT,
                       "%s: dim %d is %llu (per-sample dims must be "
                       "positive)", s->label, d,
                       (unsigned long long)h->shape[d]);
    if (!pl_mul_u64(bytes, h->shape[d], &bytes))
      return pl_errorf(err, PL_FORMAT, "%s: the shape overflows 64 bits",
                       s->label);
    a->field.shape[d - 1] = (int64_t)h->shape[d];
  }
  if (complex_)
    a->field.shape[per - 1] = 2;
  a->field.ndim = per;
  a->count = h->shape[0];
  a->sample_bytes = bytes;
  return PL_OK;
}

static pl_status npy_parse(const npy_src *s, npy_array *a, pl_error *err) {
  uint64_t data_off = 0;
  const char *text = NULL;
  size_t len = 0;
  npy_header h;
  PL_TRY(npy_preamble(s, &data_off, &text, &len, err));
  PL_TRY(parse_dict(s, text, len, &h, err));
  size_t elem = 0;
  bool complex_ = false, big = false;
  PL_TRY(map_descr(s, h.descr, &a->field.dtype, &elem, &complex_, &big, err));
  if (h.fortran && h.ndim > 1)
    return pl_errorf(err, PL_FORMAT,
                     "%s: Fortran-order arrays are not supported (save "
                     "np.ascontiguousarray(a))", s->label);
  PL_TRY(npy_shape(s, &h, a, complex_, elem, err));
  uint64_t total, left = s->n - data_off;
  if (!pl_mul_u64(a->count, a->sample_bytes, &total))
    return pl_errorf(err, PL_FORMAT, "%s: the shape overflows 64 bits",
                     s->label);
  if (left < total)
    return pl_errorf(err, PL_FORMAT,
                     "%s: offset %llu: data is %llu bytes but the file has "
                     "%llu left (truncated)", s->label,
                     (unsigned long long)data_off, (unsigned long long)total,
                     (unsigned long long)left);
  if (left > total)
    return pl_errorf(err, PL_FORMAT,
                     "%s: offset %llu: %llu trailing bytes after the %llu "
                     "bytes of data", s->label,
                     (unsigned long long)(data_off + total),
                     (unsigned long long)(left - total),
                     (unsigned long long)total);
  a->data = s->p + data_off;
  a->swap = big && elem > 1 ? elem : 0;
  return PL_OK;
}

/* A field name: the file's (or member's) stem, at most 31 bytes. */
static void set_name(npy_array *a, const char *name, size_t len) {
  const char *slash = memchr(name, '/', len) ? strrchr(name, '/') : NULL;
  if (slash && (size_t)(slash - name) < len) {
    len -= (size_t)(slash + 1 - name);
    name = slash + 1;
  }
  if (len >= 4 && !memcmp(name + len - 4, ".npy", 4))
    len -= 4;
  else if (len >= 7 && !memcmp(name + len - 7, ".npy.gz", 7))
    len -= 7;
  len = PL_MIN(len, (size_t)PL_NAME_MAX - 1);
  memset(a->field.name, 0, sizeof a->field.name);
  memcpy(a->field.name, name, len);
}

/* ---------------------------------------------------------------- .npz */

typedef struct zip_dir {
  uint64_t entries, offset, size;
} zip_dir;

static pl_status zip_bad(const char *path, const char *what, pl_error *err) {
  return pl_errorf(err, PL_FORMAT, "%s: not a valid .npz (zip) archive: %s",
                   path, what);
}

static pl_status zip64_dir(const pl_file_map *m, uint64_t eocd, zip_dir *z,
                           pl_error *err) {
  if (eocd < 20 || le32(m->data + eocd - 20) != 0x07064b50u)
    return zip_bad(m->path, "zip64 locator missing", err);
  uint64_t off = le64(m->data + eocd - 20 + 8);
  if (off > m->size || m->size - off < 56 ||
      le32(m->data + off) != 0x06064b50u)
    return zip_bad(m->path, "zip64 end record out of range", err);
  z->entries = le64(m->data + off + 32);
  z->size = le64(m->data + off + 40);
  z->offset = le64(m->data + off + 48);
  return PL_OK;
}

static pl_status zip_find_dir(const pl_file_map *m, zip_dir *z,
                              pl_error *err) {
  if (m->size < 22)
    return zip_bad(m->path, "too short", err);
  uint64_t lo = m->size > 22 + 65535 ? m->size - 22 - 65535 : 0;
  for (uint64_t e = m->size - 22 + 1; e-- > lo;) {
    if (le32(m->data + e) != 0x06054b50u)
      continue;
    z->entries = le16(m->data + e + 10);
    z->size = le32(m->data + e + 12);
    z->offset = le32(m->data + e + 16);
    if (z->entries == 0xFFFF || z->size == 0xFFFFFFFFu ||
        z->offset == 0xFFFFFFFFu)
      PL_TRY(zip64_dir(m, e, z, err));
    if (z->offset > m->size || z->size > m->size - z->offset)
      return zip_bad(m->path, "central directory out of range", err);
    return PL_OK;
  }
  return zip_bad(m->path, "no end of central directory record", err);
}

typedef struct zip_entry {
  const char *name;
  size_t name_len;
  uint16_t flags, method;
  uint64_t csize, usize, local;
} zip_entry;

/* Sizes and offset from the zip64 extra field where the header has 0xFF.. */
static void zip64_extra(const uint8_t *x, size_t n, zip_entry *e) {
  for (size_t i = 0; i + 4 <= n;) {
    uint16_t id = le16(x + i), len = le16(x + i + 2);
    if (i + 4 + len > n)
      return;
    if (id == 1) {
      const uint8_t *v = x + i + 4, *end = v + len;
      if (e->usize == 0xFFFFFFFFu && v + 8 <= end)
        e->usize = le64(v), v += 8;
      if (e->csize == 0xFFFFFFFFu && v + 8 <= end)
        e->csize = le64(v), v += 8;
      if (e->local == 0xFFFFFFFFu && v + 8 <= end)
        e->local = le64(v);
      return;
    }
    i += 4 + (size_t)len;
  }
}

static pl_status zip_entry_at(const pl_file_map *m, uint64_t *pos,
                              uint64_t end, zip_entry *e, pl_error *err) {
  const uint8_t *p = m->data + *pos;
  if (end - *pos < 46 || le32(p) != 0x02014b50u)
    return zip_bad(m->path, "bad central directory entry", err);
  e->flags = le16(p + 8);
  e->method = le16(p + 10);
  e->csize = le32(p + 20);
  e->usize = le32(p + 24);
  size_t nl = le16(p + 28), xl = le16(p + 30), cl = le16(p + 32);
  e->local = le32(p + 42);
  if (end - *pos - 46 < nl + xl + cl)
    return zip_bad(m->path, "central directory entry truncated", err);
  e->name = (const char *)p + 46;
  e->name_len = nl;
  zip64_extra(p + 46 + nl, xl, e);
  *pos += 46 + nl + xl + cl;
  return PL_OK;
}

/* The member's bytes within the archive, if stored uncompressed. */
static pl_status zip_member(const pl_file_map *m, const zip_entry *e,
                            const char *label, npy_src *s, pl_error *err) {
  if (e->flags & 1)
    return pl_errorf(err, PL_FORMAT, "%s: the member is encrypted", label);
  if (e->method != 0)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the member is compressed (zip method %u, as "
                     "np.savez_compressed writes); only stored members can "
                     "be memory-mapped: save with np.savez", label,
                     e->method);
  if (e->csize != e->usize)
    return zip_bad(m->path, "a stored member's sizes differ", err);
  if (e->local > m->size || m->size - e->local < 30 ||
      le32(m->data + e->local) != 0x04034b50u)
    return zip_bad(m->path, "local header out of range", err);
  uint64_t data = e->local + 30 + le16(m->data + e->local + 26) +
                  le16(m->data + e->local + 28);
  if (data > m->size || m->size - data < e->usize)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the member's %llu bytes run past the end of the "
                     "archive (truncated)", label,
                     (unsigned long long)e->usize);
  *s = (npy_src){label, m->data + data, e->usize};
  return PL_OK;
}

static pl_status add_npz(npy_impl *im, const pl_file_map *m, pl_error *err) {
  zip_dir z = {0, 0, 0};
  PL_TRY(zip_find_dir(m, &z, err));
  uint64_t pos = z.offset, end = z.offset + z.size;
  if (z.entries == 0)
    return pl_errorf(err, PL_FORMAT, "%s: the archive has no members",
                     m->path);
  for (uint64_t i = 0; i < z.entries; i++) {
    zip_entry e = {0};
    PL_TRY(zip_entry_at(m, &pos, end, &e, err));
    char label[LABEL_MAX];
    snprintf(label, sizeof label, "%s: member '%.*s'", m->path,
             (int)PL_MIN(e.name_len, (size_t)200), e.name);
    if (im->narrays == NPY_MAX_FIELDS)
      return pl_errorf(err, PL_FORMAT, "%s: more than %d arrays", m->path,
                       NPY_MAX_FIELDS);
    npy_src s;
    npy_array *a = &im->arrays[im->narrays];
    PL_TRY(zip_member(m, &e, label, &s, err));
    PL_TRY(npy_parse(&s, a, err));
    set_name(a, e.name, e.name_len);
    im->narrays++;
  }
  return PL_OK;
}

static bool is_npz(const char *path) {
  size_t n = strlen(path);
  return n >= 4 && !strcmp(path + n - 4, ".npz");
}

static pl_status add_file(npy_impl *im, const pl_file_map *m,
                          pl_error *err) {
  if (is_npz(m->path))
    return add_npz(im, m, err);
  if (im->narrays == NPY_MAX_FIELDS)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "npy: more than %d arrays",
                     NPY_MAX_FIELDS);
  npy_src s = {m->path, m->data, m->size};
  npy_array *a = &im->arrays[im->narrays];
  PL_TRY(npy_parse(&s, a, err));
  const char *base = pl_basename(m->path);
  set_name(a, base, strlen(base));
  im->narrays++;
  return PL_OK;
}

/* ---------------------------------------------------------------- dataset */

static void swap_elements(uint8_t *p, uint64_t bytes, size_t elem) {
  for (uint64_t i = 0; i < bytes; i += elem)
    for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
      uint8_t t = p[i + a];
      p[i + a] = p[i + b];
      p[i + b] = t;
    }
}

/* For tar shards (data/npy_member.h): the whole array, its first axis
 * a dimension like the others. */
pl_status pl_npy_view_parse(const char *label, const uint8_t *p, uint64_t n,
                            pl_npy_view *out, pl_error *err) {
  npy_src s = {label, p, n};
  npy_array a;
  memset(&a, 0, sizeof a);
  PL_TRY(npy_parse(&s, &a, err));
  if (a.field.ndim + 1 > PL_MAX_DIMS)
    return pl_errorf(err, PL_FORMAT, "%s: %d dims (at most %d)", label,
                     a.field.ndim + 1, PL_MAX_DIMS);
  memset(out, 0, sizeof *out);
  out->dtype = a.field.dtype;
  out->ndim = a.field.ndim + 1;
  out->shape[0] = (int64_t)a.count;
  memcpy(out->shape + 1, a.field.shape, (size_t)a.field.ndim * sizeof(int64_t));
  out->data = a.data;
  out->bytes = a.count * a.sample_bytes; /* npy_parse checked the product */
  out->swap = a.swap;
  return PL_OK;
}

void pl_npy_view_copy(const pl_npy_view *v, void *dst) {
  memcpy(dst, v->data, (size_t)v->bytes);
  if (v->swap)
    swap_elements(dst, v->bytes, v->swap);
}

static pl_status npy_read(const pl_dataset *ds, uint64_t index,
                          const pl_sample_ctx *ctx, void *const *dst,
                          pl_error *err) {
  const npy_impl *im = ds->impl;
  for (int i = 0; i < im->narrays; i++) {
    const npy_array *a = &im->arrays[i];
    const uint8_t *src = a->data + index * a->sample_bytes;
    if (!a->swap) {
      pl_copy_stream(dst[i], src, a->sample_bytes);
      continue;
    }
    memcpy(dst[i], src, a->sample_bytes);
    swap_elements(dst[i], a->sample_bytes, a->swap);
  }
  return PL_OK;
}

static const void *npy_view(const pl_dataset *ds, uint64_t index, int field) {
  const npy_array *a = &((const npy_impl *)ds->impl)->arrays[field];
  return a->swap ? NULL : a->data + index * a->sample_bytes;
}

static void npy_destroy(void *p) {
  npy_impl *im = p;
  if (!im)
    return;
  for (int f = 0; f < im->nfiles; f++)
    pl_file_map_close(&im->maps[f]);
  free(im->maps);
  free(im);
}

static const pl_dataset_vt npy_vt = {
    .kind = "npy",
    .read = npy_read,
    .view = npy_view,
    .destroy_impl = npy_destroy,
};

static pl_status check_lengths(const npy_impl *im, pl_error *err) {
  for (int i = 1; i < im->narrays; i++)
    if (im->arrays[i].count != im->arrays[0].count)
      return pl_errorf(err, PL_FORMAT,
                       "npy: array '%s' has %llu rows but '%s' has %llu "
                       "(first axes must match)",
                       im->arrays[i].field.name,
                       (unsigned long long)im->arrays[i].count,
                       im->arrays[0].field.name,
                       (unsigned long long)im->arrays[0].count);
  return PL_OK;
}

pl_status pl_dataset_open_npy(const char *const *paths, int npaths,
                              pl_dataset **out, pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!paths || npaths <= 0 || npaths > NPY_MAX_FIELDS)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "npy: from 1 to %d files are required", NPY_MAX_FIELDS);
  npy_impl *im = calloc(1, sizeof *im);
  if (im && !(im->maps = calloc((size_t)npaths, sizeof *im->maps))) {
    free(im);
    im = NULL;
  }
  if (!im)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory opening npy");
  pl_status s = PL_OK;
  for (int f = 0; s == PL_OK && f < npaths; f++) {
    s = paths[f] ? pl_file_map_open(paths[f], &im->maps[f], err)
                 : pl_errorf(err, PL_INVALID_ARGUMENT, "npy: path %d is NULL",
                             f);
    if (s == PL_OK) {
      im->nfiles = f + 1;
      s = add_file(im, &im->maps[f], err);
    }
  }
  if (s == PL_OK)
    s = check_lengths(im, err);
  if (s == PL_OK) {
    pl_field fields[NPY_MAX_FIELDS];
    for (int i = 0; i < im->narrays; i++)
      fields[i] = im->arrays[i].field;
    s = pl_dataset_new(&npy_vt, im, im->arrays[0].count, fields,
                       im->narrays, out, err);
  }
  if (s != PL_OK) {
    pl_error_path_from(err, paths, npaths);
    npy_destroy(im);
  }
  return s;
}

pl_status pl_source_open_npy(const char *const *paths, int npaths,
                             const pl_options *o, pl_dataset **out,
                             pl_error *err) {
  return pl_dataset_open_npy(paths, npaths, out, err);
}
