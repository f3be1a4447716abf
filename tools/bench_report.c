/* Reports of `pinloader bench`: aligned text tables for a person, JSON and
 * CSV for machines. All are pure functions of the results. */
#include "bench.h"

#include <string.h>

const char *const bench_bw_kind_name[BW_KIND_COUNT] = {
    "h2d_pageable",  "h2d_pinned_sync",  "h2d_pinned_async",
    "h2d_registered", "d2h_pageable",    "d2h_pinned_sync",
    "d2h_pinned_async", "d2h_registered", "host_memcpy"};

static const char *on_off(int v) { return v ? "on" : "off"; }

/* ------------------------------------------------------------- text */

static void print_bw_dir(FILE *f, const bench_bw *bw, int base,
                         const char *title) {
  char sz[32];
  fprintf(f, "%s, GB/s:\n", title);
  fprintf(f, "  %9s %9s %12s %13s %11s %16s\n", "size", "pageable",
          "pinned sync", "pinned async", "registered", "pinned/pageable");
  for (int i = 0; i < bw->nsizes; i++) {
    const double *g = bw->gbs[i] + base;
    fprintf(f, "  %9s %9.2f %12.2f %13.2f %11.2f %15.1fx\n",
            bench_bytes_str(sz, sizeof sz, bw->sizes[i]), g[0], g[1], g[2],
            g[3], g[0] > 0 ? g[2] / g[0] : 0);
  }
}

void bench_print_bw(FILE *f, const bench_bw *bw) {
  char sz[32];
  if (!bw->ran) {
    fprintf(f, "bandwidth: skipped: %s\n\n", bw->note);
    return;
  }
  if (!bw->on_gpu) {
    fprintf(f, "== bandwidth: no GPU (%s): host memcpy speed instead ==\n",
            bw->note[0] ? bw->note : "none found");
    fprintf(f, "  %9s %12s\n", "size", "memcpy GB/s");
    for (int i = 0; i < bw->nsizes; i++)
      fprintf(f, "  %9s %12.2f\n",
              bench_bytes_str(sz, sizeof sz, bw->sizes[i]),
              bw->gbs[i][BW_MEMCPY]);
    fprintf(f, "\n");
    return;
  }
  fprintf(f, "== bandwidth: %s (cudaMemcpy / cudaMemcpyAsync) ==\n",
          bw->device);
  print_bw_dir(f, bw, BW_H2D_PAGEABLE, "host-to-device");
  print_bw_dir(f, bw, BW_D2H_PAGEABLE, "device-to-host");
  fprintf(f,
          "pinning %s costs: cudaHostAlloc %.0f ms, cudaHostRegister %.0f ms "
          "(pages already touched), cudaFreeHost %.0f ms: pin once, reuse\n\n",
          bench_bytes_str(sz, sizeof sz, bw->sizes[bw->nsizes - 1]),
          bw->pin_alloc_ms, bw->register_ms, bw->pin_free_ms);
}

void bench_print_overlap(FILE *f, const bench_overlap *ov) {
  char sz[32];
  if (!ov->ran) {
    fprintf(f, "overlap: skipped: %s\n\n", ov->note);
    return;
  }
  fprintf(f,
          "== overlap: copy %s to the GPU, %.1f ms of CPU work (a busy spin), then GPU "
          "work using the copy (median of %d) ==\n",
          bench_bytes_str(sz, sizeof sz, ov->copy_bytes), ov->work_ms,
          ov->reps);
  fprintf(f, "  %-8s %12s %8s %8s %8s %9s %9s %12s %6s\n", "memory",
          "non_blocking", "copy ms", "cpu ms", "gpu ms", "total ms",
          "saved ms", "max saved ms", "saved");
  for (int i = 0; i < 4; i++) {
    const bench_overlap_row *r = &ov->rows[i];
    fprintf(f, "  %-8s %12s %8.2f %8.2f %8.2f %9.2f %9.2f %12.2f %5.0f%%\n",
            r->pinned ? "pinned" : "pageable", on_off(r->non_blocking),
            r->copy_ms, r->cpu_ms, r->gpu_ms, r->iter_ms, r->saved_ms,
            r->max_saved_ms, r->saved_pct);
  }
  fprintf(f, "  saved = copy + cpu + gpu - total; the most that can be saved "
             "is min(copy, cpu)\n\n");
}

int bench_seed_steady(const bench_seed_row *r) {
  return r->batches >= 2 * r->batch_buffers;
}

/* 100 (mean - floor) / floor, or NaN where it measures nothing: no floor
 * (no step), or an epoch too short for steady state. */
