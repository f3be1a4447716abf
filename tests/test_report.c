/* Per-stage timings, the bottleneck report, the replay and autotuning.
 *
 * The report's constructed cases are extreme on purpose (a 20 ms dataset
 * against a step of nothing, a 20 ms step against a dataset of nothing),
 * and the checks name the bound stage, never a time: a loaded CI machine
 * slows everything, but cannot turn one case into the other. The copy-
 * bound case needs a GPU for real (tests/gpu/test_gpu_report.c); here the
 * analysis is fed constructed numbers. */
#include "loader_fixture.h"

#include "core/cpus.h"
#include "loader/report.h"
#include "loader/tune.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static pl_loader *make(pl_dataset *ds, uint32_t batch, int workers,
                       pl_loader_config *cfg) {
  pl_loader_config def;
  if (!cfg) {
    pl_loader_config_init(&def);
    cfg = &def;
  }
  cfg->batch_size = batch;
  cfg->num_workers = workers;
  cfg->device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, cfg, &ld, &err), &err);
  return ld;
}

/* Consumes `n` batches, sleeping `step` seconds while holding each. */
static void consume(pl_loader *ld, int n, double step) {
  for (int i = 0; i < n; i++) {
    pl_batch *b;
    pl_error err;
    pl_status s = pl_loader_next(ld, &b, &err);
    if (s == PL_END_OF_EPOCH) {
      i--;
      continue;
    }
    CHECK_OK(s, &err);
    if (s != PL_OK)
      return;
    if (step > 0)
      sleep_s(step);
    pl_batch_release(b, NULL);
  }
}

/* The numbers move while workers run: the size asked for first is a hint,
 * and a larger buffer is tried until the report fits. */
static char *report_of(pl_loader *ld, int flags) {
  size_t len = 0;
  pl_error err;
  CHECK_OK(pl_loader_report(ld, NULL, &len, flags, &err), &err);
  for (int tries = 0; tries < 8; tries++) {
    size_t cap = len + 1 + 64 * tries;
    char *buf = malloc(cap);
    size_t got = cap;
    if (pl_loader_report(ld, buf, &got, flags, &err) == PL_OK) {
      CHECK_EQ_U64(strlen(buf), got);
      return buf;
    }
    CHECK(got >= cap); /* too small is the only failure here */
    free(buf);
    len = got;
  }
  CHECK(0);
  return calloc(1, 1);
}

static int bound_is(const char *json, const char *name) {
  char want[64];
  snprintf(want, sizeof want, "{\"bound\": \"%s\"", name);
  int ok = strncmp(json, want, strlen(want)) == 0;
  if (!ok)
    fprintf(stderr, "want bound %s, report: %s\n", name, json);
  return ok;
}

/* ------------------------------------------------------------ live */

