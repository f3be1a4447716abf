/* The loader: configuration, the job stream, the workers and the consumer.
 * Read loader_internal.h first: it states the ownership and locking rules
 * this file follows. */
#include "loader/loader_internal.h"

#include "core/options.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* ------------------------------------------------------------ config */

/* The options against the table; then what only the dataset can tell. */
static pl_status validate(const pl_dataset *ds, const pl_loader_config *cfg,
                          pl_error *err) {
  PL_TRY(pl_options_check(cfg, err));
  /* As torch (whose single-process iterator asserts timeout == 0), but
   * said at create: with no workers the consumer reads the samples in its
   * own thread, and nothing is left to watch the clock. */
  if (cfg->timeout_s > 0 && cfg->num_workers == 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "timeout_s %g needs num_workers >= 1: with 0 workers "
                     "samples are read in the calling thread, where no "
                     "timeout can interrupt them",
                     cfg->timeout_s);
  uint64_t bytes;
  if (!pl_mul_u64(cfg->batch_size, ds->sample_bytes, &bytes) ||
      bytes > (1ull << 46))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "a batch of %u samples of %llu bytes is too large",
                     cfg->batch_size, (unsigned long long)ds->sample_bytes);
  return PL_OK;
}

/* ------------------------------------------------------------ job stream */

static int slot_is_stale(const pl_core *c, const pl_batch *b) {
  return b->gen != c->gen || b->job < c->next_deliver;
}

/* Finished, undelivered buffers of stale jobs go back to the free list;
 * buffers still being filled are freed by their filler. [mu] */
static void drop_stale(pl_core *c) {
  for (int i = 0; i < c->nslots; i++) {
    pl_batch *b = c->slots[i];
    if ((b->state == SLOT_READY || b->state == SLOT_FAILED) &&
        slot_is_stale(c, b))
      b->state = SLOT_FREE;
  }
  pl_wake_all_workers(c);
}

void pl_core_restart(pl_core *c, uint64_t epoch, uint64_t start) {
  pl_order_unref(c->order);
  pl_order_unref(c->then);
  c->order = c->then = NULL;
  c->base = 0;
  pl_sampler_plan(&c->sampler, 0, 0, &c->full);
  pl_sampler_plan(&c->sampler, epoch, start, &c->first);
  if (c->first.num_batches == 0 && start > 0 && c->full.num_batches > 0)
    pl_sampler_plan(&c->sampler, ++epoch, 0, &c->first);
  if (c->cfg.explicit_order) /* an empty explicit epoch until set_order */
    c->first.start = c->first.per_rank = c->first.num_batches = 0;
  c->gen++;
  atomic_store_explicit(&c->gen_now, c->gen, memory_order_relaxed);
  c->next_claim = c->next_deliver = 0;
  c->end_pending = 0;
  c->cur_epoch = epoch;
  drop_stale(c);
}

/* The consumer gave up on the rest of `epoch` (an error): the next
 * delivery is the next epoch's first batch. Never backwards: the epoch may
 * have been delivered to its end and dropped meanwhile (a queue_order while
 * deliver had the lock released). */
static void skip_epoch(pl_core *c, uint64_t epoch) {
  uint64_t next = pl_core_epoch_first_job(c, epoch + 1);
  if (c->next_deliver < next)
    c->next_deliver = next;
  if (c->next_claim < c->next_deliver)
    c->next_claim = c->next_deliver;
  if (c->cur_epoch < epoch + 1)
    c->cur_epoch = epoch + 1;
  drop_stale(c);
}

/* ------------------------------------------------------------ filling */

static pl_batch *find_free(pl_core *c) {
  for (int i = 0; i < c->nslots; i++)
    if (c->slots[i]->state == SLOT_FREE)
      return c->slots[i];
  return NULL;
}

static pl_batch *find_job(pl_core *c, uint64_t job) {
  for (int i = 0; i < c->nslots; i++) {
    pl_batch *b = c->slots[i];
    if (b->gen == c->gen && b->job == job && b->state != SLOT_FREE &&
        b->state != SLOT_HELD && b->state != SLOT_CACHED)
      return b;
  }
  return NULL;
}

/* Claims the next job into a free buffer. [mu] The sample indices are
 * computed later, by the filler, outside the lock. */
static pl_batch *claim(pl_core *c, pl_batch *b) {
  assert(b->state == SLOT_FREE);
  b->state = SLOT_FILLING;
  b->gen = c->gen;
  b->job = c->next_claim++;
  pl_order *order;
  pl_core_job_locate(c, b->job, &b->index, &b->plan, &order);
  b->epoch = b->plan.epoch;
  pl_order_unref(b->order);
  b->order = pl_order_ref(order);
  b->size = b->order ? pl_order_batch_size(b->order, b->index)
                     : pl_sampler_batch_size(&c->sampler, &b->plan, b->index);
  atomic_store_explicit(&b->cur_t0, 0.0, memory_order_relaxed);
  pl_error_clear(&b->err);
  return b;
}

