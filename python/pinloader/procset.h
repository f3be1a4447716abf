/* Worker processes for Python datasets: the parts' shared state.
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
 * The wire format is wire.h. The parts, each a file: procset.c (the
 * ProcSet type, the callback, from_workers), channels.c (which worker
 * reads which batch, and when; the kept blobs; failures), wire.c (requests
 * and replies), split.c (a batch split over idle workers), local_fill.c
 * (no processes: filled in this process), cpu_time.c (the workers' CPU
 * seconds). Calls go from procset.c down: split.c and wire.c call
 * channels.c, and nothing calls procset.c. */
#ifndef PL_PY_PROCSET_H
#define PL_PY_PROCSET_H

#include "module.h"
#include "wire.h"

#include <pthread.h>

#define WAIT_SLICE_MS 100
#define EPOCH_SEEDS 16

enum { BLOB_ERROR = 1, BLOB_EXTRA = 2 };

/* A loader thread waiting for a channel: batches reach a worker in their
 * order (stream, epoch, batch), so that its iterator (IterableDataset) and
 * its random state see them as a torch worker would. */
typedef struct waiter {
  struct waiter *next;
  uint64_t stream, epoch, batch;
} waiter;

typedef struct channel {
  waiter *waiting; /* [mu] */
  /* [mu] The stream it serves (a batch of an older one is stale). Its
   * batches come in claim order: the loader's calls take turns until each
   * is in this queue (PL_BATCH_IN_ORDER), so that a thread that claimed
   * later but ran faster cannot go first, nor a batch of the next epoch
   * before the last of this one. */
  uint64_t cur_stream;
  int served_any;
  int sock;     /* the parent's end of the worker's socket (owned) */
  int sentinel; /* readable once the process has exited (owned dup) */
  long pid;
  int busy; /* [mu] a loader thread talks to it */
  /* [mu] Its "ready" reply has been read (set_ready): the loader may be
   * made while the last workers still start, and waits for them here. */
  int ready;
  int dead;     /* [mu] exited, killed, or its stream broke */
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
  int balanced; /* any idle worker takes the next batch */
  int split;    /* the first round's batches may be split (read_split) */
  /* [mu] Split batches go out in job order: the first job of split_stream
   * that has not yet sent all its chunks (a later one waits for it). */
  uint64_t split_stream, split_next;
  waiter *waiting; /* [mu] balanced: threads waiting for any worker */
  /* [mu] balanced: the newest stream a batch came from; a batch of an
   * older one was abandoned by the loader (a new epoch, an explicit order)
   * and is not read. */
  uint64_t newest_stream;
  channel *ch;
  blob *blobs;                                               /* [mu] */
  uint64_t next_token;                                       /* [mu] */
  uint64_t seed_epoch[EPOCH_SEEDS], seed_value[EPOCH_SEEDS]; /* [mu] */
  int nseeds;                                                /* [mu] */
} procset;

typedef struct {
  PyObject_HEAD procset *ps;
  long pid; /* the process that made it: a forked child's copy is inert */
  /* No processes (worker_mode="thread", num_workers=0): filler.fill_local
   * runs under the GIL on the loader's threads; its exceptions are kept
   * as themselves in local_errors, by token. */
  PyObject *filler;
  PyObject *local_errors;
} ProcSetObject;

typedef enum {
  WAIT_OK,
  WAIT_DIED,
  WAIT_TIMEOUT,
  WAIT_CLOSED,
  WAIT_BROKEN
} wait_result;

/* channel_take's answer for a batch of a stream the worker has left. */
extern const channel stale_channel; /* never read or written */
#define STALE_CHANNEL ((channel *)&stale_channel)

/* channels.c. blobs: kept by (kind, keys) under mu; put takes data
 * (malloc'd); take returns one to free, or NULL. */
void blob_put(procset *ps, int kind, uint64_t k1, uint64_t k2, uint64_t k3,
              char *data, size_t len);
blob *blob_take(procset *ps, int kind, uint64_t k1, uint64_t k2, uint64_t k3);
double now_s(void);
int is_closing(procset *ps);
/* [mu]: whether no waiter in list goes before me; wait a while on cv;
 * take me off the list; an idle live worker (balanced); whether the batch
 * is wanted no more. */
int first_waiting_in(const waiter *list, const waiter *me);
void wait_briefly(procset *ps);
void unlink_waiter(waiter **list, const waiter *me);
channel *idle_channel(procset *ps);
int batch_abandoned(procset *ps, const pl_batch_info *info,
                    const pl_batch_dst *dst);
/* The batch's channel, busy for the caller (NULL: closing;
 * STALE_CHANNEL: abandoned); given back, dead or not. */
channel *channel_take(procset *ps, const pl_batch_info *info,
                      const pl_batch_dst *dst);
void channel_give(procset *ps, channel *ch, int dead);
uint64_t base_seed_of(procset *ps, uint64_t epoch, int *found);
void describe_samples(const uint64_t *idx, uint32_t n, char *out, size_t cap);
/* Failures: ch given back, msg saying what became of the worker. */
void wait_failed(procset *ps, channel *ch, wait_result r, int err_no,
                 const pl_batch_info *info, const char *samples, char *msg,
                 size_t msg_len);
void store_error(procset *ps, int w, long pid, char *payload, uint64_t len,
                 char *msg, size_t msg_len);
void send_failed(procset *ps, channel *ch, int e, const pl_batch_info *info,
                 const char *samples, char *msg, size_t msg_len);
void no_longer_running(procset *ps, channel *ch, char *msg, size_t msg_len);

/* wire.c: a fill request for samples indices[0..n-1] at batch positions
 * first.. (0, an errno, or -1: no memory); the reply it gets. */
int send_fill(procset *ps, channel *ch, const uint64_t *indices, uint32_t n,
              uint32_t first, const pl_batch_info *info,
              const pl_batch_dst *dst);
wait_result read_reply(procset *ps, channel *ch, const pl_batch_info *info,
                       const pl_batch_dst *dst, rep_head *rh, char **payload,
                       int *err_no);

/* split.c: whether a batch is split; the split fill (0, 1: msg says why,
 * -1: fill it whole instead). */
int split_wanted(const procset *ps, const pl_batch_info *info,
                 const pl_batch_dst *dst);
int read_split(procset *ps, const uint64_t *indices, uint32_t n,
               const pl_batch_info *info, const pl_batch_dst *dst, char *msg,
               size_t msg_len);

/* local_fill.c: the batch filled in this process (filler.fill_local). */
int local_read_batch(ProcSetObject *owner, const uint64_t *indices, uint32_t n,
                     const pl_batch_info *info, const pl_batch_dst *dst,
                     char *msg, size_t msg_len);

/* wire.c: _pinloader.WIRE, the wire format's constants. */
int pl_py_init_wire(PyObject *m);

/* cpu_time.c: pl_worker_cpu_fn over the processes. */
double ps_worker_cpu(void *user);

#endif /* PL_PY_PROCSET_H */