static void test_loader_bound(void) {
  fixture fx = {.sleep_s = 0.020};
  pl_dataset *ds = fixture_dataset(&fx, 64, 16);
  pl_loader *ld = make(ds, 1, 1, NULL);
  consume(ld, 8, 0);
  char *json = report_of(ld, PL_REPORT_JSON);
  CHECK(bound_is(json, "workers"));
  free(json);
  char *text = report_of(ld, 0);
  CHECK(strstr(text, "bound: workers\n") != NULL);
  CHECK(strstr(text, "add workers or lighten transforms") != NULL);
  free(text);
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK_EQ_U64(t.batches, 7); /* the first is startup */
  CHECK(t.read_s > 0 && t.workers == 1 && t.worker_threads == 1);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

static void test_consumer_bound(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 64, 16);
  pl_loader *ld = make(ds, 4, 2, NULL);
  consume(ld, 8, 0.020);
  char *json = report_of(ld, PL_REPORT_JSON);
  CHECK(bound_is(json, "consumer"));
  free(json);
  char *text = report_of(ld, 0);
  CHECK(strstr(text, "your training step is the bottleneck") != NULL);
  free(text);
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK_EQ_U64(t.batches_released, 8); /* the first one's hold counts */
  CHECK(t.consumer_hold_s > 0);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* The same with no workers: loading runs in the consumer's thread. */
static void test_in_thread_loading(void) {
  fixture fx = {.sleep_s = 0.020};
  pl_dataset *ds = fixture_dataset(&fx, 64, 16);
  pl_loader *ld = make(ds, 1, 0, NULL);
  consume(ld, 6, 0);
  char *text = report_of(ld, 0);
  CHECK(strstr(text, "bound: workers\n") != NULL);
  CHECK(strstr(text, "loading runs in your thread; use workers") != NULL);
  free(text);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

static void test_report_errors(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 16, 4);
  pl_loader *ld = make(ds, 2, 1, NULL);
  pl_error err;
  char small[8];
  size_t len = sizeof small;
  CHECK_STATUS(pl_loader_report(ld, small, &len, 0, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "the buffer has 8");
  CHECK(len > sizeof small && small[0] == 0);
  /* Nothing delivered yet: too little to judge. */
  char *json = report_of(ld, PL_REPORT_JSON);
  CHECK(bound_is(json, "unknown"));
  free(json);
  CHECK_STATUS(pl_loader_report(NULL, NULL, &len, 0, &err),
               PL_INVALID_ARGUMENT, &err);
  pl_loader_destroy(ld);

  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.timings = 0;
  ld = make(ds, 2, 1, &cfg);
  consume(ld, 3, 0);
  CHECK_STATUS(pl_loader_report(ld, NULL, &len, 0, &err), PL_BAD_STATE, &err);
  CHECK_MSG(&err, "timings are off");
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK_EQ_U64(t.batches, 0);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* An older caller's smaller struct: only its bytes are written. */
static void test_timings_size(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 16, 4);
  pl_loader *ld = make(ds, 2, 1, NULL);
  consume(ld, 4, 0);
  unsigned char buf[sizeof(pl_loader_timings) + 8];
  memset(buf, 0xAB, sizeof buf);
  size_t part = offsetof(pl_loader_timings, startup_s);
  pl_loader_timings_get(ld, (pl_loader_timings *)buf, part);
  for (size_t i = part; i < sizeof buf; i++)
    CHECK(buf[i] == 0xAB);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ replay */

static void test_replay(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 40, 8); /* 10 batches of 4 */
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.replay_batches = 2;
  cfg.replay_after = 3;
  pl_loader *ld = make(ds, 4, 2, &cfg);
  pl_batch *held = NULL;
  for (int epoch = 0; epoch < 2; epoch++) {
    for (int i = 0; i < 10; i++) {
      pl_batch *b;
      pl_error err;
      CHECK_OK(pl_loader_next(ld, &b, &err), &err);
      if (!b)
        return;
      uint64_t s0 = pl_batch_sample_index(b, 0);
      /* Batches 3 and 4 of epoch 0 are kept; then they come in turn. */
      uint64_t want = epoch == 0 && i < 5 ? (uint64_t)i * 4
                                          : (uint64_t)(3 + (epoch * 10 + i - 5) % 2) * 4;
      CHECK_EQ_U64(s0, want);
      CHECK_EQ_U64(pl_batch_epoch(b), epoch);
      CHECK(fixture_check_batch(b, 8) == 0);
      if (epoch == 1 && i == 2)
        held = b; /* a handle held across others on the same batch */
      else
        pl_batch_release(b, NULL);
    }
    pl_batch *end;
    pl_error err;
    CHECK_STATUS(pl_loader_next(ld, &end, &err), PL_END_OF_EPOCH, &err);
  }
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK_EQ_U64(t.replayed, 15);
  CHECK_EQ_U64(t.batches, 4); /* loaded 1..4 after the first */
  char *text = report_of(ld, 0);
  CHECK(strstr(text, "of the ceiling") != NULL);
  free(text);
  pl_loader_destroy(ld);
  CHECK(fixture_check_batch(held, 8) == 0); /* valid after destroy */
  pl_batch_release(held, NULL);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ analysis */

static pl_report_in constructed(void) {
  pl_report_in in;
  memset(&in, 0, sizeof in);
  in.device = "cuda:0 test";
  in.cuda = 1;
  in.batch_size = 256;
  pl_loader_timings *t = &in.t;
  t->wall_s = 10;
  t->batches = 1000;
  t->workers = t->worker_threads = 8;
  t->prefetch = 16;
  t->cpus = 16;
  t->cpu_budget = 14;
  t->process_cpu_s = 50;
  return in;
}

static pl_bound analyze(const pl_report_in *in, pl_analysis *a) {
  pl_report_analyze(in, a);
  return a->bound;
}

static const char *finding(const pl_analysis *a, const char *stage) {
  for (int i = 0; i < a->nfindings; i++)
    if (!strcmp(a->findings[i].stage, stage))
      return a->findings[i].text;
  return "";
}

static void test_analysis_cases(void) {
  pl_analysis a;
  /* Copy-bound: the step waits 60%, the copy engine is busy 95%, workers
   * mostly wait for staging. */
  pl_report_in in = constructed();
  in.t.consumer_wait_s = 6;
  in.t.copy_s = 9.5;
  in.t.bytes_copied = 494ull << 30;
  in.t.link_bytes_per_s = 55e9;
  in.t.read_s = 20;
  in.t.stage_s = 55;
  CHECK(analyze(&in, &a) == PL_BOUND_COPY);
  CHECK(strstr(finding(&a, "copy"), "% of this link's measured 55.0 GB/s") != NULL);
  CHECK(strstr(finding(&a, "copy"), "the copy runs at 55.8 GB/s") != NULL);
  CHECK(fabs(a.speedup - 2.5) < 1e-9);
  in.t.link_bytes_per_s = 0;
  analyze(&in, &a);
  CHECK(strstr(finding(&a, "copy"), "rate is unknown") != NULL);

  /* Worker-bound: 8 workers busy 97%. */
  in = constructed();
  in.t.consumer_wait_s = 5;
  in.t.read_s = 70;
  in.t.transform_s = 7.6;
  in.t.copy_s = 1;
  in.t.bytes_copied = 1ull << 30;
  CHECK(analyze(&in, &a) == PL_BOUND_WORKERS);
  CHECK(strstr(finding(&a, "workers"), "workers are busy 97%: add workers") != NULL);
  in.t.workers = 14; /* tuned up to the budget */
  in.auto_workers = 1;
  in.t.read_s = 130;
  CHECK(analyze(&in, &a) == PL_BOUND_WORKERS);
  CHECK(strstr(finding(&a, "workers"), "CPU budget is used up") != NULL);

  /* Consumer-bound: the step never waits; the loader is idle 78%. */
  in = constructed();
  in.t.consumer_wait_s = 0.1;
  in.t.read_s = 17.6;
  in.t.idle_s = 62.4;
  CHECK(analyze(&in, &a) == PL_BOUND_CONSUMER);
  CHECK(strstr(finding(&a, "verdict"), "the loader is idle 78% of the time: "
                                       "your training step is the bottleneck") != NULL);

  /* Buffers: nothing is busy, workers wait for buffers the step holds. */
  in = constructed();
  in.t.consumer_wait_s = 4;
  in.t.read_s = 10;
  in.t.buffer_wait_s = 50;
  in.t.consumer_hold_s = 80;
  in.t.batches_released = 1000;
  CHECK(analyze(&in, &a) == PL_BOUND_BUFFERS);
  CHECK(strstr(finding(&a, "buffers"), "held 80 ms on average") != NULL);

  /* Prefetch: the step waits though nothing is busy. */
  in = constructed();
  in.t.consumer_wait_s = 3;
  in.t.read_s = 20;
  in.t.idle_s = 50;
  CHECK(analyze(&in, &a) == PL_BOUND_PREFETCH);
  CHECK(strstr(finding(&a, "prefetch"), "raise prefetch (now 16)") != NULL);

  /* Device transforms dominate. */
  in = constructed();
  in.t.consumer_wait_s = 5;
  in.t.device_transform_s = 9;
  CHECK(analyze(&in, &a) == PL_BOUND_DEVXFORM);

  /* Too little to judge. */
  in = constructed();
  in.t.batches = 1;
  CHECK(analyze(&in, &a) == PL_BOUND_UNKNOWN);
  CHECK(a.nfindings == 1);

  /* Headroom: 100 batches/s loaded against 250 on cached batches. */
  in = constructed();
  in.t.consumer_wait_s = 6;
  in.t.read_s = 78;
  in.t.replayed = 501;
  in.t.replay_s = 2;
  analyze(&in, &a);
  CHECK(strstr(finding(&a, "headroom"), "loading reaches 40% of the ceiling: "
                                        "100 batches/s loaded, 250 on cached") != NULL);
}

static void test_format(void) {
  pl_report_in in = constructed();
  in.device = "a \"quoted\"\n device";
  in.t.consumer_wait_s = 0; /* speedup without bound: JSON null */
  pl_analysis a;
  pl_report_analyze(&in, &a);
  char buf[8192];
  size_t len = sizeof buf;
  pl_error err;
  CHECK_OK(pl_report_format(&in, &a, PL_REPORT_JSON, buf, &len, &err), &err);
  CHECK(strstr(buf, "\"device\": \"a \\\"quoted\\\"\\u000a device\"") != NULL);
  CHECK(strstr(buf, "\"speedup\": null") != NULL);
  CHECK(strstr(buf, "\"wall_s\": 10,") != NULL);
  CHECK(strlen(buf) == len && buf[len - 1] == '\n');
}

/* ------------------------------------------------------------ tuning */

static pl_tune tuner(int threads, int active, int auto_prefetch) {
  pl_tune t;
  memset(&t, 0, sizeof t);
  t.auto_workers = 1;
  t.auto_prefetch = auto_prefetch;
  t.threads = t.worker_cap = threads;
  t.active = active;
  t.prefetch = 4;
  t.prefetch_max = t.prefetch_cap = 64;
  t.cpus = 16;
  t.budget = threads;
  return t;
}

static void test_tune_decide(void) {
  char why[256];
  pl_tune t = tuner(14, 2, 1);
  pl_tune_window starved = {.dt = 0.25, .rate = 100, .wait = 0.2,
                            .busy = 0.95, .copy = 0.1, .cpu_cores = 3};
  CHECK(pl_tune_decide(&t, &starved, why, sizeof why) == PL_TUNE_GROW_WORKERS);
  CHECK(t.active == 3);
  CHECK(t.prefetch == 6); /* an auto depth follows: 2 per worker */
  CHECK(strstr(why, "2 -> 3 workers: the step waited 20%") != NULL);
  starved.rate = 150; /* it helped: keep growing */
  CHECK(pl_tune_decide(&t, &starved, why, sizeof why) == PL_TUNE_GROW_WORKERS);
  CHECK(t.active == 4 && t.prefetch == 8);
  starved.rate = 151; /* no gain: back, and no retry for a while */
  CHECK(pl_tune_decide(&t, &starved, why, sizeof why) == PL_TUNE_REVERT);
  CHECK(t.active == 3 && t.worker_cap == 3 && t.prefetch == 6);
  CHECK(strstr(why, "4 workers were no faster than 3") != NULL);
  /* Capped: the depth grows instead only if workers are not busy. */
  CHECK(pl_tune_decide(&t, &starved, why, sizeof why) == PL_TUNE_NONE);
  CHECK(t.active == 3);
  /* The cap expires: tried again. */
  for (int i = 0; i < 40 && t.active == 3; i++)
    (void)pl_tune_decide(&t, &starved, why, sizeof why);
  CHECK(t.active == 4);

  /* Starved (the step waits > 30%): twice the workers, to the threads. */
  t = tuner(14, 2, 1);
  pl_tune_window empty = starved;
  empty.wait = 0.9;
  int steps[] = {4, 8, 14};
  for (int i = 0; i < 3; i++) {
    empty.rate = 100.0 * (i + 1);
    CHECK(pl_tune_decide(&t, &empty, why, sizeof why) == PL_TUNE_GROW_WORKERS);
    CHECK(t.active == steps[i] && t.prefetch == 2 * steps[i]);
  }
  CHECK(strstr(why, "8 -> 14 workers") != NULL);

  /* Copy engine full or no cores left: workers would not help. */
  t = tuner(14, 2, 0);
  pl_tune_window copyfull = starved;
  copyfull.copy = 0.95;
  CHECK(pl_tune_decide(&t, &copyfull, why, sizeof why) == PL_TUNE_NONE);
  pl_tune_window nocpu = starved;
  nocpu.cpu_cores = 15.8;
  CHECK(pl_tune_decide(&t, &nocpu, why, sizeof why) == PL_TUNE_NONE);
  CHECK(t.active == 2);

  /* Waiting with idle workers: a deeper prefetch, while it pays. */
  t = tuner(14, 4, 1);
  pl_tune_window bursty = {.dt = 0.25, .rate = 100, .wait = 0.2, .busy = 0.3};
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_GROW_PREFETCH);
  CHECK(t.prefetch == 8);
  CHECK(strstr(why, "prefetch 4 -> 8") != NULL);
  bursty.rate = 120; /* it paid: deeper still */
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_GROW_PREFETCH);
  CHECK(t.prefetch == 12);
  bursty.rate = 90; /* slower: back to 8, not tried again for a while */
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_REVERT);
  CHECK(t.prefetch == 8 && t.prefetch_cap == 8);
  CHECK(strstr(why, "prefetch 12 was slower than 8") != NULL);
  /* Depth capped, workers idle, the step still waits: a worker as a trial
   * (its cores are there: cpu_cores 0 of 16). */
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_GROW_WORKERS);
  CHECK(t.active == 5 && t.prefetch == 10);
  CHECK(strstr(why, "a trial") != NULL);

  /* A deeper prefetch that is only as fast (noise) stays; the next growth
   * is a worker (the latency case: on the H200 CIFAR waited 41% with 2
   * workers 44% busy, and 8 workers were 1.5x faster). */
  t = tuner(14, 2, 1);
  bursty.rate = 100;
  bursty.wait = 0.4;
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_GROW_PREFETCH);
  CHECK(t.prefetch == 6);
  bursty.rate = 99;
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_GROW_WORKERS);
  CHECK(t.prefetch == 8 && t.prefetch_cap == 6 && t.active == 4);
  bursty.rate = 150; /* kept; and on */
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_GROW_WORKERS);
  CHECK(t.active == 8 && t.prefetch == 16);
  bursty.rate = 152; /* 8 no better than 4: back to 4 and its depth */
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_REVERT);
  CHECK(t.active == 4 && t.prefetch == 8 && t.worker_cap == 4);
  CHECK(pl_tune_decide(&t, &bursty, why, sizeof why) == PL_TUNE_NONE);

  /* Slack: a shrink after SLACK windows, never below one worker. */
  t = tuner(14, 4, 0);
  pl_tune_window slack = {.dt = 0.25, .rate = 100, .wait = 0.0, .busy = 0.2};
  int shrinks = 0;
  for (int i = 0; i < 40; i++)
    shrinks += pl_tune_decide(&t, &slack, why, sizeof why) ==
               PL_TUNE_SHRINK_WORKERS;
  CHECK(shrinks == 3 && t.active == 1);

  /* Budgets: never above the cores; the default is all of them. */
  CHECK(pl_tune_budget(0, 16) == 16);
  CHECK(pl_tune_budget(0, 2) == 2);
  CHECK(pl_tune_budget(1000, 8) == 8);
  CHECK(pl_tune_budget(3, 8) == 3);
  CHECK(pl_cpus_from_quota("max 100000\n") == 0);
  CHECK(pl_cpus_from_quota("250000 100000\n") == 3);
  CHECK(pl_cpus_from_quota("-1 100000") == 0);
  CHECK(pl_cpus_from_quota("junk") == 0);
  CHECK(pl_cpus_available() >= 1);
}

