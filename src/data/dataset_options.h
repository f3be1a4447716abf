/* Source options as specs and pl_dataset_open take them: "key=value" pairs
 * joined by '&' ("context=1024&samples=50000"). Parsed strictly: an unknown
 * key, a repeated key, a missing '=' or a value that does not parse is an
 * error naming the source kind, the key and what it wants. */
#ifndef PL_DATASET_OPTIONS_H
#define PL_DATASET_OPTIONS_H

#include "core/common.h"

#define PL_OPTIONS_MAX 24

typedef struct pl_options {
  const char *kind; /* for messages: "tokens" */
  char *buf;        /* the parsed copy; keys and values point into it */
  int n;
  const char *key[PL_OPTIONS_MAX];
  const char *value[PL_OPTIONS_MAX];
} pl_options;

/* Parses `text` (NULL or "" for none). `allowed` is the keys this kind
 * takes, space-separated; any other key is refused with that list. */
pl_status pl_options_parse(const char *kind, const char *text,
                           const char *allowed, pl_options *o,
                           pl_error *err);
void pl_options_free(pl_options *o);

/* Typed getters: leave *out untouched when the key is absent. */
pl_status pl_options_u64(const pl_options *o, const char *key, uint64_t max,
                         uint64_t *out, pl_error *err);
pl_status pl_options_double(const pl_options *o, const char *key, double lo,
                            double hi, double *out, pl_error *err);
/* "A:B" pairs such as scale=0.08:1 */
pl_status pl_options_pair(const pl_options *o, const char *key, double *a,
                          double *b, pl_error *err);
/* One of the words in `choices` (space-separated); *out is its position. */
pl_status pl_options_choice(const pl_options *o, const char *key,
                            const char *choices, int *out, pl_error *err);
/* The key an option was given under: its name, or its deprecated alias;
 * both at once are refused. */
pl_status pl_options_key_of(const pl_options *o, const char *name,
                            const char *alias, const char **key, pl_error *err);
/* The value as given, or NULL. */
const char *pl_options_get(const pl_options *o, const char *key);

#endif /* PL_DATASET_OPTIONS_H */