/* Publishes a filled buffer. [mu] */
static void publish(pl_core *c, pl_batch *b) {
  assert(b->state == SLOT_FILLING);
  if (slot_is_stale(c, b)) {
    b->state = SLOT_FREE;
    pl_wake_worker(c);
    return;
  }
  b->state = b->err.status == PL_OK ? SLOT_READY : SLOT_FAILED;
  pthread_cond_signal(&c->ready_cv); /* one consumer at a time */
}

static int claimable(const pl_core *c) {
  return !c->replay.active && pl_core_job_exists(c, c->next_claim) &&
         c->next_claim - c->next_deliver < (uint64_t)c->prefetch;
}

/* What a worker about to wait is waiting for (timing.h), judged once as
 * it begins: a parked worker's time counts nowhere. [mu] */
static pl_stage wait_stage(pl_core *c, int id) {
  if (!c->tm.on || !pl_worker_active(c, id))
    return PL_ST_COUNT_;
  return claimable(c) && !find_free(c) ? PL_ST_BUFWAIT : PL_ST_IDLE;
}

static void *worker_main(void *arg) {
  pl_worker *w = arg;
  pl_core *c = w->core;
  int id = atomic_fetch_add(&c->worker_ids, 1);
  pthread_mutex_lock(&c->mu);
  for (;;) {
    pl_batch *b = NULL;
    pl_stage waiting = wait_stage(c, id);
    double t = pl_stage_now(&c->tm);
    while (!c->stop && !(pl_worker_active(c, id) && claimable(c) &&
                         (b = find_free(c))))
      pthread_cond_wait(pl_worker_active(c, id) ? &c->work_cv : &c->park_cv,
                        &c->mu);
    if (c->stop)
      break;
    claim(c, b);
    pthread_mutex_unlock(&c->mu);
    if (waiting != PL_ST_COUNT_)
      pl_stage_add(&c->tm, waiting, t);
    pl_fill(c, b);
    pthread_mutex_lock(&c->mu);
    publish(c, b);
  }
  /* Destroy may have detached this thread (stuck in a callback): the
   * reference it holds kept the core alive until now. */
  w->exited = 1;
  pthread_cond_broadcast(&c->ready_cv);
  int last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last)
    pl_core_free(c);
  return NULL;
}

/* ------------------------------------------------------------ the pool */

static void slot_free(pl_core *c, pl_batch *b) {
  if (b->mem.data || b->mem.priv)
    c->be->vt->buf_free(c->be, &b->mem);
  pl_order_unref(b->order);
  free(b->spans);
  free(b->sample_idx);
  free(b);
}

static pl_status slot_new(pl_core *c, pl_batch **out, pl_error *err) {
  pl_batch *b = pl_calloc(1, sizeof *b);
  if (b)
    b->sample_idx = pl_calloc(c->cfg.batch_size, sizeof *b->sample_idx);
  if (b && b->sample_idx)
    b->spans = pl_calloc((size_t)c->copy.max_spans, sizeof *b->spans);
  if (!b || !b->sample_idx || !b->spans) {
    if (b) {
      free(b->spans);
      free(b->sample_idx);
    }
    free(b);
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for a batch");
  }
  b->core = c;
  b->mem.bytes = c->mem_bytes;
  b->mem.host_fd = -1;
  pl_status s = c->be->vt->buf_alloc(c->be, &b->mem, err);
  if (s != PL_OK) {
    free(b->spans);
    free(b->sample_idx);
    free(b);
    return s;
  }
  *out = b;
  return PL_OK;
}

/* Adds one buffer to the pool; called by the consumer, lock held on entry
 * and exit, released while allocating. */
static pl_status grow(pl_core *c, pl_error *err) {
  c->growing++;
  pthread_mutex_unlock(&c->mu);
  pl_batch *b = NULL;
  pl_status s = slot_new(c, &b, err);
  pthread_mutex_lock(&c->mu);
  c->growing--;
  if (s == PL_OK) {
    c->slots[c->nslots++] = b;
    pl_wake_all_workers(c);
  }
  return s;
}

void pl_core_free(pl_core *c) {
  for (int i = 0; i < c->nslots; i++)
    slot_free(c, c->slots[i]);
  if (c->be)
    c->be->vt->destroy(c->be);
  pl_dataset_destroy(c->ds);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->work_cv);
  pthread_cond_destroy(&c->park_cv);
  pthread_cond_destroy(&c->ready_cv);
  free(c->slots);
  free(c->workers);
  pl_order_unref(c->order);
  pl_order_unref(c->then);
  pl_replay_free(c);
  pl_copy_plan_free(&c->copy);
  pl_xform_plan_free(c->xf);
  free(c->out_off);
  free(c->out_bytes);
  free(c);
}

void pl_core_unref(pl_core *c) {
  pthread_mutex_lock(&c->mu);
  assert(c->refs > 0);
  int last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last)
    pl_core_free(c);
}

/* ------------------------------------------------------------ create */

