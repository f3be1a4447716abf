/* `pinloader run`: load epochs of a data set and report throughput. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FASHION_DIR "/usr/share/datasets/fashion-mnist/"
#define DEFAULT_DATASET                                                       \
  "idx:" FASHION_DIR "train-images-idx3-ubyte.gz," FASHION_DIR               \
  "train-labels-idx1-ubyte.gz"

typedef struct run_opts {
  const char *dataset;
  pl_loader_config cfg;
  uint64_t epochs;
  uint64_t max_batches; /* 0: no limit */
  const char *order_out, *save_state, *resume;
  int checksum, quiet;
  int report, json; /* --report, --json */
  int epoch_set;    /* --epoch N was given */
  double step_ms;   /* --step-ms: a stand-in training step */
  unsigned shard_keep; /* PL_KEEP_*: sharding given as flags */
  pl_transform xf[8]; /* --normalize, --to, --random-crop, --flip, ... */
  int nxf;
} run_opts;

typedef struct run_totals {
  uint64_t samples, bytes, batches;
  uint64_t fnv;
  FILE *order;            /* order_out's stream */
  cli_output order_out, state_out;
  uint64_t records;       /* the data set's samples */
  uint8_t *scratch; /* host copy of a device batch, for --checksum */
  uint64_t scratch_len;
  double checksum_s; /* time spent hashing: not loading, so not in samples/s */
} run_totals;

/* The command's own flags; the loader's come from the option table. */
enum { F_DATASET, F_EPOCHS, F_MAX_BATCHES, F_ORDER_OUT, F_SAVE_STATE,
       F_RESUME, F_CHECKSUM, F_QUIET, F_REPORT, F_JSON, F_STEP_MS,
       F_RANDOM_CROP, F_FLIP, F_TO, F_NORMALIZE, F_CHANNELS_LAST,
       F_INT64_LABELS };
static const cli_flag run_flags[] = {
    {"dataset", "SPEC", "idx:IMAGES,LABELS, cifar10:FILE[,FILE...], "
     "tokens:FILE[,FILE...]?context=T[&samples=N], npy:FILE[,FILE...], "
     "images:ROOT[?size=224] or shards:TAR|URL|PATTERN[,...]"
     "[?fields=image:jpg,label:cls] (options: docs/sources.md; "
     "default: Fashion-MNIST train from " FASHION_DIR ")", F_DATASET, 0, 0, 0,
     NULL},
    {"epochs", "N", "epochs in the whole run (default 1); with --resume, "
     "what is left of them", F_EPOCHS, 1, 1, UINT64_MAX, NULL},
    {"max-batches", "N", "stop after N batches (default: no limit)",
     F_MAX_BATCHES, 1, 1, UINT64_MAX, " (leave it out for no limit)"},
    {"order-out", "FILE", "write delivered dataset indices, one per line",
     F_ORDER_OUT, 0, 0, 0, NULL},
    {"save-state", "FILE", "write the loader's position when done",
     F_SAVE_STATE, 0, 0, 0, NULL},
    {"resume", "FILE", "start from a saved position", F_RESUME, 0, 0, 0, NULL},
    {"checksum", NULL, "print the FNV-1a checksum of delivered bytes (timed "
     "on its own, not counted in samples/s)", F_CHECKSUM, 0, 0, 0, NULL},
    {"quiet", NULL, "no progress bar", F_QUIET, 0, 0, 0, NULL},
    {"report", NULL, "print the bottleneck report after the run (which "
     "stage bounds throughput, and by how much)", F_REPORT, 0, 0, 0, NULL},
    {"json", NULL, "print the results as one JSON object on stdout, in "
     "`bench --json`'s schema (docs/bench.md), the report under \"report\"; "
     "no other text on stdout", F_JSON, 0, 0, 0, NULL},
    {"step-ms", "MS", "sleep MS per batch while holding it: a stand-in "
     "training step", F_STEP_MS, 0, 0, 0, NULL},
    /* Transforms of the `image` field (docs/transforms.md): on the GPU after
     * the copy, in the workers on the CPU; applied in this order whatever
     * the flags' order. CLI-only: not scalar loader options. */
    {"random-crop", "PAD", "zero-pad PAD pixels, crop the original size "
     "back at a random offset (torchvision RandomCrop)", F_RANDOM_CROP, 1, 0,
     4096, NULL},
    {"flip", NULL, "random horizontal flip, p = 0.5", F_FLIP, 0, 0, 0, NULL},
    {"to", "T", "float32, bf16 or fp16: x / 255 (ConvertImageDtype)", F_TO,
     0, 0, 0, NULL},
    {"normalize", "M,S", "(x / 255 - M) / S; M1,..,Mc,S1,..,Sc per channel",
     F_NORMALIZE, 0, 0, 0, NULL},
    {"channels-last", NULL, "deliver images [H,W,C] per sample (default "
     "[C,H,W])", F_CHANNELS_LAST, 0, 0, 0, NULL},
    {"int64-labels", NULL, "widen the `label` field to int64",
     F_INT64_LABELS, 0, 0, 0, NULL},
};

