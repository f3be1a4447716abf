/* Rank sharding (DistributedSampler semantics) through real loaders: per
 * epoch the ranks' shares are disjoint positions of one global order that
 * does not depend on the world size or the workers; without drop_last they
 * cover the data set with the fewest repeats (the first positions of the
 * epoch's order), with drop_last the tail of the order is dropped; every
 * rank has the same number of batches. And the environment variables that
 * launchers set. */
#include "loader_fixture.h"

#include <stdlib.h>

enum { WIDTH = 3, EPOCHS = 2 };

static pl_loader *make(pl_dataset *ds, uint32_t bs, int workers, int dl,
                       uint32_t rank, uint32_t world, int shuffle) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = bs;
  cfg.num_workers = workers;
  cfg.shuffle = shuffle;
  cfg.seed = 1234;
  cfg.drop_last = dl;
  cfg.rank = rank;
  cfg.world_size = world;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  return ld;
}

/* One epoch of `ld` into seq (capacity cap); checks batch numbering and
 * sizes (all full but the last) and the bytes. Returns samples loaded. */
static uint64_t load_epoch(pl_loader *ld, uint32_t bs, uint64_t epoch,
                           uint64_t *seq, uint64_t cap, uint64_t *nbatches) {
  uint64_t got = 0, nb = 0;
  pl_batch *b;
  pl_error err;
  pl_status s;
  CHECK_EQ_U64(pl_loader_epoch(ld), epoch);
  while ((s = pl_loader_next(ld, &b, &err)) == PL_OK) {
    CHECK_EQ_U64(pl_batch_epoch(b), epoch);
    CHECK_EQ_U64(pl_batch_index(b), nb);
    CHECK(nb == 0 || pl_batch_size(b) <= bs);
    CHECK(fixture_check_batch(b, WIDTH) == 0);
    for (uint32_t i = 0; i < pl_batch_size(b); i++)
      if (got < cap)
        seq[got++] = pl_batch_sample_index(b, i);
      else
        CHECK(got < cap);
    nb++;
    pl_batch_release(b, NULL);
  }
  CHECK_STATUS(s, PL_END_OF_EPOCH, &err);
  *nbatches = nb;
  return got;
}

/* The global order of each epoch, from one rank of world 1. */
static void global_orders(pl_dataset *ds, uint64_t n, int shuffle,
                          uint64_t *g) {
  pl_loader *ld = make(ds, 7, 0, 0, 0, 1, shuffle);
  char *seen = calloc(n, 1);
  for (uint64_t e = 0; e < EPOCHS; e++) {
    uint64_t nb;
    CHECK_EQ_U64(load_epoch(ld, 7, e, g + e * n, n, &nb), n);
    memset(seen, 0, n);
    for (uint64_t p = 0; p < n; p++) { /* a permutation of [0, n) */
      CHECK(g[e * n + p] < n && !seen[g[e * n + p]]);
      if (g[e * n + p] < n)
        seen[g[e * n + p]] = 1;
    }
  }
  if (shuffle && n > 20) /* epochs reshuffle */
    CHECK(memcmp(g, g + n, n * sizeof *g) != 0);
  free(seen);
  pl_loader_destroy(ld);
}

typedef struct shard_case {
  uint64_t n;
  uint32_t bs, world;
  int dl, shuffle;
} shard_case;

