/* The plot of `pinloader bench`: a hand-written SVG with two panels, copy
 * bandwidth against size (log x axis) and epoch time against workers. No
 * dependency: a viewer or a browser shows it. */
#include "bench.h"

#include <math.h>
#include <string.h>

#define SVG_W 1100
#define SVG_H 460
#define MAX_POINTS 64
#define MAX_SERIES 8

typedef struct svg_series {
  const char *name;
  const char *color;
  int dashed;
  int n;
  double x[MAX_POINTS], y[MAX_POINTS];
} svg_series;

typedef struct svg_panel {
  double x0, y0, w, h; /* the plotting area, in pixels */
  const char *title, *xlabel, *ylabel;
  int xlog;            /* x axis in log2 */
  int nxticks;
  double xticks[MAX_POINTS];
  char xtick_label[MAX_POINTS][16];
  double xmin, xmax, ymax;
  double legend_at; /* 0: legend at the top, 1: at the bottom */
  int nseries;
  svg_series s[MAX_SERIES];
} svg_panel;

static const char *const COLORS[] = {"#1f77b4", "#d62728", "#2ca02c",
                                     "#9467bd", "#ff7f0e", "#8c564b"};

static double px_x(const svg_panel *p, double x) {
  double a = p->xlog ? log2(p->xmin) : p->xmin;
  double b = p->xlog ? log2(p->xmax) : p->xmax;
  double v = p->xlog ? log2(x) : x;
  return p->x0 + (b > a ? (v - a) / (b - a) : 0.5) * p->w;
}

static double px_y(const svg_panel *p, double y) {
  return p->y0 + p->h - (p->ymax > 0 ? y / p->ymax : 0) * p->h;
}

/* A round step giving about five y ticks: 1, 2 or 5 times a power of 10. */
static double nice_step(double max) {
  double raw = max / 5, p = pow(10, floor(log10(raw)));
  return raw / p <= 1 ? p : raw / p <= 2 ? 2 * p : raw / p <= 5 ? 5 * p
                                                                  : 10 * p;
}

static void panel_axes(FILE *f, const svg_panel *p) {
  double step = nice_step(p->ymax);
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" class=\"title\">%s</text>\n",
          p->x0 + p->w / 2, p->y0 - 14, p->title);
  for (double y = 0; y <= p->ymax * 1.0001; y += step) {
    double py = px_y(p, y);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "class=\"grid\"/>\n", p->x0, py, p->x0 + p->w, py);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"ytick\">%g</text>\n",
            p->x0 - 6, py + 4, y);
  }
  for (int i = 0; i < p->nxticks; i++) {
    double px = px_x(p, p->xticks[i]);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "class=\"grid\"/>\n", px, p->y0, px, p->y0 + p->h);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"xtick\">%s</text>\n", px,
            p->y0 + p->h + 18, p->xtick_label[i]);
  }
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
             "class=\"frame\"/>\n", p->x0, p->y0, p->w, p->h);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"label\">%s</text>\n",
          p->x0 + p->w / 2, p->y0 + p->h + 40, p->xlabel);
  fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" "
             "class=\"label\">%s</text>\n",
          p->x0 - 48, p->y0 + p->h / 2, p->ylabel);
}

/* The legend: a boxed list inside the frame at the right, at the height
 * the panel asks for (where its data leaves room). */
static void panel_legend(FILE *f, const svg_panel *p) {
  double bw = 170, bh = 10 + 18 * p->nseries;
  double bx = p->x0 + p->w - bw - 8;
  double by = p->y0 + (p->h - bh) * p->legend_at;
  if (!p->nseries)
    return;
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
             "class=\"legendbox\"/>\n", bx, by, bw, bh);
  for (int k = 0; k < p->nseries; k++) {
    const svg_series *s = &p->s[k];
    double ly = by + 18 + 18 * k;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\" stroke-width=\"2\"%s/>\n",
            bx + 8, ly - 4, bx + 32, ly - 4, s->color,
            s->dashed ? " stroke-dasharray=\"6,4\"" : "");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">%s</text>\n",
            bx + 38, ly, s->name);
  }
}

static void panel_series(FILE *f, const svg_panel *p) {
  for (int k = 0; k < p->nseries; k++) {
    const svg_series *s = &p->s[k];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s "
               "points=\"", s->color,
            s->dashed ? " stroke-dasharray=\"6,4\"" : "");
    for (int i = 0; i < s->n; i++)
      fprintf(f, "%s%.1f,%.1f", i ? " " : "", px_x(p, s->x[i]),
              px_y(p, s->y[i]));
    fprintf(f, "\"/>\n");
    for (int i = 0; i < s->n; i++)
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
              px_x(p, s->x[i]), px_y(p, s->y[i]), s->color);
  }
  panel_legend(f, p);
  if (!p->nseries)
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"label\">not measured"
               "</text>\n", p->x0 + p->w / 2, p->y0 + p->h / 2);
}

