/* The loader's options, from the one table PL_OPTION_MAP (pinloader.h):
 * defaults, range checks, setting and reading by name as text, and the
 * struct_size rule that lets pl_loader_config grow. */
#include "core/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The C type behind each option type: the table's fields must match. */
#define PL_OPT_CTYPE_BOOL int
#define PL_OPT_CTYPE_INT int
#define PL_OPT_CTYPE_U32 uint32_t
#define PL_OPT_CTYPE_U64 uint64_t
#define PL_OPT_CTYPE_BYTES uint64_t
#define PL_OPT_CTYPE_REAL double
#define PL_OPT_CTYPE_DEVICE pl_device_kind
#define PL_OPT_CTYPE_LOG_LEVEL pl_log_level
#define PL_OPT_CTYPE_AUTO_INT int
#define PL_OPT_CTYPE_DECODE pl_decode_mode

#define PL_OPT_CHECK_(name, TYPE, def, lo, hi, doc)                           \
  _Static_assert(sizeof(((pl_loader_config *)0)->name) ==                     \
                     sizeof(PL_OPT_CTYPE_##TYPE),                             \
                 "pl_loader_config." #name " does not match its table type");
PL_OPTION_MAP(PL_OPT_CHECK_)
#undef PL_OPT_CHECK_
/* value_read / value_write move the enums as ints. */
_Static_assert(sizeof(pl_device_kind) == sizeof(int), "enum size");
_Static_assert(sizeof(pl_log_level) == sizeof(int), "enum size");
_Static_assert(sizeof(pl_decode_mode) == sizeof(int), "enum size");

typedef struct option {
  pl_option_info info;
  size_t offset, size;
} option;

/* The words an enum option's text may be. */
#define PL_OPT_VALUES_BOOL NULL
#define PL_OPT_VALUES_INT NULL
#define PL_OPT_VALUES_U32 NULL
#define PL_OPT_VALUES_U64 NULL
#define PL_OPT_VALUES_BYTES NULL
#define PL_OPT_VALUES_REAL NULL
#define PL_OPT_VALUES_DEVICE "auto|cpu|cuda|cuda:N"
#define PL_OPT_VALUES_LOG_LEVEL "debug|info|warn|error"
#define PL_OPT_VALUES_AUTO_INT "N|auto"
#define PL_OPT_VALUES_DECODE "cpu|gpu|auto"

#define PL_OPT_ROW_(name, TYPE, def, lo, hi, doc)                             \
  {{#name, PL_OPT_##TYPE, doc, PL_OPT_VALUES_##TYPE, (uint64_t)(def), (uint64_t)(lo),         \
    (uint64_t)(hi), (double)(def), (double)(lo), (double)(hi)},               \
   offsetof(pl_loader_config, name), sizeof(PL_OPT_CTYPE_##TYPE)},
static const option options[] = {PL_OPTION_MAP(PL_OPT_ROW_)};
#undef PL_OPT_ROW_
enum { NOPTIONS = sizeof options / sizeof options[0] };

static const option *option_at(int i) {
  return i >= 0 && i < NOPTIONS ? &options[i] : NULL;
}

int pl_option_count(void) { return NOPTIONS; }

const pl_option_info *pl_option_info_at(int i) {
  const option *o = option_at(i);
  return o ? &o->info : NULL;
}

int pl_option_find(const char *name) {
  for (int i = 0; name && i < NOPTIONS; i++)
    if (!strcmp(options[i].info.name, name))
      return i;
  return -1;
}

void pl_loader_config_init(pl_loader_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
#define PL_OPT_INIT_(name, TYPE, def, lo, hi, doc) \
  cfg->name = (PL_OPT_CTYPE_##TYPE)(def);
  PL_OPTION_MAP(PL_OPT_INIT_)
#undef PL_OPT_INIT_
}

/* ------------------------------------------------------------ values */

/* An option's value, widened: integers as magnitude and sign. */
typedef struct value {
  uint64_t u;
  int neg;
  double d;
} value;

static int is_real(const option *o) { return o->info.type == PL_OPT_REAL; }

static value value_read(const pl_loader_config *cfg, const option *o) {
  const char *p = (const char *)cfg + o->offset;
  value v = {0, 0, 0};
  if (is_real(o)) {
    memcpy(&v.d, p, sizeof v.d);
  } else if (o->size == sizeof(uint64_t)) {
    memcpy(&v.u, p, sizeof v.u);
  } else if (o->info.type == PL_OPT_U32) {
    uint32_t x;
    memcpy(&x, p, sizeof x);
    v.u = x;
  } else { /* int and the int-sized enums */
    int x;
    memcpy(&x, p, sizeof x);
    v.neg = x < 0;
    v.u = v.neg ? 0 - (uint64_t)(int64_t)x : (uint64_t)x;
  }
  return v;
}

static void value_write(pl_loader_config *cfg, const option *o, value v) {
  char *p = (char *)cfg + o->offset;
  if (is_real(o)) {
    memcpy(p, &v.d, sizeof v.d);
  } else if (o->size == sizeof(uint64_t)) {
    memcpy(p, &v.u, sizeof v.u);
  } else if (o->info.type == PL_OPT_U32) {
    uint32_t x = (uint32_t)v.u;
    memcpy(p, &x, sizeof x);
  } else {
    int x = v.neg ? -(int)v.u : (int)v.u; /* in range: checked before */
    memcpy(p, &x, sizeof x);
  }
}

/* PL_AUTO (-1), which AUTO_INT options also take. */
static int is_auto(const option *o, value v) {
  return o->info.type == PL_OPT_AUTO_INT && v.neg && v.u == 1;
}

static int in_range(const option *o, value v) {
  if (is_auto(o, v))
    return 1;
  if (is_real(o))
    return v.d >= o->info.min_real && v.d <= o->info.max_real;
  return !v.neg && v.u >= o->info.min && v.u <= o->info.max;
}

/* "batch_size must be in [1, 4294967295], got " + what was given. */
static pl_status range_error(pl_error *err, const option *o, const char *got) {
  const pl_option_info *in = &o->info;
  switch (in->type) {
  case PL_OPT_BOOL:
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s must be 0 or 1 (false or true), got %s", in->name,
                     got);
  case PL_OPT_DEVICE:
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s must be auto, cpu, cuda or cuda:N, got %s", in->name,
                     got);
  case PL_OPT_LOG_LEVEL:
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s must be debug, info, warn or error, got %s", in->name,
                     got);
  case PL_OPT_DECODE:
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s must be cpu, gpu or auto, got %s", in->name, got);
  case PL_OPT_REAL:
    return pl_errorf(err, PL_INVALID_ARGUMENT, "%s must be in [%g, %g], got %s",
                     in->name, in->min_real, in->max_real, got);
  case PL_OPT_AUTO_INT:
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s must be in [%llu, %llu] or auto, got %s", in->name,
                     (unsigned long long)in->min, (unsigned long long)in->max,
                     got);
  default:
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s must be in [%llu, %llu], got %s", in->name,
                     (unsigned long long)in->min,
                     (unsigned long long)in->max, got);
  }
}

