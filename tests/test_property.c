/* Property test: thousands of random loader configurations, each driven by
 * a random consumer (holding batches, jumping epochs, checkpointing, and
 * restoring into the same loader or a new one with other workers, world
 * size, rank or batch size), checked batch by batch
 * against an independent model of what must be delivered:
 *
 *   - an epoch's global order is the identity, or (shuffle) a permutation
 *     that is a pure function of (seed, epoch): it must equal the order a
 *     0-worker, 1-rank loader with the same seed delivers;
 *   - rank r of W takes global positions r, r+W, r+2W, ...; without
 *     drop_last ceil(n/W) of them, positions >= n wrapping to the start of
 *     the epoch's order; with drop_last floor(n/W);
 *   - batches of batch_size, the short last one dropped with drop_last;
 *   - every byte of every sample as the dataset defines it, also for
 *     batches held while the loader runs ahead.
 *
 * A second part creates and destroys loaders mid-epoch with busy workers
 * and batches released from another thread after destroy: run it under
 * ThreadSanitizer (-DPL_SANITIZE=thread) for races, ASan for leaks.
 *
 * Scale: PL_TEST_SCALE (a float, default 1; smaller under sanitizers)
 * multiplies the number of configurations. PL_TEST_SEED picks the run. */
#include "loader/loader_internal.h"
#include "loader_fixture.h"

#include <pthread.h>
#include <stdlib.h>

/* Default scale: 1, or less under a sanitizer (TSan is the slowest). */
#if defined(__SANITIZE_THREAD__)
#define DEFAULT_SCALE 0.15
#elif defined(__SANITIZE_ADDRESS__)
#define DEFAULT_SCALE 0.4
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DEFAULT_SCALE 0.15
#elif __has_feature(address_sanitizer)
#define DEFAULT_SCALE 0.4
#endif
#endif
#ifndef DEFAULT_SCALE
#define DEFAULT_SCALE 1.0
#endif

enum { MAX_HOLD = 4, MAX_CACHED_EPOCHS = 16, WAIT_S = 60 };

/* ------------------------------------------------------------ random */

static uint64_t rng_state;

/* What the run exercised, printed at the end (a property test that never
 * reaches a case proves nothing about it). */
static struct {
  uint64_t batches, epochs, set_epochs, saves, rewinds, restores,
      restores_resharded;
} stats;

static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static uint64_t rnd_in(uint64_t lo, uint64_t hi) {
  return lo + rnd() % (hi - lo + 1);
}

static int chance(int percent) { return (int)(rnd() % 100) < percent; }

/* ------------------------------------------------------------ the model */

typedef struct model {
  uint64_t n;
  uint32_t bs, world, rank;
  int shuffle, drop_last;
  uint64_t seed;
  pl_dataset *ds;
  /* Reference orders of epochs 0..MAX_CACHED_EPOCHS-1 (NULL until needed),
   * plus one scratch slot for later epochs. */
  uint64_t *order[MAX_CACHED_EPOCHS + 1];
  uint64_t scratch_epoch;
  /* The consumer's position: the next batch is batch k of the stream that
   * began at global position `start` of epoch `epoch` (start > 0 only for
   * an epoch resumed from a checkpoint; whole epochs start at 0). */
  uint64_t epoch, start, k;
} model;

/* The epoch's global order, from a 0-worker single-rank loader taking the
 * whole epoch in one batch; checked to be a permutation of [0, n). */
