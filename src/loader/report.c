/* The bottleneck report (report.h states the rule). Each finding is one
 * short sentence followed by the numbers it rests on, in parentheses. */
#include "loader/report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define WAIT_BOUND 0.10 /* the step waits less than this: it is the bound */
#define BUSY_BOUND 0.60 /* a loader stage this busy bounds the loader */
#define BUFWAIT_BOUND 0.20
#define MIN_BATCHES 2

static const char *const bound_names[PL_BOUND_COUNT_] = {
    "unknown", "consumer", "workers", "copy",
    "buffers", "prefetch", "device_transforms"};

const char *pl_bound_name(pl_bound b) {
  return b >= 0 && b < PL_BOUND_COUNT_ ? bound_names[b] : "unknown";
}

static double frac(double part, double whole) {
  double f = whole > 0 ? part / whole : 0;
  return f < 0 ? 0 : f > 1 ? 1 : f;
}

static double pct(double f) { return 100.0 * f; }

static void add(pl_analysis *a, const char *stage, const char *fmt, ...)
    PL_PRINTF(3, 4);

static void add(pl_analysis *a, const char *stage, const char *fmt, ...) {
  if (a->nfindings >= PL_FINDINGS_MAX)
    return;
  pl_finding *f = &a->findings[a->nfindings++];
  f->stage = stage;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->text, sizeof f->text, fmt, ap);
  va_end(ap);
}

/* The measures the rule uses, from the raw timings. */
typedef struct measures {
  double W;       /* steady wall time */
  double n;       /* workers the loader's work is spread over (at least 1) */
  double step;    /* seconds per batch of the consumer's own work */
  double wait;    /* fraction of W the consumer waited */
  double work;    /* workers busy reading + transforming, of n * W */
  double stage;   /* workers staging, of n * W */
  double bufwait; /* workers waiting for buffers, of n * W */
  double idle;    /* workers with nothing to do, of n * W */
  double copy;    /* copy engine busy, of W */
  double devx;    /* device transforms, of W */
} measures;

static measures measure(const pl_loader_timings *t) {
  measures m;
  m.W = t->wall_s;
  m.n = t->workers > 0 ? t->workers : 1;
  double nW = m.n * m.W;
  m.wait = frac(t->consumer_wait_s, m.W);
  m.step = t->batches ? (m.W - t->consumer_wait_s) / (double)t->batches : 0;
  if (m.step < 0)
    m.step = 0;
  m.work = frac(t->read_s + t->transform_s, nW);
  m.stage = frac(t->stage_s, nW);
  m.bufwait = frac(t->buffer_wait_s, nW);
  /* With no workers the consumer's thread loads: whatever it did not load
   * in, the loader was idle. */
  m.idle = t->workers > 0 ? frac(t->idle_s, nW)
                          : 1 - frac(t->read_s + t->transform_s, m.W);
  m.copy = frac(t->copy_s, m.W);
  m.devx = frac(t->device_transform_s, m.W);
  return m;
}

static pl_bound pick(const pl_loader_timings *t, const measures *m) {
  if (t->batches < MIN_BATCHES || !(m->W > 0))
    return PL_BOUND_UNKNOWN;
  if (m->wait < WAIT_BOUND)
    return PL_BOUND_CONSUMER;
  pl_bound best = PL_BOUND_WORKERS;
  double u = m->work;
  if (m->copy > u)
    best = PL_BOUND_COPY, u = m->copy;
  if (m->devx > u)
    best = PL_BOUND_DEVXFORM, u = m->devx;
  if (u >= BUSY_BOUND)
    return best;
  if (m->bufwait >= BUFWAIT_BOUND)
    return PL_BOUND_BUFFERS;
  return PL_BOUND_PREFETCH;
}