/* Workers and depth are resolved once (tune.c) and told by the timings:
 * prefetch 0 is two per worker, PL_AUTO starts at two per active worker;
 * the caller's config is read, never written. */
static void test_resolved_depth(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 64, 8);
  const struct {
    int workers, prefetch, want_depth; /* want_depth -1: 2 per active */
  } cases[] = {{3, 0, 6}, {3, 5, 5}, {0, 0, 2}, {1, 0, 2},
               {PL_AUTO, 0, -1}, {PL_AUTO, PL_AUTO, -1}, {2, PL_AUTO, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    pl_loader_config cfg;
    pl_loader_config_init(&cfg);
    cfg.prefetch = cases[i].prefetch;
    pl_loader *ld = make(ds, 4, cases[i].workers, &cfg);
    CHECK(cfg.prefetch == cases[i].prefetch);
    CHECK(cfg.num_workers == cases[i].workers);
    pl_loader_timings t;
    pl_loader_timings_get(ld, &t, sizeof t);
    int want = cases[i].want_depth >= 0 ? cases[i].want_depth
                                        : 2 * (t.workers > 1 ? t.workers : 1);
    if (t.prefetch != want)
      fprintf(stderr, "case %zu: workers %d prefetch %d: depth %d, want %d\n",
              i, cases[i].workers, cases[i].prefetch, t.prefetch, want);
    CHECK(t.prefetch == want);
    CHECK(t.worker_threads == (cases[i].workers == PL_AUTO
                                   ? pl_cpus_available()
                                   : cases[i].workers));
    pl_loader_destroy(ld);
  }
  pl_dataset_destroy(ds);
}

