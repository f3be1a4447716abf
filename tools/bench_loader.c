/* `pinloader bench loader`: a simulated training step through the real loader
 * (public API only), then a sweep over worker counts; and the generated
 * CIFAR-10-format data set it runs on when no --data is given. */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CIFAR_RECORD 3073u /* label byte + 3x32x32 pixels */

/* ------------------------------------------------------------- data */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* One record: label (< 10), then pseudo-random pixels. */
static void fill_record(uint8_t *r, uint64_t *state) {
  uint64_t x = splitmix64(state);
  r[0] = (uint8_t)(x % 10);
  for (unsigned j = 1; j < CIFAR_RECORD; j += 8) {
    x = splitmix64(state);
    unsigned n = CIFAR_RECORD - j < 8 ? CIFAR_RECORD - j : 8;
    memcpy(r + j, &x, n);
  }
}

static int write_cifar_file(const char *path, uint64_t n, uint64_t *state) {
  enum { CHUNK = 256 };
  uint8_t *buf = malloc((size_t)CHUNK * CIFAR_RECORD);
  FILE *f = fopen(path, "wb");
  int rc = buf && f ? 0 : -1;
  for (uint64_t done = 0; !rc && done < n; done += CHUNK) {
    uint64_t k = n - done < CHUNK ? n - done : CHUNK;
    for (uint64_t i = 0; i < k; i++)
      fill_record(buf + i * CIFAR_RECORD, state);
    if (fwrite(buf, CIFAR_RECORD, (size_t)k, f) != k)
      rc = -1;
  }
  if (f && fclose(f) != 0)
    rc = -1;
  free(buf);
  if (rc)
    fprintf(stderr, "pinloader bench: cannot write %s: %s\n", path,
            strerror(errno ? errno : EIO));
  return rc;
}

int bench_make_cifar(const char *dir, uint64_t records, int files,
                     uint64_t seed, char **paths) {
  uint64_t state = seed ^ 0xC1FA510ull;
  for (int i = 0; i < files; i++) {
    uint64_t n = records / (uint64_t)files +
                 ((uint64_t)i < records % (uint64_t)files);
    size_t len = strlen(dir) + 32;
    if (!(paths[i] = malloc(len))) {
      fprintf(stderr, "pinloader bench: out of memory\n");
      return -1;
    }
    snprintf(paths[i], len, "%s/data_batch_%d.bin", dir, i + 1);
    if (write_cifar_file(paths[i], n, &state))
      return -1;
  }
  return 0;
}

/* ------------------------------------------------------------- loading */

typedef struct bench_data {
  char *paths[64];
  int npaths;
  char tmpdir[256]; /* "" unless we generated into a directory we remove */
  pl_dataset *u8, *f32;
} bench_data;

static int open_data(const bench_opts *o, bench_data *d, bench_loader *lr) {
  pl_error err;
  if (o->data) { /* FILE[,FILE...] */
    char *list = strdup(o->data), *save = NULL;
    for (char *p = strtok_r(list, ",", &save); p && d->npaths < 64;
         p = strtok_r(NULL, ",", &save))
      d->paths[d->npaths++] = strdup(p);
    free(list);
    snprintf(lr->data, sizeof lr->data, "%s", o->data);
  } else {
    const char *dir = o->keep_data;
    if (!dir) {
      const char *t = getenv("TMPDIR");
      snprintf(d->tmpdir, sizeof d->tmpdir, "%s/pinloader-bench-XXXXXX",
               t && *t ? t : "/tmp");
      if (!mkdtemp(d->tmpdir)) {
        fprintf(stderr, "pinloader bench: mkdtemp %s: %s\n", d->tmpdir,
                strerror(errno));
        d->tmpdir[0] = '\0';
        return -1;
      }
      dir = d->tmpdir;
    }
    d->npaths = o->files;
    if (bench_make_cifar(dir, o->records, o->files, o->seed, d->paths))
      return -1;
    snprintf(lr->data, sizeof lr->data,
             "generated: %llu CIFAR-10-format records (pseudo-random "
             "pixels) in %d files in %s%s",
             (unsigned long long)o->records, o->files, dir,
             o->keep_data ? "" : " (removed afterwards)");
  }
  if (pl_dataset_open_cifar10((const char *const *)d->paths, d->npaths,
                              &d->u8, &err) != PL_OK ||
      pl_dataset_to_float32(d->u8, "image", 1.0f / 255.0f, &d->f32, &err) !=
          PL_OK) {
    fprintf(stderr, "pinloader bench: error: data set: %s\n", err.message);
    snprintf(lr->note, sizeof lr->note, "data set: %s", err.message);
    return -1;
  }
  lr->records = pl_dataset_length(d->u8);
  return 0;
}

