/* Helpers shared by the CLI's commands. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double pl_now_cli(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* strtoull and strtol also take " 1", "+1" and " -1" (as 2^64-1). */
static int starts_plainly(const char *s, int allow_minus) {
  if (allow_minus && *s == '-')
    s++;
  return *s >= '0' && *s <= '9' && !(s[0] == '0' && (s[1] == 'x' || s[1] == 'X'));
}

int cli_parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  if (!s || !starts_plainly(s, 0))
    return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno)
    return -1;
  *out = v;
  return 0;
}

int cli_parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  if (!s || !*s)
    return -1;
  if (!starts_plainly(s, 1))
    return -1;
  long v = strtol(s, &end, 10);
  if (*end || errno || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

int cli_parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  if (!s || !*s)
    return -1;
  if (!starts_plainly(s, 1) && !(s[0] == '.' || (s[0] == '-' && s[1] == '.')))
    return -1;
  double v = strtod(s, &end);
  if (*end || errno || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

int cli_parse_size(const char *s, uint64_t *out) {
  char buf[32];
  size_t n = strlen(s);
  uint64_t mult = 1, v;
  if (n == 0 || n >= sizeof buf)
    return -1;
  memcpy(buf, s, n + 1);
  char c = buf[n - 1];
  if (c == 'K' || c == 'k') mult = 1ull << 10;
  else if (c == 'M' || c == 'm') mult = 1ull << 20;
  else if (c == 'G' || c == 'g') mult = 1ull << 30;
  if (mult > 1)
    buf[n - 1] = '\0';
  if (cli_parse_u64(buf, &v) || v == 0 || v > (UINT64_MAX >> 2) / mult)
    return -1;
  *out = v * mult;
  return 0;
}

int cli_parse_device(const char *s, pl_device_kind *kind, int *index) {
  *index = 0;
  if (!strcmp(s, "cpu")) {
    *kind = PL_DEVICE_CPU;
    return 0;
  }
  if (!strcmp(s, "cuda")) {
    *kind = PL_DEVICE_CUDA;
    return 0;
  }
  if (!strncmp(s, "cuda:", 5) && cli_parse_int(s + 5, 0, 1 << 16, index) == 0) {
    *kind = PL_DEVICE_CUDA;
    return 0;
  }
  return -1;
}

void cli_progress(FILE *f, const char *label, uint64_t done, uint64_t total,
                  double elapsed_s) {
  enum { WIDTH = 30 };
  double frac = total ? (double)done / (double)total : 1.0;
  int filled = (int)(frac * WIDTH + 0.5);
  char bar[WIDTH + 1];
  for (int i = 0; i < WIDTH; i++)
    bar[i] = i < filled ? '#' : '.';
  bar[WIDTH] = '\0';
  fprintf(f, "\r%-12s [%s] %3.0f%% %llu/%llu %.1fs", label, bar, frac * 100,
          (unsigned long long)done, (unsigned long long)total, elapsed_s);
  fflush(f);
}

void cli_progress_end(FILE *f) {
  fprintf(f, "\r\033[K");
  fflush(f);
}

const char *cli_rate(char *buf, size_t n, double per_s, const char *unit) {
  static const char *const prefix[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (per_s >= 1000 && p < 4) {
    per_s /= 1000;
    p++;
  }
  snprintf(buf, n, "%.2f %s%s/s", per_s, prefix[p], unit);
  return buf;
}

void cli_log(void *user, pl_log_level level, const char *msg) {
  static const char *const names[] = {"debug", "info", "warning", "error"};
  (void)user;
  fprintf(stderr, "pinloader: %s%s%s\n",
          level == PL_LOG_INFO ? "" : names[level],
          level == PL_LOG_INFO ? "" : ": ", msg);
}

void cli_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* JSON has no NaN or infinity: such a number is written as null. */
void cli_json_num(FILE *f, double v) {
  if (v != v || v > 1e300 || v < -1e300)
    fprintf(f, "null");
  else
    fprintf(f, "%.6g", v);
}