static void direct_off(pl_core *c, const char *why) {
  pl_log(&c->log, PL_LOG_INFO,
         "copies straight from the dataset's memory are off: %s", why);
}

static pl_plan_request plan_request(const pl_core *c) {
  const pl_loader_config *cfg = &c->cfg;
  return (pl_plan_request){
      .ds = c->ds,
      .batch_size = cfg->batch_size,
      .num_workers = cfg->num_workers,
      /* Auto: staging for the deepest prefetch the tuner may reach. */
      .prefetch = PL_MAX(c->prefetch, c->tune.prefetch_max),
      .pin_memory = cfg->pin_memory,
      .pinned_budget = cfg->pinned_budget,
      /* A whole-batch dataset (source_batch_callback.c) fills a batch in one
       * call: WHOLE, never chunked or direct; its workers may be processes
       * that need the memory shared. */
      .copy_chunk_bytes = c->ds->vt->read_batch ? UINT64_MAX
                                                : cfg->copy_chunk_bytes,
      .direct_copy = c->ds->vt->read_batch ? 0 : cfg->direct_copy,
      .shared_memory =
          c->ds->vt->shared_memory && c->ds->vt->shared_memory(c->ds),
      .extra_sample_bytes = c->xf ? (uint64_t)c->xf->nparams *
                                        sizeof(pl_xform_params)
                                  : 0,
  };
}

/* The delivered layout, after the plan's staged one: with transforms a
 * batch buffer holds the staged bytes, then (from out_base) the delivered
 * arrays; without, the two are one. Tells the plan's fields where they
 * lie in both. */
static void delivered_layout(pl_core *c) {
  const pl_copy_plan *p = &c->copy;
  uint64_t end = 0;
  for (int f = 0; f < c->ds->nfields; f++) {
    if (!c->xf) {
      c->out_off[f] = p->fields[f].batch_off;
      c->out_bytes[f] = p->fields[f].bytes;
      continue;
    }
    c->out_off[f] = pl_align_up(end, 256);
    c->out_bytes[f] = pl_field_bytes(&c->xf->out_fields[f]);
    end = c->out_off[f] + (uint64_t)p->batch_size * c->out_bytes[f];
  }
  c->out_base = c->xf ? pl_align_up(p->batch_bytes, 256) : 0;
  c->mem_bytes = c->xf ? c->out_base + PL_MAX(end, 1) : p->batch_bytes;
  for (int i = 0; c->xf && i < c->xf->n; i++) {
    c->xf->f[i].in_off = p->fields[c->xf->f[i].field].batch_off;
    c->xf->f[i].out_off = c->out_off[c->xf->f[i].field];
  }
  if (c->xf && c->xf->nparams)
    c->xf->params_off = p->fields[c->ds->nfields].batch_off;
}

/* What the plan that was kept says about direct mode. */
static void log_plan(pl_core *c, double seconds) {
  const pl_copy_plan *p = &c->copy;
  if (p->why_not_direct[0])
    direct_off(c, p->why_not_direct);
  if (p->mode != PL_PLAN_DIRECT)
    return;
  pl_log(&c->log, PL_LOG_INFO,
         "%llu bytes of dataset memory page-locked in place (%d region%s, "
         "%.2f s): samples of 64 KiB and more are copied from it, with no "
         "gather",
         (unsigned long long)p->region_bytes, p->nregions,
         p->nregions == 1 ? "" : "s", seconds);
}

static pl_status create_backend(pl_core *c, pl_device_kind kind,
                                pl_error *err) {
  const pl_loader_config *cfg = &c->cfg;
  pl_backend_config bc = {
      .device_index = cfg->device_index,
      .pin_memory = cfg->pin_memory,
      .non_blocking = cfg->non_blocking,
      .plan = &c->copy,
      .log = &c->log,
      .xform = c->xf,
      .xform_out_off = c->out_base,
      .xform_buf_bytes = c->mem_bytes,
  };
  c->xf_host = c->xf && kind == PL_DEVICE_CPU;
  return kind == PL_DEVICE_CPU ? pl_backend_cpu_create(&bc, &c->be, err)
                               : pl_backend_cuda_create(&bc, &c->be, err);
}

/* The copy plan for this kind of backend, then the backend made with it.
 * One fallback: a direct plan whose dataset memory the driver will not
 * page-lock (another process holds it, say) is planned again without
 * direct mode, and the log says why. */
static pl_status plan_and_create(pl_core *c, pl_device_kind kind,
                                 pl_error *err) {
  pl_backend_caps caps = kind == PL_DEVICE_CPU ? pl_backend_cpu_caps()
                                               : pl_backend_cuda_caps();
  pl_plan_request req = plan_request(c);
  pl_copy_plan_free(&c->copy);
  PL_TRY(pl_copy_plan_make(&caps, &req, &c->copy, err));
  delivered_layout(c);
  double t0 = pl_now();
  pl_status s = create_backend(c, kind, err);
  if (s != PL_OK && c->copy.mode == PL_PLAN_DIRECT && s != PL_NO_DEVICE &&
      s != PL_UNSUPPORTED) {
    direct_off(c, err ? err->message : pl_status_str(s));
    pl_error_clear(err);
    req.direct_copy = 0;
    pl_copy_plan_free(&c->copy);
    PL_TRY(pl_copy_plan_make(&caps, &req, &c->copy, err));
    delivered_layout(c);
    s = create_backend(c, kind, err);
  }
  if (s == PL_OK)
    log_plan(c, pl_now() - t0);
  return s;
}

