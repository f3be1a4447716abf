/* Checkpoints (pl_loader_save_state / load_state): a restore at any batch
 * boundary, into a loader with another worker count, continues exactly the
 * uninterrupted sequence, into the following epochs too; a restore under
 * another world size continues the same global sequence from the same
 * global position; and every kind of bad blob is refused with PL_BAD_STATE
 * and a message that says what is wrong, leaving the loader as it was. */
#include "loader_fixture.h"

#include <stdlib.h>

enum { WIDTH = 2, STATE = 64 };

static pl_loader *make(pl_dataset *ds, uint32_t bs, int workers, int dl,
                       uint64_t seed, uint32_t rank, uint32_t world) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = bs;
  cfg.num_workers = workers;
  cfg.shuffle = 1;
  cfg.seed = seed;
  cfg.drop_last = dl;
  cfg.rank = rank;
  cfg.world_size = world;
  cfg.epoch = 3; /* not 0, so an epoch number lost on the way shows */
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  return ld;
}

/* What a consumer saw: one entry per batch, and END_OF_EPOCH marks. */
typedef struct trace {
  uint64_t *ev; /* per batch: epoch, index, size, then `size` sample
                   indices; END_OF_EPOCH: UINT64_MAX */
  uint64_t len, cap;
} trace;

static void push(trace *t, uint64_t v) {
  if (t->len == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 256;
    t->ev = realloc(t->ev, t->cap * sizeof *t->ev);
  }
  t->ev[t->len++] = v;
}

/* Takes `batches` batches (END_OF_EPOCH not counted) or, with batches ==
 * UINT64_MAX, until `ends` END_OF_EPOCHs have been seen. */
static void take(pl_loader *ld, trace *t, uint64_t batches, int ends) {
  uint64_t got = 0;
  int seen_ends = 0;
  while (got < batches && (batches != UINT64_MAX || seen_ends < ends)) {
    pl_batch *b;
    pl_error err;
    pl_status s = pl_loader_next(ld, &b, &err);
    if (s == PL_END_OF_EPOCH) {
      push(t, UINT64_MAX);
      seen_ends++;
      continue;
    }
    CHECK_OK(s, &err);
    if (s != PL_OK)
      return;
    CHECK(fixture_check_batch(b, WIDTH) == 0);
    push(t, pl_batch_epoch(b));
    push(t, pl_batch_index(b)); /* counts on across a restore */
    push(t, pl_batch_size(b));
    for (uint32_t i = 0; i < pl_batch_size(b); i++)
      push(t, pl_batch_sample_index(b, i));
    pl_batch_release(b, NULL);
    got++;
  }
}

/* Offset in t->ev just after the k-th batch (END_OF_EPOCHs before it
 * included). */
static uint64_t after_batches(const trace *t, uint64_t k) {
  uint64_t i = 0;
  for (uint64_t seen = 0; seen < k;) {
    if (t->ev[i] == UINT64_MAX) {
      i++;
      continue;
    }
    i += 3 + t->ev[i + 2];
    seen++;
  }
  return i;
}

static void save(const pl_loader *ld, uint8_t *blob) {
  size_t len = STATE;
  pl_error err;
  CHECK_OK(pl_loader_save_state(ld, blob, &len, &err), &err);
  CHECK_EQ_U64(len, STATE);
}

static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Save after k batches (k = 0 .. a whole epoch, and into the next), restore
 * into a fresh loader with another worker count: it continues with exactly
 * the batches the uninterrupted loader delivered, the rest of that epoch,
 * its END_OF_EPOCH and the whole next epoch. Saving right after an epoch's
 * last batch, before its END_OF_EPOCH is seen, resumes at the next epoch's
 * first batch. */
