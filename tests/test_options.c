/* The option table (PL_OPTION_MAP): defaults, setting by name with exact
 * range errors, validation at create, the struct_size rule, the
 * environment's sharding rule and its announcement, the structured error
 * fields, the dtype table, and the CLI usage listing every option. */
#include "loader_fixture.h"

#include <errno.h>
#include <stddef.h>

static void env_clear(void) {
  static const char *const vars[] = {
      "RANK",     "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
      "PMI_SIZE", NULL};
  for (const char *const *v = vars; *v; v++)
    unsetenv(*v);
}

/* cfg <- name=value must fail with exactly `want`. */
static void set_fails(const char *name, const char *value, const char *want) {
  pl_loader_config cfg, before;
  pl_error err;
  pl_loader_config_init(&cfg);
  before = cfg;
  CHECK_STATUS(pl_loader_config_set(&cfg, name, value, &err),
               PL_INVALID_ARGUMENT, &err);
  if (strcmp(err.message, want)) {
    fprintf(stderr, "set %s=\"%s\": got \"%s\", want \"%s\"\n", name, value,
            err.message, want);
    pl_test_failures++;
  }
  CHECK(memcmp(&cfg, &before, sizeof cfg) == 0); /* unchanged on error */
}

static void table(void) {
  CHECK_EQ_U64(pl_option_count(), 26);
  CHECK(pl_option_info_at(-1) == NULL);
  CHECK(pl_option_info_at(pl_option_count()) == NULL);
  const pl_option_info *b = pl_option_info_at(pl_option_find("batch_size"));
  CHECK(b && !strcmp(b->name, "batch_size") && b->type == PL_OPT_U32);
  CHECK(b && b->def == 1 && b->min == 1 && b->max == UINT32_MAX);
  const pl_option_info *w = pl_option_info_at(pl_option_find("num_workers"));
  CHECK(w && w->max == PL_MAX_WORKERS && w->doc[0]);
  const pl_option_info *d = pl_option_info_at(pl_option_find("device"));
  CHECK(d && d->values && !strcmp(d->values, "auto|cpu|cuda|cuda:N"));
  const pl_option_info *t = pl_option_info_at(pl_option_find("timeout_s"));
  CHECK(t && t->type == PL_OPT_REAL && t->max_real == PL_MAX_TIMEOUT_S);
  CHECK_EQ_U64(pl_option_find("nope"), (uint64_t)-1);
  /* Every option's default is what _init sets, and passes validation. */
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  CHECK_EQ_U64(cfg.struct_size, sizeof cfg);
  CHECK_EQ_U64(cfg.batch_size, 1);
  CHECK_EQ_U64(cfg.world_size, 1);
  CHECK_EQ_U64(cfg.pin_memory, 1);
  CHECK_EQ_U64(cfg.non_blocking, 1);
  CHECK_EQ_U64(cfg.log_level, PL_LOG_INFO);
  CHECK(cfg.log == NULL && cfg.log_user == NULL);
  char buf[64];
  pl_error err;
  for (int i = 0; i < pl_option_count(); i++) {
    const pl_option_info *o = pl_option_info_at(i);
    CHECK_OK(pl_loader_config_get(&cfg, o->name, buf, sizeof buf, &err), &err);
    pl_loader_config copy = cfg;
    CHECK_OK(pl_loader_config_set(&copy, o->name, buf, &err), &err);
    CHECK(memcmp(&copy, &cfg, sizeof cfg) == 0); /* get and set round-trip */
  }
}

