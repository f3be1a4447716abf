/* Channels: which worker process reads which batch, and when (batch k to
 * worker k % n in order, or balanced: the earliest waiting batch to any
 * idle worker), a stale stream's batches left unread; the blobs kept for
 * the consumer (pickled extras, exceptions); what a failed exchange says
 * about its worker. */
#include "procset.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int waiter_before(const waiter *a, const waiter *b) {
  if (a->stream != b->stream)
    return a->stream < b->stream;
  if (a->epoch != b->epoch)
    return a->epoch < b->epoch;
  return a->batch < b->batch;
}

void blob_put(procset *ps, int kind, uint64_t k1, uint64_t k2, uint64_t k3,
              char *data, size_t len) { /* takes data: malloc'd */
  blob *b = malloc(sizeof *b + len);
  if (b) {
    *b = (blob){NULL, kind, k1, k2, k3, len};
    memcpy(b->data, data, len);
  }
  free(data);
  if (!b)
    return; /* the consumer then sees the message without the object */
  pthread_mutex_lock(&ps->mu);
  for (blob **p = &ps->blobs; *p; p = &(*p)->next)
    if ((*p)->kind == kind && (*p)->k1 == k1 && (*p)->k2 == k2 &&
        (*p)->k3 == k3) {
      blob *old = *p; /* the same batch filled again: the newer is right */
      *p = old->next;
      free(old);
      break;
    }
  b->next = ps->blobs;
  ps->blobs = b;
  pthread_mutex_unlock(&ps->mu);
}

blob *blob_take(procset *ps, int kind, uint64_t k1, uint64_t k2, uint64_t k3) {
  pthread_mutex_lock(&ps->mu);
  blob *found = NULL;
  for (blob **p = &ps->blobs; *p; p = &(*p)->next)
    if ((*p)->kind == kind && (*p)->k1 == k1 && (*p)->k2 == k2 &&
        (*p)->k3 == k3) {
      found = *p;
      *p = found->next;
      break;
    }
  pthread_mutex_unlock(&ps->mu);
  return found;
}
double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int is_closing(procset *ps) {
  pthread_mutex_lock(&ps->mu);
  int c = ps->closing;
  pthread_mutex_unlock(&ps->mu);
  return c;
}

int first_waiting_in(const waiter *list, const waiter *me) {
  for (const waiter *w = list; w; w = w->next)
    if (w != me && waiter_before(w, me))
      return 0;
  return 1;
}

static int first_waiting(const channel *ch, const waiter *me) {
  return first_waiting_in(ch->waiting, me);
}

/* A batch of a stream older than the one this worker serves now: the
 * loader has abandoned it, nobody waits for its result. [mu] */
static int is_stale(const channel *ch, const pl_batch_info *info) {
  return ch->served_any && info->stream < ch->cur_stream;
}

void wait_briefly(procset *ps) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 1;
  pthread_cond_timedwait(&ps->cv, &ps->mu, &ts);
}

void unlink_waiter(waiter **list, const waiter *me) {
  for (waiter **p = list; *p; p = &(*p)->next)
    if (*p == me) {
      *p = me->next;
      return;
    }
}

/* Balanced: an idle live worker, or, when every worker is dead, one of
 * them (its holder then reports the death). NULL: wait. [mu] */
channel *idle_channel(procset *ps) {
  int alive = 0;
  for (int i = 0; i < ps->n; i++) {
    channel *ch = &ps->ch[i];
    if (!ch->dead && !ch->busy && ch->ready)
      return ch;
    alive += !ch->dead; /* one still starting counts: it will be ready */
  }
  for (int i = 0; !alive && i < ps->n; i++)
    if (!ps->ch[i].busy)
      return &ps->ch[i];
  return NULL;
}

/* Balanced: the earliest batch waiting goes first, to whichever worker is
 * idle (with as many loader threads as workers there is always one, but
 * the tuner may run more threads than processes are idle). */
/* Balanced: notes info's stream; whether it is older than the newest
 * (abandoned). A newer stream wakes the waiters of older ones. [mu] */