static void resume_everywhere(void) {
  static const uint64_t lens[] = {1, 23, 40};
  static const uint32_t bss[] = {1, 4, 5};
  static const int workers[][2] = {{2, 0}, {0, 3}, {3, 1}};
  fixture fx = {0};
  for (size_t a = 0; a < 3; a++) {
    uint64_t n = lens[a];
    pl_dataset *ds = fixture_dataset(&fx, n, WIDTH);
    for (size_t b = 0; b < 3; b++)
      for (int dl = 0; dl < 2; dl++)
        for (uint32_t world = 1; world <= 3; world += 2) {
          uint32_t bs = bss[b], rank = world - 1;
          const int *wk = workers[(a + b + (size_t)dl) % 3];
          trace ref = {0};
          pl_loader *ld = make(ds, bs, wk[0], dl, 5, rank, world);
          uint64_t nb = pl_loader_num_batches(ld);
          take(ld, &ref, UINT64_MAX, 3); /* epochs 3, 4, 5 */
          pl_loader_destroy(ld);
          for (uint64_t k = 0; k <= nb + 1 && nb > 0; k++) {
            uint8_t blob[STATE];
            trace pre = {0}, post = {0};
            ld = make(ds, bs, wk[0], dl, 5, rank, world);
            take(ld, &pre, k, 0);
            save(ld, blob);
            pl_loader_destroy(ld);
            /* The saved epoch and global position: after a whole epoch,
             * the next epoch's start. */
            uint64_t epoch = 3 + k / nb;
            CHECK_EQ_U64(get64(blob + 32), epoch);
            CHECK_EQ_U64(get64(blob + 40), k % nb * bs * world);

            ld = make(ds, bs, wk[1], dl, 5, rank, world);
            pl_error err;
            CHECK_OK(pl_loader_load_state(ld, blob, STATE, &err), &err);
            CHECK_EQ_U64(pl_loader_epoch(ld), epoch);
            take(ld, &post, UINT64_MAX, (int)(6 - epoch)); /* to epoch 5 */
            pl_loader_destroy(ld);
            /* The k batches, then what the restored loader delivered, are
             * the uninterrupted trace, except that a loader saved right
             * after an epoch's last batch owes no END_OF_EPOCH for it. */
            uint64_t cut = after_batches(&ref, k);
            CHECK_EQ_U64(pre.len, cut);
            if (k > 0 && k % nb == 0)
              cut++; /* the END_OF_EPOCH the saved loader had not seen */
            CHECK(pre.len == 0 ||
                  memcmp(pre.ev, ref.ev, pre.len * sizeof *pre.ev) == 0);
            CHECK_EQ_U64(post.len, ref.len - cut);
            if (post.len == ref.len - cut &&
                memcmp(post.ev, ref.ev + cut, post.len * sizeof *post.ev)) {
              fprintf(stderr, "n=%llu bs=%u dl=%d W=%u k=%llu: resumed "
                      "sequence differs\n", (unsigned long long)n, bs, dl,
                      world, (unsigned long long)k);
              CHECK(0);
            }
            free(pre.ev);
            free(post.ev);
          }
          free(ref.ev);
        }
    pl_dataset_destroy(ds);
  }
}

/* Save and restore after every single batch, alternating worker counts:
 * a chain of restored loaders delivers the uninterrupted sequence. */
static void resume_chain(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 37, WIDTH);
  trace ref = {0}, got = {0};
  pl_loader *ld = make(ds, 4, 2, 0, 11, 0, 1);
  take(ld, &ref, 25, 0); /* 10 batches per epoch: into epoch 5 */
  pl_loader_destroy(ld);
  uint8_t blob[STATE];
  ld = make(ds, 4, 0, 0, 11, 0, 1);
  for (int i = 0; i < 25; i++) {
    take(ld, &got, 1, 0);
    save(ld, blob);
    pl_loader_destroy(ld);
    ld = make(ds, 4, i % 3, 0, 11, 0, 1);
    pl_error err;
    CHECK_OK(pl_loader_load_state(ld, blob, STATE, &err), &err);
  }
  pl_loader_destroy(ld);
  /* got lacks the END_OF_EPOCHs that fell at save points. */
  uint64_t i = 0, j = 0;
  for (; i < ref.len; i++)
    if (ref.ev[i] != UINT64_MAX) {
      if (j >= got.len || got.ev[j] != ref.ev[i])
        break;
      j++;
    }
  CHECK_EQ_U64(i, ref.len);
  CHECK_EQ_U64(j, got.len);
  free(ref.ev);
  free(got.ev);
  pl_dataset_destroy(ds);
}