/* CUDA, or (device AUTO) the CPU with a notice when there is none. */
static pl_status open_backend(pl_core *c, pl_error *err) {
  const pl_loader_config *cfg = &c->cfg;
  if (cfg->device == PL_DEVICE_CPU)
    return plan_and_create(c, PL_DEVICE_CPU, err);
  pl_status s = plan_and_create(c, PL_DEVICE_CUDA, err);
  if (s == PL_OK || cfg->device == PL_DEVICE_CUDA)
    return s;
  if (s != PL_NO_DEVICE && s != PL_UNSUPPORTED)
    return s;
  pl_log(&c->log, PL_LOG_INFO, "%s; using the CPU",
         err ? err->message : pl_status_str(s));
  pl_error_clear(err);
  return plan_and_create(c, PL_DEVICE_CPU, err);
}

static pl_status core_new(pl_dataset *ds, const pl_loader_config *cfg,
                          pl_core **out, pl_error *err) {
  pl_core *c = pl_calloc(1, sizeof *c);
  if (!c)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->work_cv, NULL);
  pthread_cond_init(&c->park_cv, NULL);
  pthread_cond_init(&c->ready_cv, NULL);
  c->refs = 1;
  c->pid = getpid();
  c->ds = pl_dataset_retain(ds);
  c->cfg = *cfg;
  c->log = (pl_logger){cfg->log, cfg->log_user, cfg->log_level};
  c->sampler = (pl_sampler){ds->length, cfg->shuffle,   cfg->seed,
                            cfg->rank,  cfg->world_size, cfg->batch_size,
                            cfg->drop_last, NULL, 0};
  if (ds->vt->shuffle_window && ds->vt->shuffle_window(ds)) { /* shards */
    c->sampler.blocks = ds;
    c->sampler.window = ds->vt->shuffle_window(ds);
  }
  pl_tune_setup(c); /* PL_AUTO: threads to start, a first depth */
  int w = c->cfg.num_workers;
  c->prefetch = c->cfg.prefetch ? c->cfg.prefetch : PL_MAX(2 * w, 2);
  c->max_slots = cfg->max_batch_buffers
                     ? (int)cfg->max_batch_buffers /* <= PL_MAX_BATCH_BUFFERS */
                     : PL_MAX(c->prefetch, c->tune.prefetch_max) + 2 + w;
  c->max_slots += (int)cfg->replay_batches; /* <= 65536, by the table */
  c->max_slots = PL_MAX(c->max_slots, 1);
  c->slots = pl_calloc((size_t)c->max_slots, sizeof *c->slots);
  *out = c;
  c->out_off = pl_calloc((size_t)PL_MAX(ds->nfields, 1), sizeof *c->out_off);
  c->out_bytes = pl_calloc((size_t)PL_MAX(ds->nfields, 1), sizeof *c->out_bytes);
  if (!c->slots || !c->out_off || !c->out_bytes)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  /* The plan keeps what it needs of the list: the caller's array may go. */
  PL_TRY(pl_xform_plan_new(ds->fields, ds->nfields, cfg->transforms,
                           cfg->num_transforms, &c->xf, err));
  c->cfg.transforms = NULL;
  c->cfg.num_transforms = 0;
  PL_TRY(pl_replay_setup(c, err));
  PL_TRY(open_backend(c, err));
  pl_timing_init(c);
  pl_core_restart(c, cfg->epoch, 0);
  /* The steady state needs prefetch buffers in flight plus the one the
   * consumer holds; more are added only if the consumer holds more. */
  int initial = PL_MIN(c->prefetch + 1, c->max_slots);
  for (int i = 0; i < initial; i++) {
    /* Count the slot only once it exists: pl_core_free frees nslots. */
    PL_TRY(slot_new(c, &c->slots[c->nslots], err));
    c->nslots++;
  }
  return PL_OK;
}

pl_status pl_core_forked(const pl_core *c, pl_error *err) {
  return pl_errorf(err, PL_BAD_STATE,
                   "this loader was created in process %d; a forked child "
                   "(process %d) cannot use it: create a new loader",
                   (int)c->pid, (int)getpid());
}

