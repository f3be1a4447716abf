/* Worker processes for Python datasets.
 *
 * A Python dataset with num_workers > 0 is read by worker PROCESSES
 * (python/pinloader/_worker.py), not by the loader's threads, so that
 * __getitem__ runs in parallel instead of taking turns on one GIL. The
 * loader stays the engine: its worker threads claim batches in order, fill
 * them and copy them; only the fill is delegated. Each batch is one call
 * of ps_read_batch (pl_read_batch_fn) on a loader thread, without the GIL:
 *
 *   1. take the batch's channel: worker process (batch index % workers), as
 *      torch assigns batches, so that a worker's random state sees the same
 *      batches as a torch worker's would; or, balanced (in_order=False, as
 *      torch's in_order=False hands a batch to a worker with room), any
 *      idle worker, so that a slower worker (a busier core, a hyperthread
 *      sibling) holds nobody back: the batches still arrive in order, only
 *      which worker reads which batch is left to timing;
 *   2. send it a request (indices, epoch, seed, the field offsets) with the
 *      batch memory's memfd attached (SCM_RIGHTS; the process maps each
 *      buffer once, by its id);
 *   3. wait for the reply with poll() on the socket and on the process's
 *      sentinel (readable once it has exited), in slices that also watch
 *      for close(): a dead worker is an error naming its pid and the
 *      samples it held, a stuck one is killed after the loader's timeout;
 *      neither hangs.
 *
 * The process writes each sample's fields straight into the batch memory
 * (page-locked staging for CUDA), so there is no pickling of samples, no
 * pin-memory thread and no second host copy. What cannot go there (strings,
 * objects, a collate_fn's odd shapes) comes back pickled in the reply: an
 * "extra" kept here by (epoch, batch) until the consumer packs the batch.
 * An exception comes back pickled too, kept under a token that the error
 * message names, so that each failure keeps its own exception whatever
 * epoch it surfaces in.
 *
 * Wire format (one machine, native byte order): req_head, fd_offset[nfields]
 * and indices[n] as uint64; the reply is rep_head and `len` payload bytes. */
#include "module.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

#define REQ_MAGIC 0x51524c50u /* "PLRQ" */
#define REP_MAGIC 0x50524c50u /* "PLRP" */
#define WAIT_SLICE_MS 100
#define MAX_REPLY (1ull << 34) /* a reply larger than this is a broken worker */
#define EPOCH_SEEDS 16
#define SPLIT_CHUNK 64 /* _worker.CHUNK: where balanced generators restart */

enum { REQ_RESEED = 1, REQ_PROGRESS = 2 };
/* REP_PROGRESS: "reading sample `len` now" (with a timeout), then more. */
enum { REP_OK = 0, REP_ERROR = 1, REP_PROGRESS = 3 };
enum { BLOB_ERROR = 1, BLOB_EXTRA = 2 };

typedef struct req_head {
  uint32_t magic, nfields, n, flags;
  uint64_t buffer_id, fd_bytes, epoch, seed, batch_index, base_seed;
  uint64_t first; /* the batch position of indices[0] (a split's chunk) */
} req_head;

typedef struct rep_head {
  uint32_t magic, status;
  uint64_t len;
} rep_head;

/* A loader thread waiting for a channel: batches reach a worker in their
 * order (stream, epoch, batch), so that its iterator (IterableDataset) and
 * its random state see them as a torch worker would. */
typedef struct waiter {
  struct waiter *next;
  uint64_t stream, epoch, batch;
} waiter;

static int waiter_before(const waiter *a, const waiter *b) {
  if (a->stream != b->stream)
    return a->stream < b->stream;
  if (a->epoch != b->epoch)
    return a->epoch < b->epoch;
  return a->batch < b->batch;
}

typedef struct channel {
  waiter *waiting; /* [mu] */
  /* [mu] The stream it serves and the last job served in it: batch k of an
   * epoch waits for batch k - workers (job - workers) on this channel, so
   * that a thread that claimed later but ran faster cannot go first. */
  uint64_t cur_stream, served_job;
  int served_any;
  int sock;     /* the parent's end of the worker's socket (owned) */
  int sentinel; /* readable once the process has exited (owned dup) */
  long pid;
  int busy; /* [mu] a loader thread talks to it */
  /* [mu] Its "ready" reply has been read (set_ready): the loader may be
   * made while the last workers still start, and waits for them here. */
  int ready;
  int dead; /* [mu] exited, killed, or its stream broke */
  double cpu_s; /* [mu] its CPU seconds as last read (kept once it ends) */
} channel;

typedef struct blob {
  struct blob *next;
  int kind;
  uint64_t k1, k2, k3; /* token; or (stream, epoch, batch index) */
  size_t len;
  char data[];
} blob;

typedef struct procset {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int closing; /* [mu] shutdown(): every wait gives up */
  int n;
  int balanced;     /* any idle worker takes the next batch */
  int split;        /* the first round's batches may be split (read_split) */
  /* [mu] Split batches go out in job order: the first job of split_stream
   * that has not yet sent all its chunks (a later one waits for it). */
  uint64_t split_stream, split_next;
  waiter *waiting;  /* [mu] balanced: threads waiting for any worker */
  /* [mu] balanced: the newest stream a batch came from; a batch of an
   * older one was abandoned by the loader (a new epoch, an explicit order)
   * and is not read. */
  uint64_t newest_stream;
  channel *ch;
  blob *blobs;         /* [mu] */
  uint64_t next_token; /* [mu] */
  uint64_t seed_epoch[EPOCH_SEEDS], seed_value[EPOCH_SEEDS]; /* [mu] */
  int nseeds;                                               /* [mu] */
} procset;