/* Global order of epoch 3 (the first), from a world-1 loader. */
static void global_order(pl_dataset *ds, uint64_t n, uint64_t *g) {
  pl_loader *ld = make(ds, 1, 0, 0, 5, 0, 1);
  trace t = {0};
  take(ld, &t, n, 0);
  for (uint64_t p = 0; p < n; p++)
    g[p] = t.ev[4 * p + 3];
  free(t.ev);
  pl_loader_destroy(ld);
}

/* W ranks in lockstep take k batches each and save; the blobs are
 * identical. Restored into W2 ranks, rank r' delivers global positions
 * start + r', start + r' + W2, ... (wrapping as padding), which together
 * are the remaining positions of the epoch; and the restored ranks have
 * equal batch counts. */
static void resume_other_world(uint64_t n, uint32_t bs, uint32_t W, uint64_t k,
                               uint32_t W2, int dl) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, n, WIDTH);
  uint64_t *g = malloc(n * sizeof *g);
  global_order(ds, n, g);
  uint8_t blob[STATE], other[STATE];
  for (uint32_t r = 0; r < W; r++) {
    pl_loader *ld = make(ds, bs, (int)r % 3, dl, 5, r, W);
    trace t = {0};
    take(ld, &t, k, 0);
    for (uint64_t b = 0, i = 0; b < k; b++) { /* positions k*W + r so far */
      uint64_t size = t.ev[i + 2];
      CHECK_EQ_U64(t.ev[i + 1], b);
      for (uint64_t s = 0; s < size; s++)
        CHECK_EQ_U64(t.ev[i + 3 + s], g[((b * bs + s) * W + r) % n]);
      i += 3 + size;
    }
    save(ld, r == 0 ? blob : other);
    if (r > 0)
      CHECK(memcmp(blob, other, STATE) == 0);
    free(t.ev);
    pl_loader_destroy(ld);
  }
  uint64_t start = k * bs * W;
  CHECK_EQ_U64(get64(blob + 40), start);
  uint64_t rem = n - start;
  uint64_t per = dl ? rem / W2 : (rem + W2 - 1) / W2;
  uint64_t nb = dl ? per / bs : (per + bs - 1) / bs;
  uint64_t kept = dl ? nb * bs : per; /* samples per restored rank */
  uint32_t *count = calloc(n, sizeof *count);
  for (uint32_t r = 0; r < W2; r++) {
    pl_loader *ld = make(ds, bs, 2, dl, 5, r, W2);
    pl_error err;
    CHECK_OK(pl_loader_load_state(ld, blob, STATE, &err), &err);
    trace t = {0};
    take(ld, &t, UINT64_MAX, 1);
    uint64_t got = 0, batches = 0;
    for (uint64_t i = 0; i < t.len && t.ev[i] != UINT64_MAX;) {
      CHECK_EQ_U64(t.ev[i], 3);
      for (uint64_t s = 0; s < t.ev[i + 2]; s++, got++) {
        CHECK_EQ_U64(t.ev[i + 3 + s], g[(start + got * W2 + r) % n]);
        count[t.ev[i + 3 + s] % n]++;
      }
      i += 3 + t.ev[i + 2];
      batches++;
    }
    CHECK_EQ_U64(got, kept);
    CHECK_EQ_U64(batches, nb);
    free(t.ev);
    pl_loader_destroy(ld);
  }
  /* The union: each remaining position once (positions before `start` were
   * consumed before the save); past the end, padding repeats the epoch's
   * first positions; with drop_last the tail beyond kept*W2 is dropped. */
  uint64_t total = kept * W2, bad = 0;
  for (uint64_t p = 0; p < n; p++) {
    uint64_t want = 0;
    for (uint64_t q = start; q < start + total; q++)
      want += q % n == p;
    bad += count[g[p]] != want;
  }
  if (bad)
    fprintf(stderr, "n=%llu bs=%u W=%u k=%llu -> W=%u dl=%d: %llu samples "
            "off\n", (unsigned long long)n, bs, W, (unsigned long long)k, W2,
            dl, (unsigned long long)bad);
  CHECK_EQ_U64(bad, 0);
  free(count);
  free(g);
  pl_dataset_destroy(ds);
}

