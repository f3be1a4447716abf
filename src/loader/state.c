/* Checkpoints: the loader's position as a small versioned byte blob.
 *
 * Layout (64 bytes, little-endian):
 *   0  magic "PLSTATE\0"     8  u32 version      12 u32 flags (1 shuffle,
 *   2 drop_last)  16 u64 dataset length  24 u64 seed  32 u64 epoch
 *   40 u64 global position   48 u32 batch size   52 u32 world size
 *   56 u32 streams           60 u32 CRC-32 of bytes 0..59
 *
 * The position counts samples of the epoch's global order consumed by all
 * ranks together, so a restore under another world size or worker count
 * continues the same global sequence. `streams` is that epoch's split of a
 * block source (sampler.h) when it has more than one, else 0: the field was
 * reserved (0) before, and a blob of then restores as it did. A library of
 * then refuses a blob of more streams (a reserved field not 0), rightly. */
#include "loader/loader_internal.h"

#include <string.h>
#include <zlib.h>

enum { STATE_BYTES = 64, STATE_VERSION = 1 };
static const char state_magic[8] = "PLSTATE";

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

pl_status pl_loader_save_state(const pl_loader *ld, void *buf, size_t *len,
                               pl_error *err) {
  if (!ld || !len)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader and len are required");
  if (!buf) {
    *len = STATE_BYTES;
    return PL_OK;
  }
  if (*len < STATE_BYTES)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "state buffer is %zu bytes, needs %d", *len, STATE_BYTES);
  pl_core *c = ld->core;
  if (pl_core_foreign(c))
    return pl_core_forked(c, err);
  uint64_t epoch, pos;
  uint32_t streams;
  pthread_mutex_lock(&c->mu);
  int explicit_order = pl_core_explicit(c);
  pl_core_position(c, &epoch, &pos, &streams);
  pthread_mutex_unlock(&c->mu);
  if (explicit_order) /* pyworkers: loader_order.c */
    return pl_errorf(err, PL_BAD_STATE,
                     "the loader is in an epoch of an explicit order "
                     "(pl_loader_set_order): a state blob cannot describe it");
  uint8_t *p = buf;
  memset(p, 0, STATE_BYTES);
  memcpy(p, state_magic, 8);
  put32(p + 8, STATE_VERSION);
  put32(p + 12, (c->sampler.shuffle ? 1u : 0u) | (c->sampler.drop_last ? 2u : 0u));
  put64(p + 16, c->sampler.n);
  put64(p + 24, c->sampler.seed);
  put64(p + 32, epoch);
  put64(p + 40, pos);
  put32(p + 48, c->sampler.batch);
  put32(p + 52, c->sampler.world);
  put32(p + 56, streams > 1 ? streams : 0);
  put32(p + 60, (uint32_t)crc32(0, p, 60));
  *len = STATE_BYTES;
  return PL_OK;
}

/* A blob whose CRC holds was still written by someone: every field must
 * be one save_state can write. */
static pl_status check_fields(const uint8_t *p, pl_error *err) {
  uint32_t flags = get32(p + 12);
  if (flags & ~3u)
    return pl_errorf(err, PL_BAD_STATE,
                     "state blob has unknown flags 0x%08x (known: 1 shuffle, "
                     "2 drop_last)", flags);
  if (get32(p + 48) == 0)
    return pl_errorf(err, PL_BAD_STATE, "state blob has batch size 0");
  if (get32(p + 52) == 0)
    return pl_errorf(err, PL_BAD_STATE, "state blob has world size 0");
  if (get64(p + 32) >= (1ull << 62))
    return pl_errorf(err, PL_BAD_STATE,
                     "state blob's epoch %llu is out of range (below 2^62)",
                     (unsigned long long)get64(p + 32));
  return PL_OK;
}

static pl_status check_blob(const uint8_t *p, size_t len, pl_error *err) {
  if (len < 8 || memcmp(p, state_magic, 8) != 0)
    return pl_errorf(err, PL_BAD_STATE,
                     "not a pinloader state blob (bad magic)");
  if (len != STATE_BYTES)
    return pl_errorf(err, PL_BAD_STATE, "state blob is %zu bytes, expected %d",
                     len, STATE_BYTES);
  uint32_t want = get32(p + 60), got = (uint32_t)crc32(0, p, 60);
  if (want != got)
    return pl_errorf(err, PL_BAD_STATE,
                     "state blob is corrupt (CRC-32 %08x, stored %08x)", got,
                     want);
  if (get32(p + 8) != STATE_VERSION)
    return pl_errorf(err, PL_BAD_STATE,
                     "state blob version %u, this library reads version %d",
                     get32(p + 8), STATE_VERSION);
  return check_fields(p, err);
}

static pl_status check_match(const pl_sampler *s, const uint8_t *p,
                             pl_error *err) {
  uint32_t flags = get32(p + 12);
  if (get64(p + 16) != s->n)
    return pl_errorf(err, PL_BAD_STATE,
                     "state was saved for a dataset of %llu samples, this "
                     "one has %llu",
                     (unsigned long long)get64(p + 16),
                     (unsigned long long)s->n);
  if (!!(flags & 1) != !!s->shuffle || (s->shuffle && get64(p + 24) != s->seed))
    return pl_errorf(err, PL_BAD_STATE,
                     "state was saved with shuffle=%d seed=%llu, this loader "
                     "has shuffle=%d seed=%llu",
                     !!(flags & 1), (unsigned long long)get64(p + 24),
                     !!s->shuffle, (unsigned long long)s->seed);
  if (!!(flags & 2) != !!s->drop_last)
    return pl_errorf(err, PL_BAD_STATE,
                     "state was saved with drop_last=%d, this loader has %d",
                     !!(flags & 2), !!s->drop_last);
  if (get64(p + 40) > s->n)
    return pl_errorf(err, PL_BAD_STATE,
                     "state position %llu is past the dataset's %llu samples",
                     (unsigned long long)get64(p + 40),
                     (unsigned long long)s->n);
  return PL_OK;
}

pl_status pl_loader_load_state(pl_loader *ld, const void *buf, size_t len,
                               pl_error *err) {
  if (!ld || !buf)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader and buf are required");
  const uint8_t *p = buf;
  PL_TRY(check_blob(p, len, err));
  pl_core *c = ld->core;
  if (pl_core_foreign(c))
    return pl_core_forked(c, err);
  PL_TRY(check_match(&c->sampler, p, err));
  if (c->cfg.explicit_order)
    return pl_errorf(err, PL_BAD_STATE,
                     "the loader's epochs come from pl_loader_set_order "
                     "(explicit_order): a state blob cannot place it");
  pthread_mutex_lock(&c->mu);
  uint32_t streams = get32(p + 56) ? get32(p + 56) : 1;
  pl_core_restart(c, get64(p + 32), get64(p + 40), streams);
  pthread_mutex_unlock(&c->mu);
  return PL_OK;
}
