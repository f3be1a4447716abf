/* Split batches: the first round's batches in chunks over idle workers. */
#include "procset.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first round of an iteration (jobs below the number of workers) is
 * split: each SPLIT_CHUNK samples of the batch go to the next idle worker,
 * so that the first batch is ready in a fraction of one worker's time
 * instead of all of it (the seeds' benchmark, 1,024 samples of about 100 us
 * on 6 workers: 100 ms become about 20), and the batches after it follow
 * one by one instead of all at once. Balanced workers' generators restart
 * at chunk boundaries whether a batch is split or not (_seeding.seed_chunk),
 * so a split changes no sample. Only where a chunk's reply is nothing but
 * "done": fixed-shape samples (no pickled parts), no collate_fn (it sees
 * the whole batch), no timeout (progress records are per batch). */
int split_wanted(const procset *ps, const pl_batch_info *info,
                 const pl_batch_dst *dst) {
  return ps->split && ps->balanced && ps->n > 1 &&
         info->job < (uint64_t)ps->n && info->timeout_s <= 0 && !dst->report;
}

/* Waits until the jobs of the stream before this one have sent all their
 * chunks, so that job 0 has every idle worker first, then job 1... (a
 * later job's thread may well get here first). 0: go on; -1: a batch of
 * an abandoned stream, or the loader is closing (left to the whole
 * batch's path, which says so). A job whose fill failed before it got
 * here never comes: after a few seconds the next goes on. [mu] */
static int split_turn(procset *ps, const pl_batch_info *info,
                      const pl_batch_dst *dst) {
  if (info->stream > ps->split_stream) {
    ps->split_stream = info->stream;
    ps->split_next = 0;
  }
  double give_up = now_s() + 3.0;
  while (!ps->closing && info->stream == ps->split_stream &&
         ps->split_next < info->job && now_s() < give_up &&
         !batch_abandoned(ps, info, dst))
    wait_briefly(ps);
  return ps->closing || info->stream != ps->split_stream ||
                 batch_abandoned(ps, info, dst)
             ? -1
             : 0;
}

/* All of job's chunks are out (or it failed): the next job's turn. [mu] */
static void split_turn_done(procset *ps, const pl_batch_info *info) {
  if (info->stream == ps->split_stream && ps->split_next <= info->job)
    ps->split_next = info->job + 1;
  pthread_cond_broadcast(&ps->cv);
}

typedef struct part {
  channel *ch;
  uint32_t first, n; /* the chunk it fills */
} part;

typedef struct splitter {
  procset *ps;
  const uint64_t *indices;
  uint32_t n, next; /* samples; the first not yet sent */
  const pl_batch_info *info;
  const pl_batch_dst *dst;
  part *parts; /* in flight: one per channel at most */
  int nparts;
  int failed;     /* msg holds the first failure; later ones are dropped */
  int later_died; /* a worker that died after the first failure, or -1 */
  char *msg, scratch[512];
  size_t msg_len;
} splitter;

/* Where a failure's words go: msg for the first, scratch after it. */
static char *fail_text(splitter *s, size_t *cap) {
  int first = !s->failed;
  s->failed = 1;
  *cap = first ? s->msg_len : sizeof s->scratch;
  return first ? s->msg : s->scratch;
}

/* A later failure that killed worker w's channel: the message must still
 * say a worker died (the loader restarts its workers on that tag). */
static void note_death(splitter *s, const char *m, int w) {
  if (m == s->scratch && s->later_died < 0)
    s->later_died = w;
}

/* Whether the batch is abandoned (then failed: nothing more is sent, and
 * what is in flight is still read). [mu] */
static int split_check_abandoned(splitter *s) {
  if (!batch_abandoned(s->ps, s->info, s->dst))
    return 0;
  if (!s->failed) {
    size_t cap;
    char *m = fail_text(s, &cap);
    snprintf(m, cap, "a batch of an abandoned stream (not read)");
  }
  return 1;
}

/* Gives ch the next chunk, or gives ch back when none is left (or the
 * batch has failed). */