/* ---------------------------------------------------------------- blobs */

static uint32_t crc32_of(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return ~c;
}

static void reseal(uint8_t *p) {
  uint32_t c = crc32_of(p, 60);
  for (int i = 0; i < 4; i++)
    p[60 + i] = (uint8_t)(c >> (8 * i));
}

/* The documented layout, byte for byte. */
static void blob_layout(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 40, WIDTH);
  pl_loader *ld = make(ds, 3, 1, 1, 0x0102030405060708ull, 1, 2);
  trace t = {0};
  take(ld, &t, 2, 0);
  free(t.ev);
  size_t len = 0;
  pl_error err;
  CHECK_OK(pl_loader_save_state(ld, NULL, &len, &err), &err);
  CHECK_EQ_U64(len, STATE);
  uint8_t p[STATE + 8];
  len = sizeof p;
  CHECK_OK(pl_loader_save_state(ld, p, &len, &err), &err);
  CHECK_EQ_U64(len, STATE);
  static const uint8_t want[60] = {
      'P', 'L', 'S', 'T', 'A', 'T', 'E', 0, /* magic */
      1, 0, 0, 0,                           /* version */
      3, 0, 0, 0,                           /* shuffle | drop_last */
      40, 0, 0, 0, 0, 0, 0, 0,              /* dataset length */
      8, 7, 6, 5, 4, 3, 2, 1,               /* seed */
      3, 0, 0, 0, 0, 0, 0, 0,               /* epoch */
      12, 0, 0, 0, 0, 0, 0, 0,              /* 2 batches * 3 * 2 ranks */
      3, 0, 0, 0,                           /* batch size */
      2, 0, 0, 0,                           /* world size */
      0, 0, 0, 0};                          /* reserved */
  CHECK(memcmp(p, want, 60) == 0);
  uint32_t crc = crc32_of(p, 60);
  CHECK_EQ_U64(p[60] | p[61] << 8 | p[62] << 16 | (uint32_t)p[63] << 24, crc);
  len = STATE - 1; /* too small a buffer */
  CHECK_STATUS(pl_loader_save_state(ld, p, &len, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_MSG(&err, "63 bytes, needs 64");
  CHECK_STATUS(pl_loader_save_state(ld, p, NULL, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_STATUS(pl_loader_load_state(ld, NULL, STATE, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_STATUS(pl_loader_load_state(NULL, p, STATE, &err),
               PL_INVALID_ARGUMENT, &err);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* Loads must fail with PL_BAD_STATE and `needle` in the message. */
static void refuse(pl_loader *ld, const uint8_t *p, size_t len,
                   const char *needle) {
  pl_error err;
  CHECK_STATUS(pl_loader_load_state(ld, p, len, &err), PL_BAD_STATE, &err);
  CHECK_MSG(&err, needle);
}

static void bad_blobs(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 40, WIDTH);
  pl_loader *ld = make(ds, 4, 2, 0, 9, 0, 1);
  trace before = {0}, after = {0};
  take(ld, &before, 3, 0);
  uint8_t good[STATE], p[STATE + 1];
  save(ld, good);

  /* A target loader that has delivered some batches: a refused blob must
   * leave its position alone. */
  pl_loader *tgt = make(ds, 4, 1, 0, 9, 0, 1);
  trace t = {0};
  take(tgt, &t, 5, 0);

  /* Every single bit flip: the magic, or the CRC, catches it. */
  for (int bit = 0; bit < STATE * 8; bit++) {
    memcpy(p, good, STATE);
    p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    refuse(tgt, p, STATE, bit < 64 ? "bad magic" : "corrupt");
  }
  /* Truncated, or with bytes after it. */
  refuse(tgt, good, 63, "63 bytes, expected 64");
  refuse(tgt, good, 9, "9 bytes, expected 64");
  refuse(tgt, good, 7, "bad magic");
  refuse(tgt, good, 0, "bad magic");
  memcpy(p, good, STATE);
  p[STATE] = 0;
  refuse(tgt, p, STATE + 1, "65 bytes, expected 64");
  /* Foreign bytes. */
  memset(p, 0, sizeof p);
  refuse(tgt, p, STATE, "not a pinloader state blob");
  memcpy(p, "\x80\x02}q\x00(X\x05", 8); /* a pickle, say */
  refuse(tgt, p, STATE, "not a pinloader state blob");
  /* Another version, with a valid CRC. */
  memcpy(p, good, STATE);
  p[8] = 2;
  reseal(p);
  refuse(tgt, p, STATE, "version 2, this library reads version 1");
  /* A position past the end (only a forged blob has one). */
  memcpy(p, good, STATE);
  p[40] = 41;
  reseal(p);
  refuse(tgt, p, STATE, "position 41 is past the dataset's 40 samples");

  /* Still where it was: the next batch is the sixth. */
  take(tgt, &t, 1, 0);
  trace ref = {0};
  pl_loader *r = make(ds, 4, 0, 0, 9, 0, 1);
  take(r, &ref, 6, 0);
  pl_loader_destroy(r);
  CHECK_EQ_U64(t.len, ref.len);
  CHECK(t.len == ref.len && memcmp(t.ev, ref.ev, t.len * sizeof *t.ev) == 0);
  free(t.ev);
  free(ref.ev);
  pl_loader_destroy(tgt);

  /* The blob is good: it restores where `ld` stands. */
  tgt = make(ds, 4, 0, 0, 9, 0, 1);
  pl_error err;
  CHECK_OK(pl_loader_load_state(tgt, good, STATE, &err), &err);
  take(tgt, &after, 2, 0);
  take(ld, &before, 2, 0);
  uint64_t cut = after_batches(&before, 3);
  CHECK_EQ_U64(after.len, before.len - cut);
  CHECK(memcmp(after.ev, before.ev + cut, after.len * sizeof *after.ev) == 0);
  pl_loader_destroy(tgt);
  pl_loader_destroy(ld);
  free(before.ev);
  free(after.ev);

  /* Loaders that differ in what defines the order. */
  pl_dataset *ds41 = fixture_dataset(&fx, 41, WIDTH);
  tgt = make(ds41, 4, 0, 0, 9, 0, 1);
  refuse(tgt, good, STATE, "dataset of 40 samples, this one has 41");
  pl_loader_destroy(tgt);
  pl_dataset_destroy(ds41);

  tgt = make(ds, 4, 0, 0, 10, 0, 1);
  refuse(tgt, good, STATE, "shuffle=1 seed=9, this loader has shuffle=1 seed=10");
  pl_loader_destroy(tgt);

  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 4;
  cfg.seed = 9;
  cfg.device = PL_DEVICE_CPU;
  CHECK_OK(pl_loader_create(ds, &cfg, &tgt, &err), &err); /* no shuffle */
  refuse(tgt, good, STATE, "shuffle=1 seed=9, this loader has shuffle=0");
  pl_loader_destroy(tgt);

  tgt = make(ds, 4, 0, 1, 9, 0, 1);
  refuse(tgt, good, STATE, "saved with drop_last=0, this loader has 1");
  pl_loader_destroy(tgt);

  /* Batch size and world size may differ: the position is in samples. */
  tgt = make(ds, 5, 0, 0, 9, 1, 3);
  CHECK_OK(pl_loader_load_state(tgt, good, STATE, &err), &err);
  pl_loader_destroy(tgt);
  pl_dataset_destroy(ds);
}

/* Unshuffled loaders ignore the seed: any seed restores. */
static void unshuffled_seed(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 20, WIDTH);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = 3;
  cfg.seed = 1;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *a = NULL, *b = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &a, &err), &err);
  cfg.seed = 2;
  CHECK_OK(pl_loader_create(ds, &cfg, &b, &err), &err);
  trace t = {0};
  take(a, &t, 2, 0);
  uint8_t blob[STATE];
  save(a, blob);
  CHECK_OK(pl_loader_load_state(b, blob, STATE, &err), &err);
  trace u = {0};
  take(b, &u, 1, 0);
  CHECK(u.len == 6 && u.ev[1] == 2 && u.ev[3] == 6 && u.ev[4] == 7 &&
        u.ev[5] == 8);
  free(t.ev);
  free(u.ev);
  pl_loader_destroy(a);
  pl_loader_destroy(b);
  pl_dataset_destroy(ds);
}

/* A checkpoint right after a failed batch names that batch, so that a run
 * restarted once the cause is mended loses nothing of the epoch; after the
 * next delivery it moves on as usual. Both error_ends_epoch settings. */
static void failed_batch_position(int ends_epoch) {
  enum { N = 40, BS = 4 };
  fixture clean = {0}, bad = {0};
  pl_dataset *ok = fixture_dataset(&clean, N, WIDTH);
  pl_loader *ref = make(ok, BS, 0, 0, 5, 0, 1);
  trace want = {0};
  take(ref, &want, N / BS, 0);
  pl_loader_destroy(ref);
  bad.fail_at = want.ev[after_batches(&want, 2) + 3 + 1]; /* in batch 2 */
  pl_dataset *ds = fixture_dataset(&bad, N, WIDTH);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.batch_size = BS, cfg.num_workers = 2, cfg.shuffle = 1, cfg.seed = 5;
  cfg.epoch = 3, cfg.device = PL_DEVICE_CPU, cfg.error_ends_epoch = ends_epoch;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  trace head = {0};
  take(ld, &head, 2, 0);
  pl_batch *b = NULL;
  CHECK_STATUS(pl_loader_next(ld, &b, &err), PL_CALLBACK, &err);
  CHECK_MSG(&err, "planted failure");
  uint8_t blob[STATE], later[STATE];
  save(ld, blob);
  CHECK_EQ_U64(get64(blob + 32), 3);
  CHECK_EQ_U64(get64(blob + 40), 2 * BS); /* the failed batch's own */
  save(ld, later); /* asking again changes nothing */
  CHECK(memcmp(blob, later, STATE) == 0);
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  CHECK_EQ_U64(pl_batch_epoch(b), ends_epoch ? 4 : 3);
  pl_batch_release(b, NULL);
  save(ld, later); /* past the next delivery: after it */
  CHECK_EQ_U64(get64(later + 32), ends_epoch ? 4 : 3);
  CHECK_EQ_U64(get64(later + 40), ends_epoch ? BS : 4 * BS);
  pl_loader_destroy(ld);
  /* Restored over mended data: the epoch from the failed batch on. */
  pl_loader *again = make(ok, BS, 2, 0, 5, 0, 1);
  CHECK_OK(pl_loader_load_state(again, blob, STATE, &err), &err);
  trace rest = {0};
  take(again, &rest, N / BS - 2, 0);
  uint64_t from = after_batches(&want, 2);
  CHECK_EQ_U64(rest.len, want.len - from);
  CHECK(rest.len == want.len - from &&
        memcmp(rest.ev, want.ev + from, rest.len * sizeof *rest.ev) == 0);
  pl_loader_destroy(again);
  free(want.ev), free(head.ev), free(rest.ev);
  pl_dataset_destroy(ds);
  pl_dataset_destroy(ok);
}

int main(void) {
  failed_batch_position(1);
  failed_batch_position(0);
  resume_everywhere();
  resume_chain();
  resume_other_world(50, 3, 4, 2, 2, 0);  /* 24 consumed, 26 left over 2 */
  resume_other_world(50, 3, 4, 2, 3, 0);  /* not a multiple of 3: padding */
  resume_other_world(50, 2, 2, 5, 5, 0);
  resume_other_world(50, 3, 4, 3, 8, 0);  /* 36 consumed, 14 over 8 ranks */
  resume_other_world(50, 2, 4, 1, 3, 1);  /* drop_last */
  resume_other_world(50, 3, 1, 16, 4, 0); /* 48 consumed, 2 over 4 ranks */
  resume_other_world(50, 3, 1, 0, 4, 1);
  blob_layout();
  bad_blobs();
  unshuffled_seed();
  return pl_test_finish("test_state");
}
