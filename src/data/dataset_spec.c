/* Dataset specs, as the CLI's --dataset takes them:
 *   idx:IMAGES,LABELS
 *   cifar10:FILE[,FILE...]
 * The kind ends at the first ':'; the rest is split on ',' (so paths may
 * hold ':' but not ','). Parsed strictly: no empty paths, no spaces
 * trimmed. */
#include "data/dataset.h"

#include <stdlib.h>
#include <string.h>

#define SPEC_USAGE "(want idx:IMAGES,LABELS or cifar10:FILE[,FILE...])"

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

static pl_status open_kind(const char *spec, const char *kind, char **paths,
                           int n, pl_dataset **out, pl_error *err) {
  if (!strcmp(kind, "idx")) {
    if (n != 2)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "dataset spec '%s': idx takes 2 files (images, "
                       "labels), got %d",
                       spec, n);
    return pl_dataset_open_idx(paths[0], paths[1], out, err);
  }
  return pl_dataset_open_cifar10((const char *const *)paths, n, out, err);
}

static pl_status check_kind(const char *spec, const char *kind, bool files,
                            pl_error *err) {
  if (strcmp(kind, "idx") && strcmp(kind, "cifar10"))
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
  copy[colon - spec] = '\0';
  char **paths = NULL;
  int n = 0;
  pl_status s = check_kind(spec, copy, colon[1] != '\0', err);
  if (s == PL_OK)
    s = split_paths(spec, copy + (colon - spec) + 1, &paths, &n, err);
  if (s == PL_OK)
    s = open_kind(spec, copy, paths, n, out, err);
  free(paths);
  free(copy);
  return s;
}
