/* MNIST / Fashion-MNIST IDX files: an images file and a labels file.
 *
 * Format: magic 0x00 0x00 TYPE NDIM, then NDIM big-endian u32 dims, then the
 * elements, big-endian, row-major. dims[0] is the sample count; a sample is
 * dims[1:]. Multi-byte elements are swapped to host order in read (so view
 * offers only single-byte fields, or all on a big-endian host). */
#include "core/memcopy.h"
#include "data/dataset.h"
#include "data/file_map.h"
#include "data/map_guard.h"
#include "data/sources/registry.h"

#include <stdlib.h>
#include <string.h>

#define IDX_MAX_NDIM (PL_MAX_DIMS + 1) /* the sample count, then the shape */

typedef struct idx_file {
  pl_file_map map;
  pl_dtype dtype;
  int ndim;
  uint64_t dims[IDX_MAX_NDIM];
  uint64_t header_bytes;
  uint64_t sample_bytes; /* product of dims[1:] times the element size */
} idx_file;

typedef struct idx_impl {
  idx_file file[2]; /* images, labels: field i comes from file[i] */
} idx_impl;

static bool idx_dtype(uint8_t code, pl_dtype *out) {
  switch (code) {
  case 0x08: *out = PL_UINT8; return true;
  case 0x09: *out = PL_INT8; return true;
  case 0x0B: *out = PL_INT16; return true;
  case 0x0C: *out = PL_INT32; return true;
  case 0x0D: *out = PL_FLOAT32; return true;
  case 0x0E: *out = PL_FLOAT64; return true;
  default: return false;
  }
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static pl_status idx_parse_magic(idx_file *x, pl_error *err) {
  const pl_file_map *m = &x->map;
  if (m->size < 4)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the file is %llu bytes, too short for an IDX "
                     "header", m->path, (unsigned long long)m->size);
  const uint8_t *d = m->data;
  if (d[0] != 0 || d[1] != 0)
    return pl_errorf(err, PL_FORMAT,
                     "%s: bad IDX magic: found bytes %02x %02x %02x %02x, "
                     "want 00 00 TYPE NDIM",
                     m->path, d[0], d[1], d[2], d[3]);
  if (!idx_dtype(d[2], &x->dtype))
    return pl_errorf(err, PL_FORMAT, "%s: unknown IDX type code 0x%02x",
                     m->path, d[2]);
  x->ndim = d[3];
  if (x->ndim == 0 || x->ndim > IDX_MAX_NDIM)
    return pl_errorf(err, PL_FORMAT,
                     "%s: IDX header has %d dims (want 1 to %d)", m->path,
                     x->ndim, IDX_MAX_NDIM);
  x->header_bytes = 4 + 4 * (uint64_t)x->ndim;
  return PL_OK;
}

static pl_status idx_check_header_size(const idx_file *x, pl_error *err) {
  const pl_file_map *m = &x->map;
  if (m->size < x->header_bytes)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the file is %llu bytes, too short for an IDX "
                     "header with %d dims (%llu bytes)",
                     m->path, (unsigned long long)m->size, x->ndim,
                     (unsigned long long)x->header_bytes);
  return PL_OK;
}

static pl_status idx_parse_dims(idx_file *x, pl_error *err) {
  const pl_file_map *m = &x->map;
  uint64_t sample = pl_dtype_size(x->dtype);
  for (int i = 0; i < x->ndim; i++) {
    x->dims[i] = be32(m->data + 4 + 4 * i);
    if (x->dims[i] == 0)
      return pl_errorf(err, PL_FORMAT, "%s: IDX dim %d is 0", m->path, i);
    if (i > 0 && !pl_mul_u64(sample, x->dims[i], &sample))
      return pl_errorf(err, PL_FORMAT,
                       "%s: IDX dims overflow 64 bits in a sample", m->path);
  }
  x->sample_bytes = sample;
  return PL_OK;
}