typedef struct {
  PyObject_HEAD
  procset *ps;
  long pid; /* the process that made it: a forked child's copy is inert */
  /* No processes (worker_mode="thread", num_workers=0): filler.fill_local
   * runs under the GIL on the loader's threads; its exceptions are kept
   * as themselves in local_errors, by token. */
  PyObject *filler;
  PyObject *local_errors;
} ProcSetObject;

static PyTypeObject ProcSetType;

/* ------------------------------------------------------------ blobs */

static void blob_put(procset *ps, int kind, uint64_t k1, uint64_t k2,
                     uint64_t k3, char *data,
                     size_t len) { /* takes data: malloc'd */
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

static blob *blob_take(procset *ps, int kind, uint64_t k1, uint64_t k2,
                       uint64_t k3) {
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

/* ------------------------------------------------------------ I/O */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_closing(procset *ps) {
  pthread_mutex_lock(&ps->mu);
  int c = ps->closing;
  pthread_mutex_unlock(&ps->mu);
  return c;
}

/* Sends the whole request, the fd with its first byte. 0, or an errno. */
static int send_request(int sock, const void *buf, size_t len, int fd) {
  const char *p = buf;
  size_t done = 0;
  while (done < len) {
    struct iovec iov = {(void *)(p + done), len - done};
    struct msghdr mh = {0};
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } ctl;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (done == 0 && fd >= 0) {
      memset(&ctl, 0, sizeof ctl);
      mh.msg_control = ctl.buf;
      mh.msg_controllen = sizeof ctl.buf;
      struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    ssize_t k = sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return errno;
    }
    done += (size_t)k;
  }
  return 0;
}

typedef enum { WAIT_OK, WAIT_DIED, WAIT_TIMEOUT, WAIT_CLOSED, WAIT_BROKEN } wait_result;

/* Reads exactly len bytes, waiting with poll() on the socket and the
 * process's sentinel; gives up on death, the deadline or close(). */
static wait_result recv_exact(procset *ps, channel *ch, void *buf, size_t len,
                              double deadline, int *err_no) {
  char *p = buf;
  size_t done = 0;
  while (done < len) {
    struct pollfd pf[2] = {{ch->sock, POLLIN, 0}, {ch->sentinel, POLLIN, 0}};
    int ms = WAIT_SLICE_MS;
    if (deadline > 0) {
      double left = deadline - now_s();
      if (left <= 0)
        return WAIT_TIMEOUT;
      if (left * 1000 < ms)
        ms = (int)(left * 1000) + 1;
    }
    int r = poll(pf, ch->sentinel >= 0 ? 2 : 1, ms);
    if (r < 0 && errno != EINTR) {
      *err_no = errno;
      return WAIT_BROKEN;
    }
    if (is_closing(ps))
      return WAIT_CLOSED;
    if (r <= 0)
      continue;
    if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t k = recv(ch->sock, p + done, len - done, MSG_DONTWAIT);
      if (k > 0) {
        done += (size_t)k;
        continue;
      }
      if (k == 0 || (errno != EAGAIN && errno != EINTR))
        return WAIT_DIED; /* the process's end closed: it is gone */
      continue;
    }
    if (pf[1].revents) /* exited with nothing (more) to read */
      return WAIT_DIED;
  }
  return WAIT_OK;
}

/* A close-on-exec copy of fd, or -1. */
static int fcntl_dup(long fd) {
  return fd < 0 || fd > INT32_MAX ? -1 : fcntl((int)fd, F_DUPFD_CLOEXEC, 3);
}

/* ------------------------------------------------------------ channels */

static int first_waiting_in(const waiter *list, const waiter *me) {
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

/* Whether the batch before `info`'s on this channel (job - workers, the
 * same epoch) has been served, or there is none to wait for. [mu] */
static int predecessor_done(const procset *ps, const channel *ch,
                            const pl_batch_info *info) {
  uint64_t w = (uint64_t)ps->n;
  if (info->batch_index < w || info->job < w)
    return 1; /* the first of its epoch or its stream on this channel */
  return ch->served_any && info->stream == ch->cur_stream &&
         ch->served_job >= info->job - w;
}

static void wait_briefly(procset *ps) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 1;
  pthread_cond_timedwait(&ps->cv, &ps->mu, &ts);
}

static void unlink_waiter(waiter **list, const waiter *me) {
  for (waiter **p = list; *p; p = &(*p)->next)
    if (*p == me) {
      *p = me->next;
      return;
    }
}

/* Balanced: an idle live worker, or, when every worker is dead, one of
 * them (its holder then reports the death). NULL: wait. [mu] */