static const uint64_t *ref_order(model *m, uint64_t epoch) {
  int slot = epoch < MAX_CACHED_EPOCHS ? (int)epoch : MAX_CACHED_EPOCHS;
  if (m->order[slot] && (slot < MAX_CACHED_EPOCHS || m->scratch_epoch == epoch))
    return m->order[slot];
  if (!m->order[slot])
    m->order[slot] = malloc((m->n + 1) * sizeof(uint64_t));
  m->scratch_epoch = epoch;
  uint64_t *o = m->order[slot];
  if (!m->shuffle) {
    for (uint64_t i = 0; i < m->n; i++)
      o[i] = i;
    return o;
  }
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = (uint32_t)(m->n ? m->n : 1);
  cfg.shuffle = 1;
  cfg.seed = m->seed;
  cfg.epoch = epoch;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  pl_error err;
  pl_batch *b = NULL;
  CHECK_OK(pl_loader_create(m->ds, &cfg, &ld, &err), &err);
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  if (b && pl_batch_size(b) == m->n) {
    char *seen = calloc(m->n, 1);
    for (uint64_t i = 0; i < m->n; i++) {
      o[i] = pl_batch_sample_index(b, (uint32_t)i);
      CHECK(o[i] < m->n && !seen[o[i]]);
      if (o[i] < m->n)
        seen[o[i]] = 1;
    }
    free(seen);
  } else {
    CHECK(0);
    memset(o, 0, m->n * sizeof *o);
  }
  pl_batch_release(b, NULL);
  pl_loader_destroy(ld);
  return o;
}

static uint64_t per_rank_from(const model *m, uint64_t start) {
  uint64_t rem = m->n > start ? m->n - start : 0;
  return m->drop_last ? rem / m->world : (rem + m->world - 1) / m->world;
}

static uint64_t per_rank(const model *m) { return per_rank_from(m, m->start); }

static uint64_t batches_from(const model *m, uint64_t start) {
  uint64_t p = per_rank_from(m, start);
  return m->drop_last ? p / m->bs : (p + m->bs - 1) / m->bs;
}

static uint64_t batches_per_epoch(const model *m) {
  return batches_from(m, m->start);
}

/* The stream resumes at global position `start` of `epoch`; a resumed
 * share with no batch left (possible under another world size) moves on
 * to the next whole epoch, as long as whole epochs have batches. */
static void model_resume(model *m, uint64_t epoch, uint64_t start) {
  m->epoch = epoch;
  m->start = start;
  m->k = 0;
  if (start > 0 && batches_from(m, start) == 0 && batches_from(m, 0) > 0) {
    m->epoch++;
    m->start = 0;
  }
}

/* Checks a delivered batch against batch m->k of epoch m->epoch. */
static int check_batch(model *m, pl_batch *b, uint32_t width) {
  int before = pl_test_failures;
  const uint64_t *o = ref_order(m, m->epoch);
  uint64_t first = m->k * m->bs, p = per_rank(m);
  /* The batch's number within this rank's epoch: a resumed stream's first
   * batch is start / (batch * world) batches in. */
  uint64_t index = m->k + m->start / ((uint64_t)m->bs * m->world);
  uint32_t want = (uint32_t)PL_TEST_MIN((uint64_t)m->bs, p - first);
  CHECK_EQ_U64(pl_batch_epoch(b), m->epoch);
  CHECK_EQ_U64(pl_batch_index(b), index);
  CHECK_EQ_U64(pl_batch_size(b), want);
  for (uint32_t i = 0; i < pl_batch_size(b) && i < want; i++) {
    uint64_t pos = m->start + (first + i) * m->world + m->rank;
    if (pl_batch_sample_index(b, i) != o[pos % m->n]) {
      fprintf(stderr, "  batch %llu sample %u: index %llu, want %llu\n",
              (unsigned long long)m->k, i,
              (unsigned long long)pl_batch_sample_index(b, i),
              (unsigned long long)o[pos % m->n]);
      pl_test_failures++;
      break;
    }
  }
  CHECK(fixture_check_batch(b, width) == 0);
  return pl_test_failures == before;
}

/* ------------------------------------------------------------ one config */

typedef struct run {
  model m;
  fixture fx;
  pl_loader_config cfg;
  pl_loader *ld;
  pl_batch *held[MAX_HOLD + 1];
  int nheld, hold;
  /* A saved position (a checkpoint) and the model position it stands for. */
  uint8_t blob[256];
  size_t blob_len;
  uint64_t blob_epoch, blob_pos;
} run;