static void setting(void) {
  pl_loader_config cfg;
  pl_error err;
  char buf[64];
  pl_loader_config_init(&cfg);
  CHECK_OK(pl_loader_config_set(&cfg, "batch_size", "256", &err), &err);
  CHECK_EQ_U64(cfg.batch_size, 256);
  CHECK_OK(pl_loader_config_set(&cfg, "batch_size", "max", &err), &err);
  CHECK_EQ_U64(cfg.batch_size, UINT32_MAX);
  CHECK_OK(pl_loader_config_set(&cfg, "pinned_budget", "64M", &err), &err);
  CHECK_EQ_U64(cfg.pinned_budget, 64ull << 20);
  CHECK_OK(pl_loader_config_set(&cfg, "copy_chunk_bytes", "off", &err), &err);
  CHECK_EQ_U64(cfg.copy_chunk_bytes, UINT64_MAX);
  CHECK_OK(pl_loader_config_set(&cfg, "shuffle", "true", &err), &err);
  CHECK_EQ_U64(cfg.shuffle, 1);
  CHECK_OK(pl_loader_config_set(&cfg, "pin_memory", "off", &err), &err);
  CHECK_EQ_U64(cfg.pin_memory, 0);
  CHECK_OK(pl_loader_config_set(&cfg, "device", "cuda:3", &err), &err);
  CHECK(cfg.device == PL_DEVICE_CUDA && cfg.device_index == 3);
  CHECK_OK(pl_loader_config_set(&cfg, "log_level", "warning", &err), &err);
  CHECK_EQ_U64(cfg.log_level, PL_LOG_WARN);
  CHECK_EQ_U64(cfg.decode, PL_DECODE_CPU); /* the default */
  CHECK_OK(pl_loader_config_set(&cfg, "decode", "GPU", &err), &err);
  CHECK_EQ_U64(cfg.decode, PL_DECODE_GPU);
  CHECK_OK(pl_loader_config_set(&cfg, "decode", "auto", &err), &err);
  CHECK_EQ_U64(cfg.decode, PL_DECODE_AUTO);
  CHECK_OK(pl_loader_config_get(&cfg, "decode", buf, sizeof buf, &err), &err);
  CHECK(!strcmp(buf, "auto"));
  CHECK_OK(pl_loader_config_set(&cfg, "timeout_s", "2.5", &err), &err);
  CHECK(cfg.timeout_s == 2.5);
  CHECK_OK(pl_loader_config_get(&cfg, "timeout_s", buf, sizeof buf, &err),
           &err);
  CHECK(!strcmp(buf, "2.5"));
  CHECK_OK(pl_loader_config_get(&cfg, "device", buf, sizeof buf, &err), &err);
  CHECK(!strcmp(buf, "cuda"));
  CHECK_OK(pl_loader_config_set(&cfg, "seed", "18446744073709551615", &err),
           &err);
  CHECK_EQ_U64(cfg.seed, UINT64_MAX);

  set_fails("batch_size", "0", "batch_size must be in [1, 4294967295], got 0");
  set_fails("batch_size", "18446744073709551619",
            "batch_size must be in [1, 4294967295], got 18446744073709551619");
  set_fails("batch_size", "2.7",
            "batch_size must be an integer in [1, 4294967295], got \"2.7\"");
  set_fails("batch_size", " 5",
            "batch_size must be an integer in [1, 4294967295], got \" 5\"");
  set_fails("batch_size", "+5",
            "batch_size must be an integer in [1, 4294967295], got \"+5\"");
  set_fails("batch_size", "0x10",
            "batch_size must be an integer in [1, 4294967295], got \"0x10\"");
  set_fails("batch_size", "",
            "batch_size must be an integer in [1, 4294967295], got \"\"");
  set_fails("seed", "18446744073709551621",
            "seed must be in [0, 18446744073709551615], got "
            "18446744073709551621");
  set_fails("rank", "-5", "rank must be in [0, 4294967294], got -5");
  set_fails("world_size", "-3", "world_size must be in [1, 4294967295], got -3");
  set_fails("pinned_budget", "-1",
            "pinned_budget must be in [0, 18446744073709551615], got -1");
  set_fails("pinned_budget", "16Q",
            "pinned_budget must be a byte count (digits with an optional K, "
            "M, G or T) in [0, 18446744073709551615], got \"16Q\"");
  set_fails("pinned_budget", "20000000000G",
            "pinned_budget must be in [0, 18446744073709551615], got "
            "20000000000G");
  set_fails("max_batch_buffers", "-1",
            "max_batch_buffers must be in [0, 1048576], got -1");
  set_fails("num_workers", "1025", "num_workers must be in [0, 1024] or auto, got 1025");
  set_fails("timeout_s", "-1", "timeout_s must be in [0, 1e+09], got -1");
  set_fails("timeout_s", "nan",
            "timeout_s must be a number in [0, 1e+09], got \"nan\"");
  set_fails("shuffle", "maybe",
            "shuffle must be 0 or 1 (false or true), got \"maybe\"");
  set_fails("device", "gpu", "device must be auto, cpu, cuda or cuda:N, got "
                             "\"gpu\"");
  set_fails("device", "cuda:-1", "device must be auto, cpu, cuda or cuda:N, "
                                 "got \"cuda:-1\"");
  set_fails("log_level", "loud",
            "log_level must be debug, info, warn or error, got \"loud\"");
  set_fails("decode", "nvjpeg",
            "decode must be cpu, gpu or auto, got \"nvjpeg\"");
  set_fails("batch_sise", "1", "unknown option 'batch_sise'");
}

