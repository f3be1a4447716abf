/* `pinloader bench [bandwidth|overlap|loader|gendata] [options]`: measures
 * what pinned memory and asynchronous copies buy on this machine, and what
 * the loader delivers. With no subcommand it runs the three experiments at
 * sizes that take about a minute on a GPU machine (less with --quick). */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void bench_usage(FILE *f) {
  fprintf(f,
      "usage: pinloader bench [bandwidth|overlap|loader] [options]\n"
      "       pinloader bench gendata DIR [--records N] [--files N] [--seed S]\n"
      "\n"
      "  bandwidth  host<->device copy speed by size: pageable, pinned (sync,\n"
      "             async), registered; host memcpy speed when there is no GPU\n"
      "  overlap    copy, CPU work (a busy spin), GPU work using the copy: the\n"
      "             time saved by pinned memory and non_blocking copies\n"
      "  loader     CIFAR-10 through the loader with a simulated training step\n"
      "             (a sleep) per batch, then a sweep over worker counts\n"
      "  (none)     all three\n"
      "  gendata    write the generated CIFAR-10-format files into DIR\n"
      "\n"
      "general:\n"
      "  --quick              small sizes, 1 epoch (default with no GPU)\n"
      "  --full               full sizes even with no GPU\n"
      "  --device D           cpu, cuda or cuda:N (default: cuda if usable)\n"
      "  --json FILE|-        write the results as JSON\n"
      "  --csv FILE|-         write the results as CSV\n"
      "  --plot FILE.svg      the plot (default pinloader-bench.svg)\n"
      "  --no-plot            write no plot\n"
      "  --quiet              no progress bar\n"
      "bandwidth:\n"
      "  --min-size BYTES     smallest copy (default 64K)\n"
      "  --max-size BYTES     largest copy (default 1G; quick 64M)\n"
      "overlap:\n"
      "  --overlap-size BYTES copy size (default 64M; quick 16M)\n"
      "  --overlap-work-ms MS CPU work while it copies (default 5; quick 2)\n"
      "loader:\n"
      "  --data FILE[,FILE]   CIFAR-10 binary files (default: generated)\n"
      "  --records N          generated records (default 50000; quick 10000)\n"
      "  --files N            generated files (default 5)\n"
      "  --keep-data DIR      generate into DIR and keep the files\n"
      "  --batch-size N       samples per batch (default 1024)\n"
      "  --workers N          workers of the simulated-step run (default 6)\n"
      "  --work-ms MS         simulated training step per batch, in ms\n"
      "                       (default 100; quick 10)\n"
      "  --spin               the step spins the CPU (default: it sleeps, so\n"
      "                       that its cost is exact and the same for torch)\n"
      "  --epochs N           epochs per configuration (default 2; quick 1)\n"
      "  --sweep N,N,...      worker counts of the sweep (default\n"
      "                       0,1,2,4,6,8,14; quick 0,1,2,4; capped at 2x CPUs)\n"
      "  --no-sweep           only the simulated-step run\n"
      "  --no-step            only the sweep\n"
      "  --seed S             shuffle and data seed (default 0)\n"
      "Sizes take K, M, G (powers of 1024). Exit status: 0 done, 1 a run\n"
      "failed, 2 bad usage.\n");
}

static int cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static int parse_workers_list(const char *s, bench_opts *o) {
  char buf[256];
  if (strlen(s) >= sizeof buf)
    return -1;
  strcpy(buf, s);
  o->nsweep_workers = 0;
  char *save = NULL;
  for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
    int w;
    if (o->nsweep_workers >= 32 || cli_parse_int(p, 0, PL_MAX_WORKERS, &w))
      return -1;
    o->sweep_workers[o->nsweep_workers++] = w;
  }
  return o->nsweep_workers ? 0 : -1;
}