static void describe(const run *r) {
  const pl_loader_config *c = &r->cfg;
  fprintf(stderr,
          "  config: n=%llu batch=%u drop_last=%d shuffle=%d seed=%llu "
          "workers=%d prefetch=%d rank=%u/%u hold=%d max_buffers=%llu "
          "width=%u\n",
          (unsigned long long)r->m.n, c->batch_size, c->drop_last, c->shuffle,
          (unsigned long long)c->seed, c->num_workers, c->prefetch, c->rank,
          c->world_size, r->hold, (unsigned long long)c->max_batch_buffers,
          r->fx.width);
}

static void release_oldest(run *r, uint32_t width) {
  /* The held batch must be intact although the loader ran on. */
  CHECK(fixture_check_batch(r->held[0], width) == 0);
  pl_batch_release(r->held[0], NULL);
  memmove(r->held, r->held + 1, (size_t)(r->nheld - 1) * sizeof *r->held);
  r->nheld--;
}

static void release_all(run *r) {
  while (r->nheld)
    release_oldest(r, r->fx.width);
}

/* A new loader with other workers and prefetch, and sometimes another
 * world size, rank or batch size, restored from the blob: it continues the
 * same global sequence. */
static void restore_elsewhere(run *r) {
  pl_error err;
  release_all(r);
  pl_loader_destroy(r->ld);
  r->cfg.num_workers = (int)rnd_in(0, 8);
  r->cfg.prefetch = (int)rnd_in(0, 8);
  stats.restores++;
  if (chance(40)) {
    stats.restores_resharded++;
    r->cfg.world_size = (uint32_t)rnd_in(1, 4);
    r->cfg.rank = (uint32_t)rnd_in(0, r->cfg.world_size - 1);
    r->m.world = r->cfg.world_size;
    r->m.rank = r->cfg.rank;
  }
  if (chance(30)) {
    r->cfg.batch_size = (uint32_t)rnd_in(1, 40);
    r->m.bs = r->cfg.batch_size;
  }
  r->cfg.epoch = rnd_in(0, 5); /* overridden by the state */
  r->ld = NULL;
  CHECK_OK(pl_loader_create(r->m.ds, &r->cfg, &r->ld, &err), &err);
  if (r->ld)
    CHECK_OK(pl_loader_load_state(r->ld, r->blob, r->blob_len, &err), &err);
  model_resume(&r->m, r->blob_epoch, r->blob_pos);
}

/* A random action between batches. */
static void perturb(run *r) {
  pl_error err;
  uint64_t nb = batches_per_epoch(&r->m);
  /* About three perturbations per epoch, whatever its length. */
  if (rnd() % (nb + 3) >= 3)
    return;
  int roll = (int)(rnd() % 100);
  if (roll < 25) { /* jump to another epoch */
    uint64_t e = rnd_in(0, 20);
    CHECK_OK(pl_loader_set_epoch(r->ld, e, &err), &err);
    stats.set_epochs++;
    model_resume(&r->m, e, 0);
  } else if (roll < 60) { /* checkpoint here */
    r->blob_len = sizeof r->blob;
    CHECK_OK(pl_loader_save_state(r->ld, r->blob, &r->blob_len, &err), &err);
    stats.saves++;
    /* At an epoch's end the position is the next epoch's start. */
    r->blob_epoch = r->m.k >= nb ? r->m.epoch + 1 : r->m.epoch;
    r->blob_pos = r->m.k >= nb
                      ? 0
                      : r->m.start + r->m.k * r->m.bs * (uint64_t)r->m.world;
  } else if (roll < 80 && r->blob_len) { /* rewind this loader */
    CHECK_OK(pl_loader_load_state(r->ld, r->blob, r->blob_len, &err), &err);
    stats.rewinds++;
    model_resume(&r->m, r->blob_epoch, r->blob_pos);
  } else if (r->blob_len) {
    restore_elsewhere(r);
  }
}

/* What the loader's stream and buffers stood at, for a failure report: a
 * rare stall (a batch not ready after WAIT_S, seen once in CI) leaves
 * something to read. */
