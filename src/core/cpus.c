/* Core counts from the affinity mask and the cgroup quota: a container
 * limited to 4 CPUs on a 128-core host must budget 4, not 128. */
#include "core/cpus.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int pl_cpus_from_quota(const char *text) {
  char q[32];
  double quota, period = 100000;
  if (!text || sscanf(text, "%31s %lf", q, &period) < 1 || !strcmp(q, "max"))
    return 0;
  char *end;
  quota = strtod(q, &end);
  if (*end || !(quota > 0) || !(period > 0)) /* v1 writes -1: no limit */
    return 0;
  double cores = quota / period;
  int n = (int)cores;
  return n + (cores > n);
}

static int read_small(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  return n > 0;
}

static int cgroup_cpus(void) {
  char buf[128], q[64];
  if (read_small("/sys/fs/cgroup/cpu.max", buf, sizeof buf))
    return pl_cpus_from_quota(buf);
  char period[64];
  if (read_small("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", q, sizeof q) &&
      read_small("/sys/fs/cgroup/cpu/cpu.cfs_period_us", period,
                 sizeof period)) {
    snprintf(buf, sizeof buf, "%.*s %.*s", (int)strcspn(q, "\n"), q,
             (int)strcspn(period, "\n"), period);
    return pl_cpus_from_quota(buf);
  }
  return 0;
}

int pl_cpus_available(void) {
  int n = 0;
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    n = CPU_COUNT(&set);
#endif
  if (n <= 0)
    n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  int quota = cgroup_cpus();
  if (quota > 0 && quota < n)
    n = quota;
  return n > 0 ? n : 1;
}

double pl_process_cpu_s(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
    return 0;
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
