/* `pinloader bench`: the measurements, their results and the reports.
 *
 * Split by what each file may touch:
 *   cmd_bench.c     options, the order of experiments, the summary
 *   bench_cuda.c    raw CUDA runtime baselines (copies, overlap); stubs that
 *                   report "no CUDA" when built without PL_HAVE_CUDA
 *   bench_host.c    host memcpy bandwidth (the no-GPU stand-in), timing and
 *                   spin helpers
 *   bench_loader.c  the seeds' experiment through the public loader API, and
 *                   the generated CIFAR-10-format data set
 *   bench_report.c  text tables, JSON and CSV
 *   bench_svg.c     the SVG plot
 * Results are plain structs so that every report is a pure function of them.
 */
#ifndef PL_BENCH_H
#define PL_BENCH_H

#include "cli.h"

#include <stdint.h>
#include <stdio.h>

int pl_cmd_bench(int argc, char **argv);

/* ------------------------------------------------------------- bandwidth */

#define BENCH_MAX_SIZES 16

/* Copy kinds, in table order. Host-only runs fill BW_MEMCPY alone. */
typedef enum bench_bw_kind {
  BW_H2D_PAGEABLE = 0,
  BW_H2D_PINNED_SYNC,
  BW_H2D_PINNED_ASYNC,
  BW_H2D_REGISTERED,
  BW_D2H_PAGEABLE,
  BW_D2H_PINNED_SYNC,
  BW_D2H_PINNED_ASYNC,
  BW_D2H_REGISTERED,
  BW_MEMCPY,
  BW_KIND_COUNT
} bench_bw_kind;

extern const char *const bench_bw_kind_name[BW_KIND_COUNT];

typedef struct bench_bw {
  int ran;        /* 0: not run (skipped) */
  int on_gpu;     /* 1: CUDA copies; 0: host memcpy */
  char device[128];
  char note[256]; /* why the GPU part was skipped, or "" */
  int nsizes;
  uint64_t sizes[BENCH_MAX_SIZES];
  double gbs[BENCH_MAX_SIZES][BW_KIND_COUNT]; /* GB/s (1e9); 0 = not run */
  double pin_alloc_ms, pin_free_ms, register_ms; /* cost of pinning the
                                                    largest buffer */
} bench_bw;

/* ------------------------------------------------------------- overlap */

typedef struct bench_overlap_row {
  int pinned, non_blocking;
  double copy_ms;   /* the copy alone, as this row issues it */
  double cpu_ms;    /* the CPU work alone */
  double gpu_ms;    /* the GPU work alone */
  double iter_ms;   /* copy + CPU work + GPU work, as the pattern runs */
  double saved_ms;  /* (copy + cpu + gpu) - iter */
  double max_saved_ms; /* min(copy, cpu) */
  double saved_pct;    /* saved / max_saved, in percent */
} bench_overlap_row;

typedef struct bench_overlap {
  int ran;
  char note[256];
  uint64_t copy_bytes;
  double work_ms;
  int reps;
  bench_overlap_row rows[4]; /* pinned x non_blocking: 11, 10, 01, 00 */
} bench_overlap;

/* ------------------------------------------------------------- loader */

#define BENCH_MAX_SEED_EPOCHS 16
#define BENCH_MAX_SWEEP 64

typedef struct bench_seed_row {
  int pin, non_blocking;
  int epochs;
  double epoch_s[BENCH_MAX_SEED_EPOCHS];
  double mean_s;   /* over epochs after the first when there are several */
  double floor_s;  /* batches x work */
  uint64_t batches; /* per epoch */
  uint64_t pinned_fallbacks;
  uint64_t batch_buffers; /* the loader's, for bench_seed_steady */
} bench_seed_row;

/* Whether an epoch of the row is long enough to show steady state: at
 * least twice as many batches as the loader has batch buffers. A shorter
 * epoch is mostly the pipeline filling (threads starting, every buffer
 * touched for the first time), so its "over floor" says nothing about the
 * loader and is not printed. */
int bench_seed_steady(const bench_seed_row *r);