static pl_status idx_check_size(const idx_file *x, pl_error *err) {
  const pl_file_map *m = &x->map;
  uint64_t data;
  if (!pl_mul_u64(x->dims[0], x->sample_bytes, &data))
    return pl_errorf(err, PL_FORMAT, "%s: IDX dims overflow 64 bits",
                     m->path);
  uint64_t left = m->size - x->header_bytes;
  if (left < data)
    return pl_errorf(err, PL_FORMAT,
                     "%s: offset %llu: data is %llu bytes (%llu x %llu) "
                     "but the file has %llu left (truncated)",
                     m->path, (unsigned long long)x->header_bytes,
                     (unsigned long long)data, (unsigned long long)x->dims[0],
                     (unsigned long long)x->sample_bytes,
                     (unsigned long long)left);
  if (left > data)
    return pl_errorf(err, PL_FORMAT,
                     "%s: offset %llu: %llu trailing bytes after the %llu "
                     "bytes of data",
                     m->path,
                     (unsigned long long)(x->header_bytes + data),
                     (unsigned long long)(left - data),
                     (unsigned long long)data);
  return PL_OK;
}

/* While a .gz decompresses: the magic as soon as 4 bytes exist, then the
 * size the dims declare, which bounds the decompression. */
static pl_status idx_expect(void *user, const char *path, const uint8_t *head,
                            uint64_t have, uint64_t *total, pl_error *err) {
  (void)user;
  idx_file t;
  memset(&t, 0, sizeof t);
  t.map.path = (char *)(uintptr_t)path;
  t.map.data = head;
  t.map.size = have;
  if (have < 4)
    return PL_OK;
  PL_TRY(idx_parse_magic(&t, err));
  if (have < t.header_bytes)
    return PL_OK;
  PL_TRY(idx_parse_dims(&t, err));
  uint64_t data;
  if (!pl_mul_u64(t.dims[0], t.sample_bytes, &data) ||
      !pl_add_u64(data, t.header_bytes, total))
    return pl_errorf(err, PL_FORMAT, "%s: IDX dims overflow 64 bits", path);
  return PL_OK;
}

/* The header is read from the mapping: under a guard, as the file may
 * shrink between the size check and the read. */
static pl_status idx_parse(idx_file *x, pl_error *err) {
  pl_map_guard g;
  if (pl_map_guard_enter(&g))
    return pl_map_guard_failed(&g, err);
  pl_status s = idx_parse_magic(x, err);
  if (s == PL_OK)
    s = idx_check_header_size(x, err);
  if (s == PL_OK)
    s = idx_parse_dims(x, err);
  pl_map_guard_leave(&g);
  return s;
}

static pl_status idx_check_file(const char *path, idx_file *x, pl_error *err) {
  const pl_file_map_opts opts = {.expect = idx_expect};
  PL_TRY(pl_file_map_open_opts(path, &opts, &x->map, err));
  PL_TRY(idx_parse(x, err));
  return idx_check_size(x, err);
}

static pl_status idx_open_file(const char *path, idx_file *x, pl_error *err) {
  pl_status s = idx_check_file(path, x, err);
  if (s != PL_OK)
    pl_error_set_path(err, path);
  return s;
}

static void idx_field(const idx_file *x, const char *name, pl_field *f) {
  memset(f, 0, sizeof *f);
  strcpy(f->name, name);
  f->dtype = x->dtype;
  f->ndim = x->ndim - 1;
  for (int i = 1; i < x->ndim; i++)
    f->shape[i - 1] = (int64_t)x->dims[i];
}

/* ---------------------------------------------------------------- reads */

static bool host_is_big_endian(void) {
  return __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
}

static void swap_elements(uint8_t *p, uint64_t bytes, size_t elem) {
  for (uint64_t i = 0; i < bytes; i += elem)
    for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
      uint8_t t = p[i + a];
      p[i + a] = p[i + b];
      p[i + b] = t;
    }
}

static const uint8_t *idx_sample(const idx_file *x, uint64_t index) {
  return x->map.data + x->header_bytes + index * x->sample_bytes;
}