static void dump_loader(pl_loader *ld) {
  static const char *const names[] = {"free", "filling", "ready", "failed",
                                      "held", "cached"};
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  fprintf(stderr,
          "  stream: gen %llu next_claim %llu next_deliver %llu end_pending "
          "%d cur_epoch %llu; prefetch %d, %d workers (%d active), slots "
          "%d of %d (growing %d), refs %d\n",
          (unsigned long long)c->stream.gen,
          (unsigned long long)c->stream.next_claim,
          (unsigned long long)c->stream.next_deliver, c->stream.end_pending,
          (unsigned long long)c->stream.cur_epoch, c->prefetch, ld->nthreads,
          c->tune.active, c->pool.nslots, c->pool.max_slots,
          c->pool.growing, c->refs);
  for (int i = 0; i < c->pool.nslots; i++) {
    const pl_batch *b = c->pool.slots[i];
    unsigned st = (unsigned)b->state;
    fprintf(stderr, "  slot %d: %s gen %llu job %llu\n", i,
            st < 6 ? names[st] : "?", (unsigned long long)b->gen,
            (unsigned long long)b->job);
  }
  pthread_mutex_unlock(&c->mu);
}

/* Runs one configuration for `epochs` epochs of consumption. */
static void one_config(uint64_t id, int big) {
  run *r = calloc(1, sizeof *r);
  int before = pl_test_failures;
  uint64_t nmax = big ? 5000 : 300;
  r->m.n = chance(3) ? 0 : rnd_in(1, nmax);
  uint32_t width = (uint32_t)rnd_in(1, 24);
  r->fx.fail_at = UINT64_MAX;
  r->m.ds = fixture_dataset(&r->fx, r->m.n, width);
  pl_loader_config *c = &r->cfg;
  pl_loader_config_init(c);
  c->device = PL_DEVICE_CPU;
  c->batch_size = (uint32_t)(chance(10) ? rnd_in(1, 300) : rnd_in(1, 40));
  c->drop_last = chance(40);
  c->shuffle = chance(70);
  c->seed = chance(50) ? rnd_in(0, 3) : rnd();
  c->num_workers = (int)rnd_in(0, 8);
  c->prefetch = (int)rnd_in(1, 8);
  c->world_size = (uint32_t)rnd_in(1, 4);
  c->rank = (uint32_t)rnd_in(0, c->world_size - 1);
  c->epoch = rnd_in(0, 3);
  r->hold = chance(50) ? 0 : (int)rnd_in(1, MAX_HOLD);
  /* Sometimes the fewest buffers that still let the consumer hold `hold`
   * batches: exercises pool growth and reuse at the edge. */
  if (chance(30))
    c->max_batch_buffers = (uint64_t)r->hold + 1;
  else if (r->hold >= 2)
    c->max_batch_buffers = (uint64_t)(c->prefetch + 2 + r->hold + c->num_workers);
  r->m.bs = c->batch_size;
  r->m.world = c->world_size;
  r->m.rank = c->rank;
  r->m.shuffle = c->shuffle;
  r->m.drop_last = c->drop_last;
  r->m.seed = c->seed;
  r->m.epoch = c->epoch;

  pl_error err;
  CHECK_OK(pl_loader_create(r->m.ds, c, &r->ld, &err), &err);
  if (!r->ld)
    goto done;
  CHECK_EQ_U64(pl_loader_num_batches(r->ld), batches_per_epoch(&r->m));
  int epochs = (int)rnd_in(1, 3), ended = 0;
  uint64_t guard = (uint64_t)epochs * (batches_per_epoch(&r->m) + 1) * 4 + 64;
  while (ended < epochs && guard-- > 0 && pl_test_failures == before) {
    if (r->ld == NULL)
      break;
    pl_batch *b = NULL;
    pl_status s = pl_loader_next_timed(r->ld, WAIT_S, &b, &err);
    if (s == PL_END_OF_EPOCH) {
      CHECK_EQ_U64(r->m.k, batches_per_epoch(&r->m));
      model_resume(&r->m, r->m.epoch + 1, 0);
      ended++;
      stats.epochs++;
      CHECK_EQ_U64(pl_loader_epoch(r->ld), r->m.epoch);
    } else if (s == PL_OK) {
      CHECK(r->m.k < batches_per_epoch(&r->m));
      if (!check_batch(&r->m, b, width)) {
        pl_batch_release(b, NULL);
        break;
      }
      r->m.k++;
      stats.batches++;
      r->held[r->nheld++] = b;
      while (r->nheld > r->hold)
        release_oldest(r, width);
    } else {
      fprintf(stderr, "  next returned %s: %s\n", pl_status_name(s),
              err.message);
      dump_loader(r->ld);
      pl_test_failures++;
      break;
    }
    if (chance(5) && r->nheld) /* release out of order too */
      release_all(r);
    perturb(r);
  }
  /* The guard (rewinds can go on for a while) ends a run early, which is
   * not a failure; every batch until then was checked. */
done:
  if (pl_test_failures != before) {
    fprintf(stderr, "property: configuration %llu failed (epoch %llu, batch "
                    "%llu)\n",
            (unsigned long long)id, (unsigned long long)r->m.epoch,
            (unsigned long long)r->m.k);
    describe(r);
  }
  /* Destroy with batches still held half the time: they stay valid. */
  int late = chance(50);
  if (!late)
    release_all(r);
  pl_loader_destroy(r->ld);
  release_all(r);
  pl_dataset_destroy(r->m.ds);
  for (int i = 0; i <= MAX_CACHED_EPOCHS; i++)
    free(r->m.order[i]);
  free(r);
}