static void split_feed(splitter *s, channel *ch) {
  pthread_mutex_lock(&s->ps->mu);
  split_check_abandoned(s);
  pthread_mutex_unlock(&s->ps->mu);
  if (s->failed || s->next >= s->n) {
    channel_give(s->ps, ch, 0);
    return;
  }
  uint32_t first = s->next;
  uint32_t cnt = s->n - first < SPLIT_CHUNK ? s->n - first : SPLIT_CHUNK;
  int e = send_fill(s->ps, ch, s->indices + first, cnt, first, s->info, s->dst);
  if (e) {
    char samples[160];
    describe_samples(s->indices + first, cnt, samples, sizeof samples);
    size_t cap;
    char *m = fail_text(s, &cap);
    int w = (int)(ch - s->ps->ch);
    send_failed(s->ps, ch, e, s->info, samples, m, cap);
    if (e > 0)
      note_death(s, m, w);
    return;
  }
  s->next += cnt;
  s->parts[s->nparts++] = (part){ch, first, cnt};
}

/* While this batch is the earliest waiting: a chunk for each idle worker. */
static void split_take_idle(splitter *s, const waiter *me, channel **got) {
  procset *ps = s->ps;
  uint32_t left = (s->n - s->next + SPLIT_CHUNK - 1) / SPLIT_CHUNK;
  int k = 0;
  channel *ch;
  pthread_mutex_lock(&ps->mu);
  if (!ps->closing && !split_check_abandoned(s) &&
      first_waiting_in(ps->waiting, me))
    while ((uint32_t)k < left && (ch = idle_channel(ps))) {
      ch->busy = 1;
      got[k++] = ch;
    }
  pthread_mutex_unlock(&ps->mu);
  for (int i = 0; i < k; i++) {
    if (got[i]->dead) { /* every worker is dead: say so */
      size_t cap;
      char *m = fail_text(s, &cap);
      no_longer_running(ps, got[i], m, cap);
      note_death(s, m, (int)(got[i] - ps->ch));
    } else {
      split_feed(s, got[i]);
    }
  }
}

/* Part i has something to read: its reply, then its channel's next chunk. */
static void split_collect(splitter *s, int i) {
  part p = s->parts[i];
  s->parts[i] = s->parts[--s->nparts];
  rep_head rh;
  char *payload;
  int err_no = 0;
  wait_result r =
      read_reply(s->ps, p.ch, s->info, s->dst, &rh, &payload, &err_no);
  size_t cap;
  if (r != WAIT_OK) {
    char samples[160];
    describe_samples(s->indices + p.first, p.n, samples, sizeof samples);
    char *m = fail_text(s, &cap);
    wait_failed(s->ps, p.ch, r, err_no, s->info, samples, m, cap);
    if (r != WAIT_CLOSED)
      note_death(s, m, (int)(p.ch - s->ps->ch));
    return;
  }
  if (rh.status == REP_OK && !payload) {
    split_feed(s, p.ch);
    return;
  }
  int w = (int)(p.ch - s->ps->ch);
  channel_give(s->ps, p.ch, 0);
  if (s->failed) { /* one error per batch: a second one is not kept */
    free(payload);
    return;
  }
  char *m = fail_text(s, &cap);
  if (rh.status == REP_OK) { /* split batches have no pickled parts */
    free(payload);
    snprintf(m, cap,
             "worker %d (pid %ld) sent pickled parts for a chunk of batch "
             "%llu, which cannot have any",
             w, p.ch->pid, (unsigned long long)s->info->batch_index);
  } else {
    store_error(s->ps, w, p.ch->pid, payload, rh.len, m, cap);
  }
}

/* Waits up to ms for a reply from the parts in flight and collects those
 * that came. */