static double over_floor_pct(const bench_seed_row *r) {
  if (!(r->floor_s > 0) || !bench_seed_steady(r))
    return 0.0 / 0.0;
  return 100.0 * (r->mean_s - r->floor_s) / r->floor_s;
}

static void print_loader_head(FILE *f, const bench_loader *lr) {
  fprintf(f, "data: %s\n", lr->data);
  fprintf(f, "device: %s\n", lr->device);
  if (lr->note[0])
    fprintf(f, "note: %s\n", lr->note);
}

void bench_print_loader_seed(FILE *f, const bench_loader *lr) {
  if (!lr->ran && !lr->nseed && !lr->nsweep) {
    fprintf(f, "loader: failed: %s\n\n",
            lr->note[0] ? lr->note : "see the error above");
    return;
  }
  if (!lr->nseed)
    return;
  fprintf(f,
          "== loader with a simulated training step (%s, %.0f ms per batch): "
          "batch %u, %d workers, float32 images (/255) ==\n",
          lr->sleep_work ? "a sleep" : "a busy CPU spin", lr->work_ms,
          lr->batch_size, lr->workers);
  print_loader_head(f, lr);
  fprintf(f, "  %-4s %12s %8s %10s %8s %11s  %s\n", "pin", "non_blocking",
          "batches", "mean s", "floor s", "over floor", "epochs s");
  for (int i = 0; i < lr->nseed; i++) {
    const bench_seed_row *r = &lr->seed[i];
    char ep[160] = "";
    size_t k = 0;
    for (int e = 0; e < r->epochs && k < sizeof ep - 12; e++)
      k += (size_t)snprintf(ep + k, sizeof ep - k, "%s%.3f", e ? " " : "",
                            r->epoch_s[e]);
    char over[32];
    double pct = over_floor_pct(r);
    if (pct == pct)
      snprintf(over, sizeof over, "%.1f%%", pct);
    else
      snprintf(over, sizeof over, "%s", r->floor_s > 0 ? "short run" : "-");
    fprintf(f, "  %-4s %12s %8llu %10.3f %8.3f %11s  %s\n", on_off(r->pin),
            on_off(r->non_blocking), (unsigned long long)r->batches, r->mean_s,
            r->floor_s, over, ep);
  }
  fprintf(f, "  floor = batches x step: an epoch cannot be shorter\n");
  for (int i = 0; i < lr->nseed; i++)
    if (lr->seed[i].floor_s > 0 && !bench_seed_steady(&lr->seed[i])) {
      fprintf(f, "  short run: %llu batches per epoch, under twice the loader's "
                 "%llu batch buffers:\n  the epoch is mostly the pipeline "
                 "filling, so over floor is not measured\n  (more --records "
                 "or a smaller --batch-size measure it)\n",
              (unsigned long long)lr->seed[i].batches,
              (unsigned long long)lr->seed[i].batch_buffers);
      break;
    }
  fprintf(f, "\n");
}

void bench_print_loader_sweep(FILE *f, const bench_loader *lr) {
  char rate[32];
  if (!lr->nsweep)
    return;
  fprintf(f, "== loader sweep: no training step, batch %u, into %s ==\n",
          lr->batch_size, lr->on_gpu ? "device memory" : "host batches");
  if (!lr->nseed)
    print_loader_head(f, lr);
  fprintf(f, "  %7s %-8s %-4s %9s %16s %10s\n", "workers", "dtype", "pin",
          "epoch s", "samples/s", "GB/s");
  for (int i = 0; i < lr->nsweep; i++) {
    const bench_sweep_row *r = &lr->sweep[i];
    fprintf(f, "  %7d %-8s %-4s %9.3f %16s %10.2f\n", r->workers,
            r->float32 ? "float32" : "uint8",
            lr->on_gpu ? on_off(r->pin) : "-", r->epoch_s,
            cli_rate(rate, sizeof rate, r->samples_s, ""), r->gbs);
  }
  fprintf(f, "\n");
}

/* ------------------------------------------------------------- files */

static FILE *open_out(const char *path) {
  if (!strcmp(path, "-"))
    return stdout;
  FILE *f = fopen(path, "w");
  if (!f)
    fprintf(stderr, "pinloader bench: error: cannot write %s\n", path);
  return f;
}

static int close_out(FILE *f, const char *path) {
  int bad = ferror(f);
  if (f == stdout)
    bad |= fflush(f) != 0;
  else
    bad |= fclose(f) != 0;
  if (bad)
    fprintf(stderr, "pinloader bench: error: writing %s failed\n", path);
  return bad ? -1 : 0;
}