static void set_defaults(bench_opts *o, int quick) {
  static const int full_sweep[] = {0, 1, 2, 4, 6, 8, 14};
  o->quick = quick;
  o->min_bytes = 64u << 10;
  o->max_bytes = quick ? 64u << 20 : 1u << 30;
  o->overlap_bytes = quick ? 16u << 20 : 64u << 20;
  o->overlap_work_ms = quick ? 2 : 5;
  o->records = quick ? 10000 : 50000;
  o->files = 5;
  o->batch_size = 1024;
  o->workers = 6;
  o->work_ms = quick ? 10 : 100;
  o->epochs = quick ? 1 : 2;
  o->nsweep_workers = 0;
  for (int i = 0; i < (quick ? 4 : 7); i++)
    o->sweep_workers[o->nsweep_workers++] = full_sweep[i];
}

/* Flags without a value. 1 if `a` is one. */
static int parse_switch(bench_opts *o, const char *a) {
  if (!strcmp(a, "--quick") || !strcmp(a, "--full")) return 1; /* pre-scan */
  else if (!strcmp(a, "--no-plot")) o->plot = NULL;
  else if (!strcmp(a, "--quiet")) o->progress = 0;
  else if (!strcmp(a, "--spin")) o->sleep_work = 0;
  else if (!strcmp(a, "--no-sweep")) o->sweep_run = 0;
  else if (!strcmp(a, "--no-step") || !strcmp(a, "--no-seed")) o->seed_run = 0;
  else return 0;
  return 1;
}

static int known_valued(const char *a) {
  static const char *const names[] = {
      "--json",     "--csv",       "--plot",         "--data",
      "--keep-data", "--device",   "--min-size",     "--max-size",
      "--overlap-size", "--overlap-work-ms", "--work-ms", "--records",
      "--files",    "--batch-size", "--workers",     "--epochs",
      "--sweep",    "--seed"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(a, names[i]))
      return 1;
  return 0;
}

/* One flag with a value. 0, or 2 after a message. */
static int parse_flag(bench_opts *o, int argc, char **argv, int *i) {
  const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  int bad = 0, n = 0;
  uint64_t u = 0;
  if (parse_switch(o, a))
    return 0;
  if (strncmp(a, "--", 2) || !strcmp(a, "--")) {
    fprintf(stderr, "pinloader bench: unexpected argument '%s'\n", a);
    return 2;
  }
  if (!known_valued(a)) {
    fprintf(stderr, "pinloader bench: unknown option '%s'\n", a);
    return 2;
  }
  if (!v) bad = 1;
  else if (!strcmp(a, "--json")) o->json = v;
  else if (!strcmp(a, "--csv")) o->csv = v;
  else if (!strcmp(a, "--plot")) o->plot = v;
  else if (!strcmp(a, "--data")) o->data = v;
  else if (!strcmp(a, "--keep-data")) o->keep_data = v;
  else if (!strcmp(a, "--device"))
    bad = cli_parse_device(v, &o->device, &o->device_index);
  else if (!strcmp(a, "--min-size")) bad = cli_parse_size(v, &o->min_bytes);
  else if (!strcmp(a, "--max-size")) bad = cli_parse_size(v, &o->max_bytes);
  else if (!strcmp(a, "--overlap-size")) bad = cli_parse_size(v, &o->overlap_bytes);
  else if (!strcmp(a, "--overlap-work-ms"))
    bad = cli_parse_double(v, &o->overlap_work_ms) || o->overlap_work_ms < 0;
  else if (!strcmp(a, "--work-ms"))
    bad = cli_parse_double(v, &o->work_ms) || o->work_ms < 0;
  else if (!strcmp(a, "--records"))
    bad = cli_parse_u64(v, &o->records) || o->records == 0;
  else if (!strcmp(a, "--files")) bad = cli_parse_int(v, 1, 64, &o->files);
  else if (!strcmp(a, "--batch-size"))
    bad = cli_parse_int(v, 1, 1 << 24, &n), o->batch_size = (uint32_t)n;
  else if (!strcmp(a, "--workers"))
    bad = cli_parse_int(v, 0, PL_MAX_WORKERS, &o->workers);
  else if (!strcmp(a, "--epochs"))
    bad = cli_parse_int(v, 1, BENCH_MAX_SEED_EPOCHS, &o->epochs);
  else if (!strcmp(a, "--sweep")) bad = parse_workers_list(v, o);
  else if (!strcmp(a, "--seed")) bad = cli_parse_u64(v, &u), o->seed = u;
  else {
    fprintf(stderr, "pinloader bench: unknown option '%s'\n", a);
    return 2;
  }
  if (bad) {
    fprintf(stderr, "pinloader bench: %s needs a valid value%s%s\n", a,
            v ? ", not " : "", v ? v : "");
    return 2;
  }
  *i += 1;
  return 0;
}