static void close_data(bench_data *d) {
  pl_dataset_destroy(d->f32);
  pl_dataset_destroy(d->u8);
  for (int i = 0; i < d->npaths; i++) {
    if (d->tmpdir[0] && d->paths[i])
      unlink(d->paths[i]);
    free(d->paths[i]);
  }
  if (d->tmpdir[0])
    rmdir(d->tmpdir);
}

static void loader_config(const bench_opts *o, int workers, int pin, int nb,
                          pl_loader_config *c) {
  pl_loader_config_init(c);
  c->batch_size = o->batch_size;
  c->num_workers = workers;
  c->shuffle = 1;
  c->seed = o->seed;
  c->device = o->device;
  c->device_index = o->device_index;
  c->pin_memory = pin;
  c->non_blocking = nb;
  c->log = cli_log;
  c->log_level = PL_LOG_WARN;
}

/* One epoch: take every batch, make the default stream wait for it, do the
 * CPU work, then wait for the data as the GPU work using it would, and give
 * it back. Returns seconds, or < 0 after printing the error. */
static double run_epoch(pl_loader *ld, double work_ms, int sleep_work,
                        uint64_t *bytes) {
  pl_error err;
  double t = bench_now();
  for (;;) {
    pl_batch *b;
    pl_status s = pl_loader_next(ld, &b, &err);
    if (s == PL_END_OF_EPOCH)
      break;
    if (s == PL_OK)
      s = pl_batch_wait_stream(b, NULL, &err);
    if (s == PL_OK) {
      if (work_ms > 0)
        (sleep_work ? bench_sleep_ms : bench_spin_ms)(work_ms);
      s = pl_batch_wait_host(b, &err);
      for (int f = 0; s == PL_OK && f < 64 && pl_batch_field(b, f); f++)
        *bytes += pl_batch_bytes(b, f);
      pl_batch_release(b, NULL);
    }
    if (s != PL_OK) {
      fprintf(stderr, "pinloader bench: error: loading: %s\n", err.message);
      return -1;
    }
  }
  return bench_now() - t;
}

static pl_loader *make_loader(pl_dataset *ds, const pl_loader_config *c) {
  pl_loader *ld = NULL;
  pl_error err;
  if (pl_loader_create(ds, c, &ld, &err) != PL_OK) {
    fprintf(stderr, "pinloader bench: error: creating the loader: %s\n",
            err.message);
    return NULL;
  }
  return ld;
}

/* The seed benchmark: float32 images, CPU work per batch, epochs. */
static int seed_row(const bench_opts *o, bench_data *d, bench_loader *lr,
                    bench_seed_row *row, int pin, int nb, double t0,
                    int *done, int total) {
  pl_loader_config c;
  loader_config(o, o->workers, pin, nb, &c);
  pl_loader *ld = make_loader(d->f32, &c);
  if (!ld)
    return -1;
  row->pin = pin;
  row->non_blocking = nb;
  row->batches = pl_loader_num_batches(ld);
  row->floor_s = (double)row->batches * o->work_ms / 1e3;
  snprintf(lr->device, sizeof lr->device, "%s", pl_loader_device_name(ld));
  lr->on_gpu = pl_loader_device(ld, NULL) == PL_DEVICE_CUDA;
  double sum = 0;
  for (int e = 0; e < o->epochs && e < BENCH_MAX_SEED_EPOCHS; e++) {
    uint64_t bytes = 0;
    double s = run_epoch(ld, o->work_ms, o->sleep_work, &bytes);
    if (s < 0) {
      pl_loader_destroy(ld);
      return -1;
    }
    row->epoch_s[row->epochs++] = s;
    sum += s;
    bench_progress(o, "loader", (uint64_t)++*done, (uint64_t)total, t0);
  }
  pl_loader_stats st;
  pl_loader_stats_get(ld, &st);
  row->pinned_fallbacks = st.pinned_fallbacks;
  row->batch_buffers = st.batch_buffers;
  row->mean_s = row->epochs ? sum / row->epochs : 0;
  pl_loader_destroy(ld);
  return 0;
}