static channel *idle_channel(procset *ps) {
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
static int batch_abandoned(procset *ps, const pl_batch_info *info,
                           const pl_batch_dst *dst) {
  return stream_abandoned(ps, info) || (dst->abandoned && dst->abandoned(dst));
}

static const channel stale_channel; /* never read or written */
#define STALE_CHANNEL ((channel *)&stale_channel)

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

/* channel_take's answer for a batch of a stream the worker has left:
 * STALE_CHANNEL (above). */

static channel *channel_take(procset *ps, const pl_batch_info *info,
                             const pl_batch_dst *dst) {
  if (ps->balanced)
    return channel_take_any(ps, info, dst);
  channel *ch = &ps->ch[info->batch_index % (uint64_t)ps->n];
  waiter me = {NULL, info->stream, info->epoch, info->batch_index};
  pthread_mutex_lock(&ps->mu);
  me.next = ch->waiting;
  ch->waiting = &me;
  /* A predecessor whose fill failed before it got here never comes: after
   * a few seconds of waiting for it, go on (order is then best effort). */
  double give_up = now_s() + 3.0;
  while ((ch->busy || !ch->ready || !first_waiting(ch, &me) ||
          (!predecessor_done(ps, ch, info) && now_s() < give_up)) &&
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
  if (!ch->served_any || info->stream > ch->cur_stream) {
    ch->cur_stream = info->stream;
    ch->served_job = info->job;
  } else if (info->stream == ch->cur_stream && info->job > ch->served_job) {
    ch->served_job = info->job;
  }
  ch->served_any = 1;
  pthread_mutex_unlock(&ps->mu);
  return ch;
}

static void channel_give(procset *ps, channel *ch, int dead) {
  pthread_mutex_lock(&ps->mu);
  ch->busy = 0;
  if (dead)
    ch->dead = 1;
  pthread_cond_broadcast(&ps->cv);
  pthread_mutex_unlock(&ps->mu);
}

static uint64_t base_seed_of(procset *ps, uint64_t epoch, int *found) {
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
static void describe_samples(const uint64_t *idx, uint32_t n, char *out,
                             size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (uint32_t i = 0; i < n && i < 8; i++)
    used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%llu",
                             i ? ", " : "", (unsigned long long)idx[i]);
  if (n > 8 && used < cap)
    snprintf(out + used, cap - used, ", ... (%u samples)", n);
}

/* ------------------------------------------------------------ in-process */


/* Moves the pending exception into owner->local_errors under a new token
 * and describes it in msg. GIL held. */
static void local_store_error(ProcSetObject *owner, char *msg, size_t cap) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value)
    PyException_SetTraceback(value, tb);
  procset *ps = owner->ps;
  pthread_mutex_lock(&ps->mu);
  uint64_t token = ++ps->next_token;
  pthread_mutex_unlock(&ps->mu);
  PyObject *text = value ? PyObject_Str(value) : NULL;
  const char *ctext = text ? PyUnicode_AsUTF8(text) : NULL;
  if (!ctext)
    PyErr_Clear();
  PyObject *where = value ? PyObject_GetAttrString(value, "_pinloader_sample")
                          : NULL;
  long long sample = where && PyLong_Check(where) ? PyLong_AsLongLong(where)
                                                  : -1;
  if (!where || PyErr_Occurred())
    PyErr_Clear();
  Py_XDECREF(where);
  char at[48] = "";
  if (sample >= 0)
    snprintf(at, sizeof at, " at dataset[%lld]", sample);
  snprintf(msg, cap, "%s%s: %.300s [pinloader-error %llu]",
           type ? ((PyTypeObject *)type)->tp_name : "an exception", at,
           ctext ? ctext : "", (unsigned long long)token);
  PyObject *key = PyLong_FromUnsignedLongLong(token);
  if (!key || !value || PyDict_SetItem(owner->local_errors, key, value) < 0)
    PyErr_Clear();
  Py_XDECREF(key);
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

/* A batch filled by filler.fill_local(buffer, offsets, indices, epoch,
 * seed, batch_index) -> bytes of extras, in this process. */
static int local_read_batch(ProcSetObject *owner, const uint64_t *indices,
                            uint32_t n, const pl_batch_info *info,
                            const pl_batch_dst *dst, char *msg,
                            size_t msg_len) {
  if (py_finalizing()) {
    snprintf(msg, msg_len, "the Python interpreter is shutting down");
    return 1;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  in_getitem++;
  int rc = 0;
  PyObject *mv = PyMemoryView_FromMemory(dst->buffer,
                                         (Py_ssize_t)dst->buffer_bytes,
                                         PyBUF_WRITE);
  PyObject *offs = PyTuple_New(dst->nfields);
  PyObject *idx = PyList_New(n);
  for (int f = 0; offs && f < dst->nfields; f++)
    PyTuple_SET_ITEM(offs, f, PyLong_FromUnsignedLongLong(dst->offset[f]));
  for (uint32_t i = 0; idx && i < n; i++)
    PyList_SET_ITEM(idx, i, PyLong_FromUnsignedLongLong(indices[i]));
  PyObject *r = NULL;
  if (mv && offs && idx && !PyErr_Occurred())
    r = PyObject_CallMethod(owner->filler, "fill_local", "OOOKKK", mv, offs,
                            idx, (unsigned long long)info->epoch,
                            (unsigned long long)info->seed,
                            (unsigned long long)info->batch_index);
  if (r && PyBytes_Check(r) && PyBytes_GET_SIZE(r) > 0) {
    size_t len = (size_t)PyBytes_GET_SIZE(r);
    char *copy = malloc(len);
    if (copy) {
      memcpy(copy, PyBytes_AS_STRING(r), len);
      blob_put(owner->ps, BLOB_EXTRA, info->stream, info->epoch,
               info->batch_index, copy, len);
    }
  }
  if (!r) {
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
      /* Ctrl-C in the consumer's thread (num_workers=0): the loader gives
       * the batch back and the consumer's next() raises this exception.
       * Kept as itself, not re-signalled (PyErr_SetInterrupt): with SIGINT
       * ignored or handled by a handler that does not raise, a re-signal is
       * lost, and a read that raises again would be retried forever. */
      if (consumer_interrupt) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb)
          PyException_SetTraceback(value, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        Py_XSETREF(*consumer_interrupt, value);
      } else { /* a worker thread: the consumer sees the interrupt */
        PyErr_Clear();
        PyErr_SetInterrupt();
      }
      rc = PL_READ_INTERRUPTED;
    } else {
      local_store_error(owner, msg, msg_len);
      rc = 1;
    }
  }
  Py_XDECREF(r);
  Py_XDECREF(idx);
  Py_XDECREF(offs);
  Py_XDECREF(mv);
  in_getitem--;
  PyGILState_Release(g);
  return rc;
}