static void json_bw(FILE *f, const bench_bw *bw) {
  fprintf(f, "  \"bandwidth\": {\"ran\": %s, \"on_gpu\": %s, \"device\": ",
          bw->ran ? "true" : "false", bw->on_gpu ? "true" : "false");
  cli_json_str(f, bw->device);
  fprintf(f, ", \"note\": ");
  cli_json_str(f, bw->note);
  fprintf(f, ",\n    \"pin_alloc_ms\": ");
  cli_json_num(f, bw->pin_alloc_ms);
  fprintf(f, ", \"register_ms\": ");
  cli_json_num(f, bw->register_ms);
  fprintf(f, ", \"pin_free_ms\": ");
  cli_json_num(f, bw->pin_free_ms);
  fprintf(f, ",\n    \"unit\": \"GB/s\", \"rows\": [");
  for (int i = 0; bw->ran && i < bw->nsizes; i++) {
    fprintf(f, "%s\n      {\"bytes\": %llu", i ? "," : "",
            (unsigned long long)bw->sizes[i]);
    for (int k = bw->on_gpu ? 0 : BW_MEMCPY;
         k < (bw->on_gpu ? BW_MEMCPY : BW_KIND_COUNT); k++) {
      fprintf(f, ", \"%s\": ", bench_bw_kind_name[k]);
      cli_json_num(f, bw->gbs[i][k]);
    }
    fprintf(f, "}");
  }
  fprintf(f, "]},\n");
}

static void json_overlap(FILE *f, const bench_overlap *ov) {
  fprintf(f, "  \"overlap\": {\"ran\": %s, \"note\": ",
          ov->ran ? "true" : "false");
  cli_json_str(f, ov->note);
  fprintf(f, ", \"copy_bytes\": %llu, \"cpu_work_ms\": ",
          (unsigned long long)ov->copy_bytes);
  cli_json_num(f, ov->work_ms);
  fprintf(f, ", \"reps\": %d, \"rows\": [", ov->reps);
  for (int i = 0; ov->ran && i < 4; i++) {
    const bench_overlap_row *r = &ov->rows[i];
    fprintf(f, "%s\n      {\"pinned\": %s, \"non_blocking\": %s", i ? "," : "",
            r->pinned ? "true" : "false", r->non_blocking ? "true" : "false");
    const char *names[] = {"copy_ms", "cpu_ms", "gpu_ms", "total_ms",
                           "saved_ms", "max_saved_ms", "saved_pct"};
    double v[] = {r->copy_ms, r->cpu_ms, r->gpu_ms, r->iter_ms, r->saved_ms,
                  r->max_saved_ms, r->saved_pct};
    for (int k = 0; k < 7; k++) {
      fprintf(f, ", \"%s\": ", names[k]);
      cli_json_num(f, v[k]);
    }
    fprintf(f, "}");
  }
  fprintf(f, "]},\n");
}

static void json_loader(FILE *f, const bench_loader *lr) {
  fprintf(f, "  \"loader\": {\"ran\": %s, \"on_gpu\": %s, \"device\": ",
          lr->ran ? "true" : "false", lr->on_gpu ? "true" : "false");
  cli_json_str(f, lr->device);
  fprintf(f, ", \"data\": ");
  cli_json_str(f, lr->data);
  fprintf(f, ", \"note\": ");
  cli_json_str(f, lr->note);
  fprintf(f, ",\n    \"records\": %llu, \"batch_size\": %u, \"workers\": %d, "
             "\"work_ms\": ",
          (unsigned long long)lr->records, lr->batch_size, lr->workers);
  cli_json_num(f, lr->work_ms);
  fprintf(f, ", \"work\": \"%s\",\n    \"seed\": [",
          lr->sleep_work ? "sleep" : "spin");
  for (int i = 0; i < lr->nseed; i++) {
    const bench_seed_row *r = &lr->seed[i];
    fprintf(f, "%s\n      {\"pin\": %s, \"non_blocking\": %s, \"batches\": "
               "%llu, \"pinned_fallbacks\": %llu, \"epoch_s\": [",
            i ? "," : "", r->pin ? "true" : "false",
            r->non_blocking ? "true" : "false",
            (unsigned long long)r->batches,
            (unsigned long long)r->pinned_fallbacks);
    for (int e = 0; e < r->epochs; e++) {
      fprintf(f, e ? ", " : "");
      cli_json_num(f, r->epoch_s[e]);
    }
    fprintf(f, "], \"mean_s\": ");
    cli_json_num(f, r->mean_s);
    fprintf(f, ", \"floor_s\": ");
    cli_json_num(f, r->floor_s);
    fprintf(f, ", \"batch_buffers\": %llu, \"steady\": %s, "
               "\"over_floor_pct\": ",
            (unsigned long long)r->batch_buffers,
            bench_seed_steady(r) ? "true" : "false");
    cli_json_num(f, over_floor_pct(r));
    fprintf(f, "}");
  }
  fprintf(f, "],\n    \"sweep\": [");
  for (int i = 0; i < lr->nsweep; i++) {
    const bench_sweep_row *r = &lr->sweep[i];
    fprintf(f, "%s\n      {\"workers\": %d, \"dtype\": \"%s\", \"pin\": %s, "
               "\"epoch_s\": ",
            i ? "," : "", r->workers, r->float32 ? "float32" : "uint8",
            r->pin ? "true" : "false");
    cli_json_num(f, r->epoch_s);
    fprintf(f, ", \"samples_per_s\": ");
    cli_json_num(f, r->samples_s);
    fprintf(f, ", \"gb_per_s\": ");
    cli_json_num(f, r->gbs);
    fprintf(f, "}");
  }
  fprintf(f, "]}\n");
}