static void verdict(const pl_report_in *in, const measures *m,
                    pl_analysis *a) {
  const pl_loader_timings *t = &in->t;
  double ms = 1e3 * m->step;
  switch (a->bound) {
  case PL_BOUND_UNKNOWN:
    add(a, "verdict",
        "not enough to judge: %llu batches measured (at least %d needed, "
        "after the first)",
        (unsigned long long)t->batches, MIN_BATCHES);
    return;
  case PL_BOUND_CONSUMER:
    add(a, "verdict",
        "the loader is idle %.0f%% of the time: your training step is the "
        "bottleneck (the step takes %.3g ms per batch and waited for data "
        "%.1f%% of %.3g s)",
        pct(m->idle), ms, pct(m->wait), m->W);
    return;
  default:
    break;
  }
  add(a, "verdict",
      "your step waits for data %.0f%% of the time: the loader is the "
      "bottleneck, bound by %s; without the waits the step would run %.3gx "
      "faster (%.3g s of %.3g s waiting, %.3g ms of own work per batch)",
      pct(m->wait), pl_bound_name(a->bound), a->speedup, t->consumer_wait_s,
      m->W, ms);
}

static void workers_line(const pl_report_in *in, const measures *m,
                         pl_analysis *a) {
  const pl_loader_timings *t = &in->t;
  const char *advice = "";
  if (a->bound == PL_BOUND_WORKERS)
    advice = in->auto_workers && t->workers >= t->cpu_budget
                 ? ": the CPU budget is used up; lighten transforms or "
                   "decode less"
             : t->workers == 0 ? ": loading runs in your thread; use workers"
                               : ": add workers or lighten transforms";
  add(a, "workers",
      "workers are busy %.0f%%%s (read %.3g s, transforms %.3g s, over %d "
      "worker%s x %.3g s; staging %.0f%%, waiting for buffers %.0f%%, "
      "idle %.0f%%)",
      pct(m->work), advice, t->read_s, t->transform_s,
      t->workers > 0 ? t->workers : 1, t->workers == 1 ? "" : "s", m->W,
      pct(m->stage), pct(m->bufwait), pct(m->idle));
}

static void buffers_line(const pl_report_in *in, const measures *m,
                         pl_analysis *a) {
  const pl_loader_timings *t = &in->t;
  if (a->bound != PL_BOUND_BUFFERS && m->bufwait < 0.05)
    return;
  double hold = t->batches_released
                    ? 1e3 * t->consumer_hold_s / (double)t->batches_released
                    : 0;
  add(a, "buffers",
      "workers waited for a free batch buffer %.0f%% of the time: release "
      "batches sooner or raise max_batch_buffers (%.3g s waiting; a batch is "
      "held %.3g ms on average over %llu releases)",
      pct(m->bufwait), t->buffer_wait_s, hold,
      (unsigned long long)t->batches_released);
}

static void copy_line(const pl_report_in *in, const measures *m,
                      pl_analysis *a) {
  const pl_loader_timings *t = &in->t;
  if (!in->cuda || t->copy_s <= 0)
    return;
  double rate = (double)t->bytes_copied / t->copy_s;
  const char *advice = a->bound == PL_BOUND_COPY
                           ? ": send fewer bytes (uint8, not float32; crop "
                             "before the copy)"
                           : "";
  if (t->link_bytes_per_s > 0)
    add(a, "copy",
        "the copy runs at %.1f GB/s, %.0f%% of this link's measured %.1f "
        "GB/s, and the copy engine is busy %.0f%%%s (%.3g GB in %.3g s of "
        "device time)",
        rate * 1e-9, pct(rate / t->link_bytes_per_s),
        t->link_bytes_per_s * 1e-9, pct(m->copy), advice,
        (double)t->bytes_copied * 1e-9, t->copy_s);
  else
    add(a, "copy",
        "the copy runs at %.1f GB/s (this link's rate is unknown) and the "
        "copy engine is busy %.0f%%%s (%.3g GB in %.3g s of device time)",
        rate * 1e-9, pct(m->copy), advice, (double)t->bytes_copied * 1e-9,
        t->copy_s);
}