/* ------------------------------------------------------------ the callback */

/* Sends ch the request to fill samples indices[0..n-1] at batch positions
 * first.. of dst: 0, an errno (the worker is gone), or -1 (no memory for
 * the request). */
static int send_fill(procset *ps, channel *ch, const uint64_t *indices,
                     uint32_t n, uint32_t first, const pl_batch_info *info,
                     const pl_batch_dst *dst) {
  size_t len = sizeof(req_head) + ((size_t)dst->nfields + n) * 8;
  uint8_t *req = malloc(len);
  if (!req)
    return -1;
  int seeded;
  uint64_t base_seed = base_seed_of(ps, info->epoch, &seeded);
  req_head h = {REQ_MAGIC,         (uint32_t)dst->nfields, n,
                (seeded ? REQ_RESEED : 0u) | (dst->report ? REQ_PROGRESS : 0u),
                dst->buffer_id,    dst->buffer_bytes,
                info->epoch,       info->seed,
                info->batch_index, base_seed,
                first};
  memcpy(req, &h, sizeof h);
  memcpy(req + sizeof h, dst->offset, (size_t)dst->nfields * 8);
  memcpy(req + sizeof h + (size_t)dst->nfields * 8, indices, (size_t)n * 8);
  int e = send_request(ch->sock, req, len, dst->fd);
  free(req);
  return e;
}

/* Waits for ch's reply: progress records first (to dst->report, each
 * restarting the clock), then the head and its payload (malloc'd; NULL
 * when empty or on failure). The timeout is per sample, as the loader's
 * stall clock (which the progress records restart): a worker is killed a
 * while after that clock has failed the batch with PL_TIMEOUT naming the
 * sample. */
static wait_result read_reply(procset *ps, channel *ch,
                              const pl_batch_info *info,
                              const pl_batch_dst *dst, rep_head *rh,
                              char **payload, int *err_no) {
  double grace = info->timeout_s * 1.5 + 0.5;
  double deadline = info->timeout_s > 0 ? now_s() + grace : 0;
  wait_result r;
  *payload = NULL;
  for (;;) {
    r = recv_exact(ps, ch, rh, sizeof *rh, deadline, err_no);
    if (r != WAIT_OK || rh->magic != REP_MAGIC || rh->status != REP_PROGRESS)
      break;
    if (dst->report)
      dst->report(dst, rh->len);
    if (deadline > 0)
      deadline = now_s() + grace;
  }
  if (r == WAIT_OK && (rh->magic != REP_MAGIC || rh->len > MAX_REPLY))
    return WAIT_BROKEN;
  if (r != WAIT_OK || !rh->len)
    return r;
  if (!(*payload = malloc((size_t)rh->len))) {
    *err_no = ENOMEM;
    return WAIT_BROKEN;
  }
  r = recv_exact(ps, ch, *payload, (size_t)rh->len, deadline, err_no);
  if (r != WAIT_OK) {
    free(*payload);
    *payload = NULL;
  }
  return r;
}

/* A wait that failed: ch goes back (dead unless the loader is closing; a
 * stuck process is killed) and msg says what became of the worker. */
