/* pl_loader_create and pl_loader_destroy: the options checked, the core
 * made (sampler, tuning, pool sizes), the copy plan and the backend, the
 * delivered layout, then the workers. Read loader_internal.h first: it
 * states the ownership and locking rules. */
#include "loader/loader_internal.h"

#include "core/options.h"

#include <stdlib.h>

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

static void direct_off(pl_core *c, const char *why) {
  pl_log(&c->log, PL_LOG_INFO,
         "copies straight from the dataset's memory are off: %s", why);
}

static pl_plan_request plan_request(const pl_core *c) {
  const pl_loader_config *cfg = &c->cfg;
  return (pl_plan_request){
      .ds = c->ds,
      .batch_size = cfg->batch_size,
      .num_workers = c->tune.threads,
      /* Auto: staging for the deepest prefetch the tuner may reach. */
      .prefetch = c->tune.prefetch_max,
      .pin_memory = cfg->pin_memory,
      .pinned_budget = cfg->pinned_budget,
      /* A whole-batch dataset (source_batch_callback.c) fills a batch in one
       * call: WHOLE, never chunked or direct; its workers may be processes
       * that need the memory shared. */
      .copy_chunk_bytes =
          c->ds->vt->read_batch ? UINT64_MAX : cfg->copy_chunk_bytes,
      .direct_copy = c->ds->vt->read_batch ? 0 : cfg->direct_copy,
      .shared_memory =
          c->ds->vt->shared_memory && c->ds->vt->shared_memory(c->ds),
      .extra_sample_bytes = c->layout.xf ? (uint64_t)c->layout.xf->nparams *
                                               sizeof(pl_xform_params)
                                         : 0,
      .device_writes = c->ds->vt->read_batch_device != NULL,
  };
}

/* The delivered layout, after the plan's staged one: with transforms a
 * batch buffer holds the staged bytes, then (from out_base) the delivered
 * arrays; without, the two are one. Tells the plan's fields where they
 * lie in both. */
static void delivered_layout(pl_core *c) {
  const pl_copy_plan *p = &c->layout.copy;
  uint64_t end = 0;
  for (int f = 0; f < c->ds->nfields; f++) {
    if (!c->layout.xf) {
      c->layout.out_off[f] = p->fields[f].batch_off;
      c->layout.out_bytes[f] = p->fields[f].bytes;
      continue;
    }
    c->layout.out_off[f] = pl_align_up(end, 256);
    c->layout.out_bytes[f] = pl_field_bytes(&c->layout.xf->out_fields[f]);
    end =
        c->layout.out_off[f] + (uint64_t)p->batch_size * c->layout.out_bytes[f];
  }
  c->layout.out_base = c->layout.xf ? pl_align_up(p->batch_bytes, 256) : 0;
  c->layout.mem_bytes =
      c->layout.xf ? c->layout.out_base + PL_MAX(end, 1) : p->batch_bytes;
  for (int i = 0; c->layout.xf && i < c->layout.xf->n; i++) {
    c->layout.xf->f[i].in_off = p->fields[c->layout.xf->f[i].field].batch_off;
    c->layout.xf->f[i].out_off = c->layout.out_off[c->layout.xf->f[i].field];
  }
  if (c->layout.xf && c->layout.xf->nparams)
    c->layout.xf->params_off = p->fields[c->ds->nfields].batch_off;
}

/* What the plan that was kept says about direct mode. */
static void log_plan(pl_core *c, double seconds) {
  const pl_copy_plan *p = &c->layout.copy;
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
      .plan = &c->layout.copy,
      .log = &c->log,
      .xform = c->layout.xf,
      .xform_out_off = c->layout.out_base,
      .xform_buf_bytes = c->layout.mem_bytes,
  };
  c->layout.xf_host = c->layout.xf && kind == PL_DEVICE_CPU;
  return kind == PL_DEVICE_CPU ? pl_backend_cpu_create(&bc, &c->be, err)
                               : pl_backend_cuda_create(&bc, &c->be, err);
}

/* The copy plan for this kind of backend, then the backend made with it.
 * One fallback: a direct plan whose dataset memory the driver will not
 * page-lock (another process holds it, say) is planned again without
 * direct mode, and the log says why. */