static void prefetch_line(const pl_report_in *in, const measures *m,
                          pl_analysis *a) {
  if (a->bound != PL_BOUND_PREFETCH)
    return;
  add(a, "prefetch",
      "no loader stage is busy (workers %.0f%%, copies %.0f%%) yet the step "
      "waits %.0f%%: raise prefetch (now %d) to ride out slow batches",
      pct(m->work), pct(m->copy), pct(m->wait), in->t.prefetch);
}

static void devx_line(const pl_report_in *in, const measures *m,
                      pl_analysis *a) {
  if (in->t.device_transform_s <= 0)
    return;
  add(a, "device_transforms",
      "device transforms are busy %.0f%% of the time (%.3g s)", pct(m->devx),
      in->t.device_transform_s);
}

static void headroom_line(const pl_report_in *in, pl_analysis *a) {
  const pl_loader_timings *t = &in->t;
  if (t->replayed < MIN_BATCHES || !(t->replay_s > 0))
    return;
  double ceiling = (double)(t->replayed - 1) / t->replay_s;
  if (t->batches < MIN_BATCHES || !(t->wall_s > 0)) {
    add(a, "headroom",
        "on cached batches your step runs %.4g batches/s: no loader can "
        "deliver faster here (%llu replayed in %.3g s)",
        ceiling, (unsigned long long)t->replayed, t->replay_s);
    return;
  }
  double loaded = (double)t->batches / t->wall_s;
  add(a, "headroom",
      "loading reaches %.0f%% of the ceiling: %.4g batches/s loaded, %.4g "
      "on cached batches (%llu batches in %.3g s; %llu replayed in %.3g s)",
      pct(loaded / ceiling), loaded, ceiling, (unsigned long long)t->batches,
      t->wall_s, (unsigned long long)t->replayed, t->replay_s);
}

static void cpu_line(const pl_report_in *in, const measures *m,
                     pl_analysis *a) {
  const pl_loader_timings *t = &in->t;
  if (!(t->process_cpu_s > 0) || !(m->W > 0))
    return;
  double procs = t->worker_process_cpu_s; /* >= 0: fill_timings */
  char of_procs[96] = "";
  if (procs > 0)
    snprintf(of_procs, sizeof of_procs, ", %.3g s of it in worker processes",
             procs);
  add(a, "cpu",
      "the process%s used %.1f of %d cores (%.3g s of CPU in %.3g s%s; %d "
      "worker%s active of %d%s)",
      procs > 0 ? " and its worker processes" : "",
      (t->process_cpu_s + procs) / m->W, t->cpus, t->process_cpu_s + procs,
      m->W, of_procs, t->workers, t->workers == 1 ? "" : "s",
      t->worker_threads, in->auto_workers ? ", tuned" : "");
}

/* Image folders with decode gpu / auto: how the JPEGs were shared, and
 * each path's rate as a worker saw it (CPU: its own decodes; GPU: its
 * calls, begin to end, other workers' work on the GPU included). */