static pl_status idx_read(const pl_dataset *ds, uint64_t index,
                          const pl_sample_ctx *ctx, void *const *dst,
                          pl_error *err) {
  const idx_impl *im = ds->impl;
  for (int i = 0; i < 2; i++) {
    const idx_file *x = &im->file[i];
    size_t elem = pl_dtype_size(x->dtype);
    if (elem == 1) { /* bytes as they are: stream them into the batch */
      pl_copy_stream(dst[i], idx_sample(x, index), x->sample_bytes);
      continue;
    }
    memcpy(dst[i], idx_sample(x, index), x->sample_bytes);
    if (!host_is_big_endian())
      swap_elements(dst[i], x->sample_bytes, elem);
  }
  return PL_OK;
}

static const void *idx_view(const pl_dataset *ds, uint64_t index, int field) {
  const idx_file *x = &((const idx_impl *)ds->impl)->file[field];
  if (pl_dtype_size(x->dtype) > 1 && !host_is_big_endian())
    return NULL; /* the file's bytes are not the field's bytes */
  return idx_sample(x, index);
}

static void idx_destroy(void *p) {
  idx_impl *im = p;
  pl_file_map_close(&im->file[0].map);
  pl_file_map_close(&im->file[1].map);
  free(im);
}

static int idx_regions(const pl_dataset *ds, int field, pl_region *out,
                       int max) {
  const pl_file_map *m = &((const idx_impl *)ds->impl)->file[field].map;
  if (max > 0)
    out[0] = (pl_region){m->data, m->size, PL_FILE_MAP_REGION(m)};
  return 1;
}

static const pl_dataset_vt idx_vt = {
    .kind = "idx",
    .read = idx_read,
    .view = idx_view,
    .regions = idx_regions,
    .destroy_impl = idx_destroy,
};

/* Labels are one number per sample (1 dim), images at least a row (2 or
 * more): this catches swapped files and the same file given twice. */
static pl_status idx_check_roles(const idx_impl *im, const char *images,
                                 const char *labels, pl_error *err) {
  if (im->file[0].ndim < 2)
    return pl_errorf(err, PL_FORMAT,
                     "%s: an IDX images file has 2 or more dims, this one has "
                     "1: it looks like a labels file (the images file comes "
                     "first, then the labels)", images);
  if (im->file[1].ndim != 1)
    return pl_errorf(err, PL_FORMAT,
                     "%s: an IDX labels file has 1 dim, this one has %d: it "
                     "looks like an images file (the images file comes "
                     "first, then the labels)", labels, im->file[1].ndim);
  return PL_OK;
}

static pl_status idx_open_both(idx_impl *im, const char *images,
                               const char *labels, pl_error *err) {
  PL_TRY(idx_open_file(images, &im->file[0], err));
  PL_TRY(idx_open_file(labels, &im->file[1], err));
  PL_TRY(idx_check_roles(im, images, labels, err));
  if (im->file[0].dims[0] != im->file[1].dims[0])
    return pl_errorf(err, PL_FORMAT,
                     "%s has %llu images but %s has %llu labels", images,
                     (unsigned long long)im->file[0].dims[0], labels,
                     (unsigned long long)im->file[1].dims[0]);
  return PL_OK;
}

pl_status pl_dataset_open_idx(const char *images_path,
                              const char *labels_path, pl_dataset **out,
                              pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!images_path || !labels_path)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "an images file and a labels file are required");
  idx_impl *im = calloc(1, sizeof *im);
  if (!im)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = idx_open_both(im, images_path, labels_path, err);
  if (s == PL_OK) {
    pl_field fields[2];
    idx_field(&im->file[0], "image", &fields[0]);
    idx_field(&im->file[1], "label", &fields[1]);
    s = pl_dataset_new(&idx_vt, im, im->file[0].dims[0], fields, 2, out, err);
  }
  if (s != PL_OK)
    idx_destroy(im);
  return s;
}

pl_status pl_source_open_idx(const char *const *paths, int npaths,
                             const pl_options *o, pl_dataset **out,
                             pl_error *err) {
  if (npaths != 2)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "idx takes 2 files (images, labels), got %d", npaths);
  return pl_dataset_open_idx(paths[0], paths[1], out, err);
}
