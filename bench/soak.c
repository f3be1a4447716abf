/* Soak: many epochs over one dataset through the public API, printing the
 * process's resident memory (and the loader's pinned bytes and batch
 * buffers) after every epoch, so that a slow leak shows as a trend. The
 * figures must be flat after the first epoch or two.
 *
 *   soak [--images F --labels F] [--workers 8] [--prefetch 4] [--batch 256]
 *        [--epochs 50] [--seconds 0] [--device auto|cpu|cuda] [--float] [--direct]
 *        [--recreate K] [--every K] [--max-growth-mib 32]
 *
 * --recreate K destroys and recreates the loader every K epochs (leaks in
 * create/destroy); --every K prints every K-th epoch; --float delivers images as float32 (the conversion
 * path); --seconds stops after that long (0: run all epochs).
 * Output: a Markdown table on stdout; exit 1 if RSS grew by more than
 * --max-growth-mib from the end of epoch 2 (the warm-up) to the end, or on
 * any loader error. Built by scripts/soak.sh. */
#define _GNU_SOURCE
#include "pinloader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A "VmRSS:" style line of /proc/self/status, in KiB (-1 if absent). */
static long proc_status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, n) && line[n] == ':') {
      v = strtol(line + n + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

typedef struct opts {
  const char *images, *labels, *device;
  int workers, prefetch, batch, epochs, recreate, to_float, every;
  double seconds, max_growth_mib;
  int direct; /* direct_copy: large samples straight from the files */
} opts;

static void parse(int argc, char **argv, opts *o) {
  *o = (opts){
      .images = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
      .labels = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
      .device = "auto",
      .workers = 8,
      .prefetch = 4,
      .batch = 256,
      .epochs = 50,
      .max_growth_mib = 32,
      .every = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int used = 1;
    if (!strcmp(a, "--images") && v) o->images = v;
    else if (!strcmp(a, "--labels") && v) o->labels = v;
    else if (!strcmp(a, "--device") && v) o->device = v;
    else if (!strcmp(a, "--workers") && v) o->workers = atoi(v);
    else if (!strcmp(a, "--prefetch") && v) o->prefetch = atoi(v);
    else if (!strcmp(a, "--batch") && v) o->batch = atoi(v);
    else if (!strcmp(a, "--epochs") && v) o->epochs = atoi(v);
    else if (!strcmp(a, "--seconds") && v) o->seconds = atof(v);
    else if (!strcmp(a, "--recreate") && v) o->recreate = atoi(v);
    else if (!strcmp(a, "--direct")) { o->direct = 1; used = 0; }
    else if (!strcmp(a, "--every") && v) o->every = atoi(v) > 0 ? atoi(v) : 1;
    else if (!strcmp(a, "--max-growth-mib") && v) o->max_growth_mib = atof(v);
    else if (!strcmp(a, "--float")) { o->to_float = 1; used = 0; }
    else {
      fprintf(stderr, "soak: unknown or incomplete option %s\n", a);
      exit(2);
    }
    i += used;
  }
}

static pl_loader *make_loader(pl_dataset *ds, const opts *o, int epoch) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = (uint32_t)o->batch;
  cfg.num_workers = o->workers;
  cfg.prefetch = o->prefetch;
  cfg.shuffle = 1;
  cfg.seed = 1;
  cfg.epoch = (uint64_t)epoch;
  cfg.timeout_s = 60; /* a stall fails loudly instead of hanging the soak */
  cfg.direct_copy = o->direct;
  cfg.device = !strcmp(o->device, "cpu")    ? PL_DEVICE_CPU
               : !strcmp(o->device, "cuda") ? PL_DEVICE_CUDA
                                            : PL_DEVICE_AUTO;
  pl_loader *ld = NULL;
  pl_error err;
  if (pl_loader_create(ds, &cfg, &ld, &err) != PL_OK) {
    fprintf(stderr, "soak: loader: %s\n", err.message);
    exit(1);
  }
  return ld;
}

int main(int argc, char **argv) {
  opts o;
  parse(argc, argv, &o);
  pl_dataset *raw = NULL, *ds = NULL;
  pl_error err;
  if (pl_dataset_open_idx(o.images, o.labels, &raw, &err) != PL_OK) {
    fprintf(stderr, "soak: %s\n", err.message);
    return 1;
  }
  if (o.to_float) {
    if (pl_dataset_to_float32(raw, "image", 1.0f / 255, &ds, &err) != PL_OK) {
      fprintf(stderr, "soak: %s\n", err.message);
      return 1;
    }
    pl_dataset_destroy(raw);
  } else {
    ds = raw;
  }
  long rss0 = proc_status_kib("VmRSS");
  pl_loader *ld = make_loader(ds, &o, 0);
  printf("device: %s; samples %llu, batch %d, workers %d, prefetch %d%s%s\n\n",
         pl_loader_device_name(ld),
         (unsigned long long)pl_dataset_length(ds), o.batch, o.workers,
         o.prefetch, o.to_float ? ", float32" : "",
         o.recreate ? ", loader recreated periodically" : "");
  printf("| epoch | time s | samples/s | RSS MiB | HWM MiB | pinned MiB | "
         "buffers | checksum |\n");
  printf("|------:|-------:|----------:|--------:|--------:|-----------:|"
         "--------:|---------:|\n");
  printf("| start | 0.0 | - | %.1f | - | - | - | - |\n", rss0 / 1024.0);
  fflush(stdout);
  double t0 = now_s();
  long rss_warm = -1, rss_last = -1;
  int rc = 0, e;
  for (e = 0; e < o.epochs; e++) {
    if (o.recreate && e > 0 && e % o.recreate == 0) {
      pl_loader_destroy(ld);
      ld = make_loader(ds, &o, e);
    }
    double te = now_s();
    uint64_t samples = 0, sum = 0;
    pl_batch *b;
    pl_status s;
    while ((s = pl_loader_next(ld, &b, &err)) == PL_OK) {
      uint8_t probe[8] = {0};
      uint64_t n = pl_batch_bytes(b, 1);
      /* Touch the batch (the labels) so the data path is really used. */
      if (pl_batch_copy_to_host(b, 1, 0, probe, n < 8 ? n : 8, &err) == PL_OK)
        for (int i = 0; i < 8; i++)
          sum = sum * 31 + probe[i];
      samples += pl_batch_size(b);
      pl_batch_release(b, NULL);
    }
    if (s != PL_END_OF_EPOCH) {
      fprintf(stderr, "soak: epoch %d: %s\n", e, err.message);
      rc = 1;
      break;
    }
    pl_loader_stats st;
    pl_loader_stats_get(ld, &st);
    double dt = now_s() - te;
    rss_last = proc_status_kib("VmRSS");
    if (e == 1)
      rss_warm = rss_last;
    int last = e + 1 == o.epochs ||
               (o.seconds > 0 && now_s() - t0 >= o.seconds);
    if (e > 1 && e % o.every != 0 && !last)
      continue;
    printf("| %d | %.1f | %.0f | %.1f | %.1f | %.1f | %llu | %08llx |\n", e,
           now_s() - t0, samples / dt, rss_last / 1024.0,
           proc_status_kib("VmHWM") / 1024.0, st.pinned_bytes / 1048576.0,
           (unsigned long long)st.batch_buffers,
           (unsigned long long)(sum & 0xffffffffu));
    fflush(stdout);
    if (o.seconds > 0 && now_s() - t0 >= o.seconds) {
      e++;
      break;
    }
  }
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
  if (rss_warm > 0) {
    double growth = (rss_last - rss_warm) / 1024.0;
    printf("\nRSS after warm-up (epoch 1): %.1f MiB; at the end (epoch %d): "
           "%.1f MiB; growth %.1f MiB (limit %.0f)\n",
           rss_warm / 1024.0, e - 1, rss_last / 1024.0, growth,
           o.max_growth_mib);
    if (growth > o.max_growth_mib)
      rc = 1;
  }
  return rc;
}