typedef struct bench_sweep_row {
  int workers;
  int float32; /* 0: uint8 as stored; 1: image as float32 / 255 */
  int pin;
  double epoch_s;
  double samples_s;
  double gbs; /* bytes delivered (all fields) per second, 1e9 */
} bench_sweep_row;

typedef struct bench_loader {
  int ran;
  char note[PL_ERROR_MESSAGE_MAX + 64];
  char data[512];   /* "generated: 50000 records in 5 files in /tmp/..." */
  char device[128]; /* as the loader names it */
  int on_gpu;
  uint64_t records;
  uint32_t batch_size;
  int workers;
  double work_ms;
  int sleep_work; /* 1: the CPU work sleeps; 0: it spins */
  int nseed;
  bench_seed_row seed[4];
  int nsweep;
  bench_sweep_row sweep[BENCH_MAX_SWEEP];
} bench_loader;

/* ------------------------------------------------------------- options */

typedef struct bench_opts {
  int run_bw, run_overlap, run_loader;
  int quick;
  int progress; /* stderr is a terminal and not --quiet */
  const char *json, *csv, *plot; /* NULL: not written; "-": stdout */
  /* bandwidth */
  uint64_t min_bytes, max_bytes;
  /* overlap */
  uint64_t overlap_bytes;
  double overlap_work_ms;
  /* loader */
  const char *data; /* "FILE[,FILE...]" or NULL: generate */
  const char *keep_data; /* generate into this directory and keep it */
  uint64_t records;
  int files;
  uint32_t batch_size;
  int workers;
  double work_ms;
  int sleep_work;
  int epochs;
  int sweep_workers[32];
  int nsweep_workers;
  int seed_run, sweep_run; /* loader parts */
  pl_device_kind device;
  int device_index;
  uint64_t seed;
  int cuda_ok; /* a CUDA device is usable (decided once) */
} bench_opts;

typedef struct bench_results {
  char version[32];
  int cpus;
  int quick;
  double total_s;
  bench_bw bw;
  bench_overlap overlap;
  bench_loader loader;
} bench_results;

/* ------------------------------------------------------------- helpers */

double bench_now(void);
/* Busy-waits `ms` milliseconds (CPU work that cannot overlap with itself). */
void bench_spin_ms(double ms);
void bench_sleep_ms(double ms);
/* "64 KiB", "1 GiB" into buf. */
const char *bench_bytes_str(char *buf, size_t n, uint64_t bytes);
/* Progress on stderr, only when o->progress. */
void bench_progress(const bench_opts *o, const char *label, uint64_t done,
                    uint64_t total, double t0);
void bench_progress_end(const bench_opts *o);

/* Host memcpy bandwidth by size into bw (BW_MEMCPY). 0, or -1 with a
 * message on stderr. */
int bench_host_bandwidth(const bench_opts *o, bench_bw *bw);

/* CUDA: usable device count (0 without CUDA support or a device); the
 * bandwidth and overlap experiments. Return 0, or -1 after writing the
 * cause into the result's note. */
int bench_cuda_devices(void);
int bench_cuda_bandwidth(const bench_opts *o, bench_bw *bw);
int bench_cuda_overlap(const bench_opts *o, bench_overlap *ov);

/* The generated CIFAR-10-format data set: `files` files of records with a
 * label byte < 10 and 3072 pseudo-random pixel bytes, `records` in all,
 * named data_batch_1.bin ... in dir. Fills paths (caller frees each).
 * Returns 0, or -1 with a message on stderr. */
int bench_make_cifar(const char *dir, uint64_t records, int files,
                     uint64_t seed, char **paths);

int bench_loader_run(const bench_opts *o, bench_loader *lr);

/* Reports. Text goes to f (a person); JSON/CSV to a path or "-". */
void bench_print_bw(FILE *f, const bench_bw *bw);
void bench_print_overlap(FILE *f, const bench_overlap *ov);
void bench_print_loader_seed(FILE *f, const bench_loader *lr);
void bench_print_loader_sweep(FILE *f, const bench_loader *lr);
int bench_write_json(const char *path, const bench_results *r);
int bench_write_csv(const char *path, const bench_results *r);
int bench_write_svg(const char *path, const bench_results *r);

#endif
