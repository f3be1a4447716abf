/* Per-stage timings of a loader (timing.h) and the public getters:
 * pl_loader_timings_get and pl_loader_report (analysis in report.c). */
#include "loader/loader_internal.h"
#include "core/cpus.h"
#include "loader/report.h"
#include "data/sources/images_gpu.h"

#include <stdlib.h>
#include <string.h>

void pl_timing_init(pl_core *c) {
  pl_timing *tm = &c->tm;
  tm->on = c->cfg.timings || c->tune.auto_workers || c->tune.auto_prefetch;
  /* The link's rate is for the report: measured only where timings are. */
  tm->link_bytes_per_s =
      tm->on && c->be->vt->link_rate ? c->be->vt->link_rate(c->be) : 0;
}

void pl_timing_snap(pl_core *c, pl_stage_snap *s) {
  for (int i = 0; i < PL_ST_COUNT_; i++)
    s->ns[i] = atomic_load_explicit(&c->tm.ns[i], memory_order_relaxed);
  s->released = atomic_load_explicit(&c->tm.released, memory_order_relaxed);
  pl_loader_stats st;
  memset(&st, 0, sizeof st);
  c->be->vt->stats(c->be, &st);
  s->copy_s = st.copy_s;
  s->bytes_copied = st.bytes_copied;
  s->process_cpu_s = pl_process_cpu_s();
  s->worker_cpu_s = pl_dataset_worker_cpu_s(c->ds);
  s->t = pl_now();
}

static void on_replayed(pl_timing *tm, double t0, double now) {
  if (tm->replayed++ == 0)
    tm->t_replay0 = now;
  else
    tm->replay_wait_s += now - t0;
  tm->t_replay_last = now;
}

void pl_timing_returned(pl_core *c, double t0, double now, pl_batch *b) {
  pl_timing *tm = &c->tm;
  if (!tm->on)
    return;
  if (tm->t_first_call == 0)
    tm->t_first_call = t0;
  if (b)
    b->t_out = now;
  if (b && b->replay_of) {
    on_replayed(tm, t0, now);
    return;
  }
  if (tm->have_end)
    return; /* the replay began: the loaded phase is over */
  if (!tm->have_first) {
    if (!b)
      return;
    tm->have_first = 1;
    tm->startup_s = now - tm->t_first_call;
    pl_timing_snap(c, &tm->first);
  } else {
    tm->wait_s += now - t0;
    if (b) {
      tm->batches++;
      tm->samples += b->size;
      tm->t_last = now;
    }
  }
  if (b && c->replay.active) {
    tm->have_end = 1;
    pl_timing_snap(c, &tm->end);
  }
}

void pl_timing_released(pl_core *c, pl_batch *b) {
  if (!c->tm.on || b->t_out <= 0)
    return;
  pl_stage_add(&c->tm, PL_ST_HOLD, b->t_out);
  atomic_fetch_add_explicit(&c->tm.released, 1, memory_order_relaxed);
}

static double ns_s(uint64_t hi, uint64_t lo) {
  return hi > lo ? (double)(hi - lo) * 1e-9 : 0;
}

/* The steady-state window: first batch out to the last (or to the
 * replay's start). [mu] */
/* The GPU decode split's counts, since create (not the steady state:
 * they say how the work was shared, not how fast). */
static void decode_timings(pl_core *c, pl_loader_timings *t) {
  pl_decode_counts d;
  if (!pl_images_decode_counts(c->ds, &d))
    return;
  t->decode_gpu = !d.gpu_off;
  t->decode_cpu_images = d.cpu_images + d.gpu_failed;
  t->decode_gpu_images = d.gpu_images;
  t->decode_not_gpu = d.not_gpu;
  t->decode_gpu_failed = d.gpu_failed;
  t->decode_cpu_s = d.cpu_s;
  t->decode_gpu_s = d.gpu_s;
  t->decode_gpu_share = d.share;
  t->decode_gpu_warming = d.gpu_warming;
  t->decode_gpu_in_place = d.in_place;
  t->decode_gpu_begin_s = d.gpu_begin_s;
  t->decode_ahead_batches = d.ahead;
}