static void split_wait(splitter *s, struct pollfd *pf, int ms) {
  for (int i = 0; i < s->nparts; i++) {
    pf[2 * i] = (struct pollfd){s->parts[i].ch->sock, POLLIN, 0};
    pf[2 * i + 1] = (struct pollfd){s->parts[i].ch->sentinel, POLLIN, 0};
  }
  if (poll(pf, (nfds_t)(2 * s->nparts), ms) <= 0)
    return; /* nothing yet (or EINTR): the caller looks again */
  for (int i = s->nparts - 1; i >= 0; i--) /* collect moves the last to i */
    if (pf[2 * i].revents || pf[2 * i + 1].revents)
      split_collect(s, i);
}

/* The loader is closing: what is in flight goes back unread. */
static void split_abandon(splitter *s) {
  while (s->nparts > 0)
    channel_give(s->ps, s->parts[--s->nparts].ch, 0);
  size_t cap;
  char *m = fail_text(s, &cap);
  snprintf(m, cap, "the loader's worker processes were shut down");
}

/* All chunks are out: the next batch may take the workers. */
static void split_sent(procset *ps, waiter *me, const pl_batch_info *info) {
  pthread_mutex_lock(&ps->mu);
  unlink_waiter(&ps->waiting, me);
  split_turn_done(ps, info);
  pthread_mutex_unlock(&ps->mu);
}

/* Fills the batch in chunks (see split_wanted): 0, 1 (msg says why), or
 * -1 when it is to be filled whole instead (no memory to split it, a
 * stale stream). After a failure nothing more is sent, and what is in
 * flight is still read, so that no worker's reply is left for its next
 * request to find. */
int read_split(procset *ps, const uint64_t *indices, uint32_t n,
               const pl_batch_info *info, const pl_batch_dst *dst, char *msg,
               size_t msg_len) {
  splitter s = {ps, indices, n,  0,   info, dst,    NULL,
                0,  0,       -1, msg, {0},  msg_len};
  s.parts = calloc((size_t)ps->n, sizeof *s.parts);
  channel **got = calloc((size_t)ps->n, sizeof *got);
  struct pollfd *pf = calloc(2 * (size_t)ps->n, sizeof *pf);
  if (!s.parts || !got || !pf) { /* filled whole; the next job need not wait */
    free(s.parts);
    free(got);
    free(pf);
    pthread_mutex_lock(&ps->mu);
    split_turn_done(ps, info);
    pthread_mutex_unlock(&ps->mu);
    return -1;
  }
  waiter me = {NULL, info->stream, info->epoch, info->batch_index};
  pthread_mutex_lock(&ps->mu);
  if (split_turn(ps, info, dst) < 0) {
    pthread_mutex_unlock(&ps->mu);
    free(s.parts);
    free(got);
    free(pf);
    return -1;
  }
  me.next = ps->waiting;
  ps->waiting = &me; /* the earliest batch: later ones wait for its chunks */
  pthread_mutex_unlock(&ps->mu);
  int queued = 1;
  while (s.nparts > 0 || (!s.failed && s.next < n)) {
    if (queued && !s.failed && s.next < n)
      split_take_idle(&s, &me, got);
    if (queued && (s.failed || s.next >= n)) {
      split_sent(ps, &me, info);
      queued = 0;
    }
    if (is_closing(ps)) {
      split_abandon(&s);
      break;
    }
    if (s.nparts > 0) {
      split_wait(&s, pf, queued ? 2 : WAIT_SLICE_MS);
    } else if (!s.failed) { /* the workers are busy, or an earlier batch waits
                             */
      pthread_mutex_lock(&ps->mu);
      if (!ps->closing &&
          (!first_waiting_in(ps->waiting, &me) || !idle_channel(ps)))
        wait_briefly(ps);
      pthread_mutex_unlock(&ps->mu);
    }
  }
  if (queued)
    split_sent(ps, &me, info);
  if (s.failed && s.later_died >= 0 && !strstr(msg, "[pinloader-died")) {
    size_t used = strlen(msg);
    if (used + 32 < msg_len)
      snprintf(msg + used, msg_len - used,
               "; a worker died too [pinloader-died %d]", s.later_died);
  }
  free(s.parts);
  free(got);
  free(pf);
  return s.failed ? 1 : 0;
}
