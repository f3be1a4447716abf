/* The CLI's commands and shared helpers. */
#ifndef PL_CLI_H
#define PL_CLI_H

#include "pinloader.h"

#include <stdint.h>
#include <stdio.h>

int pl_cmd_run(int argc, char **argv);
int pl_cmd_bench(int argc, char **argv); /* tools/cmd_bench.c */

/* Strict number parsing for flags: the whole string, in range, as a person
 * writes numbers: no leading whitespace, no '+', no base prefix ("0x").
 * 0 on success. */
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_int(const char *s, int lo, int hi, int *out);
int cli_parse_double(const char *s, double *out);
/* Bytes: "65536", "64K", "256M", "4G"; positive. */
int cli_parse_size(const char *s, uint64_t *out);

/* "--device cpu|cuda|cuda:N" */
int cli_parse_device(const char *s, pl_device_kind *kind, int *index);

#define PL_CLI_MIN(a, b) ((a) < (b) ? (a) : (b))

/* A command's own flag (not a loader option): `arg` names its value (NULL:
 * a switch); `count`: the value is an integer in [min, max], and `hint`
 * follows the range error. */
typedef struct cli_flag {
  const char *name; /* without the dashes: "dataset" */
  const char *arg;
  const char *doc;
  int id;
  int count;
  uint64_t min, max;
  const char *hint;
} cli_flag;

/* Flags of one command: its own (flags) and the loader's options, which go
 * into cfg through pl_loader_config_set. set[i]: table option i was given. */
typedef struct cli_parser {
  const char *cmd; /* "pinloader run", for messages */
  const cli_flag *flags;
  int nflags;
  pl_loader_config *cfg;
  /* Called for each of the command's own flags; value NULL for a switch,
   * n the parsed count. Returns 0, or 2 after printing why. */
  int (*on_flag)(void *user, const cli_flag *f, const char *value,
                 uint64_t n);
  void *user;
  unsigned char set[64];
} cli_parser;

/* 0: parsed; 2: a mistake, explained on stderr ("unknown option --shufle
 * (did you mean --shuffle?)"); -1: --help was printed. */
int cli_parse_args(cli_parser *p, int argc, char **argv);
void cli_usage(const cli_parser *p, FILE *f);
/* PL_KEEP_* for the rank, world size and device ordinal given as flags. */
unsigned cli_shard_keep(const cli_parser *p);

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