/* pl_loader_create checks every option of a config set by hand. */
static void create_fails(pl_loader_config *cfg, const char *want) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 10, 4);
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_STATUS(pl_loader_create(ds, cfg, &ld, &err), PL_INVALID_ARGUMENT,
               &err);
  if (strcmp(err.message, want)) {
    fprintf(stderr, "create: got \"%s\", want \"%s\"\n", err.message, want);
    pl_test_failures++;
  }
  CHECK(ld == NULL);
  pl_dataset_destroy(ds);
}

static void validation(void) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 0;
  create_fails(&cfg, "batch_size must be in [1, 4294967295], got 0");
  pl_loader_config_init(&cfg);
  cfg.num_workers = -3;
  create_fails(&cfg, "num_workers must be in [0, 1024] or auto, got -3");
  pl_loader_config_init(&cfg);
  cfg.shuffle = 2;
  create_fails(&cfg, "shuffle must be 0 or 1 (false or true), got 2");
  pl_loader_config_init(&cfg);
  cfg.device = (pl_device_kind)7;
  create_fails(&cfg, "device must be auto, cpu, cuda or cuda:N, got 7");
  pl_loader_config_init(&cfg);
  cfg.max_batch_buffers = PL_MAX_BATCH_BUFFERS + 1;
  create_fails(&cfg, "max_batch_buffers must be in [0, 1048576], got 1048577");
  pl_loader_config_init(&cfg);
  cfg.timeout_s = -0.5;
  create_fails(&cfg, "timeout_s must be in [0, 1e+09], got -0.5");
  pl_loader_config_init(&cfg);
  cfg.rank = 2;
  cfg.world_size = 2;
  create_fails(&cfg, "rank must be below world_size (in [0, 1]), got rank 2 "
                     "of world_size 2");
}