/* All ranks of one world size, EPOCHS epochs, against the global orders. */
static void check_world(pl_dataset *ds, const shard_case *c, const uint64_t *g,
                        int workers) {
  uint64_t n = c->n, W = c->world, bs = c->bs;
  uint64_t share = c->dl ? n / W : (n + W - 1) / W; /* DistributedSampler */
  uint64_t nb = c->dl ? share / bs : (share + bs - 1) / bs;
  uint64_t per = c->dl ? nb * bs : share; /* drop_last drops a short batch */
  uint64_t *seq = malloc((per + 1) * sizeof *seq);
  uint32_t *count = malloc(n * sizeof *count);
  for (uint64_t e = 0; e < EPOCHS; e++) {
    const uint64_t *ge = g + e * n;
    memset(count, 0, n * sizeof *count);
    for (uint32_t r = 0; r < W; r++) {
      pl_loader *ld = make(ds, c->bs, workers, c->dl, r, c->world, c->shuffle);
      CHECK_EQ_U64(pl_loader_num_batches(ld), nb); /* same on every rank */
      CHECK_EQ_U64(pl_loader_num_samples(ld), per);
      if (e > 0) {
        pl_error err;
        CHECK_OK(pl_loader_set_epoch(ld, e, &err), &err);
      }
      uint64_t got_nb, got = load_epoch(ld, c->bs, e, seq, per + 1, &got_nb);
      CHECK_EQ_U64(got, per);
      CHECK_EQ_U64(got_nb, nb);
      /* Rank r's k-th sample is global position k*W + r; positions past
       * the end wrap to the epoch's first positions. This one check says
       * the shares are disjoint positions of the same global order for
       * every world size and worker count (elastic determinism). */
      uint64_t bad = 0;
      for (uint64_t k = 0; k < got && k < per; k++) {
        bad += seq[k] != ge[(k * W + r) % n];
        if (seq[k] < n)
          count[seq[k]]++;
      }
      if (bad)
        fprintf(stderr,
                "n=%llu bs=%llu W=%llu r=%u dl=%d workers=%d epoch %llu: "
                "%llu samples off the global order\n",
                (unsigned long long)n, (unsigned long long)bs,
                (unsigned long long)W, r, c->dl, workers,
                (unsigned long long)e, (unsigned long long)bad);
      CHECK_EQ_U64(bad, 0);
      pl_loader_destroy(ld);
    }
    /* Coverage, by dataset index through the global order ge. */
    if (!c->dl) {
      /* Every sample at least once; the ceil(n/W)*W - n repeats are the
       * order's first positions (more than once round only when W > n). */
      uint64_t total = share * W, bad = 0, repeats = 0;
      for (uint64_t p = 0; p < n; p++) {
        uint64_t want = total / n + (p < total % n);
        bad += count[ge[p]] != want;
        repeats += count[ge[p]] - 1;
      }
      CHECK_EQ_U64(bad, 0);
      CHECK_EQ_U64(repeats, total - n);
    } else {
      /* Distinct samples, exactly the first per*W positions: the dropped
       * ones are the tail of the global order. */
      uint64_t bad = 0, kept = per * W;
      for (uint64_t p = 0; p < n; p++)
        bad += count[ge[p]] != (p < kept);
      CHECK_EQ_U64(bad, 0);
      if (bs == 1) /* no batch to drop: floor(n/W)*W samples */
        CHECK_EQ_U64(kept, n / W * W);
    }
  }
  free(seq);
  free(count);
}

static void sharding(void) {
  static const uint64_t lens[] = {1, 2, 5, 7, 16, 63, 100, 257};
  static const uint32_t bss[] = {1, 3, 8};
  fixture fx = {0};
  for (size_t a = 0; a < sizeof lens / sizeof lens[0]; a++) {
    uint64_t n = lens[a];
    pl_dataset *ds = fixture_dataset(&fx, n, WIDTH);
    uint64_t *g = malloc(EPOCHS * n * sizeof *g);
    for (int shuffle = 0; shuffle < 2; shuffle++) {
      global_orders(ds, n, shuffle, g);
      for (size_t b = 0; b < 3; b++)
        for (uint32_t w = 1; w <= 8; w++)
          for (int dl = 0; dl < 2; dl++) {
            shard_case c = {n, bss[b], w, dl, shuffle};
            if (!shuffle && (b > 0 || w % 3 != 1))
              continue; /* identity order: a few cases suffice */
            /* Workers 0 and 3 alike: both against the same order. */
            check_world(ds, &c, g, 0);
            if ((a + b + w) % 2 == 0 || n == 257)
              check_world(ds, &c, g, 3);
          }
    }
    free(g);
    pl_dataset_destroy(ds);
  }
}

/* A concrete case spelled out, so that a reader sees the rule: 10 samples
 * in index order over 4 ranks. Without drop_last rank r gets positions
 * r, r+4, r+8 (mod 10): 0 4 8 | 1 5 9 | 2 6 0 | 3 7 1 (0 and 1 repeat).
 * With drop_last, positions 8 and 9 are dropped. */
static void spelled_out(void) {
  static const uint64_t want[4][3] = {{0, 4, 8}, {1, 5, 9}, {2, 6, 0},
                                      {3, 7, 1}};
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 10, WIDTH);
  for (int dl = 0; dl < 2; dl++)
    for (uint32_t r = 0; r < 4; r++) {
      pl_loader *ld = make(ds, 2, 1, dl, r, 4, 0);
      uint64_t seq[4], nb;
      uint64_t got = load_epoch(ld, 2, 0, seq, 4, &nb);
      CHECK_EQ_U64(got, dl ? 2 : 3);
      CHECK_EQ_U64(nb, dl ? 1 : 2);
      for (uint64_t k = 0; k < got; k++)
        CHECK_EQ_U64(seq[k], want[r][k]);
      pl_loader_destroy(ld);
    }
  pl_dataset_destroy(ds);
}

/* ---------------------------------------------------------------- env */

static const char *const env_vars[] = {
    "RANK",     "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
    "PMI_SIZE", NULL};