static int stream_abandoned(procset *ps, const pl_batch_info *info) {
  if (info->stream > ps->newest_stream) {
    ps->newest_stream = info->stream;
    pthread_cond_broadcast(&ps->cv);
  }
  return info->stream < ps->newest_stream;
}

/* Whether the batch is wanted no more: an older stream than one seen
 * here, or the loader says so (its stream is over before any batch of
 * the next one got here: the threads are all busy with the old one). */
int batch_abandoned(procset *ps, const pl_batch_info *info,
                    const pl_batch_dst *dst) {
  return stream_abandoned(ps, info) || (dst->abandoned && dst->abandoned(dst));
}

const channel stale_channel;

static channel *channel_take_any(procset *ps, const pl_batch_info *info,
                                 const pl_batch_dst *dst) {
  waiter me = {NULL, info->stream, info->epoch, info->batch_index};
  channel *ch = NULL;
  pthread_mutex_lock(&ps->mu);
  me.next = ps->waiting;
  ps->waiting = &me;
  while (!ps->closing && !batch_abandoned(ps, info, dst) &&
         (!first_waiting_in(ps->waiting, &me) || !(ch = idle_channel(ps))))
    wait_briefly(ps);
  unlink_waiter(&ps->waiting, &me);
  if (ps->closing || batch_abandoned(ps, info, dst)) {
    /* Abandoned: nobody waits for it, and its worker is better spent on
     * the new stream (at the start of an explicit order, the loader's own
     * first batches would otherwise hold every worker for a batch). */
    int closing = ps->closing;
    pthread_cond_broadcast(&ps->cv);
    pthread_mutex_unlock(&ps->mu);
    return closing ? NULL : STALE_CHANNEL;
  }
  ch->busy = 1;
  pthread_cond_broadcast(&ps->cv); /* the next waiter may find another */
  pthread_mutex_unlock(&ps->mu);
  return ch;
}

channel *channel_take(procset *ps, const pl_batch_info *info,
                      const pl_batch_dst *dst) {
  if (ps->balanced)
    return channel_take_any(ps, info, dst);
  channel *ch = &ps->ch[info->batch_index % (uint64_t)ps->n];
  waiter me = {NULL, info->stream, info->epoch, info->batch_index};
  pthread_mutex_lock(&ps->mu);
  me.next = ch->waiting;
  ch->waiting = &me;
  /* In its place: the loader lets the next batch's call begin (the
   * dataset is PL_BATCH_IN_ORDER). Every batch claimed before this one is
   * in its channel's queue by now, or served: the first waiting is the
   * next this worker reads, across epochs too, with no clock in it. */
  pthread_mutex_unlock(&ps->mu);
  dst->queued(dst);
  pthread_mutex_lock(&ps->mu);
  while ((ch->busy || !ch->ready || !first_waiting(ch, &me)) &&
         !ps->closing && !is_stale(ch, info))
    wait_briefly(ps);
  unlink_waiter(&ch->waiting, &me);
  if (ps->closing) {
    pthread_cond_broadcast(&ps->cv);
    pthread_mutex_unlock(&ps->mu);
    return NULL;
  }
  if (is_stale(ch, info)) {
    /* Stale: the loader began a newer stream, whose batches this worker
     * already serves; nobody waits for this one, and reading it would
     * move an IterableDataset worker's iterator between the two streams
     * (restarting it: a duplicated batch). */
    pthread_cond_broadcast(&ps->cv); /* those behind it in the queue */
    pthread_mutex_unlock(&ps->mu);
    return STALE_CHANNEL;
  }
  ch->busy = 1;
  if (!ch->served_any || info->stream > ch->cur_stream)
    ch->cur_stream = info->stream;
  ch->served_any = 1;
  pthread_mutex_unlock(&ps->mu);
  return ch;
}

void channel_give(procset *ps, channel *ch, int dead) {
  pthread_mutex_lock(&ps->mu);
  ch->busy = 0;
  if (dead)
    ch->dead = 1;
  pthread_cond_broadcast(&ps->cv);
  pthread_mutex_unlock(&ps->mu);
}

