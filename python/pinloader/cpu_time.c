/* CPU-time accounting: the worker processes' CPU seconds, for the
 * loader's timings (pl_worker_cpu_fn). */
#include "procset.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* User + system CPU seconds of a process, from /proc/PID/stat; -1 when it
 * cannot be read (gone, or no /proc). */
static double pid_cpu_s(long pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  unsigned long long ut, st;
  /* After the name: state ppid pgrp session tty tpgid flags minflt cminflt
   * majflt cmajflt utime stime. */
  if (!p ||
      sscanf(p + 1, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu",
             &ut, &st) != 2)
    return -1;
  long tck = sysconf(_SC_CLK_TCK);
  return (double)(ut + st) / (double)(tck > 0 ? tck : 100);
}

/* pl_worker_cpu_fn: the worker processes' CPU so far. A worker that ended
 * keeps its last reading (its pid may be another process's by now). */
double ps_worker_cpu(void *user) {
  ProcSetObject *owner = user;
  procset *ps = owner->ps;
  if (!ps || owner->filler)
    return 0;
  double total = 0;
  for (int i = 0; i < ps->n; i++) {
    channel *ch = &ps->ch[i];
    pthread_mutex_lock(&ps->mu);
    int live = !ch->dead && !ps->closing;
    pthread_mutex_unlock(&ps->mu);
    double v = live ? pid_cpu_s(ch->pid) : -1; /* unlocked: a file read */
    pthread_mutex_lock(&ps->mu);
    if (v > ch->cpu_s && !ch->dead)
      ch->cpu_s = v;
    total += ch->cpu_s;
    pthread_mutex_unlock(&ps->mu);
  }
  return total;
}
