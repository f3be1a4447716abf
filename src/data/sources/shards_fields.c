/* The tar shards source's fields and paths (shards_internal.h): fields
 * named NAME:EXT[;EXT...][:KIND], members matched by extension, and
 * brace patterns expanded as WebDataset's braceexpand does. */
#include "data/sources/shards_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- fields */

/* By the first alternative's last part: "seg.png" is an image. */
static field_kind default_kind(const char *exts) {
  char whole[128];
  size_t n = strcspn(exts, ";");
  snprintf(whole, sizeof whole, "%.*s", (int)PL_MIN(n, 127), exts);
  const char *dot = strrchr(whole, '.');
  const char *first = dot ? dot + 1 : whole;
  if (!strcasecmp(first, "jpg") || !strcasecmp(first, "jpeg") ||
      !strcasecmp(first, "png"))
    return F_IMAGE;
  if (!strcasecmp(first, "npy"))
    return F_NPY;
  return !strcasecmp(first, "cls") ? F_INT : F_BYTES;
}

static pl_status parse_field(shards_impl *im, char *item, pl_error *err) {
  char *c1 = strchr(item, ':');
  char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c1 || c1 == item || !c1[1] || (c2 && (c2 == c1 + 1 || !c2[1])))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: field '%s' (want NAME:EXT[;EXT...][:KIND])",
                     item);
  if (im->nf == MAX_FIELDS)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "shards: over %d fields",
                     MAX_FIELDS);
  *c1 = '\0';
  if (c2)
    *c2 = '\0';
  field_spec *f = &im->f[im->nf++];
  if (strlen(item) + 5 > PL_NAME_MAX || strlen(c1 + 1) >= sizeof f->exts)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "shards: field '%s': name "
                     "or extensions too long", item);
  strcpy(f->name, item);
  snprintf(f->len_name, sizeof f->len_name, "%s_len", item);
  strcpy(f->exts, c1 + 1);
  f->kind = default_kind(f->exts);
  if (!c2)
    return PL_OK;
  if (!strcmp(c2 + 1, "image"))
    f->kind = F_IMAGE;
  else if (!strcmp(c2 + 1, "int"))
    f->kind = F_INT;
  else if (!strcmp(c2 + 1, "bytes"))
    f->kind = F_BYTES;
  else if (!strcmp(c2 + 1, "npy"))
    f->kind = F_NPY;
  else
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: field '%s': kind '%s' (want image, int, bytes "
                     "or npy)", item, c2 + 1);
  return PL_OK;
}

pl_status pl_shards_parse_fields(shards_impl *im, pl_error *err) {
  char *save = NULL;
  for (char *t = strtok_r(im->fields_text, ",", &save); t;
       t = strtok_r(NULL, ",", &save))
    PL_TRY(parse_field(im, t, err));
  if (!im->nf)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "shards: no fields");
  return PL_OK;
}

