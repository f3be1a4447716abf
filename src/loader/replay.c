/* The replay (config.replay_batches): the headroom measurement. After
 * replay_after loaded batches, the next replay_batches batches handed out
 * are kept (their buffers leave circulation, state SLOT_CACHED once given
 * back), and from then on pl_loader_next hands out handles on them in
 * turn instead of loading: the workers stop claiming jobs, and the step
 * rate the consumer reaches is what no loader could beat.
 *
 * Epochs keep their length: a replay handle takes the place of the next
 * job in the stream, so END_OF_EPOCH comes where it would have; the jobs
 * are simply never loaded. A handle is its own pl_batch (the consumer may
 * hold several handles on one kept batch at once) that shares the kept
 * batch's memory and sample indices and carries the epoch it was handed
 * out in. Releasing a handle frees it; the kept batch lives until the
 * core is freed, and its memory is never written again. */
#include "loader/loader_internal.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_REPLAY = 1 << 16 };

pl_status pl_replay_setup(pl_core *c, pl_error *err) {
  uint32_t k = c->cfg.replay_batches;
  if (!k)
    return PL_OK;
  if (k > MAX_REPLAY)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "replay_batches is %u (at most %d)", k, MAX_REPLAY);
  c->replay.cache = calloc(k, sizeof *c->replay.cache);
  if (!c->replay.cache)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  return PL_OK;
}

void pl_replay_free(pl_core *c) { free(c->replay.cache); }

void pl_replay_on_deliver(pl_core *c, pl_batch *b) {
  pl_replay *r = &c->replay;
  if (!r->cache || r->active || b->replay_of)
    return;
  if (r->delivered++ < c->cfg.replay_after)
    return;
  b->cached = 1;
  r->cache[r->n++] = b;
  if (r->n == c->cfg.replay_batches) {
    r->active = 1;
    pl_log(&c->log, PL_LOG_INFO,
           "replay: %u batches kept after %llu loaded; handing them out "
           "again instead of loading",
           r->n, (unsigned long long)c->cfg.replay_after);
  }
}

/* The epoch of a job the replay stands in for, and whether it begins
 * that epoch (stream.c). */
static uint64_t job_epoch(const pl_core *c, uint64_t job) {
  uint64_t batch;
  pl_epoch_plan p;
  pl_core_job_locate(c, job, &batch, &p, NULL);
  return p.epoch;
}

static int job_starts_epoch(const pl_core *c, uint64_t job) {
  uint64_t batch;
  pl_epoch_plan p;
  pl_core_job_locate(c, job, &batch, &p, NULL);
  return batch == 0;
}

pl_status pl_replay_next(pl_core *c, pl_batch **out, pl_error *err) {
  pl_replay *r = &c->replay;
  if (c->stream.end_pending || !pl_core_job_exists(c, c->stream.next_deliver)) {
    c->stream.end_pending = 0;
    c->stream.cur_epoch++;
    return PL_END_OF_EPOCH;
  }
  pl_batch *src = r->cache[r->next++ % r->n];
  pl_batch *h = malloc(sizeof *h);
  if (!h)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for a replay batch");
  memcpy(h, src, sizeof *h);
  h->replay_of = src;
  h->cached = 0;
  h->spans = NULL;
  h->state = SLOT_HELD;
  h->epoch = job_epoch(c, c->stream.next_deliver);
  c->refs++;
  c->stream.cur_epoch = h->epoch;
  c->stream.next_deliver++;
  if (c->stream.next_claim < c->stream.next_deliver)
    c->stream.next_claim = c->stream.next_deliver;
  c->stream.end_pending = !pl_core_job_exists(c, c->stream.next_deliver) ||
                          job_starts_epoch(c, c->stream.next_deliver);
  *out = h;
  return PL_OK;
}

int pl_replay_release(pl_core *c, pl_batch *b) {
  if (b->replay_of) {
    free(b);
    return 1;
  }
  b->state = b->cached ? SLOT_CACHED : SLOT_FREE;
  return 0;
}
