/* Dataset specs, as the CLI's --dataset takes them, and pl_dataset_open,
 * which turns a kind, files and "key=value&..." options into a source.
 * The kinds, their usage lines and keys are the rows of the source
 * registry (sources/registry.c), e.g.
 *   tokens:FILE[,FILE...]?context=T[&samples=N][&stride=S][&dtype=D][&format=F]
 *   images:ROOT?size=224[&train=0][&scale=A:B][&ratio=A:B][&flip_p=P]...
 *   shards:A.tar[,B.tar|URL|PATTERN...]?fields=image:jpg,label:cls[&size=224]...
 * The kind ends at the first ':', the options begin at the last '?'; the
 * files between are split on ',' (so paths may hold ':' but not ',' or
 * '?'; the C and Python APIs take paths as a list, without these limits).
 * Parsed strictly: no empty paths, no spaces trimmed, unknown options
 * refused. */
#include "data/dataset.h"
#include "data/dataset_options.h"
#include "data/sources/registry.h"

#include <stdlib.h>
#include <string.h>

/* The usage of every kind, for messages: "(want idx:IMAGES,LABELS, ...)". */
#define WANT pl_source_want((char[512]){0}, 512)

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
                       "dataset spec '%s': path %d is empty %s", spec, i + 1,
                       WANT);
    }
  }
  *paths = v;
  *n = count;
  return PL_OK;
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
  const pl_source_row *row = pl_source_find(kind);
  if (!row)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "unknown dataset kind '%s' %s",
                     kind, WANT);
  if (!row->info.keys[0] && options && options[0])
    return pl_errorf(err, PL_INVALID_ARGUMENT, "%s takes no options", kind);
  pl_options o;
  PL_TRY(pl_options_parse(kind, options, row->info.keys, &o, err));
  pl_status s = row->open(paths, npaths, &o, out, err);
  pl_options_free(&o);
  return s;
}

static pl_status check_kind(const char *spec, const char *kind, bool files,
                            pl_error *err) {
  if (!pl_source_find(kind))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "dataset spec '%s': unknown kind '%s' %s", spec, kind,
                     WANT);
  if (!files)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "dataset spec '%s': no files after '%s:' %s", spec, kind,
                     WANT);
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
                     "dataset spec '%s': no 'KIND:' prefix %s", spec, WANT);
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