/* Waits on ready_cv until `deadline` (monotonic seconds). [mu] */
static void wait_until(pl_core *c, double deadline) {
  double rel = PL_MIN(deadline - pl_now(), 86400.0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + PL_MAX(rel, 0.0);
  ts.tv_sec = (time_t)at;
  ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
  pthread_cond_timedwait(&c->ready_cv, &c->mu, &ts);
}

static int workers_exited(const pl_core *c, int n) {
  int k = 0;
  for (int i = 0; i < n; i++)
    k += c->workers[i].exited;
  return k;
}

/* Stops the workers: each finishes the sample it is reading. With a
 * timeout_s, a worker still in its sample timeout_s later is stuck: it is
 * detached, not joined (it holds a core reference and exits when its
 * callback returns), so destroy returns in bounded time. */
static void stop_workers(pl_loader *ld) {
  pl_core *c = ld->core;
  int n = ld->nthreads;
  double timeout = c->cfg.timeout_s;
  double deadline = timeout > 0 ? pl_now() + timeout : INFINITY;
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pl_wake_all_workers(c);
  while (workers_exited(c, n) < n && pl_now() < deadline)
    if (deadline == INFINITY)
      pthread_cond_wait(&c->ready_cv, &c->mu);
    else
      wait_until(c, deadline);
  int done[PL_MAX_WORKERS];
  for (int i = 0; i < n; i++)
    done[i] = c->workers[i].exited;
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; i < n; i++) {
    if (done[i]) {
      pthread_join(c->workers[i].thread, NULL);
      continue;
    }
    pl_log(&c->log, PL_LOG_WARN,
           "worker %d is stuck in a sample callback for more than %.1f s: "
           "detached; it exits when the callback returns", i, timeout);
    pthread_detach(c->workers[i].thread);
  }
  ld->nthreads = 0;
}

static pl_status start_workers(pl_loader *ld, int n, pl_error *err) {
  pl_core *c = ld->core;
  c->workers = pl_calloc((size_t)PL_MAX(n, 1), sizeof *c->workers);
  if (!c->workers)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  c->nworkers = n;
  for (int i = 0; i < n; i++) {
    pl_worker *w = &c->workers[i];
    w->core = c;
    pthread_mutex_lock(&c->mu);
    c->refs++; /* the worker's own: see worker_main */
    pthread_mutex_unlock(&c->mu);
    int rc = PL_FAULT(PL_FAULT_THREAD_CREATE)
                 ? EAGAIN
                 : pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
      pthread_mutex_lock(&c->mu);
      c->refs--;
      pthread_mutex_unlock(&c->mu);
      return pl_errorf(err, PL_NO_MEMORY,
                       "starting worker %d of %d: %s", i + 1, n, strerror(rc));
    }
    ld->nthreads++;
  }
  return PL_OK;
}

pl_status pl_loader_create(pl_dataset *ds, const pl_loader_config *cfg,
                           pl_loader **out, pl_error *err) {
  pl_loader_config full;
  if (!out || !ds)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "dataset and out are required");
  *out = NULL;
  PL_TRY(pl_loader_config_upgrade(cfg, &full, err));
  cfg = &full;
  PL_TRY(validate(ds, cfg, err));
  pl_loader *ld = pl_calloc(1, sizeof *ld);
  if (!ld)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_status s = core_new(ds, cfg, &ld->core, err);
  if (s == PL_OK)
    s = start_workers(ld, ld->core->cfg.num_workers, err);
  if (s != PL_OK) {
    pl_loader_destroy(ld);
    return s;
  }
  *out = ld;
  return PL_OK;
}

void pl_loader_destroy(pl_loader *ld) {
  if (!ld)
    return;
  /* In a forked child the core belongs to the parent (its lock may be
   * held, its workers do not exist here): leave it alone. */
  if (ld->core && !pl_core_foreign(ld->core)) {
    stop_workers(ld);
    pl_core_unref(ld->core);
  }
  free(ld);
}

/* ------------------------------------------------------------ consumer */

/* The consumer is past b (delivered, or failed with error_ends_epoch 0):
 * the next delivery is the job after it, and the epoch's end is pending
 * when that job begins another epoch. [mu] */
static void step_past(pl_core *c, const pl_batch *b) {
  c->next_deliver = b->job + 1;
  if (c->next_claim < c->next_deliver)
    c->next_claim = c->next_deliver;
  c->cur_epoch = b->epoch;
  uint64_t next_b;
  pl_epoch_plan p;
  if (!pl_core_job_exists(c, c->next_deliver))
    c->end_pending = 1;
  else {
    pl_core_job_locate(c, c->next_deliver, &next_b, &p, NULL);
    c->end_pending = next_b == 0;
  }
  pl_wake_worker(c); /* one more job may be claimed */
}