static void decode_line(const pl_report_in *in, pl_analysis *a) {
  const pl_loader_timings *t = &in->t;
  uint64_t all = t->decode_cpu_images + t->decode_gpu_images;
  if (!all)
    return;
  double cpu_rate = t->decode_cpu_s > 0
                        ? (double)(t->decode_cpu_images -
                                   t->decode_gpu_failed) / t->decode_cpu_s
                        : 0;
  double gpu_rate = t->decode_gpu_s > 0
                        ? (double)t->decode_gpu_images / t->decode_gpu_s
                        : 0;
  add(a, "decode",
      "%.0f%% of images decoded on the GPU%s (%llu GPU, %llu of them "
      "written in the batch's device memory; %llu CPU; share of "
      "GPU-able JPEGs now %.0f%%; %.4g images/s per worker on the CPU path, "
      "%.4g per call on the GPU path, %.0f%% of its time in the call that "
      "queues it, the worker held; %llu batches leaned to the CPU, the "
      "loader ahead; to the CPU: %llu not for the GPU, %llu refused by "
      "nvJPEG, %llu while nvJPEG started)",
      pct((double)t->decode_gpu_images / (double)all),
      t->decode_gpu ? "" : ", now off after a GPU error",
      (unsigned long long)t->decode_gpu_images,
      (unsigned long long)t->decode_gpu_in_place,
      (unsigned long long)t->decode_cpu_images, pct(t->decode_gpu_share),
      cpu_rate, gpu_rate,
      pct(t->decode_gpu_s > 0 ? t->decode_gpu_begin_s / t->decode_gpu_s : 0),
      (unsigned long long)t->decode_ahead_batches,
      (unsigned long long)t->decode_not_gpu,
      (unsigned long long)t->decode_gpu_failed,
      (unsigned long long)t->decode_gpu_warming);
}

void pl_report_analyze(const pl_report_in *in, pl_analysis *a) {
  memset(a, 0, sizeof *a);
  measures m = measure(&in->t);
  a->bound = pick(&in->t, &m);
  a->wait_fraction = m.wait;
  if (a->bound == PL_BOUND_CONSUMER) {
    /* How much faster the loader could go: its busiest stage per batch
     * against the step's own work per batch. */
    double per = in->t.batches ? m.W / (double)in->t.batches : 0;
    double busiest = PL_MAX(PL_MAX(m.work, m.copy), m.devx) * per;
    a->speedup = busiest > 0 ? m.step / busiest : INFINITY;
  } else if (a->bound != PL_BOUND_UNKNOWN) {
    a->speedup = m.W > in->t.consumer_wait_s
                     ? m.W / (m.W - in->t.consumer_wait_s)
                     : INFINITY;
  }
  verdict(in, &m, a);
  if (a->bound == PL_BOUND_UNKNOWN)
    return;
  workers_line(in, &m, a);
  buffers_line(in, &m, a);
  copy_line(in, &m, a);
  devx_line(in, &m, a);
  prefetch_line(in, &m, a);
  headroom_line(in, a);
  cpu_line(in, &m, a);
  decode_line(in, a);
}

/* ------------------------------------------------------------ format */

typedef struct out {
  char *buf;
  size_t cap, len;
} out;

static void put(out *o, const char *fmt, ...) PL_PRINTF(2, 3);

static void put(out *o, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n <= 0)
    return;
  size_t k = PL_MIN((size_t)n, sizeof tmp - 1);
  if (o->buf && o->len + k < o->cap)
    memcpy(o->buf + o->len, tmp, k);
  o->len += k;
}

static void put_json_string(out *o, const char *s) {
  put(o, "\"");
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      put(o, "\\%c", ch);
    else if (ch < 0x20)
      put(o, "\\u%04x", ch);
    else
      put(o, "%c", ch);
  }
  put(o, "\"");
}

/* JSON has no infinity: a speedup without bound is written as null. */
static void put_num(out *o, const char *key, double v) {
  if (isfinite(v))
    put(o, "\"%s\": %.6g", key, v);
  else
    put(o, "\"%s\": null", key);
}