/* The transform of kind k in the CLI's list, added if new. */
static pl_transform *add_xf(run_opts *o, pl_transform_kind k) {
  for (int i = 0; i < o->nxf; i++)
    if (o->xf[i].kind == k)
      return &o->xf[i];
  pl_transform_init(&o->xf[o->nxf], k);
  return &o->xf[o->nxf++];
}

/* "M,S" or "M1,..,Mc,S1,..,Sc" into t's mean and std. 0 on success. */
static int parse_normalize(const char *v, pl_transform *t) {
  float vals[2 * PL_TRANSFORM_MAX_CHANNELS];
  int n = 0;
  char buf[512];
  if (strlen(v) >= sizeof buf)
    return 1;
  snprintf(buf, sizeof buf, "%s", v);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    double d;
    if (n == 2 * PL_TRANSFORM_MAX_CHANNELS || cli_parse_double(tok, &d))
      return 1;
    vals[n++] = (float)d;
  }
  if (n < 2 || n % 2)
    return 1;
  t->num_channels = n / 2;
  for (int c = 0; c < n / 2; c++)
    t->mean[c] = vals[c], t->std[c] = vals[n / 2 + c];
  return 0;
}

static int parse_to(const char *v, pl_transform *t) {
  if (!strcmp(v, "float32") || !strcmp(v, "fp32"))
    t->dtype = PL_FLOAT32;
  else if (!strcmp(v, "bf16") || !strcmp(v, "bfloat16"))
    t->dtype = PL_BFLOAT16;
  else if (!strcmp(v, "fp16") || !strcmp(v, "float16"))
    t->dtype = PL_FLOAT16;
  else
    return 1;
  return 0;
}

static int on_transform_flag(run_opts *o, int id, const char *v, uint64_t n) {
  switch (id) {
  case F_RANDOM_CROP:
    add_xf(o, PL_TRANSFORM_RANDOM_CROP)->padding = (int32_t)n;
    return 0;
  case F_FLIP: add_xf(o, PL_TRANSFORM_RANDOM_HFLIP); return 0;
  case F_CHANNELS_LAST:
    add_xf(o, PL_TRANSFORM_LAYOUT)->layout = PL_LAYOUT_HWC;
    return 0;
  case F_INT64_LABELS: add_xf(o, PL_TRANSFORM_TO_INT64); return 0;
  case F_TO:
    if (!parse_to(v, add_xf(o, PL_TRANSFORM_CONVERT)))
      return 0;
    fprintf(stderr, "pinloader run: --to must be float32, bf16 or fp16, "
                    "got %s\n", v);
    return 2;
  default:
    if (!parse_normalize(v, add_xf(o, PL_TRANSFORM_NORMALIZE)))
      return 0;
    fprintf(stderr, "pinloader run: --normalize must be MEAN,STD or "
                    "M1,..,Mc,S1,..,Sc (at most 16 channels), got %s\n", v);
    return 2;
  }
}

/* Where the CLI starts from other than the library's defaults. Sharding
 * comes from RANK / WORLD_SIZE / LOCAL_RANK where --rank / --world-size
 * do not say (pl_loader_config_shard_env). */
static const char *const run_defaults[][2] = {{"batch_size", "64"},
                                              {"num_workers", "2"}};