/* The dataset's fields: a bytes field is two (its bytes, its length). */
int pl_shards_make_fields(const shards_impl *im, pl_field *out) {
  int k = 0;
  int64_t size = im->opt.image.size;
  for (int i = 0; i < im->nf; i++) {
    const field_spec *f = &im->f[i];
    pl_field *o = &out[k++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", f->name);
    o->dtype = f->kind == F_INT ? PL_INT64 : PL_UINT8;
    if (f->kind == F_NPY) {
      o->dtype = f->npy.dtype;
      o->ndim = f->npy.ndim;
      memcpy(o->shape, f->npy.shape, sizeof o->shape);
    } else if (f->kind == F_IMAGE) {
      o->ndim = 3;
      o->shape[0] = 3, o->shape[1] = size, o->shape[2] = size;
    } else if (f->kind == F_BYTES) {
      o->ndim = 1;
      o->shape[0] = im->opt.max_bytes;
      pl_field *l = &out[k++];
      memset(l, 0, sizeof *l);
      snprintf(l->name, sizeof l->name, "%s", f->len_name);
      l->dtype = PL_INT64;
    }
  }
  return k;
}

static bool ext_matches(const char *exts, const char *ext) {
  size_t len = strlen(ext);
  for (const char *p = exts; *p;) {
    size_t n = strcspn(p, ";");
    if (n == len && !strncasecmp(p, ext, n)) /* webdataset lowercases */
      return true;
    p += n + (p[n] == ';');
  }
  return false;
}

static pl_status missing(const shard *sh, uint64_t j, const field_spec *f,
                         pl_error *err) {
  char have[256] = "";
  size_t used = 0;
  for (uint64_t m = sh->ix.first[j];
       m < sh->ix.first[j + 1] && used + 1 < sizeof have; m++) {
    int w = snprintf(have + used, sizeof have - used, "%s%s", used ? ", " : "",
                     pl_tar_ext(&sh->ix, m));
    used = PL_MIN(used + (size_t)PL_MAX(w, 0), sizeof have - 1);
  }
  pl_errorf(err, PL_FORMAT,
            "%s: sample '%s' has no member for field '%s' (want extension "
            "%s; it has %s)",
            sh->path, pl_tar_key(&sh->ix, sh->ix.first[j]), f->name, f->exts,
            have);
  pl_error_set_path(err, sh->path);
  return PL_FORMAT;
}

pl_status pl_shards_member(const shard *sh, uint64_t j, const field_spec *f,
                           uint64_t *m, pl_error *err) {
  uint64_t k = sh->ix.first[j];
  uint64_t end = sh->ix.first[j + 1];
  while (k < end && !ext_matches(f->exts, pl_tar_ext(&sh->ix, k)))
    k++;
  if (k == end)
    return missing(sh, j, f, err);
  *m = k;
  return PL_OK;
}

void pl_shards_member_label(const shard *sh, uint64_t m, char *out,
                            size_t cap) {
  snprintf(out, cap, "%s: %s.%s", sh->path, pl_tar_key(&sh->ix, m),
           pl_tar_ext(&sh->ix, m));
}

/* ---------------------------------------------------------------- brace
 * patterns: "a-{000..099}.tar" as WebDataset (braceexpand) writes them,
 * each {A..B} a range of integers, zero-padded to A's width when A has a
 * leading zero, or {x,y,z} a list of alternatives (a mix of folders or
 * splits: "{train,extra}-{0..9}.tar"); several braces multiply, the
 * leftmost varying slowest, as braceexpand orders them. */

static pl_status strv_add(strv *l, const char *s, size_t n, pl_error *err) {
  if (l->n == MAX_SHARDS)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "shards: over %d shards",
                     MAX_SHARDS);
  if (l->n == l->cap) {
    int cap = PL_MAX(l->cap * 2, 16);
    char **v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory");
    l->v = v, l->cap = cap;
  }
  if (!(l->v[l->n] = strndup(s, n)))
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  l->n++;
  return PL_OK;
}

void pl_shards_strv_free(strv *l) {
  for (int i = 0; i < l->n; i++)
    free(l->v[i]);
  free(l->v);
}

/* {x,y,z}: pat with each alternative in place of the brace, in turn. */
static pl_status expand_list(const char *pat, const char *open,
                             const char *close, strv *out, pl_error *err) {
  size_t len = strlen(pat) + 1;
  char *buf = malloc(len);
  if (!buf)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = PL_OK;
  for (const char *alt = open + 1; s == PL_OK && alt <= close;) {
    const char *end = memchr(alt, ',', (size_t)(close - alt));
    if (!end)
      end = close;
    snprintf(buf, len, "%.*s%.*s%s", (int)(open - pat), pat,
             (int)(end - alt), alt, close + 1);
    s = pl_shards_expand(buf, out, err);
    alt = end + 1;
  }
  free(buf);
  return s;
}

pl_status pl_shards_expand(const char *pat, strv *out, pl_error *err) {
  const char *open = strchr(pat, '{');
  const char *close = open ? strchr(open, '}') : NULL;
  if (!open)
    return strv_add(out, pat, strlen(pat), err);
  const char *inner = close ? memchr(open + 1, '{', (size_t)(close - open - 1))
                            : NULL;
  if (close && !inner && memchr(open, ',', (size_t)(close - open)))
    return expand_list(pat, open, close, out, err);
  const char *dots = close ? strstr(open, "..") : NULL;
  char *end1, *end2;
  unsigned long long a = strtoull(open + 1, &end1, 10);
  unsigned long long b = dots ? strtoull(dots + 2, &end2, 10) : 0;
  if (!close || !dots || dots > close || end1 != dots || end2 != close ||
      end1 == open + 1 || end2 == dots + 2 || b < a || b - a >= MAX_SHARDS)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "shards: '%s': a brace must be {FIRST..LAST} with "
                     "FIRST <= LAST, or {A,B,...}", pat);
  int width = open[1] == '0' ? (int)(dots - open - 1) : 0;
  size_t len = strlen(pat) + 32;
  char *buf = malloc(len);
  if (!buf)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = PL_OK;
  for (unsigned long long i = a; s == PL_OK && i <= b; i++) {
    snprintf(buf, len, "%.*s%0*llu%s", (int)(open - pat), pat, width, i,
             close + 1);
    s = pl_shards_expand(buf, out, err);
  }
  free(buf);
  return s;
}