static void value_text(const option *o, value v, char *buf, size_t n) {
  static const char *const devices[] = {"auto", "cpu", "cuda"};
  static const char *const levels[] = {"debug", "info", "warn", "error"};
  static const char *const decodes[] = {"cpu", "gpu", "auto"};
  pl_option_type t = o->info.type;
  if (t == PL_OPT_REAL)
    snprintf(buf, n, "%.17g", v.d);
  else if (t == PL_OPT_DEVICE && !v.neg && v.u < 3)
    snprintf(buf, n, "%s", devices[v.u]);
  else if (t == PL_OPT_LOG_LEVEL && !v.neg && v.u < 4)
    snprintf(buf, n, "%s", levels[v.u]);
  else if (t == PL_OPT_DECODE && !v.neg && v.u < 3)
    snprintf(buf, n, "%s", decodes[v.u]);
  else if (is_auto(o, v))
    snprintf(buf, n, "auto");
  else
    snprintf(buf, n, "%s%llu", v.neg ? "-" : "", (unsigned long long)v.u);
}

pl_status pl_options_check(const pl_loader_config *cfg, pl_error *err) {
  for (int i = 0; i < NOPTIONS; i++) {
    const option *o = &options[i];
    value v = value_read(cfg, o);
    if (!in_range(o, v)) {
      char got[64];
      if (o->info.type == PL_OPT_DEVICE || o->info.type == PL_OPT_LOG_LEVEL ||
          o->info.type == PL_OPT_DECODE)
        snprintf(got, sizeof got, "%s%llu", v.neg ? "-" : "",
                 (unsigned long long)v.u);
      else
        value_text(o, v, got, sizeof got);
      return range_error(err, o, got);
    }
  }
  if (cfg->rank >= cfg->world_size)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "rank must be below world_size (in [0, %u]), got rank "
                     "%u of world_size %u",
                     cfg->world_size - 1, cfg->rank, cfg->world_size);
  return PL_OK;
}