static int on_run_flag(void *user, const cli_flag *f, const char *v,
                       uint64_t n) {
  run_opts *o = user;
  switch (f->id) {
  case F_DATASET: o->dataset = v; break;
  case F_EPOCHS: o->epochs = n; break;
  case F_MAX_BATCHES: o->max_batches = n; break;
  case F_ORDER_OUT: o->order_out = v; break;
  case F_SAVE_STATE: o->save_state = v; break;
  case F_RESUME: o->resume = v; break;
  case F_CHECKSUM: o->checksum = 1; break;
  case F_QUIET: o->quiet = 1; break;
  case F_REPORT: o->report = 1; break;
  case F_JSON: o->json = 1; break;
  case F_STEP_MS:
    if (cli_parse_double(v, &o->step_ms) || !(o->step_ms >= 0) ||
        o->step_ms > 1e6) {
      fprintf(stderr, "pinloader run: --step-ms needs a number of "
                      "milliseconds (0 to 1e6), not %s\n", v);
      return 2;
    }
    break;
  default: return on_transform_flag(o, f->id, v, n);
  }
  return 0;
}

/* 0: run; 2: a usage mistake (explained); -1: --help printed. */
static int parse_run(run_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  pl_loader_config_init(&o->cfg);
  for (size_t i = 0; i < sizeof run_defaults / sizeof run_defaults[0]; i++)
    pl_loader_config_set(&o->cfg, run_defaults[i][0], run_defaults[i][1],
                         NULL);
  o->cfg.log = cli_log;
  o->epochs = 1;
  o->dataset = DEFAULT_DATASET;
  cli_parser p = {"pinloader run", run_flags,
                  sizeof run_flags / sizeof run_flags[0], &o->cfg,
                  on_run_flag, o, {0}};
  int rc = cli_parse_args(&p, argc, argv);
  o->shard_keep = cli_shard_keep(&p);
  o->epoch_set = cli_was_set(&p, "epoch");
  o->cfg.transforms = o->xf;
  o->cfg.num_transforms = o->nxf;
  return rc;
}

static int fail(const char *what, const pl_error *err) {
  fprintf(stderr, "pinloader: error: %s: %s\n", what, err->message);
  return 1;
}

/* Hashes the batch's samples in order, fields in declared order. */
static int checksum_batch(pl_batch *b, int nfields, run_totals *t,
                          pl_error *err) {
  const uint8_t *base[64];
  uint64_t fb[64], total = 0;
  if (nfields > 64) {
    snprintf(err->message, sizeof err->message, "--checksum: over 64 fields");
    return 1;
  }
  for (int f = 0; f < nfields; f++)
    total += pl_batch_bytes(b, f);
  int on_device = pl_batch_device(b, NULL) == PL_DEVICE_CUDA;
  if (on_device && t->scratch_len < total) {
    free(t->scratch);
    t->scratch = malloc(total);
    t->scratch_len = t->scratch ? total : 0;
    if (!t->scratch) {
      snprintf(err->message, sizeof err->message, "out of memory");
      return 1;
    }
  }
  uint64_t off = 0;
  for (int f = 0; f < nfields; f++) {
    uint64_t n = pl_batch_bytes(b, f);
    fb[f] = n / pl_batch_size(b);
    if (on_device) { /* the bytes that reached device memory */
      if (pl_batch_copy_to_host(b, f, 0, t->scratch + off, n, err) != PL_OK)
        return 1;
      base[f] = t->scratch + off;
      off += n;
    } else {
      base[f] = pl_batch_data(b, f);
    }
  }
  for (uint32_t i = 0; i < pl_batch_size(b); i++)
    for (int f = 0; f < nfields; f++) {
      const uint8_t *p = base[f] + i * fb[f];
      for (uint64_t k = 0; k < fb[f]; k++) {
        t->fnv ^= p[k];
        t->fnv *= 0x100000001b3ull;
      }
    }
  return 0;
}

/* Whether `out` is one of the files of the data set spec (the same
 * inode): writing it would truncate a mapped input under the loader. The
 * spec's files follow "KIND:", split on ','. */
