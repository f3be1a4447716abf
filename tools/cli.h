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
/* Whether table option `name` ("epoch") was given as a flag. */
int cli_was_set(const cli_parser *p, const char *name);
/* PL_KEEP_* for the rank, world size and device ordinal given as flags. */
unsigned cli_shard_keep(const cli_parser *p);

/* A one-line progress bar on stream `f` (a terminal): done of total. */
void cli_progress(FILE *f, const char *label, uint64_t done, uint64_t total,
                  double elapsed_s);
void cli_progress_end(FILE *f);

/* "12.3 GB/s", "1.23 M/s" into buf. */
const char *cli_rate(char *buf, size_t n, double per_s, const char *unit);

/* An output file, written whole or not at all (tools/cli_output.c). */
typedef struct cli_output {
  const char *opt, *path; /* "--save-state", NULL: not asked for */
  char tmp[4200];         /* the temporary file, renamed over path */
  int fd;
  FILE *f;
} cli_output;

/* Checks `path` before a run (nothing there or a regular file; the
 * directory writable) and creates the temporary file. path NULL: nothing
 * to do. 0, or 1 after a message naming opt and path. */
int cli_output_open(cli_output *o, const char *opt, const char *path);
FILE *cli_output_stream(cli_output *o);
int cli_output_write(cli_output *o, const void *buf, size_t len);
/* Closes and renames over the path: 0, or 1 after a message. */
int cli_output_commit(cli_output *o);
/* Removes the temporary file: the path keeps what it had. */
void cli_output_abort(cli_output *o);
/* Whether two paths name one file (the same inode, or for a path not
 * there yet, the same resolved place). */
int cli_same_file(const char *a, const char *b);

/* JSON: a string, quoted and escaped; a number (NaN, inf: null). Shared by
 * `run --json` and `bench --json`, which use one schema (docs/bench.md). */
void cli_json_str(FILE *f, const char *s);
void cli_json_num(FILE *f, double v);

/* Monotonic seconds. */
double pl_now_cli(void);

/* Log hook printing "pinloader: warning: ..." to stderr. */
void cli_log(void *user, pl_log_level level, const char *msg);

#endif