static pl_status plan_and_create(pl_core *c, pl_device_kind kind,
                                 pl_error *err) {
  pl_backend_caps caps =
      kind == PL_DEVICE_CPU ? pl_backend_cpu_caps() : pl_backend_cuda_caps();
  pl_plan_request req = plan_request(c);
  pl_copy_plan_free(&c->layout.copy);
  PL_TRY(pl_copy_plan_make(&caps, &req, &c->layout.copy, err));
  delivered_layout(c);
  double t0 = pl_now();
  pl_status s = create_backend(c, kind, err);
  if (s != PL_OK && c->layout.copy.mode == PL_PLAN_DIRECT &&
      s != PL_NO_DEVICE && s != PL_UNSUPPORTED) {
    direct_off(c, err ? err->message : pl_status_str(s));
    pl_error_clear(err);
    req.direct_copy = 0;
    pl_copy_plan_free(&c->layout.copy);
    PL_TRY(pl_copy_plan_make(&caps, &req, &c->layout.copy, err));
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
  pthread_cond_init(&c->turn_cv, NULL);
  c->refs = 1;
  c->pid = getpid();
  c->ds = pl_dataset_retain(ds);
  c->cfg = *cfg;
  c->log = (pl_logger){cfg->log, cfg->log_user, cfg->log_level};
  c->sampler =
      (pl_sampler){ds->length,      cfg->shuffle,    cfg->seed,     cfg->rank,
                   cfg->world_size, cfg->batch_size, cfg->drop_last,
                   NULL,            0};
  if (ds->vt->shuffle_window && ds->vt->shuffle_window(ds)) {
    /* a source read in blocks (tar shards): shuffled block by block */
    c->sampler.blocks = ds;
    c->sampler.window = ds->vt->shuffle_window(ds);
  }
  pl_tune_setup(c); /* workers and depth resolved, once (PL_AUTO, 0) */
  int w = c->tune.threads;
  c->prefetch = c->tune.prefetch;
  c->pool.max_slots =
      cfg->max_batch_buffers
          ? (int)cfg->max_batch_buffers /* <= PL_MAX_BATCH_BUFFERS */
          : c->tune.prefetch_max + 2 + w;
  c->pool.max_slots += (int)cfg->replay_batches; /* <= 65536, by the table */
  c->pool.max_slots = PL_MAX(c->pool.max_slots, 1);
  c->pool.slots = pl_calloc((size_t)c->pool.max_slots, sizeof *c->pool.slots);
  *out = c;
  c->layout.out_off =
      pl_calloc((size_t)PL_MAX(ds->nfields, 1), sizeof *c->layout.out_off);
  c->layout.out_bytes =
      pl_calloc((size_t)PL_MAX(ds->nfields, 1), sizeof *c->layout.out_bytes);
  if (!c->pool.slots || !c->layout.out_off || !c->layout.out_bytes)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  /* The plan keeps what it needs of the list: the caller's array may go. */
  PL_TRY(pl_xform_plan_new(ds->fields, ds->nfields, cfg->transforms,
                           cfg->num_transforms, &c->layout.xf, err));
  c->cfg.transforms = NULL;
  c->cfg.num_transforms = 0;
  PL_TRY(pl_replay_setup(c, err));
  PL_TRY(pl_decode_setup(c, err)); /* may replace c->ds: before the plan */
  PL_TRY(open_backend(c, err));
  pl_timing_init(c);
  pl_core_restart(c, cfg->epoch, 0, 0);
  /* The steady state needs prefetch buffers in flight plus the one the
   * consumer holds; more are added only if the consumer holds more. */
  int initial = PL_MIN(c->prefetch + 1, c->pool.max_slots);
  for (int i = 0; i < initial; i++) {
    /* Count the slot only once it exists: pl_core_free frees nslots. */
    PL_TRY(pl_pool_slot_new(c, &c->pool.slots[c->pool.nslots], err));
    c->pool.nslots++;
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
    s = pl_workers_start(ld, ld->core->tune.threads, err);
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
    pl_workers_stop(ld);
    pl_core_unref(ld->core);
  }
  free(ld);
}