static int output_is_input(const char *spec, const char *out) {
  struct stat so, si;
  const char *p = spec ? strchr(spec, ':') : NULL;
  if (!p || stat(out, &so) != 0)
    return 0;
  for (p++; *p;) {
    size_t n = strcspn(p, ",");
    char path[4096];
    if (n < sizeof path) {
      memcpy(path, p, n);
      path[n] = '\0';
      if (stat(path, &si) == 0 && si.st_dev == so.st_dev &&
          si.st_ino == so.st_ino)
        return 1;
    }
    p += n + (p[n] == ',');
  }
  return 0;
}

static int refuse_input_as_output(const run_opts *o) {
  const char *opt[2] = {"--order-out", "--save-state"};
  const char *path[2] = {o->order_out, o->save_state};
  for (int i = 0; i < 2; i++)
    if (path[i] && output_is_input(o->dataset, path[i])) {
      fprintf(stderr,
              "pinloader: error: %s %s: is one of the data set's files "
              "(--dataset %s); refusing to overwrite it\n",
              opt[i], path[i], o->dataset);
      return 1;
    }
  return 0;
}

/* Two roles, one file: the second write would replace the first. (--resume
 * S --save-state S is fine: S is read before the run and replaced after.) */
static int refuse_same_file(const char *opt_a, const char *a,
                            const char *opt_b, const char *b) {
  if (!a || !b || !cli_same_file(a, b))
    return 0;
  fprintf(stderr, "pinloader: error: %s %s and %s %s are the same file; "
                  "give each its own\n", opt_a, a, opt_b, b);
  return 1;
}

/* The files the run writes, checked and their temporary files made before
 * anything is loaded: a mistake costs no run, and a failed run leaves them
 * as they were. 0, or 1 after a message. */
static int open_outputs(const run_opts *o, run_totals *t) {
  if (refuse_input_as_output(o) ||
      refuse_same_file("--order-out", o->order_out, "--save-state",
                       o->save_state) ||
      refuse_same_file("--order-out", o->order_out, "--resume", o->resume))
    return 1;
  if (cli_output_open(&t->order_out, "--order-out", o->order_out))
    return 1;
  if (cli_output_open(&t->state_out, "--save-state", o->save_state)) {
    cli_output_abort(&t->order_out);
    return 1;
  }
  if (o->order_out && !(t->order = cli_output_stream(&t->order_out))) {
    fprintf(stderr, "pinloader: error: --order-out %s: cannot open\n",
            o->order_out);
    return 1;
  }
  return 0;
}

/* After the run: renamed into place when it succeeded, else removed. */
static int close_outputs(run_totals *t, int rc) {
  if (rc) {
    cli_output_abort(&t->order_out);
    cli_output_abort(&t->state_out);
    return rc;
  }
  rc = cli_output_commit(&t->order_out);
  if (rc)
    cli_output_abort(&t->state_out);
  else
    rc = cli_output_commit(&t->state_out);
  return rc;
}

static int write_state(const pl_loader *ld, run_totals *t) {
  uint8_t buf[256];
  size_t len = sizeof buf;
  pl_error err;
  if (pl_loader_save_state(ld, buf, &len, &err) != PL_OK)
    return fail("--save-state", &err);
  if (cli_output_write(&t->state_out, buf, len) == 0)
    return 0;
  fprintf(stderr, "pinloader: error: --save-state %s: write failed\n",
          t->state_out.path);
  return 1;
}

/* --epoch N is the first epoch to load, and --epochs E counts the whole
 * run from epoch 0 (as with --resume): N >= E would load nothing and exit
 * 0, most often because --epoch was typed for --epochs. */
static int check_epochs(const run_opts *o) {
  if (!o->epoch_set || o->resume || o->cfg.epoch < o->epochs)
    return 0;
  fprintf(stderr, "pinloader run: --epoch %llu is the first epoch to load, "
          "and --epochs %llu counts the whole run from epoch 0, so nothing "
          "would be loaded (did you mean --epochs %llu?)\n",
          (unsigned long long)o->cfg.epoch, (unsigned long long)o->epochs,
          (unsigned long long)o->cfg.epoch);
  return 2;
}

static int read_state(pl_loader *ld, const char *path) {
  uint8_t buf[4096];
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "pinloader: error: --resume %s: cannot open\n", path);
    return 1;
  }
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  pl_error err;
  if (pl_loader_load_state(ld, buf, len, &err) != PL_OK)
    return fail(path, &err);
  return 0;
}