static void fill_timings(pl_core *c, pl_loader_timings *t) {
  pl_timing *tm = &c->tm;
  memset(t, 0, sizeof *t);
  t->workers = c->tune.active;
  t->worker_threads = c->tune.threads;
  t->prefetch = c->prefetch;
  t->cpus = c->tune.cpus;
  t->cpu_budget = c->tune.budget;
  t->link_bytes_per_s = tm->link_bytes_per_s;
  t->startup_s = tm->startup_s;
  t->replayed = tm->replayed;
  t->replay_s = tm->replayed > 1 ? tm->t_replay_last - tm->t_replay0 : 0;
  t->replay_wait_s = tm->replay_wait_s;
  decode_timings(c, t);
  if (!tm->have_first)
    return;
  pl_stage_snap now;
  if (tm->have_end)
    now = tm->end;
  else
    pl_timing_snap(c, &now);
  const pl_stage_snap *a = &tm->first;
  t->wall_s = tm->batches ? tm->t_last - a->t : 0;
  t->batches = tm->batches;
  t->samples = tm->samples;
  double read = ns_s(now.ns[PL_ST_READ], a->ns[PL_ST_READ]);
  t->transform_s = ns_s(now.ns[PL_ST_TRANSFORM], a->ns[PL_ST_TRANSFORM]);
  t->read_s = read > t->transform_s ? read - t->transform_s : 0;
  t->buffer_wait_s = ns_s(now.ns[PL_ST_BUFWAIT], a->ns[PL_ST_BUFWAIT]);
  t->stage_s = ns_s(now.ns[PL_ST_STAGE], a->ns[PL_ST_STAGE]);
  t->idle_s = ns_s(now.ns[PL_ST_IDLE], a->ns[PL_ST_IDLE]);
  t->device_transform_s =
      ns_s(now.ns[PL_ST_DEVXFORM], a->ns[PL_ST_DEVXFORM]);
  t->consumer_hold_s = ns_s(now.ns[PL_ST_HOLD], a->ns[PL_ST_HOLD]);
  t->batches_released = now.released - a->released;
  t->copy_s = now.copy_s > a->copy_s ? now.copy_s - a->copy_s : 0;
  t->bytes_copied = now.bytes_copied - a->bytes_copied;
  t->consumer_wait_s = tm->wait_s;
  t->process_cpu_s = now.process_cpu_s - a->process_cpu_s;
  t->worker_process_cpu_s = now.worker_cpu_s > a->worker_cpu_s
                                ? now.worker_cpu_s - a->worker_cpu_s
                                : 0;
}

void pl_loader_timings_get(const pl_loader *ld, pl_loader_timings *out,
                           size_t size) {
  if (!out || !size)
    return;
  pl_loader_timings t;
  if (!ld) {
    memset(&t, 0, sizeof t);
  } else {
    pl_core *c = ld->core;
    pthread_mutex_lock(&c->mu);
    fill_timings(c, &t);
    pthread_mutex_unlock(&c->mu);
  }
  memcpy(out, &t, PL_MIN(size, sizeof t));
}

pl_status pl_loader_report(const pl_loader *ld, char *buf, size_t *len,
                           int flags, pl_error *err) {
  if (!ld || !len)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "loader and len are required");
  if (!ld->core->tm.on)
    return pl_errorf(err, PL_BAD_STATE,
                     "timings are off (config.timings = 0): nothing to "
                     "report");
  pl_core *c = ld->core;
  pl_report_in in = {
      .device = c->be->name,
      .cuda = c->be->kind == PL_DEVICE_CUDA,
      .batch_size = c->cfg.batch_size,
      .auto_workers = c->tune.auto_workers,
      .auto_prefetch = c->tune.auto_prefetch,
  };
  pl_loader_timings_get(ld, &in.t, sizeof in.t);
  pl_analysis *a = malloc(sizeof *a);
  if (!a)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory");
  pl_report_analyze(&in, a);
  pl_status s = pl_report_format(&in, a, flags, buf, len, err);
  free(a);
  return s;
}