uint64_t base_seed_of(procset *ps, uint64_t epoch, int *found) {
  uint64_t v = 0;
  *found = 0;
  pthread_mutex_lock(&ps->mu);
  for (int i = 0; i < ps->nseeds; i++)
    if (ps->seed_epoch[i] == epoch) {
      v = ps->seed_value[i];
      *found = 1;
    }
  pthread_mutex_unlock(&ps->mu);
  return v;
}

/* "3, 17, 42, ... (256 samples)" */
void describe_samples(const uint64_t *idx, uint32_t n, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (uint32_t i = 0; i < n && i < 8; i++)
    used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%llu",
                             i ? ", " : "", (unsigned long long)idx[i]);
  if (n > 8 && used < cap)
    snprintf(out + used, cap - used, ", ... (%u samples)", n);
}

/* A wait that failed: ch goes back (dead unless the loader is closing; a
 * stuck process is killed) and msg says what became of the worker. */
void wait_failed(procset *ps, channel *ch, wait_result r, int err_no,
                 const pl_batch_info *info, const char *samples, char *msg,
                 size_t msg_len) {
  int w = (int)(ch - ps->ch);
  long pid = ch->pid;
  if (r == WAIT_TIMEOUT)
    kill((pid_t)pid, SIGKILL); /* stuck: a process can be killed */
  channel_give(ps, ch, r != WAIT_CLOSED);
  const char *what = r == WAIT_TIMEOUT
                         ? "did not finish within the timeout and was killed, "
                     : r == WAIT_CLOSED ? "was shut down "
                     : r == WAIT_DIED   ? "exited "
                                        : "sent a malformed reply ";
  snprintf(msg, msg_len,
           "worker %d (pid %ld) %swhile loading batch %llu of epoch %llu "
           "(samples %s)%s%s [pinloader-died %d]",
           w, pid, what, (unsigned long long)info->batch_index,
           (unsigned long long)info->epoch, samples, err_no ? ": " : "",
           err_no ? strerror(err_no) : "", w);
}

/* A worker's exception (payload: uint32 text length, text, pickled
 * error): kept under a new token that msg names. Takes payload. */
void store_error(procset *ps, int w, long pid, char *payload, uint64_t len,
                 char *msg, size_t msg_len) {
  uint32_t tl = 0;
  if (payload && len >= 4)
    memcpy(&tl, payload, 4);
  if (tl > len - 4)
    tl = 0;
  pthread_mutex_lock(&ps->mu);
  uint64_t token = ++ps->next_token;
  pthread_mutex_unlock(&ps->mu);
  snprintf(msg, msg_len, "%.*s (worker %d, pid %ld) [pinloader-error %llu]",
           (int)(tl < 300 ? tl : 300), payload ? payload + 4 : "", w, pid,
           (unsigned long long)token);
  if (payload)
    blob_put(ps, BLOB_ERROR, token, 0, 0, payload, (size_t)len);
}

void send_failed(procset *ps, channel *ch, int e, const pl_batch_info *info,
                 const char *samples, char *msg, size_t msg_len) {
  int w = (int)(ch - ps->ch);
  channel_give(ps, ch, e > 0);
  if (e < 0)
    snprintf(msg, msg_len, "out of memory for a request (batch %llu)",
             (unsigned long long)info->batch_index);
  else
    snprintf(msg, msg_len,
             "worker %d (pid %ld) exited before batch %llu of epoch %llu "
             "(samples %s) could be sent (%s) [pinloader-died %d]",
             w, ch->pid, (unsigned long long)info->batch_index,
             (unsigned long long)info->epoch, samples, strerror(e), w);
}

void no_longer_running(procset *ps, channel *ch, char *msg, size_t msg_len) {
  int w = (int)(ch - ps->ch);
  channel_give(ps, ch, 1);
  snprintf(msg, msg_len,
           "worker %d (pid %ld) is no longer running [pinloader-died %d]", w,
           ch->pid, w);
}