/* Union over all ranks of one epoch: each index exactly once (drop_last:
 * at most once, floor(n/W)*W in all; otherwise at least once, the padding
 * repeats the epoch's first positions). Independent of the model above. */
static void all_ranks_cover(uint64_t n, uint32_t world, uint32_t bs,
                            int drop_last, uint64_t seed) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, n, 3);
  uint32_t *count = calloc(n ? n : 1, sizeof *count);
  uint64_t total = 0;
  for (uint32_t r = 0; r < world; r++) {
    pl_loader_config cfg;
    pl_loader_config_init(&cfg);
    cfg.device = PL_DEVICE_CPU;
    cfg.batch_size = bs;
    cfg.shuffle = 1;
    cfg.seed = seed;
    cfg.drop_last = drop_last;
    cfg.world_size = world;
    cfg.rank = r;
    cfg.num_workers = (int)(r % 3);
    pl_loader *ld = NULL;
    pl_error err;
    CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
    pl_batch *b;
    pl_status s;
    while (ld && (s = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_OK) {
      for (uint32_t i = 0; i < pl_batch_size(b); i++) {
        uint64_t x = pl_batch_sample_index(b, i);
        CHECK(x < n);
        if (x < n)
          count[x]++;
      }
      total += pl_batch_size(b);
      pl_batch_release(b, NULL);
    }
    pl_loader_destroy(ld);
  }
  uint64_t per = drop_last ? n / world : (n + world - 1) / world;
  uint64_t want = drop_last ? per / bs * bs * world : per * world;
  CHECK_EQ_U64(total, want);
  uint64_t dup = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (drop_last)
      CHECK(count[i] <= 1);
    else
      CHECK(count[i] >= 1); /* W > n: the padding may repeat one often */
    dup += count[i] > 1 ? count[i] - 1 : 0;
  }
  if (!drop_last)
    CHECK_EQ_U64(dup, per * world - n);
  free(count);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ lifetimes */

typedef struct releaser {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pl_batch *queue[64];
  int n, done;
} releaser;

static void *releaser_main(void *arg) {
  releaser *rl = arg;
  pthread_mutex_lock(&rl->mu);
  for (;;) {
    while (!rl->n && !rl->done)
      pthread_cond_wait(&rl->cv, &rl->mu);
    if (!rl->n && rl->done)
      break;
    pl_batch *b = rl->queue[--rl->n];
    pthread_mutex_unlock(&rl->mu);
    CHECK(fixture_check_batch(b, 7) == 0);
    pl_batch_release(b, NULL);
    pthread_mutex_lock(&rl->mu);
  }
  pthread_mutex_unlock(&rl->mu);
  return NULL;
}

static void give(releaser *rl, pl_batch *b) {
  pthread_mutex_lock(&rl->mu);
  if (rl->n < 64)
    rl->queue[rl->n++] = b;
  else
    pl_batch_release(b, NULL);
  pthread_cond_signal(&rl->cv);
  pthread_mutex_unlock(&rl->mu);
}

