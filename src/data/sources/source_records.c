/* Fixed-size records in one or more files: the general source that CIFAR-10
 * (and any "header + N equal records" format) is built on.
 *
 * Sample i lives in the file f whose record range [start[f], start[f+1])
 * holds i; a read is one memcpy per field out of the mapping, and `view`
 * hands out a pointer into it. */
#include "data/dataset.h"
#include "core/memcopy.h"
#include "data/file_map.h"

#include <stdlib.h>
#include <string.h>

typedef struct records_impl {
  uint64_t header_bytes, record_bytes;
  int nfields;
  uint64_t *offsets;     /* per field, within a record */
  uint64_t *field_bytes; /* per field */
  int nfiles;
  pl_file_map *maps;
  uint64_t *start; /* nfiles + 1 prefix sums of records per file */
} records_impl;

static void records_destroy(void *p) {
  records_impl *r = p;
  if (!r)
    return;
  for (int f = 0; f < r->nfiles; f++)
    pl_file_map_close(&r->maps[f]);
  free(r->maps);
  free(r->start);
  free(r->offsets);
  free(r->field_bytes);
  free(r);
}

/* The file holding global record `index`: the last f with start[f] <= index
 * (files without records are skipped over since their range is empty). */
static int records_file_of(const records_impl *r, uint64_t index) {
  return pl_part_of(r->start, r->nfiles, index);
}

static const uint8_t *records_at(const records_impl *r, uint64_t index) {
  int f = records_file_of(r, index);
  uint64_t k = index - r->start[f];
  return r->maps[f].data + r->header_bytes + k * r->record_bytes;
}

static pl_status records_read(const pl_dataset *ds, uint64_t index,
                              const pl_sample_ctx *ctx, void *const *dst,
                              pl_error *err) {
  const records_impl *r = ds->impl;
  const uint8_t *rec = records_at(r, index);
  for (int i = 0; i < r->nfields; i++)
    pl_copy_stream(dst[i], rec + r->offsets[i], r->field_bytes[i]);
  return PL_OK;
}

static const void *records_view(const pl_dataset *ds, uint64_t index,
                                int field) {
  const records_impl *r = ds->impl;
  return records_at(r, index) + r->offsets[field];
}

/* Every field is interleaved in every file. */
static int records_regions(const pl_dataset *ds, int field, pl_region *out,
                           int max) {
  const records_impl *r = ds->impl;
  int n = 0;
  (void)field;
  for (int f = 0; f < r->nfiles; f++) {
    const pl_file_map *m = &r->maps[f];
    if (m->size == 0)
      continue;
    if (n < max)
      out[n] = (pl_region){m->data, m->size, PL_FILE_MAP_REGION(m)};
    n++;
  }
  return n;
}

static const pl_dataset_vt records_vt = {
    .kind = "records",
    .read = records_read,
    .view = records_view,
    .regions = records_regions,
    .destroy_impl = records_destroy,
};

static pl_status check_format(const pl_record_format *fmt, pl_error *err) {
  if (fmt->record_bytes == 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "record_bytes must be > 0");
  if (fmt->nfields <= 0 || !fmt->fields || !fmt->offsets)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "a record format needs fields and their offsets");
  for (int i = 0; i < fmt->nfields; i++) {
    const pl_field *f = &fmt->fields[i];
    uint64_t bytes = pl_field_bytes(f), end;
    if (bytes == 0 || !memchr(f->name, '\0', PL_NAME_MAX))
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "field %d: invalid name, dtype or shape", i);
    if (!pl_add_u64(fmt->offsets[i], bytes, &end) || end > fmt->record_bytes)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "field '%s': offset %llu + %llu bytes does not fit in "
                       "a %llu-byte record",
                       f->name, (unsigned long long)fmt->offsets[i],
                       (unsigned long long)bytes,
                       (unsigned long long)fmt->record_bytes);
  }
  return PL_OK;
}

/* Records in one mapped file, or a PL_FORMAT error naming it. */
static pl_status count_records(const pl_file_map *m, uint64_t header,
                               uint64_t record, uint64_t *n, pl_error *err) {
  if (m->size < header)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the file is %llu bytes, shorter than the %llu-byte "
                     "header",
                     m->path, (unsigned long long)m->size,
                     (unsigned long long)header);
  uint64_t body = m->size - header;
  *n = body / record;
  if (body % record != 0)
    return pl_errorf(err, PL_FORMAT,
                     "%s: %llu bytes after the %llu-byte header are not a "
                     "whole number of %llu-byte records (%llu records and "
                     "%llu bytes left)",
                     m->path, (unsigned long long)body,
                     (unsigned long long)header, (unsigned long long)record,
                     (unsigned long long)*n,
                     (unsigned long long)(body % record));
  return PL_OK;
}

static pl_status records_alloc(const pl_record_format *fmt, int npaths,
                               records_impl **out, pl_error *err) {
  records_impl *r = calloc(1, sizeof *r);
  if (r) {
    r->maps = calloc((size_t)npaths, sizeof *r->maps);
    r->start = calloc((size_t)npaths + 1, sizeof *r->start);
    r->offsets = calloc((size_t)fmt->nfields, sizeof *r->offsets);
    r->field_bytes = calloc((size_t)fmt->nfields, sizeof *r->field_bytes);
  }
  if (!r || !r->maps || !r->start || !r->offsets || !r->field_bytes) {
    records_destroy(r);
    return pl_errorf(err, PL_NO_MEMORY, "out of memory opening records");
  }
  r->header_bytes = fmt->header_bytes;
  r->record_bytes = fmt->record_bytes;
  r->nfields = fmt->nfields;
  for (int i = 0; i < fmt->nfields; i++) {
    r->offsets[i] = fmt->offsets[i];
    r->field_bytes[i] = pl_field_bytes(&fmt->fields[i]);
  }
  *out = r;
  return PL_OK;
}

static pl_status records_map_files(records_impl *r, const char *const *paths,
                                   int npaths, pl_error *err) {
  for (int f = 0; f < npaths; f++) {
    if (!paths[f])
      return pl_errorf(err, PL_INVALID_ARGUMENT, "path %d is NULL", f);
    pl_status s = pl_file_map_open(paths[f], &r->maps[f], err);
    r->nfiles = s == PL_OK ? f + 1 : f; /* so that destroy closes it */
    uint64_t n = 0;
    if (s == PL_OK)
      s = count_records(&r->maps[f], r->header_bytes, r->record_bytes, &n, err);
    if (s != PL_OK) {
      pl_error_set_path(err, paths[f]);
      return s;
    }
    if (!pl_add_u64(r->start[f], n, &r->start[f + 1]))
      return pl_errorf(err, PL_FORMAT, "%s: too many records in total",
                       paths[f]);
  }
  return PL_OK;
}

pl_status pl_dataset_open_records(const pl_record_format *fmt,
                                  const char *const *paths, int npaths,
                                  pl_dataset **out, pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!fmt || !paths || npaths <= 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "a record format and at least one file are required");
  PL_TRY(check_format(fmt, err));
  records_impl *r = NULL;
  PL_TRY(records_alloc(fmt, npaths, &r, err));
  pl_status s = records_map_files(r, paths, npaths, err);
  if (s == PL_OK)
    s = pl_dataset_new(&records_vt, r, r->start[npaths], fmt->fields,
                       fmt->nfields, out, err);
  if (s != PL_OK)
    records_destroy(r);
  return s;
}