/* Panel 1: GB/s against copy size. */
static void bw_panel(const bench_bw *bw, svg_panel *p) {
  static const struct {
    bench_bw_kind k;
    const char *name;
    int color, dashed;
  } lines[] = {{BW_H2D_PAGEABLE, "H2D pageable", 1, 0},
               {BW_H2D_PINNED_SYNC, "H2D pinned (sync)", 3, 0},
               {BW_H2D_PINNED_ASYNC, "H2D pinned (async)", 0, 0},
               {BW_H2D_REGISTERED, "H2D registered", 2, 0},
               {BW_D2H_PAGEABLE, "D2H pageable", 1, 1},
               {BW_D2H_PINNED_ASYNC, "D2H pinned (async)", 0, 1},
               {BW_MEMCPY, "host memcpy (no GPU)", 4, 0}};
  p->title = bw->on_gpu ? "Copy bandwidth by size" : "Host memcpy by size";
  p->xlabel = "bytes per copy";
  p->ylabel = "GB/s";
  p->xlog = 1;
  p->legend_at = bw->on_gpu ? 0.55 : 0; /* GPU: between pageable (low)
                                          and pinned (high) */
  if (!bw->ran || bw->nsizes < 1)
    return;
  p->xmin = (double)bw->sizes[0];
  p->xmax = (double)bw->sizes[bw->nsizes - 1];
  for (int i = 0; i < bw->nsizes && i < MAX_POINTS; i++) {
    p->xticks[p->nxticks] = (double)bw->sizes[i];
    bench_bytes_str(p->xtick_label[p->nxticks++], 16, bw->sizes[i]);
  }
  for (size_t l = 0; l < sizeof lines / sizeof *lines; l++) {
    if ((lines[l].k == BW_MEMCPY) == bw->on_gpu)
      continue;
    svg_series *s = &p->s[p->nseries++];
    s->name = lines[l].name;
    s->color = COLORS[lines[l].color];
    s->dashed = lines[l].dashed;
    for (int i = 0; i < bw->nsizes && i < MAX_POINTS; i++) {
      s->x[s->n] = (double)bw->sizes[i];
      s->y[s->n++] = bw->gbs[i][lines[l].k];
      if (bw->gbs[i][lines[l].k] > p->ymax)
        p->ymax = bw->gbs[i][lines[l].k];
    }
  }
}

/* Panel 2: epoch time against workers, one line per (dtype, pin). */
static void sweep_panel(const bench_loader *lr, svg_panel *p) {
  p->title = "Loader epoch time by workers (no training step)";
  p->xlabel = "workers";
  p->ylabel = "seconds per epoch";
  for (int dt = 0; dt < 2; dt++)
    for (int pin = 1; pin >= 0; pin--) {
      svg_series *s = &p->s[p->nseries];
      memset(s, 0, sizeof *s);
      for (int i = 0; i < lr->nsweep && s->n < MAX_POINTS; i++) {
        const bench_sweep_row *r = &lr->sweep[i];
        if (r->float32 != dt || r->pin != pin)
          continue;
        s->x[s->n] = r->workers;
        s->y[s->n++] = r->epoch_s;
        if (r->epoch_s > p->ymax)
          p->ymax = r->epoch_s;
        if (r->workers > p->xmax)
          p->xmax = r->workers;
      }
      if (!s->n)
        continue;
      s->name = dt ? (pin ? "float32, pinned" : lr->on_gpu ? "float32, pageable"
                                                            : "float32")
                   : (pin ? "uint8, pinned" : lr->on_gpu ? "uint8, pageable"
                                                         : "uint8");
      s->color = COLORS[dt ? 1 : 0];
      s->dashed = !pin && lr->on_gpu;
      p->nseries++;
    }
  if (!p->nseries)
    return;
  for (int i = 0; i < lr->nsweep && p->nxticks < MAX_POINTS; i++) {
    int seen = 0;
    for (int j = 0; j < p->nxticks; j++)
      seen |= p->xticks[j] == lr->sweep[i].workers;
    if (seen)
      continue;
    p->xticks[p->nxticks] = lr->sweep[i].workers;
    snprintf(p->xtick_label[p->nxticks++], 16, "%d", lr->sweep[i].workers);
  }
  if (p->xmax <= p->xmin)
    p->xmax = p->xmin + 1;
}

static void write_style(FILE *f) {
  fprintf(f,
          "<style>\n"
          "  text { font-family: sans-serif; font-size: 12px; fill: #222; }\n"
          "  .title { font-size: 15px; font-weight: bold; text-anchor: middle; }\n"
          "  .label { font-size: 13px; text-anchor: middle; }\n"
          "  .xtick { text-anchor: middle; }\n"
          "  .ytick { text-anchor: end; }\n"
          "  .legend { font-size: 12px; }\n"
          "  .grid { stroke: #ddd; stroke-width: 1; }\n"
          "  .frame { fill: none; stroke: #444; stroke-width: 1; }\n"
          "  .legendbox { fill: white; fill-opacity: 0.85; stroke: #bbb; }\n"
          "</style>\n");
}

int bench_write_svg(const char *path, const bench_results *r) {
  static svg_panel p[2]; /* large; one plot at a time */
  memset(p, 0, sizeof p);
  for (int i = 0; i < 2; i++) {
    p[i].x0 = 80 + i * 550;
    p[i].y0 = 60;
    p[i].w = 440;
    p[i].h = 320;
  }
  bw_panel(&r->bw, &p[0]);
  sweep_panel(&r->loader, &p[1]);
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "pinloader bench: error: cannot write %s\n", path);
    return -1;
  }
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
             "height=\"%d\" viewBox=\"0 0 %d %d\">\n",
          SVG_W, SVG_H, SVG_W, SVG_H);
  write_style(f);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f, "<text x=\"%d\" y=\"22\" class=\"title\">pinloader %s bench: "
             "%s, %d CPUs</text>\n", SVG_W / 2, r->version,
          r->loader.device[0] ? r->loader.device
          : r->bw.on_gpu      ? r->bw.device
                              : "cpu", r->cpus);
  for (int i = 0; i < 2; i++) {
    if (p[i].ymax <= 0)
      p[i].ymax = 1;
    p[i].ymax *= 1.1;
    panel_axes(f, &p[i]);
    panel_series(f, &p[i]);
  }
  fprintf(f, "</svg>\n");
  if (ferror(f) | (fclose(f) != 0)) {
    fprintf(stderr, "pinloader bench: error: writing %s failed\n", path);
    return -1;
  }
  return 0;
}