/* Which experiments the subcommand names; "" is all. -1 if unknown. */
static int pick_experiments(bench_opts *o, const char *sub) {
  o->run_bw = !*sub || !strcmp(sub, "bandwidth");
  o->run_overlap = !*sub || !strcmp(sub, "overlap");
  o->run_loader = !*sub || !strcmp(sub, "loader");
  return o->run_bw || o->run_overlap || o->run_loader ? 0 : -1;
}

static int has_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], flag))
      return 1;
  return 0;
}

/* Parses everything; `sub` is the subcommand or "". Returns 0 or 2. */
static int parse_bench(bench_opts *o, int argc, char **argv, int first,
                       const char *sub) {
  memset(o, 0, sizeof *o);
  o->cuda_ok = pl_cuda_available() && pl_cuda_device_count() > 0 &&
               bench_cuda_devices() > 0;
  int quick = has_flag(argc, argv, "--quick");
  /* No GPU and no subcommand: the whole run must stay well under a minute
   * on a small machine, so quick sizes unless --full. */
  if (!*sub && !o->cuda_ok && !has_flag(argc, argv, "--full"))
    quick = 1;
  set_defaults(o, quick);
  o->device = PL_DEVICE_AUTO;
  o->plot = "pinloader-bench.svg";
  o->progress = isatty(STDERR_FILENO);
  o->sleep_work = 1;
  o->seed_run = o->sweep_run = 1;
  if (pick_experiments(o, sub)) {
    fprintf(stderr, "pinloader bench: unknown experiment '%s'\n", sub);
    return 2;
  }
  for (int i = first; i < argc; i++)
    if (parse_flag(o, argc, argv, &i))
      return 2;
  if (o->min_bytes > o->max_bytes) {
    fprintf(stderr, "pinloader bench: --min-size is above --max-size\n");
    return 2;
  }
  if (o->device == PL_DEVICE_CPU)
    o->cuda_ok = 0;
  return 0;
}

/* Sizes from min to max by factors of 4, and max itself. */
static void bw_sizes(const bench_opts *o, bench_bw *bw) {
  bw->nsizes = 0;
  for (uint64_t n = o->min_bytes; n < o->max_bytes && bw->nsizes <
       BENCH_MAX_SIZES - 1; n *= 4)
    bw->sizes[bw->nsizes++] = n;
  bw->sizes[bw->nsizes++] = o->max_bytes;
}

static int run_bandwidth(const bench_opts *o, bench_bw *bw) {
  bw_sizes(o, bw);
  if (o->cuda_ok)
    return bench_cuda_bandwidth(o, bw);
#ifdef PL_HAVE_CUDA
  snprintf(bw->note, sizeof bw->note, o->device == PL_DEVICE_CPU
                                          ? "--device cpu"
                                          : "no usable CUDA device");
#else
  snprintf(bw->note, sizeof bw->note, "this build has no CUDA support");
#endif
  return bench_host_bandwidth(o, bw);
}

static int run_overlap(const bench_opts *o, bench_overlap *ov) {
  if (o->cuda_ok)
    return bench_cuda_overlap(o, ov);
  snprintf(ov->note, sizeof ov->note, "no GPU: nothing to overlap with");
  return 0;
}