static void env_clear(void) {
  for (const char *const *v = env_vars; *v; v++)
    unsetenv(*v);
}

static void env_ok(void) {
  pl_loader_config cfg;
  pl_error err;
  env_clear();
  pl_loader_config_init(&cfg);
  CHECK_OK(pl_loader_config_from_env(&cfg, &err), &err); /* nothing set */
  CHECK_EQ_U64(cfg.rank, 0);
  CHECK_EQ_U64(cfg.world_size, 1);
  CHECK_EQ_U64(cfg.device_index, 0);

  setenv("RANK", "5", 1); /* torchrun */
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_RANK", "2", 1); /* torchrun's win */
  CHECK_OK(pl_loader_config_from_env(&cfg, &err), &err);
  CHECK_EQ_U64(cfg.rank, 5);
  CHECK_EQ_U64(cfg.world_size, 8);
  CHECK_EQ_U64(cfg.device_index, 1);

  env_clear(); /* Open MPI */
  pl_loader_config_init(&cfg);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  CHECK_OK(pl_loader_config_from_env(&cfg, &err), &err);
  CHECK_EQ_U64(cfg.rank, 3);
  CHECK_EQ_U64(cfg.world_size, 4);
  CHECK_EQ_U64(cfg.device_index, 3);

  env_clear(); /* PMI: no local rank, device_index kept */
  pl_loader_config_init(&cfg);
  cfg.device_index = 2;
  setenv("PMI_RANK", "0", 1);
  setenv("PMI_SIZE", "2", 1);
  CHECK_OK(pl_loader_config_from_env(&cfg, &err), &err);
  CHECK_EQ_U64(cfg.rank, 0);
  CHECK_EQ_U64(cfg.world_size, 2);
  CHECK_EQ_U64(cfg.device_index, 2);

  /* The loader built from it is that shard. */
  env_clear();
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "3", 1);
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  CHECK_OK(pl_loader_config_from_env(&cfg, &err), &err);
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 10, WIDTH);
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  if (ld) {
    uint64_t seq[5], nb;
    CHECK_EQ_U64(load_epoch(ld, 1, 0, seq, 5, &nb), 4);
    CHECK(seq[0] == 1 && seq[1] == 4 && seq[2] == 7 && seq[3] == 0);
  }
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
  env_clear();
}

/* A malformed variable is an error naming it; cfg is left unchanged. */
static void env_bad_one(const char *var, const char *val, const char *other,
                        const char *other_val, const char *needle) {
  pl_loader_config cfg;
  pl_error err;
  env_clear();
  setenv(var, val, 1);
  if (other)
    setenv(other, other_val, 1);
  pl_loader_config_init(&cfg);
  CHECK_STATUS(pl_loader_config_from_env(&cfg, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_MSG(&err, needle);
  CHECK_EQ_U64(cfg.rank, 0);
  CHECK_EQ_U64(cfg.world_size, 1);
  env_clear();
}

static void env_bad(void) {
  env_bad_one("RANK", "abc", NULL, NULL, "RANK=\"abc\"");
  env_bad_one("RANK", "", NULL, NULL, "RANK=\"\"");
  env_bad_one("RANK", "-1", NULL, NULL, "RANK=\"-1\"");
  env_bad_one("RANK", " 1", NULL, NULL, "RANK=\" 1\"");
  env_bad_one("RANK", "+1", NULL, NULL, "RANK=\"+1\"");
  env_bad_one("RANK", "1x", NULL, NULL, "RANK=\"1x\"");
  env_bad_one("RANK", "4294967296", NULL, NULL, "RANK=\"4294967296\"");
  env_bad_one("WORLD_SIZE", "two", NULL, NULL, "WORLD_SIZE=\"two\"");
  env_bad_one("LOCAL_RANK", "0.5", NULL, NULL, "LOCAL_RANK=\"0.5\"");
  env_bad_one("OMPI_COMM_WORLD_SIZE", "x", NULL, NULL, "OMPI_COMM_WORLD_SIZE");
  env_bad_one("PMI_RANK", "-3", NULL, NULL, "PMI_RANK");
  /* Well-formed but inconsistent: both variables named. */
  env_bad_one("WORLD_SIZE", "0", NULL, NULL, "WORLD_SIZE=0");
  env_bad_one("RANK", "4", "WORLD_SIZE", "4", "RANK=4");
  env_bad_one("RANK", "4", "WORLD_SIZE", "4", "WORLD_SIZE=4");
  env_bad_one("RANK", "2", NULL, NULL, "RANK=2"); /* world 1 by default */
}

int main(void) {
  spelled_out();
  sharding();
  env_ok();
  env_bad();
  return pl_test_finish("test_sharding");
}