pl_status pl_loader_config_upgrade(const pl_loader_config *in,
                                   pl_loader_config *out, pl_error *err) {
  pl_loader_config_init(out);
  if (!in)
    return PL_OK;
  if (in->struct_size < PL_LOADER_CONFIG_MIN_SIZE ||
      in->struct_size > sizeof *out)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "config.struct_size is %zu, this library accepts %zu to "
                     "%zu: initialise the config with pl_loader_config_init",
                     in->struct_size, (size_t)PL_LOADER_CONFIG_MIN_SIZE,
                     sizeof *out);
  /* Fields past the caller's struct keep the defaults just set. */
  memcpy(out, in, in->struct_size);
  out->struct_size = sizeof *out;
  return PL_OK;
}

/* ------------------------------------------------------------ text */

/* Plain decimal digits with an optional leading '-' (kept only to say "got
 * -5": every option's minimum is 0 or more). No whitespace, no '+', no
 * base prefix: strtoull would take " -1" as 2^64-1. *over: too large. */
static int parse_decimal(const char *s, value *v, int *over) {
  v->neg = *s == '-';
  s += v->neg;
  if (*s < '0' || *s > '9')
    return 0;
  uint64_t x = 0;
  *over = 0;
  for (; *s >= '0' && *s <= '9'; s++)
    if (!pl_mul_u64(x, 10, &x) || !pl_add_u64(x, (uint64_t)(*s - '0'), &x))
      *over = 1;
  v->u = x;
  return *s == '\0';
}

static int parse_suffix(char c, uint64_t *mult) {
  static const char units[] = "KMGT";
  const char *p = strchr(units, c >= 'a' && c <= 'z' ? c - 32 : c);
  if (!p || !c)
    return 0;
  *mult = 1ull << (10 * (p - units + 1));
  return 1;
}

/* Digits with an optional K/M/G/T suffix. */
static int parse_bytes(const char *s, value *v, int *over) {
  char buf[32];
  size_t n = strlen(s);
  uint64_t mult = 1;
  if (n == 0 || n >= sizeof buf)
    return n >= sizeof buf && parse_decimal(s, v, over);
  memcpy(buf, s, n + 1);
  if (parse_suffix(buf[n - 1], &mult))
    buf[n - 1] = '\0';
  if (!parse_decimal(buf, v, over))
    return 0;
  if (!pl_mul_u64(v->u, mult, &v->u))
    *over = 1;
  return 1;
}

/* A finite decimal number as a person writes it: "0.5", "30", "-1", "1e3";
 * not " 1", "+1", "0x1p3", "inf" or "nan". */
static int parse_real(const char *s, value *v) {
  const char *d = s + (*s == '-');
  if (!((*d >= '0' && *d <= '9') || *d == '.') || strpbrk(s, "xXpP"))
    return 0;
  char *end;
  errno = 0;
  v->d = strtod(s, &end);
  return *end == '\0' && errno == 0;
}

static int parse_bool(const char *s, value *v) {
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(s, yes[i]))
      return v->u = 1, 1;
    if (!strcasecmp(s, no[i]))
      return v->u = 0, 1;
  }
  return 0;
}

static int parse_word(const char *s, const char *const *words, int n,
                      value *v) {
  for (int i = 0; i < n; i++)
    if (!strcasecmp(s, words[i]))
      return v->u = (uint64_t)i, 1;
  return 0;
}

static pl_status not_valid(pl_error *err, const option *o, const char *text) {
  char got[96];
  snprintf(got, sizeof got, "\"%.80s\"", text);
  return range_error(err, o, got);
}

/* "cuda:N": the device and its ordinal. */
static pl_status set_device(pl_loader_config *cfg, const option *o,
                            const char *text, pl_error *err) {
  static const char *const devices[] = {"auto", "cpu", "cuda"};
  value v = {0, 0, 0}, ord = {0, 0, 0};
  int over = 0;
  if (parse_word(text, devices, 3, &v)) {
    cfg->device = (pl_device_kind)v.u;
    return PL_OK;
  }
  if (strncasecmp(text, "cuda:", 5) || !parse_decimal(text + 5, &ord, &over) ||
      over || ord.neg || ord.u > INT32_MAX)
    return not_valid(err, o, text);
  cfg->device = PL_DEVICE_CUDA;
  cfg->device_index = (int)ord.u;
  return PL_OK;
}