static int sweep_row(const bench_opts *o, bench_data *d, bench_loader *lr,
                     bench_sweep_row *row) {
  pl_loader_config c;
  loader_config(o, row->workers, row->pin, 1, &c);
  pl_loader *ld = make_loader(row->float32 ? d->f32 : d->u8, &c);
  if (!ld)
    return -1;
  snprintf(lr->device, sizeof lr->device, "%s", pl_loader_device_name(ld));
  lr->on_gpu = pl_loader_device(ld, NULL) == PL_DEVICE_CUDA;
  uint64_t bytes = 0;
  double s = 0;
  /* The second epoch is timed: the first pays for thread start-up and the
   * first touch of every staging buffer. */
  for (int e = 0; e < 2 && s >= 0; e++) {
    bytes = 0;
    s = run_epoch(ld, 0, 0, &bytes);
  }
  uint64_t samples = pl_loader_num_samples(ld);
  pl_loader_destroy(ld);
  if (s < 0)
    return -1;
  row->epoch_s = s;
  row->samples_s = (double)samples / (s > 0 ? s : 1e-9);
  row->gbs = (double)bytes / (s > 0 ? s : 1e-9) / 1e9;
  return 0;
}

/* The loader's device for these options, without creating one. */
static int wants_gpu(const bench_opts *o) {
  return o->device == PL_DEVICE_CUDA ||
         (o->device == PL_DEVICE_AUTO && o->cuda_ok);
}

static int run_seed(const bench_opts *o, bench_data *d, bench_loader *lr) {
  static const int combos[4][2] = {{1, 1}, {1, 0}, {0, 1}, {0, 0}};
  int gpu = wants_gpu(o), n = gpu ? 4 : 1, done = 0;
  double t0 = bench_now();
  for (int i = 0; i < n; i++) {
    /* On the CPU there is no copy: one row, pinning off. */
    int pin = gpu ? combos[i][0] : 0, nb = gpu ? combos[i][1] : 0;
    if (seed_row(o, d, lr, &lr->seed[i], pin, nb, t0, &done, n * o->epochs))
      return -1;
    lr->nseed = i + 1;
  }
  bench_progress_end(o);
  if (!gpu)
    snprintf(lr->note, sizeof lr->note,
             "no GPU: batches stay in host memory, so pin_memory and "
             "non_blocking do not apply (one row)");
  return 0;
}

static int run_sweep(const bench_opts *o, bench_data *d, bench_loader *lr) {
  int pins = wants_gpu(o) ? 2 : 1;
  int total = o->nsweep_workers * 2 * pins;
  double t0 = bench_now();
  lr->nsweep = 0;
  for (int w = 0; w < o->nsweep_workers; w++)
    for (int f = 0; f < 2; f++)
      for (int p = 0; p < pins; p++) {
        if (lr->nsweep >= BENCH_MAX_SWEEP)
          return 0;
        bench_sweep_row *row = &lr->sweep[lr->nsweep];
        row->workers = o->sweep_workers[w];
        row->float32 = f;
        row->pin = pins == 2 ? !p : 0;
        if (sweep_row(o, d, lr, row))
          return -1;
        lr->nsweep++;
        bench_progress(o, "sweep", (uint64_t)lr->nsweep, (uint64_t)total,
                       t0);
      }
  bench_progress_end(o);
  return 0;
}

int bench_loader_run(const bench_opts *o, bench_loader *lr) {
  bench_data d;
  memset(&d, 0, sizeof d);
  lr->batch_size = o->batch_size;
  lr->workers = o->workers;
  lr->work_ms = o->work_ms;
  lr->sleep_work = o->sleep_work;
  int rc = open_data(o, &d, lr);
  if (!rc && o->seed_run)
    rc = run_seed(o, &d, lr);
  if (!rc && o->sweep_run)
    rc = run_sweep(o, &d, lr);
  if (!lr->device[0])
    snprintf(lr->device, sizeof lr->device, "%s",
             wants_gpu(o) ? "cuda" : "cpu");
  close_data(&d);
  lr->ran = !rc;
  return rc;
}
