/* A command's flags: the loader's options from the library's option table
 * (pl_option_info_at), the command's own flags from a small table, parsed
 * and described the same way. --flag value and --flag=value both work. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* Older or shorter spellings of table options; `value` fixes the value
 * (a switch), NULL takes one. */
typedef struct cli_alias {
  const char *name, *option, *value;
} cli_alias;

static const cli_alias aliases[] = {
    {"workers", "num_workers", NULL},     {"direct", "direct_copy", "1"},
    {"no-pin", "pin_memory", "0"},        {"sync", "non_blocking", "0"},
    {"copy-chunk", "copy_chunk_bytes", NULL}, {"timeout", "timeout_s", NULL},
    {"replay", "replay_batches", NULL},   {"no-timings", "timings", "0"},
};
enum { NALIASES = sizeof aliases / sizeof aliases[0] };

/* "batch_size" -> "batch-size". */
static void dashed(const char *name, char *buf, size_t n) {
  size_t i = 0;
  for (; name[i] && i + 1 < n; i++)
    buf[i] = name[i] == '_' ? '-' : name[i];
  buf[i] = '\0';
}

/* The table option whose flag is `flag` ("batch-size"), or -1. */
static int option_of_flag(const char *flag) {
  char buf[64];
  for (int i = 0; i < pl_option_count(); i++) {
    dashed(pl_option_info_at(i)->name, buf, sizeof buf);
    if (!strcmp(buf, flag))
      return i;
  }
  return -1;
}

/* ------------------------------------------------------------ suggestions */

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), row[64];
  if (lb >= 64 || la >= 64)
    return 64;
  for (size_t j = 0; j <= lb; j++)
    row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      best = PL_CLI_MIN(best, up + 1);
      row[j] = PL_CLI_MIN(best, row[j - 1] + 1);
      diag = up;
    }
  }
  return row[lb];
}

typedef struct suggestion {
  const char *typed;
  char best[72];
  size_t dist, key;
} suggestion;

/* Closest by edit distance; at a tie, a name the typed text begins (a
 * shortened flag: --epo is --epoch before --to). */
static void consider(suggestion *s, const char *name) {
  size_t d = edit_distance(s->typed, name);
  size_t key = 2 * d + !!strncmp(name, s->typed, strlen(s->typed));
  if (key < s->key) {
    s->dist = d;
    s->key = key;
    snprintf(s->best, sizeof s->best, "%s", name);
  }
}

/* The known flag closest to `typed`, when it is close enough to be a
 * typo; "" otherwise. */
static const char *closest(const cli_parser *p, const char *typed,
                           suggestion *s) {
  char buf[72];
  s->typed = typed;
  s->best[0] = '\0';
  s->dist = s->key = (size_t)-1;
  for (int i = 0; i < p->nflags; i++)
    consider(s, p->flags[i].name);
  for (int i = 0; i < NALIASES; i++)
    consider(s, aliases[i].name);
  for (int i = 0; i < pl_option_count(); i++) {
    const pl_option_info *o = pl_option_info_at(i);
    dashed(o->name, buf + 3, sizeof buf - 3);
    consider(s, buf + 3);
    if (o->type == PL_OPT_BOOL) {
      memcpy(buf, "no-", 3);
      consider(s, buf);
    }
  }
  consider(s, "help");
  size_t len = strlen(typed);
  return s->dist <= 2 || s->dist * 3 <= len ? s->best : "";
}

/* ------------------------------------------------------------ parsing */

static int usage_error(const cli_parser *p, const char *fmt, const char *a,
                       const char *b) {
  fprintf(stderr, "%s: ", p->cmd);
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, " (%s --help lists the options)\n", p->cmd);
  return 2;
}

static void mark_set(cli_parser *p, int i) {
  if (i >= 0 && (size_t)i < sizeof p->set)
    p->set[i] = 1;
}

int cli_was_set(const cli_parser *p, const char *name) {
  int i = pl_option_find(name);
  return i >= 0 && (size_t)i < sizeof p->set && p->set[i];
}

/* Sets table option i from text; the library checks the range. */
static int set_option(cli_parser *p, int i, const char *flag,
                      const char *value) {
  pl_error err;
  const pl_option_info *o = pl_option_info_at(i);
  if (pl_loader_config_set(p->cfg, o->name, value, &err) != PL_OK) {
    fprintf(stderr, "%s: --%s: %s\n", p->cmd, flag, err.message);
    return 2;
  }
  mark_set(p, i);
  if (o->type == PL_OPT_DEVICE && strchr(value, ':'))
    mark_set(p, pl_option_find("device_index")); /* cuda:N names it */
  return 0;
}

