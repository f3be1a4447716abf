/* The bottleneck report: a pure function from a loader's settings and its
 * per-stage timings to findings (which stage bounds throughput, by how
 * much, and the measurement each finding rests on), and their text or JSON
 * form. Nothing here reads a clock or a loader: tests feed it constructed
 * numbers.
 *
 * The rule. The consumer's wait for data is the one signal every stall
 * shows in. If it waits under WAIT_BOUND of the time, its own step bounds
 * throughput. Otherwise the loader does, and the stage that is busiest
 * (workers reading and transforming, the copy engine, device transforms)
 * is named when it is busy at least BUSY_BOUND of the time; failing that,
 * workers starved of batch buffers name the buffers, and otherwise the
 * depth is too shallow for the loader's bursts (prefetch). */
#ifndef PL_LOADER_REPORT_H
#define PL_LOADER_REPORT_H

#include "core/common.h"

typedef enum {
  PL_BOUND_UNKNOWN = 0, /* too few batches to judge */
  PL_BOUND_CONSUMER,    /* the training step */
  PL_BOUND_WORKERS,     /* reading, decoding, host transforms */
  PL_BOUND_COPY,        /* host-to-device copies */
  PL_BOUND_BUFFERS,     /* the consumer holds the batch buffers */
  PL_BOUND_PREFETCH,    /* no stage is busy, yet the step waits */
  PL_BOUND_DEVXFORM,    /* device transforms */
  PL_BOUND_COUNT_
} pl_bound;

/* "consumer", "workers", ... as in the JSON form. */
const char *pl_bound_name(pl_bound b);

typedef struct pl_report_in {
  const char *device; /* "cpu", "cuda:0 NVIDIA H200" */
  int cuda;
  uint32_t batch_size;
  int auto_workers, auto_prefetch;
  pl_loader_timings t;
} pl_report_in;

enum { PL_FINDINGS_MAX = 12, PL_FINDING_TEXT = 512 };

typedef struct pl_finding {
  const char *stage; /* "verdict", "step", "workers", "copy", ... */
  char text[PL_FINDING_TEXT];
} pl_finding;

typedef struct pl_analysis {
  pl_bound bound;
  double wait_fraction; /* of the consumer's time, waiting for data */
  double speedup;       /* loader-bound: the step's rate without waits over
                           the rate seen; consumer-bound: how much faster
                           the loader could deliver than the step takes */
  int nfindings;
  pl_finding findings[PL_FINDINGS_MAX];
} pl_analysis;

void pl_report_analyze(const pl_report_in *in, pl_analysis *out);

/* Text (flags 0) or JSON (PL_REPORT_JSON) into buf, as pl_loader_report
 * documents (*len: size in, length needed out). */
pl_status pl_report_format(const pl_report_in *in, const pl_analysis *a,
                           int flags, char *buf, size_t *len, pl_error *err);

#endif /* PL_LOADER_REPORT_H */
