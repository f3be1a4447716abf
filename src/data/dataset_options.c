/* "key=value&key=value" source options (see dataset_options.h). */
#include "data/dataset_options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether `word` is one of the space-separated words of `list`; *pos gets
 * its position. */
static bool word_in(const char *list, const char *word, int *pos) {
  size_t n = strlen(word);
  int i = 0;
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ' ');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && !strncmp(p, word, n)) {
      if (pos)
        *pos = i;
      return true;
    }
    i++;
    p += len + (end != NULL);
  }
  return false;
}

static pl_status parse_pair(pl_options *o, char *item, const char *allowed,
                            pl_error *err) {
  char *eq = strchr(item, '=');
  if (!eq || eq == item || !eq[1])
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s option '%s': want KEY=VALUE", o->kind, item);
  *eq = '\0';
  if (!word_in(allowed, item, NULL))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s: unknown option '%s' (options: %s)", o->kind, item,
                     allowed);
  if (pl_options_get(o, item))
    return pl_errorf(err, PL_INVALID_ARGUMENT, "%s: option '%s' given twice",
                     o->kind, item);
  if (o->n == PL_OPTIONS_MAX)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "%s: too many options",
                     o->kind);
  o->key[o->n] = item;
  o->value[o->n] = eq + 1;
  o->n++;
  return PL_OK;
}

pl_status pl_options_parse(const char *kind, const char *text,
                           const char *allowed, pl_options *o,
                           pl_error *err) {
  memset(o, 0, sizeof *o);
  o->kind = kind;
  if (!text || !text[0])
    return PL_OK;
  if (!(o->buf = strdup(text)))
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  for (char *p = o->buf; p;) {
    char *amp = strchr(p, '&');
    if (amp)
      *amp = '\0';
    pl_status s = parse_pair(o, p, allowed, err);
    if (s != PL_OK) {
      pl_options_free(o);
      return s;
    }
    p = amp ? amp + 1 : NULL;
  }
  return PL_OK;
}

void pl_options_free(pl_options *o) {
  free(o->buf);
  memset(o, 0, sizeof *o);
}

const char *pl_options_get(const pl_options *o, const char *key) {
  for (int i = 0; i < o->n; i++)
    if (!strcmp(o->key[i], key))
      return o->value[i];
  return NULL;
}

pl_status pl_options_u64(const pl_options *o, const char *key, uint64_t max,
                         uint64_t *out, pl_error *err) {
  const char *v = pl_options_get(o, key);
  if (!v)
    return PL_OK;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || *end || errno || x > max)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s option %s=%s: want an integer from 0 to %llu",
                     o->kind, key, v, (unsigned long long)max);
  *out = x;
  return PL_OK;
}

static bool parse_double(const char *v, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (!*v || *end || errno || !isfinite(x))
    return false;
  *out = x;
  return true;
}

pl_status pl_options_double(const pl_options *o, const char *key, double lo,
                            double hi, double *out, pl_error *err) {
  const char *v = pl_options_get(o, key);
  double x;
  if (!v)
    return PL_OK;
  if (!parse_double(v, &x) || x < lo || x > hi)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s option %s=%s: want a number from %g to %g", o->kind,
                     key, v, lo, hi);
  *out = x;
  return PL_OK;
}

pl_status pl_options_pair(const pl_options *o, const char *key, double *a,
                          double *b, pl_error *err) {
  const char *v = pl_options_get(o, key);
  if (!v)
    return PL_OK;
  char tmp[64];
  const char *colon = strchr(v, ':');
  double x, y;
  bool ok = colon && (size_t)(colon - v) < sizeof tmp;
  if (ok) {
    memcpy(tmp, v, (size_t)(colon - v));
    tmp[colon - v] = '\0';
    ok = parse_double(tmp, &x) && parse_double(colon + 1, &y);
  }
  if (!ok)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s option %s=%s: want two numbers MIN:MAX", o->kind,
                     key, v);
  *a = x;
  *b = y;
  return PL_OK;
}

pl_status pl_options_choice(const pl_options *o, const char *key,
                            const char *choices, int *out, pl_error *err) {
  const char *v = pl_options_get(o, key);
  if (v && !word_in(choices, v, out))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s option %s=%s: want one of: %s", o->kind, key, v,
                     choices);
  return PL_OK;
}

pl_status pl_options_key_of(const pl_options *o, const char *name,
                            const char *alias, const char **key,
                            pl_error *err) {
  *key = pl_options_get(o, alias) ? alias : name;
  if (pl_options_get(o, alias) && pl_options_get(o, name))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s: options '%s' and '%s' (its deprecated spelling) "
                     "both given",
                     o->kind, name, alias);
  return PL_OK;
}