/* A command's own flag with a count: strict digits in [min, max]. */
static int parse_count(const cli_parser *p, const cli_flag *f,
                       const char *value, uint64_t *out) {
  if (cli_parse_u64(value, out) == 0 && *out >= f->min && *out <= f->max)
    return 0;
  int digits = value[0] >= '0' && value[0] <= '9';
  fprintf(stderr, "%s: --%s must be %sin [%llu, %llu], got %s%s%s%s\n",
          p->cmd, f->name, digits ? "" : "an integer ",
          (unsigned long long)f->min, (unsigned long long)f->max,
          digits ? "" : "\"", value, digits ? "" : "\"", f->hint ? f->hint : "");
  return 2;
}

/* Takes the flag's value: inline (--a=v) or the next argument. */
static const char *take_value(int argc, char **argv, int *i,
                              const char *inline_value) {
  if (inline_value)
    return inline_value;
  if (*i + 1 >= argc)
    return NULL;
  return argv[++*i];
}

static int command_flag(cli_parser *p, const cli_flag *f, int argc,
                        char **argv, int *i, const char *inl) {
  uint64_t n = 0;
  if (!f->arg) {
    if (inl)
      return usage_error(p, "--%s takes no value%s", f->name, "");
    return p->on_flag(p->user, f, NULL, 0);
  }
  const char *v = take_value(argc, argv, i, inl);
  if (!v)
    return usage_error(p, "--%s needs a value (%s)", f->name, f->arg);
  if (f->count && parse_count(p, f, v, &n))
    return 2;
  return p->on_flag(p->user, f, v, n);
}

static int alias_flag(cli_parser *p, const cli_alias *a, int argc,
                      char **argv, int *i, const char *inl) {
  int o = pl_option_find(a->option);
  if (a->value) {
    if (inl)
      return usage_error(p, "--%s takes no value%s", a->name, "");
    return set_option(p, o, a->name, a->value);
  }
  const char *v = take_value(argc, argv, i, inl);
  if (!v)
    return usage_error(p, "--%s needs a value%s", a->name, "");
  return set_option(p, o, a->name, v);
}

/* --NAME, --no-NAME (switches) or --NAME VALUE for a table option. */
static int table_flag(cli_parser *p, const char *name, int argc, char **argv,
                      int *i, const char *inl) {
  int o = option_of_flag(name);
  if (o >= 0 && pl_option_info_at(o)->type == PL_OPT_BOOL)
    return set_option(p, o, name, inl ? inl : "1");
  if (o < 0 && !strncmp(name, "no-", 3) && (o = option_of_flag(name + 3)) >= 0 &&
      pl_option_info_at(o)->type == PL_OPT_BOOL) {
    if (inl)
      return usage_error(p, "--%s takes no value%s", name, "");
    return set_option(p, o, name, "0");
  }
  if (o < 0)
    return -1;
  const char *v = take_value(argc, argv, i, inl);
  if (!v)
    return usage_error(p, "--%s needs a value%s", name, "");
  return set_option(p, o, name, v);
}

static int one_flag(cli_parser *p, int argc, char **argv, int *i) {
  const char *arg = argv[*i];
  char name[72];
  if (strncmp(arg, "--", 2) || !arg[2])
    return usage_error(p, "unexpected argument '%s'%s", arg, "");
  const char *eq = strchr(arg, '=');
  size_t n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
  if (n >= sizeof name)
    n = sizeof name - 1;
  memcpy(name, arg + 2, n);
  name[n] = '\0';
  const char *inl = eq ? eq + 1 : NULL;
  for (int k = 0; k < p->nflags; k++)
    if (!strcmp(p->flags[k].name, name))
      return command_flag(p, &p->flags[k], argc, argv, i, inl);
  for (int k = 0; k < NALIASES; k++)
    if (!strcmp(aliases[k].name, name))
      return alias_flag(p, &aliases[k], argc, argv, i, inl);
  int rc = table_flag(p, name, argc, argv, i, inl);
  if (rc >= 0)
    return rc;
  suggestion s;
  const char *best = closest(p, name, &s);
  fprintf(stderr, "%s: unknown option --%s%s%s%s\n", p->cmd, name,
          *best ? " (did you mean --" : "", best, *best ? "?)" : "");
  return 2;
}