/* Create, take a few batches (handing some to another thread that checks
 * and releases them, possibly after destroy), jump epochs, destroy while
 * workers are busy in the callback. */
static void lifetimes(int rounds) {
  fixture fx = {.sleep_s = 0.0002};
  pl_dataset *ds = fixture_dataset(&fx, 500, 7);
  releaser rl = {.n = 0};
  pthread_mutex_init(&rl.mu, NULL);
  pthread_cond_init(&rl.cv, NULL);
  pthread_t th;
  pthread_create(&th, NULL, releaser_main, &rl);
  for (int i = 0; i < rounds; i++) {
    pl_loader_config cfg;
    pl_loader_config_init(&cfg);
    cfg.device = PL_DEVICE_CPU;
    cfg.batch_size = (uint32_t)rnd_in(1, 16);
    cfg.num_workers = (int)rnd_in(1, 8);
    cfg.prefetch = (int)rnd_in(1, 8);
    cfg.shuffle = 1;
    cfg.seed = (uint64_t)i;
    cfg.max_batch_buffers = (uint64_t)cfg.prefetch + 8;
    if (chance(30))
      cfg.timeout_s = 5;
    pl_loader *ld = NULL;
    pl_error err;
    CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
    if (!ld)
      continue;
    int take = (int)rnd_in(0, 6);
    for (int k = 0; k < take; k++) {
      pl_batch *b = NULL;
      pl_status s = pl_loader_next_timed(ld, WAIT_S, &b, &err);
      if (s != PL_OK) {
        CHECK_STATUS(s, PL_OK, &err);
        break;
      }
      if (chance(50))
        give(&rl, b);
      else {
        CHECK(fixture_check_batch(b, 7) == 0);
        pl_batch_release(b, NULL);
      }
      if (chance(20))
        CHECK_OK(pl_loader_set_epoch(ld, rnd_in(0, 3), &err), &err);
    }
    pl_loader_stats st;
    pl_loader_stats_get(ld, &st);
    pl_loader_destroy(ld);
  }
  pthread_mutex_lock(&rl.mu);
  rl.done = 1;
  pthread_cond_signal(&rl.cv);
  pthread_mutex_unlock(&rl.mu);
  pthread_join(th, NULL);
  pthread_mutex_destroy(&rl.mu);
  pthread_cond_destroy(&rl.cv);
  pl_dataset_destroy(ds);
}

int main(void) {
  double scale = DEFAULT_SCALE;
  const char *e = getenv("PL_TEST_SCALE");
  if (e && atof(e) > 0)
    scale = atof(e);
  const char *seed = getenv("PL_TEST_SEED");
  uint64_t run_seed = seed ? strtoull(seed, NULL, 0) : 20261201;
  rng_state = run_seed;
  int configs = (int)(3000 * scale) + 20;
  printf("test_property: seed %llu, %d configurations\n",
         (unsigned long long)run_seed, configs);
  for (int i = 0; i < configs && pl_test_failures < 20; i++)
    one_config((uint64_t)i, i % 8 == 0);

  static const uint64_t ns[] = {0, 1, 2, 7, 10, 97, 1000};
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
    for (uint32_t w = 1; w <= 4; w++)
      for (int dl = 0; dl < 2; dl++)
        all_ranks_cover(ns[i], w, (uint32_t)(1 + i % 5), dl, i * 31 + w);

  printf("test_property: checked %llu batches, %llu epoch ends, %llu "
         "set_epoch, %llu saves, %llu rewinds, %llu restores (%llu into "
         "another world size or batch size)\n",
         (unsigned long long)stats.batches, (unsigned long long)stats.epochs,
         (unsigned long long)stats.set_epochs, (unsigned long long)stats.saves,
         (unsigned long long)stats.rewinds, (unsigned long long)stats.restores,
         (unsigned long long)stats.restores_resharded);
  lifetimes((int)(300 * scale) + 10);
  return pl_test_finish("test_property");
}
