/* A tar shards sample's fields from its members (shards_internal.h):
 * integers, byte strings, arrays and images. */
#include "data/sources/shards_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_MEMBER PL_IMAGE_SAMPLE_FREE_SLOT

/* The bytes of member m: in the mapping, or fetched into the scratch. */
static pl_status member_bytes(shards_impl *im, shard *sh, uint64_t m,
                              pl_scratch *sc, const uint8_t **out,
                              pl_error *err) {
  const pl_tar_member *t = &sh->ix.members[m];
  static const uint8_t none[1];
  if (sh->map.data || !t->size) { /* a range of 0 bytes would be "to the end" */
    *out = sh->map.data ? sh->map.data + t->offset : none;
    return PL_OK;
  }
  buf_sink b = {pl_scratch_get(sc, SLOT_MEMBER, t->size ? t->size : 1), 0,
                t->size};
  if (!b.p)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  PL_TRY(pl_shards_remote_get(im, sh, t->offset, t->size, &sh->meta,
                              pl_shards_to_buf, &b, NULL, err));
  if (b.n != t->size) /* a fetcher of one's own that fell short */
    return pl_errorf(err, PL_IO, "%s: %s.%s: %llu of its %llu bytes came",
                     sh->path, pl_tar_key(&sh->ix, m), pl_tar_ext(&sh->ix, m),
                     (unsigned long long)b.n, (unsigned long long)t->size);
  *out = b.p;
  return PL_OK;
}

static pl_status to_int(const shard *sh, uint64_t m, const uint8_t *p,
                        uint64_t n, void *dst, pl_error *err) {
  char text[32];
  while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' '))
    n--;
  char *end = NULL;
  long long v = 0;
  if (n && n < sizeof text) {
    memcpy(text, p, n);
    text[n] = '\0';
    errno = 0;
    v = strtoll(text, &end, 10);
  }
  if (!end || *end || end == text || errno == ERANGE)
    return pl_errorf(err, PL_FORMAT, "%s: %s.%s: not an integer", sh->path,
                     pl_tar_key(&sh->ix, m), pl_tar_ext(&sh->ix, m));
  int64_t x = v;
  memcpy(dst, &x, sizeof x);
  return PL_OK;
}

static void shape_text(const pl_npy_view *v, char *out, size_t cap) {
  size_t used = (size_t)snprintf(out, cap, "%s (", pl_dtype_name(v->dtype));
  for (int d = 0; d < v->ndim && used < cap; d++)
    used += (size_t)snprintf(out + used, cap - used, "%s%lld", d ? ", " : "",
                             (long long)v->shape[d]);
  if (used < cap)
    snprintf(out + used, cap - used, ")");
}

/* An array member: the dtype and shape of the field, or refused. */
static pl_status to_npy(const shard *sh, uint64_t m, const field_spec *f,
                        const uint8_t *p, uint64_t n, void *dst,
                        pl_error *err) {
  char label[512];
  pl_shards_member_label(sh, m, label, sizeof label);
  pl_npy_view v;
  PL_TRY(pl_npy_view_parse(label, p, n, &v, err));
  if (v.dtype != f->npy.dtype || v.ndim != f->npy.ndim ||
      memcmp(v.shape, f->npy.shape, sizeof v.shape)) {
    char got[160], want[160];
    shape_text(&v, got, sizeof got);
    shape_text(&f->npy, want, sizeof want);
    return pl_errorf(err, PL_FORMAT,
                     "%s: %s, but field '%s' is %s (its first sample's)",
                     label, got, f->name, want);
  }
  pl_npy_view_copy(&v, dst);
  return PL_OK;
}

static pl_status one_field(shards_impl *im, shard *sh, uint64_t m,
                           const field_spec *f, uint64_t index,
                           const pl_sample_ctx *ctx, pl_scratch *sc,
                           void *const *dst, pl_error *err) {
  const uint8_t *p = NULL;
  uint64_t n = sh->ix.members[m].size;
  PL_TRY(member_bytes(im, sh, m, sc, &p, err));
  if (f->kind == F_INT)
    return to_int(sh, m, p, n, dst[0], err);
  if (f->kind == F_NPY)
    return to_npy(sh, m, f, p, n, dst[0], err);
  if (f->kind == F_BYTES) {
    if (n > im->opt.max_bytes)
      return pl_errorf(err, PL_FORMAT, "%s: %s.%s: %llu bytes, over "
                       "max_bytes %u", sh->path, pl_tar_key(&sh->ix, m),
                       pl_tar_ext(&sh->ix, m), (unsigned long long)n,
                       im->opt.max_bytes);
    memcpy(dst[0], p, (size_t)n);
    memset((uint8_t *)dst[0] + n, 0, (size_t)(im->opt.max_bytes - n));
    int64_t len = (int64_t)n;
    memcpy(dst[1], &len, sizeof len);
    return PL_OK;
  }
  char name[512];
  snprintf(name, sizeof name, "%s:%s.%s", sh->path, pl_tar_key(&sh->ix, m),
           pl_tar_ext(&sh->ix, m));
  pl_sample_ctx zero = {0};
  return pl_image_sample_from_bytes(&im->opt.image, p, (size_t)n, name,
                                    ctx ? ctx : &zero, index, sc, dst[0],
                                    NULL, err);
}

static int find_shard(const shards_impl *im, uint64_t index) {
  int lo = 0, hi = im->n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (im->s[mid].first <= index)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

static pl_status read_fields(shards_impl *im, shard *sh, uint64_t j,
                             uint64_t index, const pl_sample_ctx *ctx,
                             pl_scratch *sc, void *const *dst, pl_error *err) {
  int k = 0;
  for (int i = 0; i < im->nf; i++) {
    const field_spec *f = &im->f[i];
    uint64_t m;
    PL_TRY(pl_shards_member(sh, j, f, &m, err));
    PL_TRY(one_field(im, sh, m, f, index, ctx, sc, dst + k, err));
    k += f->kind == F_BYTES ? 2 : 1;
  }
  return PL_OK;
}

pl_status pl_shards_read(const pl_dataset *ds, uint64_t index,
                             const pl_sample_ctx *ctx, void *const *dst,
                             pl_error *err) {
  shards_impl *im = ds->impl;
  shard *sh = &im->s[find_shard(im, index)];
  bool hold = sh->remote && im->opt.readahead == PL_SHARDS_WHOLE;
  if (hold)
    PL_TRY(pl_shards_acquire(im, sh, err));
  pl_scratch *sc = pl_scratch_take(&im->scratch);
  pl_status s = sc ? read_fields(im, sh, index - sh->first, index, ctx, sc,
                                 dst, err)
                   : pl_errorf(err, PL_NO_MEMORY, "shards: out of memory");
  if (sc)
    pl_scratch_give(&im->scratch, sc);
  if (hold)
    pl_shards_release(im, sh);
  return s;
}

const char *pl_shards_sample_path(const pl_dataset *ds, uint64_t index,
                                      int64_t *label) {
  const shards_impl *im = ds->impl;
  if (label)
    *label = -1;
  return im->s[find_shard(im, index)].path;
}