/* Takes one batch's worth of results into the totals. */
static int consume(pl_batch *b, const run_opts *o, int nfields, run_totals *t) {
  pl_error err;
  if (pl_batch_wait_stream(b, NULL, &err) != PL_OK)
    return fail("waiting for a batch", &err);
  double c0 = pl_now_cli();
  if (o->checksum && checksum_batch(b, nfields, t, &err))
    return fail("--checksum", &err);
  if (o->checksum)
    t->checksum_s += pl_now_cli() - c0;
  if (o->step_ms > 0) { /* the batch is held for the step, as in training */
    struct timespec ts = {(time_t)(o->step_ms / 1e3),
                          (long)(fmod(o->step_ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
  }
  for (uint32_t i = 0; t->order && i < pl_batch_size(b); i++)
    fprintf(t->order, "%llu\n", (unsigned long long)pl_batch_sample_index(b, i));
  t->samples += pl_batch_size(b);
  for (int f = 0; f < nfields; f++)
    t->bytes += pl_batch_bytes(b, f);
  t->batches++;
  return 0;
}

static int run_epochs(pl_loader *ld, const run_opts *o, int nfields,
                      run_totals *t, double t0) {
  int bar = !o->quiet && !o->json && isatty(STDOUT_FILENO);
  uint64_t per_epoch = pl_loader_num_batches(ld);
  /* --epochs counts the whole run, as torch's StatefulDataLoader does: a
   * resumed run loads the epochs that are left, from where it stopped. */
  uint64_t first = pl_loader_epoch(ld);
  if (o->resume && first >= o->epochs)
    fprintf(stderr, "pinloader run: --resume %s is at epoch %llu; --epochs "
            "%llu counts the whole run, so nothing is left to load\n",
            o->resume, (unsigned long long)first,
            (unsigned long long)o->epochs);
  for (uint64_t e = first; e < o->epochs; e++) {
    uint64_t done = 0;
    for (;;) {
      if (o->max_batches && t->batches >= o->max_batches)
        return 0;
      pl_batch *b;
      pl_error err;
      pl_status s = pl_loader_next(ld, &b, &err);
      if (s == PL_END_OF_EPOCH)
        break;
      if (s != PL_OK)
        return fail("loading", &err);
      int rc = consume(b, o, nfields, t);
      pl_batch_release(b, NULL);
      if (rc)
        return rc;
      if (bar && (++done % 16 == 0 || done == per_epoch)) {
        char label[32];
        snprintf(label, sizeof label, "epoch %llu", (unsigned long long)e);
        cli_progress(stdout, label, done, per_epoch, pl_now_cli() - t0);
      }
    }
    if (bar)
      cli_progress_end(stdout);
  }
  return 0;
}

static void report(const pl_loader *ld, const run_opts *o, const run_totals *t,
                   double secs) {
  pl_loader_stats st;
  char r1[32], r2[32];
  pl_loader_stats_get(ld, &st);
  printf("device: %s\n", pl_loader_device_name(ld));
  printf("loaded: %llu samples in %llu batches, %.3f s\n",
         (unsigned long long)t->samples, (unsigned long long)t->batches, secs);
  printf("samples/s: %.0f (%s)\n", t->samples / secs,
         cli_rate(r1, sizeof r1, t->samples / secs, "samples"));
  printf("bytes/s: %.0f (%s)\n", t->bytes / secs,
         cli_rate(r2, sizeof r2, t->bytes / secs, "B"));
  if (pl_loader_device(ld, NULL) == PL_DEVICE_CPU) /* nothing is copied */
    printf("stats: batches stay in host memory (no device copies), batch "
           "buffers %llu, consumer waited %.3f s, workers busy %.3f s\n",
           (unsigned long long)st.batch_buffers, st.consumer_wait_s,
           st.worker_busy_s);
  else
    printf("stats: copied %llu batches / %llu bytes (%llu without a gather), "
           "pinned %llu bytes (%llu fallbacks), batch buffers %llu, consumer "
           "waited %.3f s, workers busy %.3f s, copies %.3f s\n",
           (unsigned long long)st.batches_copied,
           (unsigned long long)st.bytes_copied,
           (unsigned long long)st.batches_direct,
           (unsigned long long)st.pinned_bytes,
           (unsigned long long)st.pinned_fallbacks,
           (unsigned long long)st.batch_buffers, st.consumer_wait_s,
           st.worker_busy_s, st.copy_s);
  if (o->checksum)
    printf("checksum: %016llx\nchecksum time: %.3f s (not counted in the "
           "loading time)\n", (unsigned long long)t->fnv, t->checksum_s);
}

/* pl_loader_report's text or JSON, malloc'ed; NULL after a message. */
static char *loader_report(const pl_loader *ld, int flags) {
  pl_error err;
  size_t len = 0;
  if (pl_loader_report(ld, NULL, &len, flags, &err) != PL_OK) {
    fail("--report", &err);
    return NULL;
  }
  len += 256; /* the numbers may still move: some margin */
  char *buf = malloc(len);
  if (!buf || pl_loader_report(ld, buf, &len, flags, &err) != PL_OK) {
    if (buf)
      fail("--report", &err);
    free(buf);
    return NULL;
  }
  return buf;
}

static void json_u64(FILE *f, const char *key, uint64_t v) {
  fprintf(f, "\"%s\": %llu", key, (unsigned long long)v);
}

static void json_real(FILE *f, const char *key, double v) {
  fprintf(f, "\"%s\": ", key);
  cli_json_num(f, v);
}

/* The run's row: what `bench --json` calls a seed row and a sweep row. */
static void json_run_row(FILE *f, const pl_loader *ld, const run_opts *o,
                         const run_totals *t, double secs) {
  pl_loader_stats st;
  pl_loader_stats_get(ld, &st);
  int gpu = pl_loader_device(ld, NULL) == PL_DEVICE_CUDA; /* else n/a */
  fprintf(f, "    \"run\": {\"pin\": %s, \"non_blocking\": %s, ",
          gpu && o->cfg.pin_memory ? "true" : "false",
          gpu && o->cfg.non_blocking ? "true" : "false");
  json_u64(f, "batches", t->batches), fprintf(f, ", ");
  json_u64(f, "samples", t->samples), fprintf(f, ", ");
  json_u64(f, "bytes", t->bytes), fprintf(f, ", ");
  json_u64(f, "pinned_fallbacks", st.pinned_fallbacks), fprintf(f, ",\n      ");
  json_real(f, "seconds", secs), fprintf(f, ", ");
  json_real(f, "samples_per_s", t->samples / secs), fprintf(f, ", ");
  json_real(f, "gb_per_s", t->bytes / secs / 1e9), fprintf(f, ",\n      ");
  fprintf(f, "\"checksum\": ");
  if (o->checksum)
    fprintf(f, "\"%016llx\", ", (unsigned long long)t->fnv);
  else
    fprintf(f, "null, ");
  json_real(f, "checksum_s", t->checksum_s), fprintf(f, ",\n      ");
  fprintf(f, "\"stats\": {");
  json_u64(f, "batches_copied", st.batches_copied), fprintf(f, ", ");
  json_u64(f, "bytes_copied", st.bytes_copied), fprintf(f, ", ");
  json_u64(f, "batches_direct", st.batches_direct), fprintf(f, ", ");
  json_u64(f, "pinned_bytes", st.pinned_bytes), fprintf(f, ", ");
  json_u64(f, "batch_buffers", st.batch_buffers), fprintf(f, ", ");
  json_real(f, "consumer_wait_s", st.consumer_wait_s), fprintf(f, ", ");
  json_real(f, "worker_busy_s", st.worker_busy_s), fprintf(f, ", ");
  json_real(f, "copy_s", st.copy_s), fprintf(f, "}}");
}

/* --json: one object on stdout, in `bench --json`'s schema where the two
 * describe the same things (docs/bench.md, "Machine-readable reports"). */
static int print_json(const pl_loader *ld, const run_opts *o,
                      const run_totals *t, double secs, double total_s) {
  pl_loader_timings tm;
  pl_loader_timings_get(ld, &tm, sizeof tm);
  int on_gpu = pl_loader_device(ld, NULL) == PL_DEVICE_CUDA;
  char *rep = o->report ? loader_report(ld, PL_REPORT_JSON) : NULL;
  if (o->report && !rep)
    return 1;
  fprintf(stdout, "{\n  \"pinloader_version\": ");
  cli_json_str(stdout, pl_version_string());
  fprintf(stdout, ", \"cpus\": %ld, ", sysconf(_SC_NPROCESSORS_ONLN));
  json_real(stdout, "total_s", total_s);
  fprintf(stdout, ",\n  \"loader\": {\"ran\": true, \"on_gpu\": %s, "
                  "\"device\": ", on_gpu ? "true" : "false");
  cli_json_str(stdout, pl_loader_device_name(ld));
  fprintf(stdout, ", \"data\": ");
  cli_json_str(stdout, o->dataset);
  fprintf(stdout, ", \"note\": \"\",\n    ");
  json_u64(stdout, "records", t->records);
  fprintf(stdout, ", \"batch_size\": %u, \"workers\": %d, ",
          o->cfg.batch_size,
          o->cfg.num_workers == PL_AUTO ? tm.workers : o->cfg.num_workers);
  json_real(stdout, "work_ms", o->step_ms);
  fprintf(stdout, ", \"work\": \"sleep\",\n");
  json_run_row(stdout, ld, o, t, secs);
  fprintf(stdout, "}%s", rep ? ",\n  \"report\": " : "");
  if (rep)
    fputs(rep, stdout);
  fprintf(stdout, "\n}\n");
  free(rep);
  return fflush(stdout) ? 1 : 0;
}

/* --report without --json: the report's text on stdout. */
static int print_report(const pl_loader *ld) {
  char *buf = loader_report(ld, 0);
  if (!buf)
    return 1;
  fputs(buf, stdout);
  free(buf);
  return 0;
}

/* The data set and the loader over it; NULL after a message. */
static pl_loader *open_loader(run_opts *o, run_totals *t, int *nfields) {
  pl_error err;
  pl_dataset *ds = NULL;
  if (pl_dataset_open_spec(o->dataset, &ds, &err) != PL_OK) {
    fail("--dataset", &err);
    return NULL;
  }
  pl_loader *ld = NULL;
  pl_status s = pl_loader_create(ds, &o->cfg, &ld, &err);
  *nfields = pl_dataset_num_fields(ds);
  t->records = pl_dataset_length(ds);
  pl_dataset_destroy(ds); /* the loader keeps its own reference */
  if (s != PL_OK) {
    fail("creating the loader", &err);
    return NULL;
  }
  return ld;
}

/* After the epochs: the results, the report and the state. */
static int finish(pl_loader *ld, const run_opts *o, run_totals *t, double t0,
                  double start) {
  pl_error err;
  /* The clock stops when the last copy has landed, not when it was queued. */
  if (pl_loader_sync(ld, &err) != PL_OK)
    return fail("waiting for the copies", &err);
  double secs = pl_now_cli() - t0 - t->checksum_s; /* loading only */
  secs = secs > 0 ? secs : 1e-9;
  int rc = 0;
  if (o->json) {
    rc = print_json(ld, o, t, secs, pl_now_cli() - start);
  } else {
    report(ld, o, t, secs);
    if (o->report)
      rc = print_report(ld);
  }
  if (!rc && o->save_state)
    rc = write_state(ld, t);
  return rc;
}

int pl_cmd_run(int argc, char **argv) {
  double start = pl_now_cli();
  run_opts o;
  int prc = parse_run(&o, argc, argv);
  if (prc)
    return prc < 0 ? 0 : 2;
  if (check_epochs(&o))
    return 2;
  pl_error err;
  if (pl_loader_config_shard_env(&o.cfg, o.shard_keep, &err) != PL_OK)
    return fail("sharding", &err);
  run_totals t = {.fnv = 0xcbf29ce484222325ull};
  if (open_outputs(&o, &t))
    return 1;
  int nfields = 0;
  pl_loader *ld = open_loader(&o, &t, &nfields);
  int rc = ld ? 0 : 1;
  if (!rc && o.resume)
    rc = read_state(ld, o.resume);
  double t0 = pl_now_cli();
  if (!rc)
    rc = run_epochs(ld, &o, nfields, &t, t0);
  if (!rc)
    rc = finish(ld, &o, &t, t0, start);
  rc = close_outputs(&t, rc);
  free(t.scratch);
  pl_loader_destroy(ld);
  return rc;
}
