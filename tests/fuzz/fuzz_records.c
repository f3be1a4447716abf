/* Fuzz pl_dataset_open_records with a format taken from the input's first
 * bytes (zstd's data-producer style): header_bytes, record_bytes, fields
 * (dtype, ndim, shape, name, offset), file count and gzip flags; the rest
 * becomes the files' bytes. Also exercises the float32 view on field 0. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct producer {
  const uint8_t *p;
  size_t n;
} producer;

static uint32_t take(producer *pr, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; i++) {
    v |= (uint32_t)(pr->n ? pr->p[0] : 0) << (8 * i);
    if (pr->n) {
      pr->p++;
      pr->n--;
    }
  }
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  producer pr = {data, size};
  pl_record_format fmt;
  pl_field fields[4];
  uint64_t offsets[4];
  memset(fields, 0, sizeof fields);
  uint32_t hdr = take(&pr, 1);
  fmt.header_bytes = hdr == 255 ? UINT64_MAX - take(&pr, 1) : hdr;
  uint32_t rb = take(&pr, 2);
  fmt.record_bytes = rb >= 0xfff0 ? UINT64_MAX - (rb & 15) : rb;
  fmt.nfields = (int)(take(&pr, 1) % 6) - 1; /* -1..4: invalid counts too */
  for (int f = 0; f < 4; f++) {
    uint32_t t = take(&pr, 1);
    fields[f].dtype = (pl_dtype)(t % (PL_DTYPE_COUNT_ + 1));
    fields[f].ndim = (int)(take(&pr, 1) % 4);
    for (int d = 0; d < fields[f].ndim; d++) {
      uint32_t s = take(&pr, 1);
      fields[f].shape[d] = s == 255 ? INT64_MAX : (int64_t)s - 1;
    }
    uint32_t nm = take(&pr, 1);
    if (nm != 0)
      snprintf(fields[f].name, PL_NAME_MAX, "f%u", nm % 5);
    uint32_t o = take(&pr, 2);
    offsets[f] = o == 0xffff ? UINT64_MAX : o;
  }
  fmt.fields = fields;
  fmt.offsets = offsets;
  uint32_t fl = take(&pr, 1);
  int nfiles = 1 + (int)(fl % 3);
  size_t part = take(&pr, 2);
  char paths[3][128];
  const char *pp[3];
  for (int i = 0; i < nfiles; i++) {
    size_t n = i == nfiles - 1 ? pr.n : (part < pr.n ? part : pr.n);
    char name[16];
    snprintf(name, sizeof name, "rec%d", i);
    pp[i] = fuzz_put(paths[i], name, (int)((fl >> (2 + 2 * i)) % 3), pr.p, n);
    pr.p += n;
    pr.n -= n;
  }
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s = pl_dataset_open_records(&fmt, pp, nfiles, &ds, &err);
  if (s == PL_OK) {
    fuzz_check_dataset(ds);
    pl_dataset *f32 = NULL;
    const pl_field *f0 = pl_dataset_field(ds, 0);
    if (pl_dataset_to_float32(ds, f0->name, 0.5f, &f32, &err) == PL_OK) {
      fuzz_check_dataset(f32);
      pl_dataset_destroy(f32);
    }
    pl_dataset_destroy(ds);
  } else if (ds || !err.message[0] || err.status != s) {
    abort();
  }
  for (int i = 0; i < nfiles; i++)
    unlink(pp[i]);
  return 0;
}