static void wait_failed(procset *ps, channel *ch, wait_result r, int err_no,
                        const pl_batch_info *info, const char *samples,
                        char *msg, size_t msg_len) {
  int w = (int)(ch - ps->ch);
  long pid = ch->pid;
  if (r == WAIT_TIMEOUT)
    kill((pid_t)pid, SIGKILL); /* stuck: a process can be killed */
  channel_give(ps, ch, r != WAIT_CLOSED);
  const char *what = r == WAIT_TIMEOUT  ? "did not finish within the timeout and was killed, "
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
static void store_error(procset *ps, int w, long pid, char *payload,
                        uint64_t len, char *msg, size_t msg_len) {
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

static void send_failed(procset *ps, channel *ch, int e,
                        const pl_batch_info *info, const char *samples,
                        char *msg, size_t msg_len) {
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

static void no_longer_running(procset *ps, channel *ch, char *msg,
                              size_t msg_len) {
  int w = (int)(ch - ps->ch);
  channel_give(ps, ch, 1);
  snprintf(msg, msg_len,
           "worker %d (pid %ld) is no longer running [pinloader-died %d]", w,
           ch->pid, w);
}

/* ------------------------------------------------------------ split batches */

/* The first round of an iteration (jobs below the number of workers) is
 * split: each SPLIT_CHUNK samples of the batch go to the next idle worker,
 * so that the first batch is ready in a fraction of one worker's time
 * instead of all of it (the seeds' benchmark, 1,024 samples of about 100 us
 * on 6 workers: 100 ms become about 20), and the batches after it follow
 * one by one instead of all at once. Balanced workers' generators restart
 * at chunk boundaries whether a batch is split or not (_worker.seed_chunk),
 * so a split changes no sample. Only where a chunk's reply is nothing but
 * "done": fixed-shape samples (no pickled parts), no collate_fn (it sees
 * the whole batch), no timeout (progress records are per batch). */
static int split_wanted(const procset *ps, const pl_batch_info *info,
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
  int failed; /* msg holds the first failure; later ones are dropped */
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
  wait_result r = read_reply(s->ps, p.ch, s->info, s->dst, &rh, &payload, &err_no);
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
static int read_split(procset *ps, const uint64_t *indices, uint32_t n,
                      const pl_batch_info *info, const pl_batch_dst *dst,
                      char *msg, size_t msg_len) {
  splitter s = {ps, indices, n, 0, info, dst, NULL, 0, 0, -1, msg, {0}, msg_len};
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
    } else if (!s.failed) { /* the workers are busy, or an earlier batch waits */
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
      snprintf(msg + used, msg_len - used, "; a worker died too [pinloader-died %d]",
               s.later_died);
  }
  free(s.parts);
  free(got);
  free(pf);
  return s.failed ? 1 : 0;
}

/* ------------------------------------------------------------ one batch */

static int ps_read_batch(void *user, const uint64_t *indices, uint32_t n,
                         const pl_batch_info *info, const pl_batch_dst *dst,
                         char *msg, size_t msg_len) {
  ProcSetObject *owner = user;
  procset *ps = owner->ps;
  if (owner->filler)
    return local_read_batch(owner, indices, n, info, dst, msg, msg_len);
  if (dst->fd < 0) {
    snprintf(msg, msg_len, "the batch memory is not shared (no memfd)");
    return 1;
  }
  if (split_wanted(ps, info, dst)) {
    int r = read_split(ps, indices, n, info, dst, msg, msg_len);
    if (r >= 0)
      return r;
  }
  channel *ch = channel_take(ps, info, dst);
  if (!ch) {
    snprintf(msg, msg_len, "the loader's worker processes were shut down");
    return 1;
  }
  if (ch == STALE_CHANNEL) {
    snprintf(msg, msg_len, "a batch of an abandoned stream (not read)");
    return 1;
  }
  int w = (int)(ch - ps->ch);
  if (ch->dead) { /* read without the lock: only its own holder writes it */
    no_longer_running(ps, ch, msg, msg_len);
    return 1;
  }
  char samples[160];
  describe_samples(indices, n, samples, sizeof samples);
  int e = send_fill(ps, ch, indices, n, 0, info, dst);
  if (e) {
    send_failed(ps, ch, e, info, samples, msg, msg_len);
    return 1;
  }
  rep_head rh;
  char *payload;
  int err_no = 0;
  wait_result r = read_reply(ps, ch, info, dst, &rh, &payload, &err_no);
  if (r != WAIT_OK) {
    wait_failed(ps, ch, r, err_no, info, samples, msg, msg_len);
    return 1;
  }
  channel_give(ps, ch, 0);
  if (rh.status == REP_OK) {
    if (payload)
      blob_put(ps, BLOB_EXTRA, info->stream, info->epoch, info->batch_index,
               payload, (size_t)rh.len);
    return 0;
  }
  store_error(ps, w, ch->pid, payload, rh.len, msg, msg_len);
  return 1;
}

/* ------------------------------------------------------------ ProcSet */

static void procset_shutdown(procset *ps) {
  pthread_mutex_lock(&ps->mu);
  ps->closing = 1;
  pthread_cond_broadcast(&ps->cv);
  pthread_mutex_unlock(&ps->mu);
  /* The processes read EOF and exit; a thread polling sees POLLHUP. */
  for (int i = 0; i < ps->n; i++)
    if (ps->ch[i].sock >= 0)
      shutdown(ps->ch[i].sock, SHUT_RDWR);
}

static void procset_free(procset *ps) {
  if (!ps)
    return;
  procset_shutdown(ps);
  for (int i = 0; i < ps->n; i++) {
    if (ps->ch[i].sock >= 0)
      close(ps->ch[i].sock);
    if (ps->ch[i].sentinel >= 0)
      close(ps->ch[i].sentinel);
  }
  while (ps->blobs) {
    blob *b = ps->blobs;
    ps->blobs = b->next;
    free(b);
  }
  pthread_mutex_destroy(&ps->mu);
  pthread_cond_destroy(&ps->cv);
  free(ps->ch);
  free(ps);
}

static void procset_dealloc(ProcSetObject *self) {
  procset *ps = self->ps;
  self->ps = NULL;
  if (self->pid != (long)getpid())
    ps = NULL; /* inherited by fork: shutting its sockets would cut the
                  parent's workers off; leave it (and its fds) alone */
  Py_CLEAR(self->filler);
  Py_CLEAR(self->local_errors);
  procset_free(ps);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ProcSet(socks, sentinels, pids, filler=None, balanced=False,
 * split=False, ready=None): takes copies (dup) of the fds; with a filler and no
 * processes, batches are filled in-process; balanced: any idle worker
 * takes the next batch (else batch k goes to worker k % n, as torch's);
 * split (balanced only): the first round's batches may be split in chunks
 * over idle workers (read_split), for batches that are fixed-shape arrays
 * with no collate_fn; ready: per worker, whether its "ready" reply has been
 * read (default: all); one that has not gets no batch until set_ready. */
static PyObject *procset_new(PyTypeObject *type, PyObject *args,
                             PyObject *kw) {
  static char *names[] = {"socks", "sentinels", "pids", "filler", "balanced",
                          "split", "ready", NULL};
  PyObject *socks, *sents, *pids, *filler = Py_None, *ready = Py_None;
  int balanced = 0, split = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OppO:ProcSet", names, &socks,
                                   &sents, &pids, &filler, &balanced, &split,
                                   &ready))
    return NULL;
  Py_ssize_t n = PySequence_Size(socks);
  Py_ssize_t least = filler != Py_None ? 0 : 1;
  if (n < least || n > 4096 || PySequence_Size(sents) != n ||
      PySequence_Size(pids) != n ||
      (ready != Py_None && PySequence_Size(ready) != n)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError,
                      "socks, sentinels, pids (and ready): one per worker "
                      "(1 to 4096)");
    return NULL;
  }
  procset *ps = calloc(1, sizeof *ps);
  if (ps)
    ps->ch = calloc((size_t)n, sizeof *ps->ch);
  if (!ps || !ps->ch) {
    free(ps);
    return PyErr_NoMemory();
  }
  pthread_mutex_init(&ps->mu, NULL);
  pthread_cond_init(&ps->cv, NULL);
  ps->n = (int)n;
  ps->balanced = balanced;
  ps->split = balanced && split;
  for (Py_ssize_t i = 0; i < n; i++)
    ps->ch[i].sock = ps->ch[i].sentinel = -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *a = PySequence_GetItem(socks, i);
    PyObject *b = a ? PySequence_GetItem(sents, i) : NULL;
    PyObject *c = b ? PySequence_GetItem(pids, i) : NULL;
    long fa = a ? PyLong_AsLong(a) : -1, fb = b ? PyLong_AsLong(b) : -1;
    long pid = c ? PyLong_AsLong(c) : -1;
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    if (PyErr_Occurred()) {
      procset_free(ps);
      return NULL;
    }
    int is_ready = 1;
    if (ready != Py_None) {
      PyObject *r = PySequence_GetItem(ready, i);
      is_ready = r ? PyObject_IsTrue(r) : -1;
      Py_XDECREF(r);
      if (is_ready < 0) {
        procset_free(ps);
        return NULL;
      }
    }
    ps->ch[i].ready = is_ready;
    ps->ch[i].sock = fcntl_dup(fa);
    ps->ch[i].sentinel = fb >= 0 ? fcntl_dup(fb) : -1;
    ps->ch[i].pid = pid;
    if (ps->ch[i].sock < 0 || (fb >= 0 && ps->ch[i].sentinel < 0)) {
      PyErr_SetFromErrno(PyExc_OSError);
      procset_free(ps);
      return NULL;
    }
  }
  ProcSetObject *self = (ProcSetObject *)type->tp_alloc(type, 0);
  if (!self) {
    procset_free(ps);
    return NULL;
  }
  self->ps = ps;
  self->pid = (long)getpid();
  if (filler != Py_None) {
    self->local_errors = PyDict_New();
    if (!self->local_errors) {
      Py_DECREF(self);
      return NULL;
    }
    Py_INCREF(filler);
    self->filler = filler;
  }
  return (PyObject *)self;
}

static PyObject *blob_bytes(blob *b) {
  if (!b)
    Py_RETURN_NONE;
  PyObject *r = PyBytes_FromStringAndSize(b->data, (Py_ssize_t)b->len);
  free(b);
  return r;
}

static PyObject *ps_take_error(ProcSetObject *self, PyObject *arg) {
  unsigned long long token = PyLong_AsUnsignedLongLong(arg);
  if (token == (unsigned long long)-1 && PyErr_Occurred())
    return NULL;
  if (self->local_errors) { /* the exception object itself */
    PyObject *exc = PyDict_GetItemWithError(self->local_errors, arg);
    if (!exc) {
      if (PyErr_Occurred())
        return NULL;
      Py_RETURN_NONE;
    }
    Py_INCREF(exc);
    if (PyDict_DelItem(self->local_errors, arg) < 0)
      PyErr_Clear();
    return exc;
  }
  return blob_bytes(blob_take(self->ps, BLOB_ERROR, token, 0, 0));
}

static PyObject *ps_take_extra(ProcSetObject *self, PyObject *args) {
  unsigned long long stream, epoch, index;
  if (!PyArg_ParseTuple(args, "KKK:take_extra", &stream, &epoch, &index))
    return NULL;
  return blob_bytes(blob_take(self->ps, BLOB_EXTRA, stream, epoch, index));
}

static PyObject *ps_clear_extras(ProcSetObject *self, PyObject *unused) {
  procset *ps = self->ps;
  pthread_mutex_lock(&ps->mu);
  for (blob **p = &ps->blobs; *p;) {
    if ((*p)->kind == BLOB_EXTRA) {
      blob *b = *p;
      *p = b->next;
      free(b);
    } else {
      p = &(*p)->next;
    }
  }
  pthread_mutex_unlock(&ps->mu);
  Py_RETURN_NONE;
}

static PyObject *ps_set_base_seed(ProcSetObject *self, PyObject *args) {
  unsigned long long epoch, seed;
  if (!PyArg_ParseTuple(args, "KK:set_base_seed", &epoch, &seed))
    return NULL;
  procset *ps = self->ps;
  pthread_mutex_lock(&ps->mu);
  if (ps->nseeds == EPOCH_SEEDS) { /* forget the oldest */
    memmove(ps->seed_epoch, ps->seed_epoch + 1, (EPOCH_SEEDS - 1) * 8);
    memmove(ps->seed_value, ps->seed_value + 1, (EPOCH_SEEDS - 1) * 8);
    ps->nseeds--;
  }
  ps->seed_epoch[ps->nseeds] = epoch;
  ps->seed_value[ps->nseeds++] = seed;
  pthread_mutex_unlock(&ps->mu);
  Py_RETURN_NONE;
}

static PyObject *ps_set_ready(ProcSetObject *self, PyObject *arg) {
  long w = PyLong_AsLong(arg);
  procset *ps = self->ps;
  if (w == -1 && PyErr_Occurred())
    return NULL;
  if (!ps || w < 0 || w >= ps->n) {
    PyErr_SetString(PyExc_IndexError, "no such worker");
    return NULL;
  }
  pthread_mutex_lock(&ps->mu);
  ps->ch[w].ready = 1;
  pthread_cond_broadcast(&ps->cv);
  pthread_mutex_unlock(&ps->mu);
  Py_RETURN_NONE;
}

static PyObject *ps_shutdown(ProcSetObject *self, PyObject *unused) {
  if (self->pid == (long)getpid())
    procset_shutdown(self->ps);
  Py_RETURN_NONE;
}

/* close(): after the loader is destroyed (no thread uses a channel any
 * more), the sockets and sentinels are closed now, not when the last batch
 * is released. */
static PyObject *ps_close(ProcSetObject *self, PyObject *unused) {
  procset *ps = self->ps;
  if (!ps || self->pid != (long)getpid())
    Py_RETURN_NONE;
  procset_shutdown(ps);
  pthread_mutex_lock(&ps->mu);
  for (int i = 0; i < ps->n; i++) {
    if (ps->ch[i].sock >= 0)
      close(ps->ch[i].sock);
    if (ps->ch[i].sentinel >= 0)
      close(ps->ch[i].sentinel);
    ps->ch[i].sock = ps->ch[i].sentinel = -1;
    ps->ch[i].dead = 1;
  }
  pthread_mutex_unlock(&ps->mu);
  Py_RETURN_NONE;
}

static PyObject *ps_dead(ProcSetObject *self, void *unused) {
  procset *ps = self->ps;
  PyObject *l = PyList_New(ps->n);
  pthread_mutex_lock(&ps->mu);
  for (int i = 0; l && i < ps->n; i++)
    PyList_SET_ITEM(l, i, PyBool_FromLong(ps->ch[i].dead));
  pthread_mutex_unlock(&ps->mu);
  return l;
}

static PyMethodDef ps_methods[] = {
    {"take_error", (PyCFunction)ps_take_error, METH_O,
     "take_error(token) -> bytes or None: a worker's pickled exception"},
    {"take_extra", (PyCFunction)ps_take_extra, METH_VARARGS,
     "take_extra(stream, epoch, batch_index) -> bytes or None: the pickled "
     "part of a batch"},
    {"clear_extras", (PyCFunction)ps_clear_extras, METH_NOARGS,
     "forget the pickled parts of batches not taken"},
    {"set_base_seed", (PyCFunction)ps_set_base_seed, METH_VARARGS,
     "set_base_seed(epoch, seed): workers reseed as torch's fresh workers "
     "do when their first batch of `epoch` arrives"},
    {"set_ready", (PyCFunction)ps_set_ready, METH_O,
     "set_ready(w): worker w's ready reply was read; it may get batches"},
    {"shutdown", (PyCFunction)ps_shutdown, METH_NOARGS,
     "close the workers' sockets: they exit; waiting batches fail"},
    {"close", (PyCFunction)ps_close, METH_NOARGS,
     "close the fds (after the loader is destroyed)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef ps_getset[] = {
    {"dead", (getter)ps_dead, NULL, "per worker: known to have exited", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ProcSetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinloader._pinloader.ProcSet",
    .tp_basicsize = sizeof(ProcSetObject),
    .tp_dealloc = (destructor)procset_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ProcSet(socks, sentinels, pids): the worker processes of one "
              "loader, as the batch callback talks to them",
    .tp_methods = ps_methods,
    .tp_getset = ps_getset,
    .tp_new = procset_new,
};

/* ------------------------------------------------------------ CPU clock */

/* User + system CPU seconds of a process, from /proc/PID/stat; -1 when it
 * cannot be read (gone, or no /proc). */
static double pid_cpu_s(long pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  unsigned long long ut, st;
  /* After the name: state ppid pgrp session tty tpgid flags minflt cminflt
   * majflt cmajflt utime stime. */
  if (!p || sscanf(p + 1, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu",
                   &ut, &st) != 2)
    return -1;
  long tck = sysconf(_SC_CLK_TCK);
  return (double)(ut + st) / (double)(tck > 0 ? tck : 100);
}

/* pl_worker_cpu_fn: the worker processes' CPU so far. A worker that ended
 * keeps its last reading (its pid may be another process's by now). */
static double ps_worker_cpu(void *user) {
  ProcSetObject *owner = user;
  procset *ps = owner->ps;
  if (!ps || owner->filler)
    return 0;
  double total = 0;
  for (int i = 0; i < ps->n; i++) {
    channel *ch = &ps->ch[i];
    pthread_mutex_lock(&ps->mu);
    int live = !ch->dead && !ps->closing;
    pthread_mutex_unlock(&ps->mu);
    double v = live ? pid_cpu_s(ch->pid) : -1; /* unlocked: a file read */
    pthread_mutex_lock(&ps->mu);
    if (v > ch->cpu_s && !ch->dead)
      ch->cpu_s = v;
    total += ch->cpu_s;
    pthread_mutex_unlock(&ps->mu);
  }
  return total;
}

/* ------------------------------------------------------------ dataset */

static void owner_free(void *user) {
  PyObject *o = user;
#if PY_VERSION_HEX >= 0x030D0000
  int fin = Py_IsFinalizing();
#else
  int fin = _Py_IsFinalizing();
#endif
  if (fin)
    return; /* dies with the interpreter */
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF(o);
  PyGILState_Release(g);
}

static int dtype_by_name(const char *name, pl_dtype *out) {
  for (int t = 0; t < PL_DTYPE_COUNT_; t++)
    if (strcmp(pl_dtype_name((pl_dtype)t), name) == 0) {
      *out = (pl_dtype)t;
      return 0;
    }
  PyErr_Format(PyExc_ValueError, "unknown dtype '%s'", name);
  return -1;
}

static int field_parse(PyObject *t, pl_field *f) {
  const char *name, *dtype;
  PyObject *shape;
  if (!PyArg_ParseTuple(t, "ssO", &name, &dtype, &shape))
    return -1;
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  if (dtype_by_name(dtype, &f->dtype) < 0)
    return -1;
  Py_ssize_t nd = PySequence_Size(shape);
  if (nd < 0 || nd > PL_MAX_DIMS) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError, "field '%s': at most %d dims", name,
                   PL_MAX_DIMS);
    return -1;
  }
  f->ndim = (int)nd;
  for (Py_ssize_t d = 0; d < nd; d++) {
    PyObject *v = PySequence_GetItem(shape, d);
    long long x = v ? PyLong_AsLongLong(v) : -1;
    Py_XDECREF(v);
    if (PyErr_Occurred())
      return -1;
    f->shape[d] = x;
  }
  return 0;
}

/* from_workers(procset, length, fields) -> Dataset whose batches the
 * worker processes fill. */
static PyObject *mod_from_workers(PyObject *m, PyObject *args) {
  PyObject *owner, *fields_obj;
  unsigned long long length;
  if (!PyArg_ParseTuple(args, "O!KO:from_workers", &ProcSetType, &owner,
                        &length, &fields_obj))
    return NULL;
  Py_ssize_t n = PySequence_Size(fields_obj);
  if (n < 1 || n > 4096) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "1 to 4096 fields (a sample with "
                      "no array-like leaf gets a placeholder field)");
    return NULL;
  }
  pl_field *fields = PyMem_Calloc((size_t)n, sizeof *fields);
  if (!fields)
    return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *t = PySequence_GetItem(fields_obj, i);
    int rc = t ? field_parse(t, &fields[i]) : -1;
    Py_XDECREF(t);
    if (rc < 0) {
      PyMem_Free(fields);
      return NULL;
    }
  }
  pl_dataset *ds = NULL;
  pl_error err;
  Py_INCREF(owner);
  int shared = ((ProcSetObject *)owner)->filler ? 0 : PL_BATCH_SHARED_MEMORY;
  pl_status s = pl_dataset_from_batch_callback(
      fields, (int)n, length, ps_read_batch, NULL, shared,
      owner, owner_free, &ds, &err);
  PyMem_Free(fields);
  if (s != PL_OK) {
    Py_DECREF(owner);
    return raise_pl(&err);
  }
  if (shared && pl_dataset_set_worker_cpu(ds, ps_worker_cpu, &err) != PL_OK) {
    pl_dataset_destroy(ds);
    return raise_pl(&err);
  }
  return dataset_wrap(ds, NULL);
}