int cli_parse_args(cli_parser *p, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      cli_usage(p, stdout);
      return -1;
    }
    int rc = one_flag(p, argc, argv, &i);
    if (rc)
      return rc;
  }
  return 0;
}

unsigned cli_shard_keep(const cli_parser *p) {
  return (cli_was_set(p, "rank") ? PL_KEEP_RANK : 0) |
         (cli_was_set(p, "world_size") ? PL_KEEP_WORLD_SIZE : 0) |
         (cli_was_set(p, "device_index") ? PL_KEEP_DEVICE_INDEX : 0);
}

/* ------------------------------------------------------------ usage */

static const char *placeholder(pl_option_type t) {
  switch (t) {
  case PL_OPT_BYTES: return "BYTES";
  case PL_OPT_REAL: return "SEC";
  case PL_OPT_DEVICE: return "DEVICE";
  case PL_OPT_LOG_LEVEL: return "LEVEL";
  case PL_OPT_DECODE: return "cpu|gpu|auto";
  default: return "N";
  }
}

/* "  --flag ARG   doc, wrapped at 79 columns" */
static void usage_line(FILE *f, const char *flag, const char *doc,
                       const char *extra) {
  enum { INDENT = 29, WIDTH = 79 };
  char text[512];
  snprintf(text, sizeof text, "%s%s", doc, extra);
  int col = fprintf(f, "  %s", flag);
  if (col >= INDENT) {
    fprintf(f, "\n");
    col = 0;
  }
  const char *w = text;
  while (*w) {
    size_t n = strcspn(w, " ");
    if (col > INDENT && col + 1 + (int)n > WIDTH) {
      fprintf(f, "\n");
      col = 0;
    }
    col += fprintf(f, "%*s%.*s", col < INDENT ? INDENT - col : 1, "", (int)n, w);
    w += n;
    w += *w == ' ';
  }
  fprintf(f, "\n");
}

/* The range and the default this command starts from. */
static void option_extra(const cli_parser *p, const pl_option_info *o,
                         char *buf, size_t n) {
  char def[64];
  pl_error err;
  if (pl_loader_config_get(p->cfg, o->name, def, sizeof def, &err) != PL_OK)
    def[0] = '\0';
  if (o->type == PL_OPT_BOOL)
    snprintf(buf, n, " (default %s)", strcmp(def, "1") ? "off" : "on");
  else if (o->values)
    snprintf(buf, n, " (default %s)", def);
  else if (o->type == PL_OPT_REAL)
    snprintf(buf, n, " (%g to %g; default %s)", o->min_real, o->max_real, def);
  else
    snprintf(buf, n, " (%llu to %llu; default %s)",
             (unsigned long long)o->min, (unsigned long long)o->max, def);
}

void cli_usage(const cli_parser *p, FILE *f) {
  char flag[160], name[64], extra[128];
  fprintf(f, "usage: %s [options]   (--flag VALUE or --flag=VALUE)\n",
          p->cmd);
  for (int i = 0; i < p->nflags; i++) {
    const cli_flag *c = &p->flags[i];
    snprintf(flag, sizeof flag, "--%s%s%s", c->name, c->arg ? " " : "",
             c->arg ? c->arg : "");
    usage_line(f, flag, c->doc, "");
  }
  fprintf(f, "loader options (the library's option table):\n");
  for (int i = 0; i < pl_option_count(); i++) {
    const pl_option_info *o = pl_option_info_at(i);
    dashed(o->name, name, sizeof name);
    if (o->type == PL_OPT_BOOL)
      snprintf(flag, sizeof flag, "--%s, --no-%s", name, name);
    else
      snprintf(flag, sizeof flag, "--%s %s", name, placeholder(o->type));
    option_extra(p, o, extra, sizeof extra);
    usage_line(f, flag, o->doc, extra);
  }
  fprintf(f, "shorter spellings:\n");
  for (int i = 0; i < NALIASES; i++) {
    const cli_alias *a = &aliases[i];
    dashed(a->option, name, sizeof name);
    snprintf(flag, sizeof flag, "--%s%s", a->name, a->value ? "" : " ...");
    snprintf(extra, sizeof extra, "--%s%s%s",
             a->value && !strcmp(a->value, "0") ? "no-" : "", name,
             a->value ? "" : " ...");
    usage_line(f, flag, "same as ", extra);
  }
}
