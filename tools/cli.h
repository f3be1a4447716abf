/* The CLI's commands and shared helpers. */
#ifndef PL_CLI_H
#define PL_CLI_H

#include "pinloader.h"

#include <stdint.h>
#include <stdio.h>

int pl_cmd_run(int argc, char **argv);
int pl_cmd_bench(int argc, char **argv); /* tools/cmd_bench.c */

/* Strict number parsing for flags: whole string, in range. 0 on success. */
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_int(const char *s, int lo, int hi, int *out);
int cli_parse_double(const char *s, double *out);
/* Bytes: "65536", "64K", "256M", "4G"; positive. */
int cli_parse_size(const char *s, uint64_t *out);

/* "--device cpu|cuda|cuda:N" */
int cli_parse_device(const char *s, pl_device_kind *kind, int *index);

/* A one-line progress bar on stream `f` (a terminal): done of total. */
void cli_progress(FILE *f, const char *label, uint64_t done, uint64_t total,
                  double elapsed_s);
void cli_progress_end(FILE *f);

/* "12.3 GB/s", "1.23 M/s" into buf. */
const char *cli_rate(char *buf, size_t n, double per_s, const char *unit);

/* Monotonic seconds. */
double pl_now_cli(void);

/* Log hook printing "pinloader: warning: ..." to stderr. */
void cli_log(void *user, pl_log_level level, const char *msg);

#endif