int bench_write_json(const char *path, const bench_results *r) {
  FILE *f = open_out(path);
  if (!f)
    return -1;
  fprintf(f, "{\n  \"pinloader_version\": ");
  cli_json_str(f, r->version);
  fprintf(f, ", \"cpus\": %d, \"quick\": %s, \"total_s\": ", r->cpus,
          r->quick ? "true" : "false");
  cli_json_num(f, r->total_s);
  fprintf(f, ",\n");
  json_bw(f, &r->bw);
  json_overlap(f, &r->overlap);
  json_loader(f, &r->loader);
  fprintf(f, "}\n");
  return close_out(f, path);
}

/* CSV: one measurement per line, long form, so every experiment fits one
 * header: experiment,config,param,value,unit. */
int bench_write_csv(const char *path, const bench_results *r) {
  FILE *f = open_out(path);
  if (!f)
    return -1;
  fprintf(f, "experiment,config,param,value,unit\n");
  const bench_bw *bw = &r->bw;
  for (int i = 0; bw->ran && i < bw->nsizes; i++)
    for (int k = bw->on_gpu ? 0 : BW_MEMCPY;
         k < (bw->on_gpu ? BW_MEMCPY : BW_KIND_COUNT); k++)
      fprintf(f, "bandwidth,%s,bytes=%llu,%.6g,GB/s\n", bench_bw_kind_name[k],
              (unsigned long long)bw->sizes[i], bw->gbs[i][k]);
  const bench_overlap *ov = &r->overlap;
  for (int i = 0; ov->ran && i < 4; i++) {
    const bench_overlap_row *o = &ov->rows[i];
    const char *cfg = o->pinned ? "pinned" : "pageable";
    const char *nb = o->non_blocking ? "non_blocking" : "blocking";
    fprintf(f, "overlap,%s+%s,total,%.6g,ms\n", cfg, nb, o->iter_ms);
    fprintf(f, "overlap,%s+%s,saved,%.6g,ms\n", cfg, nb, o->saved_ms);
    fprintf(f, "overlap,%s+%s,max_saved,%.6g,ms\n", cfg, nb, o->max_saved_ms);
    fprintf(f, "overlap,%s+%s,saved_pct,%.6g,%%\n", cfg, nb, o->saved_pct);
  }
  const bench_loader *lr = &r->loader;
  for (int i = 0; i < lr->nseed; i++) {
    const bench_seed_row *s = &lr->seed[i];
    for (int e = 0; e < s->epochs; e++)
      fprintf(f, "loader_seed,pin=%d nb=%d,epoch=%d,%.6g,s\n", s->pin,
              s->non_blocking, e + 1, s->epoch_s[e]);
    fprintf(f, "loader_seed,pin=%d nb=%d,mean,%.6g,s\n", s->pin,
            s->non_blocking, s->mean_s);
    fprintf(f, "loader_seed,pin=%d nb=%d,floor,%.6g,s\n", s->pin,
            s->non_blocking, s->floor_s);
  }
  for (int i = 0; i < lr->nsweep; i++) {
    const bench_sweep_row *s = &lr->sweep[i];
    const char *dt = s->float32 ? "float32" : "uint8";
    fprintf(f, "loader_sweep,%s pin=%d,workers=%d,%.6g,samples/s\n", dt,
            s->pin, s->workers, s->samples_s);
    fprintf(f, "loader_sweep,%s pin=%d,workers=%d,%.6g,GB/s\n", dt, s->pin,
            s->workers, s->gbs);
    fprintf(f, "loader_sweep,%s pin=%d,workers=%d,%.6g,s\n", dt, s->pin,
            s->workers, s->epoch_s);
  }
  return close_out(f, path);
}