/* Text → value for the integer and real types; PL_OK or the error. */
static pl_status parse_number(const option *o, const char *text, value *v,
                              pl_error *err) {
  pl_option_type t = o->info.type;
  int over = 0, ok;
  if (t != PL_OPT_REAL && (!strcasecmp(text, "max") ||
                           (t == PL_OPT_BYTES && !strcasecmp(text, "off")))) {
    v->u = o->info.max;
    return PL_OK;
  }
  if (t == PL_OPT_REAL)
    ok = parse_real(text, v);
  else if (t == PL_OPT_BYTES)
    ok = parse_bytes(text, v, &over);
  else
    ok = parse_decimal(text, v, &over);
  if (!ok) {
    const char *kind = t == PL_OPT_REAL    ? "a number"
                       : t == PL_OPT_BYTES ? "a byte count (digits with an "
                                             "optional K, M, G or T)"
                                           : "an integer";
    if (t == PL_OPT_REAL)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "%s must be %s in [%g, %g], got \"%.80s\"", o->info.name,
                       kind, o->info.min_real, o->info.max_real, text);
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s must be %s in [%llu, %llu], got \"%.80s\"",
                     o->info.name, kind, (unsigned long long)o->info.min,
                     (unsigned long long)o->info.max, text);
  }
  if (over || !in_range(o, *v)) {
    char got[96];
    snprintf(got, sizeof got, "%.80s", text);
    return range_error(err, o, got);
  }
  return PL_OK;
}

static pl_status check_cfg(const pl_loader_config *cfg, const option *o,
                           pl_error *err) {
  if (!cfg)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "cfg is NULL");
  if (cfg->struct_size < PL_LOADER_CONFIG_MIN_SIZE ||
      cfg->struct_size > sizeof *cfg)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "config.struct_size is %zu: initialise the config with "
                     "pl_loader_config_init",
                     cfg->struct_size);
  if (o->offset + o->size > cfg->struct_size)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "option %s is past this config's struct_size %zu (a "
                     "caller built against an older pinloader.h)",
                     o->info.name, cfg->struct_size);
  return PL_OK;
}

static const option *lookup(const char *name, pl_error *err) {
  int i = pl_option_find(name);
  if (i < 0)
    pl_errorf(err, PL_INVALID_ARGUMENT, "unknown option '%.64s'",
              name ? name : "(null)");
  return i < 0 ? NULL : &options[i];
}

pl_status pl_loader_config_set(pl_loader_config *cfg, const char *name,
                               const char *text, pl_error *err) {
  const option *o = lookup(name, err);
  if (!o)
    return PL_INVALID_ARGUMENT;
  PL_TRY(check_cfg(cfg, o, err));
  if (!text)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "%s: value is NULL",
                     o->info.name);
  static const char *const levels[] = {"debug", "info", "warn", "error"};
  static const char *const decodes[] = {"cpu", "gpu", "auto"};
  value v = {0, 0, 0};
  switch (o->info.type) {
  case PL_OPT_DEVICE:
    return set_device(cfg, o, text, err);
  case PL_OPT_LOG_LEVEL:
    if (!parse_word(text, levels, 4, &v) &&
        !(strcasecmp(text, "warning") ? 0 : (v.u = PL_LOG_WARN, 1)))
      return not_valid(err, o, text);
    break;
  case PL_OPT_DECODE:
    if (!parse_word(text, decodes, 3, &v))
      return not_valid(err, o, text);
    break;
  case PL_OPT_BOOL:
    if (!parse_bool(text, &v))
      return not_valid(err, o, text);
    break;
  case PL_OPT_AUTO_INT:
    if (!strcasecmp(text, "auto")) {
      v.neg = 1, v.u = 1;
      break;
    }
    PL_TRY(parse_number(o, text, &v, err));
    break;
  default:
    PL_TRY(parse_number(o, text, &v, err));
  }
  value_write(cfg, o, v);
  return PL_OK;
}

pl_status pl_loader_config_get(const pl_loader_config *cfg, const char *name,
                               char *buf, size_t len, pl_error *err) {
  const option *o = lookup(name, err);
  if (!o)
    return PL_INVALID_ARGUMENT;
  PL_TRY(check_cfg(cfg, o, err));
  if (!buf || len == 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "buf is NULL or empty");
  value_text(o, value_read(cfg, o), buf, len);
  return PL_OK;
}

pl_status pl_loader_config_check(const pl_loader_config *cfg, pl_error *err) {
  pl_loader_config full;
  if (!cfg)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "config is NULL");
  PL_TRY(pl_loader_config_upgrade(cfg, &full, err));
  return pl_options_check(&full, err);
}