static void format_json(const pl_report_in *in, const pl_analysis *a,
                        out *o) {
  const pl_loader_timings *t = &in->t;
  put(o, "{\"bound\": \"%s\", ", pl_bound_name(a->bound));
  put_num(o, "wait_fraction", a->wait_fraction);
  put(o, ", ");
  put_num(o, "speedup", a->speedup);
  put(o, ", \"device\": ");
  put_json_string(o, in->device ? in->device : "");
  put(o, ", \"findings\": [");
  for (int i = 0; i < a->nfindings; i++) {
    put(o, "%s{\"stage\": \"%s\", \"text\": ", i ? ", " : "",
        a->findings[i].stage);
    put_json_string(o, a->findings[i].text);
    put(o, "}");
  }
  put(o, "], \"timings\": {");
  const struct {
    const char *k;
    double v;
  } nums[] = {
      {"wall_s", t->wall_s},
      {"startup_s", t->startup_s},
      {"batches", (double)t->batches},
      {"samples", (double)t->samples},
      {"workers", t->workers},
      {"worker_threads", t->worker_threads},
      {"prefetch", t->prefetch},
      {"cpus", t->cpus},
      {"cpu_budget", t->cpu_budget},
      {"read_s", t->read_s},
      {"transform_s", t->transform_s},
      {"buffer_wait_s", t->buffer_wait_s},
      {"stage_s", t->stage_s},
      {"idle_s", t->idle_s},
      {"copy_s", t->copy_s},
      {"bytes_copied", (double)t->bytes_copied},
      {"device_transform_s", t->device_transform_s},
      {"consumer_wait_s", t->consumer_wait_s},
      {"consumer_hold_s", t->consumer_hold_s},
      {"batches_released", (double)t->batches_released},
      {"link_bytes_per_s", t->link_bytes_per_s},
      {"replayed", (double)t->replayed},
      {"replay_s", t->replay_s},
      {"replay_wait_s", t->replay_wait_s},
      {"process_cpu_s", t->process_cpu_s},
      {"worker_process_cpu_s", t->worker_process_cpu_s},
      {"decode_gpu", t->decode_gpu},
      {"decode_cpu_images", (double)t->decode_cpu_images},
      {"decode_gpu_images", (double)t->decode_gpu_images},
      {"decode_not_gpu", (double)t->decode_not_gpu},
      {"decode_gpu_failed", (double)t->decode_gpu_failed},
      {"decode_cpu_s", t->decode_cpu_s},
      {"decode_gpu_s", t->decode_gpu_s},
      {"decode_gpu_share", t->decode_gpu_share},
      {"decode_gpu_warming", (double)t->decode_gpu_warming},
      {"decode_gpu_in_place", (double)t->decode_gpu_in_place},
      {"decode_gpu_begin_s", t->decode_gpu_begin_s},
      {"decode_ahead_batches", (double)t->decode_ahead_batches},
  };
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    put(o, "%s", i ? ", " : "");
    put_num(o, nums[i].k, nums[i].v);
  }
  put(o, "}}\n");
}

static void format_text(const pl_report_in *in, const pl_analysis *a,
                        out *o) {
  const pl_loader_timings *t = &in->t;
  put(o, "report: %s, %d worker%s%s, prefetch %d%s, %llu batches in %.3g s "
         "(startup %.3g s)\n",
      in->device ? in->device : "?", t->workers, t->workers == 1 ? "" : "s",
      in->auto_workers ? " (auto)" : "", t->prefetch,
      in->auto_prefetch ? " (auto)" : "", (unsigned long long)t->batches,
      t->wall_s, t->startup_s);
  put(o, "bound: %s\n", pl_bound_name(a->bound));
  for (int i = 0; i < a->nfindings; i++)
    put(o, "- %s\n", a->findings[i].text);
}

pl_status pl_report_format(const pl_report_in *in, const pl_analysis *a,
                           int flags, char *buf, size_t *len, pl_error *err) {
  if (!len)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "len is required");
  out o = {buf, buf ? *len : 0, 0};
  if (flags & PL_REPORT_JSON)
    format_json(in, a, &o);
  else
    format_text(in, a, &o);
  size_t cap = o.cap;
  *len = o.len;
  if (!buf) /* a size query */
    return PL_OK;
  if (o.len < cap) {
    buf[o.len] = 0;
    return PL_OK;
  }
  if (cap)
    buf[0] = 0;
  return pl_errorf(err, PL_INVALID_ARGUMENT,
                   "the report needs %zu bytes and a NUL; the buffer has %zu",
                   o.len, cap);
}