static pl_status deliver(pl_core *c, pl_batch *b, pl_batch **out,
                         pl_error *err) {
  assert(b->state == SLOT_READY);
  b->state = SLOT_HELD;
  c->refs++;
  step_past(c, b);
  assert(c->refs >= 2); /* the loader handle and this batch */
  pthread_mutex_unlock(&c->mu);
  pl_status s = c->be->vt->deliver(c->be, &b->mem, err);
  pthread_mutex_lock(&c->mu);
  if (s != PL_OK) { /* the copy failed (sync mode): this epoch ends here */
    b->state = SLOT_FREE;
    c->refs--; /* the loader handle still holds one */
    c->end_pending = 0;
    skip_epoch(c, b->epoch);
    return s;
  }
  c->batches_delivered++;
  c->samples_delivered += b->size;
  for (int f = 0; f < c->ds->nfields; f++) /* as delivered: transformed */
    c->bytes_delivered += (uint64_t)b->size * c->out_bytes[f];
  *out = b;
  return PL_OK;
}

static pl_status take_failure(pl_core *c, pl_batch *b, pl_error *err) {
  assert(b->state == SLOT_FAILED && b->err.status != PL_OK);
  pl_status s = b->err.status;
  if (err)
    *err = b->err;
  b->state = SLOT_FREE;
  if (c->cfg.error_ends_epoch)
    skip_epoch(c, b->epoch);
  else /* only this batch is lost: the epoch goes on */
    step_past(c, b);
  return s;
}

/* A stalled sample: the job being waited for has spent more than
 * timeout_s on one sample. [mu] */
static pl_status check_stall(pl_core *c, pl_batch *b, pl_error *err) {
  double t0 = atomic_load_explicit(&b->cur_t0, memory_order_acquire);
  if (c->cfg.timeout_s <= 0 || t0 <= 0 || pl_now() - t0 <= c->cfg.timeout_s)
    return PL_OK;
  uint64_t idx = atomic_load_explicit(&b->cur_sample, memory_order_relaxed);
  pl_errorf(err, PL_TIMEOUT,
            "sample %llu: still loading after %.1f s (timeout %.1f s)",
            (unsigned long long)idx, pl_now() - t0, c->cfg.timeout_s);
  pl_error_set_sample(err, idx);
  skip_epoch(c, b->epoch);
  return PL_TIMEOUT;
}

static int all_held(const pl_core *c) {
  if (c->nslots + c->growing < c->max_slots)
    return 0;
  for (int i = 0; i < c->nslots; i++)
    if (c->slots[i]->state != SLOT_HELD && c->slots[i]->state != SLOT_CACHED)
      return 0;
  return 1;
}

/* With no workers the consumer fills the batch itself. [mu] */
static pl_status fill_here(pl_core *c, pl_batch *b, pl_error *err) {
  claim(c, b);
  pthread_mutex_unlock(&c->mu);
  pl_fill(c, b);
  pthread_mutex_lock(&c->mu);
  if (b->err.status == PL_NOT_READY && b->gen == c->gen) {
    /* pyworkers: the read was interrupted (PL_READ_INTERRUPTED): give the
     * job back, unfilled, for the next call. */
    b->state = SLOT_FREE;
    c->next_claim = b->job;
    if (err)
      *err = b->err;
    return PL_NOT_READY;
  }
  publish(c, b);
  return PL_OK;
}

/* Workers stuck in one sample for more than timeout_s (any job, also
 * abandoned ones), and the longest-running such sample. [mu] */
static int count_stuck(const pl_core *c, uint64_t *sample, double *secs) {
  int n = 0;
  double now = pl_now();
  *secs = 0;
  for (int i = 0; i < c->nslots; i++) {
    const pl_batch *b = c->slots[i];
    if (b->state != SLOT_FILLING)
      continue;
    double t0 = atomic_load_explicit(&b->cur_t0, memory_order_acquire);
    if (t0 <= 0 || now - t0 <= c->cfg.timeout_s)
      continue;
    n++;
    if (now - t0 > *secs) {
      *secs = now - t0;
      *sample = atomic_load_explicit(&b->cur_sample, memory_order_relaxed);
    }
  }
  return n;
}

/* With every worker stuck nothing can be loaded: say so instead of
 * waiting forever. Later calls say it again until a callback returns. */
static pl_status check_all_stuck(const pl_core *c, int workers,
                                 pl_error *err) {
  uint64_t idx = 0;
  double secs;
  workers = PL_MIN(workers, c->tune.active); /* autotuning parks the rest */
  if (c->cfg.timeout_s <= 0 || workers <= 0 ||
      count_stuck(c, &idx, &secs) < workers)
    return PL_OK;
  return pl_errorf(err, PL_TIMEOUT,
                   "all %d workers are stuck: sample %llu has been loading "
                   "for %.1f s (timeout %.1f s); nothing can be loaded until "
                   "a callback returns",
                   workers, (unsigned long long)idx, secs, c->cfg.timeout_s);
}