static int gendata(int argc, char **argv) {
  bench_opts o;
  char *paths[64] = {0};
  if (argc < 3 || argv[2][0] == '-') {
    fprintf(stderr, "pinloader bench gendata: needs a directory\n");
    return 2;
  }
  if (parse_bench(&o, argc, argv, 3, "loader"))
    return 2;
  if (mkdir(argv[2], 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "pinloader bench gendata: %s: %s\n", argv[2],
            strerror(errno));
    return 1;
  }
  int rc = bench_make_cifar(argv[2], o.records, o.files, o.seed, paths);
  for (int i = 0; i < o.files; i++) {
    if (!rc && paths[i])
      printf("%s\n", paths[i]);
    free(paths[i]);
  }
  return rc ? 1 : 0;
}

static int write_outputs(const bench_opts *o, const bench_results *r,
                         int failed, FILE *text) {
  int rc = 0;
  if (o->json && bench_write_json(o->json, r))
    rc = 1;
  if (o->csv && bench_write_csv(o->csv, r))
    rc = 1;
  if (o->plot && !failed) { /* a failed run's plot would show nothing true */
    if (bench_write_svg(o->plot, r))
      rc = 1;
    else
      fprintf(text, "plot: %s\n", o->plot);
  }
  return rc;
}

static const char *argv_device(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--device"))
      return argv[i + 1];
  return "cuda";
}

int pl_cmd_bench(int argc, char **argv) {
  const char *sub = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
  if (has_flag(argc, argv, "--help") || has_flag(argc, argv, "-h")) {
    bench_usage(stdout);
    return 0;
  }
  if (!strcmp(sub, "gendata"))
    return gendata(argc, argv);
  static bench_results r; /* large; one run per process */
  bench_opts o;
  if (parse_bench(&o, argc, argv, *sub ? 2 : 1, sub)) {
    fprintf(stderr, "`pinloader bench --help` lists the options\n");
    return 2;
  }
  if (o.device == PL_DEVICE_CUDA && !o.cuda_ok) {
    fprintf(stderr, "pinloader bench: error: --device %s: no usable CUDA "
                    "device%s\n", argv_device(argc, argv),
            pl_cuda_available() ? "" : " (this build has no CUDA support)");
    return 1;
  }
  /* Tables go to stdout unless a machine-readable report claims it. */
  FILE *text = (o.json && !strcmp(o.json, "-")) ||
                       (o.csv && !strcmp(o.csv, "-"))
                   ? stderr
                   : stdout;
  memset(&r, 0, sizeof r);
  snprintf(r.version, sizeof r.version, "%s", pl_version_string());
  r.cpus = cpu_count();
  r.quick = o.quick;
  fprintf(text, "pinloader %s bench: %d CPUs, %s%s\n\n", r.version, r.cpus,
          o.cuda_ok ? "CUDA device usable" : "no GPU: GPU parts skipped",
          o.quick ? ", quick sizes" : "");
  int kept = 0; /* more threads than 2x CPUs only measure contention */
  for (int i = 0; i < o.nsweep_workers; i++)
    if (o.sweep_workers[i] <= 2 * r.cpus)
      o.sweep_workers[kept++] = o.sweep_workers[i];
  o.nsweep_workers = kept;
  double t0 = bench_now();
  int rc = 0;
  if (o.run_bw) {
    rc |= run_bandwidth(&o, &r.bw) != 0;
    bench_print_bw(text, &r.bw);
  }
  if (o.run_overlap) {
    rc |= run_overlap(&o, &r.overlap) != 0;
    bench_print_overlap(text, &r.overlap);
  }
  if (o.run_loader) {
    rc |= bench_loader_run(&o, &r.loader) != 0;
    bench_print_loader_seed(text, &r.loader);
    bench_print_loader_sweep(text, &r.loader);
  }
  r.total_s = bench_now() - t0;
  fprintf(text, "total: %.1f s\n", r.total_s);
  rc |= write_outputs(&o, &r, rc, text);
  fflush(stdout);
  return rc ? 1 : 0;
}