/* PL_AUTO loaders deliver the same batches in the same order. */
static void test_auto_loader(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 200, 8);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.prefetch = PL_AUTO;
  cfg.cpu_budget = 1000; /* clamped to the cores */
  pl_loader *ld = make(ds, 3, PL_AUTO, &cfg);
  pl_loader_timings t;
  pl_loader_timings_get(ld, &t, sizeof t);
  CHECK(t.worker_threads == pl_cpus_available());
  CHECK(t.workers >= 1 && t.workers <= t.worker_threads);
  for (int epoch = 0; epoch < 3; epoch++) {
    uint64_t next = 0;
    pl_batch *b;
    pl_error err;
    pl_status s;
    while ((s = pl_loader_next(ld, &b, &err)) == PL_OK) {
      for (uint32_t i = 0; i < pl_batch_size(b); i++)
        CHECK_EQ_U64(pl_batch_sample_index(b, i), next++);
      pl_batch_release(b, NULL);
    }
    CHECK_STATUS(s, PL_END_OF_EPOCH, &err);
    CHECK_EQ_U64(next, 200);
  }
  pl_loader_destroy(ld);
  pl_loader_config_init(&cfg);
  cfg.num_workers = -2;
  pl_error err;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_MSG(&err, "num_workers must be in [0, 1024] or auto, got -2");
  pl_dataset_destroy(ds);
}

/* Each test's name first: a hang (none seen here) says where it is. */
#define RUN(test) (printf("test_report: %s\n", #test), test())

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  RUN(test_analysis_cases);
  RUN(test_format);
  RUN(test_tune_decide);
  RUN(test_loader_bound);
  RUN(test_consumer_bound);
  RUN(test_in_thread_loading);
  RUN(test_report_errors);
  RUN(test_timings_size);
  RUN(test_replay);
  RUN(test_resolved_depth);
  RUN(test_auto_loader);
  return pl_test_finish("test_report");
}