static void timed_wait(pl_core *c, double deadline) {
  double wake = deadline;
  if (c->cfg.timeout_s > 0) /* poll often enough to notice a stall */
    wake = PL_MIN(wake, pl_now() + PL_MIN(c->cfg.timeout_s / 4, 0.25));
  if (wake == INFINITY) {
    pthread_cond_wait(&c->ready_cv, &c->mu);
    return;
  }
  /* Condition variables use CLOCK_REALTIME; convert the monotonic wake.
   * A far deadline (wait_s = 1e300) would overflow time_t: the timedwait
   * then fails at once without ever releasing mu, so no worker could
   * publish, a hang. Wake at least daily; the caller rechecks the deadline. */
  double rel = PL_MIN(wake - pl_now(), 86400.0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + rel;
  if (at < 0)
    at = 0;
  ts.tv_sec = (time_t)at;
  ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
  pthread_cond_timedwait(&c->ready_cv, &c->mu, &ts);
}

static pl_status next_locked(pl_core *c, int workers, double deadline,
                             pl_batch **out, pl_error *err) {
  if (c->end_pending || !pl_core_job_exists(c, c->next_deliver)) {
    c->end_pending = 0;
    c->cur_epoch++;
    return PL_END_OF_EPOCH;
  }
  for (;;) {
    uint64_t job = c->next_deliver;
    pl_batch *b = find_job(c, job);
    if (b && b->state == SLOT_READY)
      return deliver(c, b, out, err);
    if (b && b->state == SLOT_FAILED)
      return take_failure(c, b, err);
    if (b)
      PL_TRY(check_stall(c, b, err));
    if (!b && c->next_claim == job) { /* nobody is filling it */
      pl_batch *f = find_free(c);
      if (!f && !all_held(c) && c->nslots + c->growing < c->max_slots) {
        PL_TRY(grow(c, err));
        continue;
      }
      if (!f && all_held(c))
        return pl_errorf(err, PL_EXHAUSTED,
                         "all %d batch buffers are held by the consumer: "
                         "release one (pl_batch_release) or raise "
                         "max_batch_buffers",
                         c->max_slots);
      if (f && workers == 0) {
        PL_TRY(fill_here(c, f, err));
        continue;
      }
    }
    PL_TRY(check_all_stuck(c, workers, err));
    if (pl_now() >= deadline)
      return pl_errorf(err, PL_NOT_READY, "no batch ready yet");
    timed_wait(c, deadline);
  }
}

pl_status pl_loader_next_timed(pl_loader *ld, double wait_s, pl_batch **out,
                               pl_error *err) {
  if (!ld || !out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader and out are required");
  *out = NULL;
  if (isnan(wait_s)) /* a NaN deadline: the same hang as in timed_wait */
    return pl_errorf(err, PL_INVALID_ARGUMENT, "wait_s is NaN");
  pl_core *c = ld->core;
  if (pl_core_foreign(c))
    return pl_core_forked(c, err);
  double t0 = pl_now();
  double deadline = wait_s < 0 ? INFINITY : t0 + wait_s;
  pthread_mutex_lock(&c->mu);
  pl_status s = c->replay.active
                    ? pl_replay_next(c, out, err)
                    : next_locked(c, ld->nthreads, deadline, out, err);
  if (s == PL_OK)
    pl_replay_on_deliver(c, *out);
  double now = pl_now();
  c->consumer_wait_s += now - t0;
  pl_timing_returned(c, t0, now, s == PL_OK ? *out : NULL);
  pthread_mutex_unlock(&c->mu);
  int want = pl_tune_tick(c);
  if (want > 0) { /* a deeper prefetch needs the buffers to fill */
    pthread_mutex_lock(&c->mu);
    while (c->nslots + c->growing < PL_MIN(want, c->max_slots) &&
           grow(c, NULL) == PL_OK)
      ;
    pthread_mutex_unlock(&c->mu);
  }
  return s;
}

pl_status pl_loader_next(pl_loader *ld, pl_batch **out, pl_error *err) {
  return pl_loader_next_timed(ld, -1, out, err);
}

/* The order a caller gives (set_order, queue_order), checked and copied. */
static pl_status order_given(pl_loader *ld, const uint64_t *indices,
                             const uint64_t *starts, uint64_t nbatches,
                             pl_order **out, pl_error *err) {
  if (!ld)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader is NULL");
  if (pl_core_foreign(ld->core))
    return pl_core_forked(ld->core, err);
  return pl_order_new(ld->core, indices, starts, nbatches, out, err);
}

/* The plan of an explicit epoch: all of o, from its first batch. */
static pl_epoch_plan explicit_plan(uint64_t epoch, const pl_order *o) {
  pl_epoch_plan p = {.epoch = epoch, .num_batches = o->nbatches};
  p.per_rank = o->nbatches ? o->starts[o->nbatches] : 0;
  return p;
}

/* An explicit epoch (loader_order.c holds the order itself). */
pl_status pl_loader_set_order(pl_loader *ld, uint64_t epoch,
                              const uint64_t *indices, const uint64_t *starts,
                              uint64_t nbatches, pl_error *err) {
  pl_order *o = NULL;
  PL_TRY(order_given(ld, indices, starts, nbatches, &o, err));
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  pl_core_restart(c, epoch, 0); /* drops any earlier order */
  c->order = o;
  c->first = explicit_plan(epoch, o);
  pl_wake_all_workers(c);
  pthread_mutex_unlock(&c->mu);
  return PL_OK;
}

/* The explicit epoch after first's, queued: its jobs follow first's in
 * the stream. The consumer already past first (every batch of it taken):
 * first is dropped, the queued epoch becomes first and `base` moves on to
 * its first job, so that o can be queued after it. Empty epochs are
 * refused on either side: an epoch's end is known by its last batch
 * (deliver), and an empty one has none. [mu] */
static pl_status queue_locked(pl_core *c, uint64_t epoch, pl_order *o,
                              pl_error *err) {
  if (!pl_core_explicit(c))
    return pl_errorf(err, PL_BAD_STATE,
                     "no explicit epoch to queue epoch %llu after "
                     "(pl_loader_set_order begins one)",
                     (unsigned long long)epoch);
  if (c->first.num_batches == 0 || o->nbatches == 0)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "epoch %llu is empty: an empty epoch is given by "
                     "pl_loader_set_order, never queued or followed",
                     (unsigned long long)(o->nbatches ? c->first.epoch
                                                      : epoch));
  if (c->then && c->next_deliver >= c->base + c->first.num_batches) {
    c->base += c->first.num_batches;
    pl_order_unref(c->order);
    c->order = c->then;
    c->first = c->second;
    c->then = NULL;
  }
  if (c->then)
    return pl_errorf(err, PL_BAD_STATE,
                     "epoch %llu is queued already, and the consumer has "
                     "not reached it",
                     (unsigned long long)c->second.epoch);
  if (epoch != c->first.epoch + 1)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "epoch %llu does not follow the explicit epoch %llu",
                     (unsigned long long)epoch,
                     (unsigned long long)c->first.epoch);
  c->then = o;
  c->second = explicit_plan(epoch, o);
  pl_wake_all_workers(c);
  return PL_OK;
}