/* die_with_parent(parent_pid) -> bool: a worker process asks for SIGKILL
 * when its parent goes (prctl PR_SET_PDEATHSIG), then checks the parent
 * did not go before it asked (elsewhere only that: the socket's EOF
 * tells the rest). False: the parent is gone already; the caller exits. */
static PyObject *mod_die_with_parent(PyObject *m, PyObject *arg) {
  long parent = PyLong_AsLong(arg);
  if (parent == -1 && PyErr_Occurred())
    return NULL;
#ifdef __linux__
  /* Refused (a seccomp profile): the socket's EOF is left to tell it. */
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
#endif
  return PyBool_FromLong((long)getppid() == parent);
}

static PyMethodDef worker_functions[] = {
    {"from_workers", mod_from_workers, METH_VARARGS,
     "from_workers(procset, length, fields) -> Dataset filled a batch at a "
     "time by worker processes"},
    {"die_with_parent", mod_die_with_parent, METH_O,
     "die_with_parent(parent_pid) -> bool: SIGKILL when the parent exits; "
     "False when it already has"},
    {NULL, NULL, 0, NULL}};

int pl_py_init_workers(PyObject *m) {
  if (PyType_Ready(&ProcSetType) < 0)
    return -1;
  Py_INCREF(&ProcSetType);
  if (PyModule_AddObject(m, "ProcSet", (PyObject *)&ProcSetType) < 0) {
    Py_DECREF(&ProcSetType);
    return -1;
  }
  return PyModule_AddFunctions(m, worker_functions);
}