/* A caller built against an older, shorter pl_loader_config. */
static void struct_size(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 10, 4);
  pl_loader *ld = NULL;
  pl_error err;
  /* The config as an older header lays it out, followed by bytes the old
   * caller never wrote: they must not be read. */
  union {
    pl_loader_config cfg;
    unsigned char bytes[sizeof(pl_loader_config) + 64];
  } u;
  memset(&u, 0xA5, sizeof u);
  pl_loader_config_init(&u.cfg);
  u.cfg.batch_size = 3;
  u.cfg.struct_size = PL_LOADER_CONFIG_MIN_SIZE;
  memset(u.bytes + PL_LOADER_CONFIG_MIN_SIZE, 0xA5,
         sizeof u.bytes - PL_LOADER_CONFIG_MIN_SIZE);
  CHECK_OK(pl_loader_create(ds, &u.cfg, &ld, &err), &err);
  CHECK_EQ_U64(pl_loader_num_batches(ld), 4);
  pl_loader_destroy(ld);

  ld = NULL;
  u.cfg.struct_size = PL_LOADER_CONFIG_MIN_SIZE - 1;
  CHECK_STATUS(pl_loader_create(ds, &u.cfg, &ld, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_MSG(&err, "config.struct_size is");
  CHECK_MSG(&err, "initialise the config with pl_loader_config_init");
  u.cfg.struct_size = sizeof(pl_loader_config) + 8; /* a newer caller */
  CHECK_STATUS(pl_loader_create(ds, &u.cfg, &ld, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK(ld == NULL);
  /* An option past the caller's struct cannot be set in it. */
  u.cfg.struct_size = offsetof(pl_loader_config, copy_chunk_bytes);
  CHECK_STATUS(pl_loader_config_set(&u.cfg, "batch_size", "2", &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "config.struct_size is");
  CHECK_OK(pl_loader_create(ds, NULL, &ld, &err), &err); /* NULL: defaults */
  CHECK_EQ_U64(pl_loader_num_batches(ld), 10);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ sharding */

typedef struct log_lines {
  int n;
  char last[512];
} log_lines;

static void keep_log(void *user, pl_log_level level, const char *msg) {
  log_lines *l = user;
  (void)level;
  l->n++;
  snprintf(l->last, sizeof l->last, "%s", msg);
}

static pl_status shard(const char *rank, const char *world, unsigned keep,
                       uint32_t r, uint32_t w, pl_loader_config *cfg,
                       log_lines *log, pl_error *err) {
  env_clear();
  if (rank)
    setenv("RANK", rank, 1);
  if (world)
    setenv("WORLD_SIZE", world, 1);
  pl_loader_config_init(cfg);
  cfg->rank = r;
  cfg->world_size = w;
  memset(log, 0, sizeof *log);
  cfg->log = keep_log;
  cfg->log_user = log;
  pl_status s = pl_loader_config_shard_env(cfg, keep, err);
  env_clear();
  return s;
}

static void sharding_rule(void) {
  pl_loader_config cfg;
  pl_error err;
  log_lines log;
  /* torchrun, DataLoader(world_size=2): rank 1's shard, announced once. */
  CHECK_OK(shard("1", "2", PL_KEEP_WORLD_SIZE, 0, 2, &cfg, &log, &err), &err);
  CHECK_EQ_U64(cfg.rank, 1);
  CHECK_EQ_U64(cfg.world_size, 2);
  CHECK_EQ_U64(log.n, 1);
  CHECK(!strcmp(log.last,
                "sharding from the environment: rank 1 of 2 (RANK, "
                "world_size set)"));
  /* Everything from the environment. */
  CHECK_OK(shard("1", "2", 0, 0, 1, &cfg, &log, &err), &err);
  CHECK(cfg.rank == 1 && cfg.world_size == 2 && log.n == 1);
  CHECK(!strcmp(log.last, "sharding from the environment: rank 1 of 2 "
                          "(RANK, WORLD_SIZE)"));
  /* An explicit world_size the environment disagrees with. */
  CHECK_STATUS(shard("1", "4", PL_KEEP_WORLD_SIZE, 0, 2, &cfg, &log, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK(!strcmp(err.message, "world_size 2 disagrees with the environment's "
                             "WORLD_SIZE=4: pass rank too, or make them "
                             "agree"));
  CHECK(cfg.rank == 0 && cfg.world_size == 2 && log.n == 0);
  /* Explicit rank: the environment's world size, its rank ignored. */
  CHECK_OK(shard("3", "4", PL_KEEP_RANK, 2, 1, &cfg, &log, &err), &err);
  CHECK(cfg.rank == 2 && cfg.world_size == 4 && log.n == 1);
  CHECK(!strcmp(log.last, "sharding from the environment: rank 2 of 4 "
                          "(rank set, WORLD_SIZE)"));
  /* Both explicit: the environment is not consulted, nothing announced. */
  CHECK_OK(shard("3", "4", PL_KEEP_RANK | PL_KEEP_WORLD_SIZE, 0, 3, &cfg,
                 &log, &err),
           &err);
  CHECK(cfg.rank == 0 && cfg.world_size == 3 && log.n == 0);
  /* Explicit world_size with RANK alone, out of that world. */
  CHECK_STATUS(shard("5", NULL, PL_KEEP_WORLD_SIZE, 0, 2, &cfg, &log, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK(!strcmp(err.message, "rank must be below world_size: RANK=5 is not "
                             "below world_size 2"));
  /* No environment: nothing changes, nothing said. */
  CHECK_OK(shard(NULL, NULL, 0, 0, 1, &cfg, &log, &err), &err);
  CHECK(cfg.rank == 0 && cfg.world_size == 1 && log.n == 0);
  /* LOCAL_RANK does not override an explicit device ordinal. */
  env_clear();
  setenv("LOCAL_RANK", "3", 1);
  pl_loader_config_init(&cfg);
  cfg.device_index = 1;
  CHECK_OK(pl_loader_config_shard_env(&cfg, PL_KEEP_DEVICE_INDEX, &err), &err);
  CHECK_EQ_U64(cfg.device_index, 1);
  CHECK_OK(pl_loader_config_shard_env(&cfg, 0, &err), &err);
  CHECK_EQ_U64(cfg.device_index, 3);
  env_clear();
}

/* ------------------------------------------------------------ errors */

static void error_fields(void) {
  pl_error err;
  pl_error_clear(&err);
  CHECK(err.sample_index == UINT64_MAX && !err.path[0] && !err.sys_errno &&
        !err.cuda_error);
  /* A missing file: path and errno, kept under the layers' prefixes. */
  pl_dataset *ds = NULL;
  const char *missing = pl_test_path("missing-images");
  CHECK_STATUS(pl_dataset_open_idx(missing, missing, &ds, &err), PL_IO, &err);
  CHECK(!strcmp(err.path, missing));
  CHECK_EQ_U64(err.sys_errno, ENOENT);
  CHECK_EQ_U64(err.sample_index, UINT64_MAX);
  /* A malformed file: the path, no errno. */
  const char *junk = pl_test_path("junk.bin");
  CHECK(pl_test_write_file(junk, "0123456789", 10) == 0);
  const char *paths[] = {junk};
  CHECK_STATUS(pl_dataset_open_cifar10(paths, 1, &ds, &err), PL_FORMAT, &err);
  CHECK(!strcmp(err.path, junk));
  CHECK_EQ_U64(err.sys_errno, 0);
  /* A failed sample: its index, through the loader. */
  fixture fx = {.fail_at = 6};
  ds = fixture_dataset(&fx, 10, 4);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 4;
  cfg.num_workers = 2;
  cfg.device = PL_DEVICE_CPU; /* fixture_check_batch reads host memory */
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  pl_batch *b = NULL;
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  CHECK_EQ_U64(fixture_check_batch(b, 4), 0);
  pl_batch_release(b, NULL);
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_CALLBACK, &err);
  CHECK_EQ_U64(err.sample_index, 6);
  CHECK_MSG(&err, "sample 6: ");
  CHECK(!err.path[0]);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
  /* A new error clears the fields of the old one. */
  CHECK_STATUS(pl_loader_create(NULL, NULL, &ld, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_EQ_U64(err.sample_index, UINT64_MAX);
}

static void dtypes(void) {
  static const char *const names[] = {"uint8",  "int8",    "int16",
                                      "uint16", "int32",   "uint32",
                                      "int64",  "float16", "float32",
                                      "float64", "bfloat16"};
  static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 8, 2, 4, 8, 2};
  CHECK_EQ_U64(PL_DTYPE_COUNT_, 11);
  for (int t = 0; t < PL_DTYPE_COUNT_; t++) {
    CHECK(!strcmp(pl_dtype_name((pl_dtype)t), names[t]));
    CHECK_EQ_U64(pl_dtype_size((pl_dtype)t), sizes[t]);
  }
  CHECK(!strcmp(pl_dtype_name(PL_DTYPE_COUNT_), "invalid"));
  CHECK_EQ_U64(pl_dtype_size(PL_DTYPE_COUNT_), 0);
}

/* `pinloader run --help` lists every option of the table as a flag. */
static void cli_usage_lists_every_option(void) {
  const char *cli = getenv("PL_CLI");
  if (!cli)
    return;
  char cmd[4096], flag[80];
  snprintf(cmd, sizeof cmd, "'%s' run --help", cli);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  if (!p)
    return;
  static char usage[32768];
  size_t n = fread(usage, 1, sizeof usage - 1, p);
  usage[n] = '\0';
  CHECK_EQ_U64(pclose(p), 0);
  for (int i = 0; i < pl_option_count(); i++) {
    const pl_option_info *o = pl_option_info_at(i);
    size_t k = 0;
    flag[k++] = '-';
    flag[k++] = '-';
    for (const char *c = o->name; *c && k + 2 < sizeof flag; c++)
      flag[k++] = *c == '_' ? '-' : *c;
    flag[k++] = ' ';
    flag[k] = '\0';
    if (o->type == PL_OPT_BOOL)
      flag[k - 1] = ','; /* "--shuffle, --no-shuffle" */
    if (!strstr(usage, flag)) {
      fprintf(stderr, "pinloader run --help lacks \"%s\"\n", flag);
      pl_test_failures++;
    }
    if (!strstr(usage, o->doc)) { /* docs wrap: check the first word */
      char first[32];
      snprintf(first, sizeof first, "%.*s", (int)strcspn(o->doc, " "), o->doc);
      CHECK(strstr(usage, first) != NULL);
    }
  }
}

/* pl_loader_config_check: the table's checks without a dataset, as
 * pl_loader_create makes them. */
static void config_check(void) {
  pl_loader_config cfg;
  pl_error err;
  pl_loader_config_init(&cfg);
  CHECK_OK(pl_loader_config_check(&cfg, &err), &err);
  cfg.batch_size = 0;
  CHECK_STATUS(pl_loader_config_check(&cfg, &err), PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "batch_size must be in [1, ");
  pl_loader_config_init(&cfg);
  cfg.rank = 2;
  cfg.world_size = 2;
  CHECK_STATUS(pl_loader_config_check(&cfg, &err), PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "rank must be below world_size");
  pl_loader_config_init(&cfg);
  cfg.struct_size = PL_LOADER_CONFIG_MIN_SIZE - 1;
  CHECK_STATUS(pl_loader_config_check(&cfg, &err), PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "config.struct_size is");
  CHECK_STATUS(pl_loader_config_check(NULL, &err), PL_INVALID_ARGUMENT, &err);
}

int main(void) {
  config_check();
  table();
  setting();
  validation();
  struct_size();
  sharding_rule();
  error_fields();
  dtypes();
  cli_usage_lists_every_option();
  return pl_test_finish("test_options");
}