pl_status pl_loader_queue_order(pl_loader *ld, uint64_t epoch,
                                const uint64_t *indices,
                                const uint64_t *starts, uint64_t nbatches,
                                pl_error *err) {
  pl_order *o = NULL;
  PL_TRY(order_given(ld, indices, starts, nbatches, &o, err));
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  pl_status s = queue_locked(c, epoch, o, err);
  pthread_mutex_unlock(&c->mu);
  if (s != PL_OK)
    pl_order_unref(o);
  return s;
}

pl_status pl_loader_set_epoch(pl_loader *ld, uint64_t epoch, pl_error *err) {
  if (!ld)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader is NULL");
  if (pl_core_foreign(ld->core))
    return pl_core_forked(ld->core, err);
  pthread_mutex_lock(&ld->core->mu);
  pl_core_restart(ld->core, epoch, 0);
  pthread_mutex_unlock(&ld->core->mu);
  return PL_OK;
}

uint64_t pl_loader_epoch(const pl_loader *ld) {
  if (!ld || pl_core_foreign(ld->core))
    return 0;
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  uint64_t e = c->cur_epoch;
  pthread_mutex_unlock(&c->mu);
  return e;
}

uint64_t pl_loader_num_batches(const pl_loader *ld) {
  return ld ? ld->core->full.num_batches : 0;
}

uint64_t pl_loader_num_samples(const pl_loader *ld) {
  if (!ld)
    return 0;
  const pl_core *c = ld->core;
  return c->sampler.drop_last
             ? c->full.num_batches * c->sampler.batch
             : c->full.per_rank;
}

void pl_loader_stats_get(const pl_loader *ld, pl_loader_stats *out) {
  memset(out, 0, sizeof *out);
  if (!ld || pl_core_foreign(ld->core))
    return;
  pl_core *c = ld->core;
  pthread_mutex_lock(&c->mu);
  out->batches_delivered = c->batches_delivered;
  out->samples_delivered = c->samples_delivered;
  out->bytes_delivered = c->bytes_delivered;
  out->consumer_wait_s = c->consumer_wait_s;
  out->batch_buffers = (uint64_t)c->nslots;
  pthread_mutex_unlock(&c->mu);
  out->batches_direct =
      atomic_load_explicit(&c->batches_direct, memory_order_relaxed);
  out->worker_busy_s =
      (double)atomic_load_explicit(&c->worker_busy_ns, memory_order_relaxed) *
      1e-9;
  c->be->vt->stats(c->be, out);
}

pl_device_kind pl_loader_device(const pl_loader *ld, int *index) {
  if (index)
    *index = ld ? ld->core->be->device_index : 0;
  return ld ? ld->core->be->kind : PL_DEVICE_CPU;
}

const char *pl_loader_device_name(const pl_loader *ld) {
  return ld ? ld->core->be->name : "none";
}

pl_status pl_loader_sync(pl_loader *ld, pl_error *err) {
  if (!ld)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader is required");
  if (pl_core_foreign(ld->core))
    return pl_core_forked(ld->core, err);
  pl_backend *be = ld->core->be;
  return be->vt->sync ? be->vt->sync(be, err) : PL_OK;
}
