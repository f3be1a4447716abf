/* Host pages for staging buffers: mapping, NUMA placement and multi-threaded
 * fault-in (see host_pages.h). */
#include "backend/host_pages.h"

#include "core/common.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum {
  TOUCH_MAX_THREADS = 8,
  /* Below this a thread costs more to start than it saves. */
  TOUCH_BYTES_PER_THREAD = 32u << 20,
  MPOL_PREFERRED_ = 1, /* <linux/mempolicy.h>, without needing the header */
  NODE_MAX = 1024,
};

static uint64_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (uint64_t)p : 4096;
}

uint64_t pl_pages_size(uint64_t bytes) {
  uint64_t ps = page_size();
  return bytes ? (bytes + ps - 1) / ps * ps : ps;
}

typedef struct touch_job {
  volatile char *base;
  uint64_t bytes, step;
} touch_job;

static void touch_range(const touch_job *j) {
  for (uint64_t o = 0; o < j->bytes; o += j->step)
    j->base[o] = 0;
}

static void *touch_main(void *arg) {
  touch_range(arg);
  return NULL;
}

static int touch_threads(uint64_t bytes, int threads) {
  if (threads > 0)
    return PL_MIN(threads, TOUCH_MAX_THREADS);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t by_size = bytes / TOUCH_BYTES_PER_THREAD;
  int n = (int)(by_size < TOUCH_MAX_THREADS ? by_size : TOUCH_MAX_THREADS);
  if (cpus > 0 && n > cpus)
    n = (int)cpus;
  return n < 1 ? 1 : n;
}

void pl_pages_touch(void *p, uint64_t bytes, int threads) {
  uint64_t ps = page_size();
  int n = touch_threads(bytes, threads);
  uint64_t pages = (bytes + ps - 1) / ps, per = (pages + n - 1) / n;
  touch_job jobs[TOUCH_MAX_THREADS];
  pthread_t tids[TOUCH_MAX_THREADS];
  int started[TOUCH_MAX_THREADS] = {0};
  for (int i = 0; i < n; i++) {
    uint64_t first = PL_MIN((uint64_t)i * per, pages);
    uint64_t last = PL_MIN(first + per, pages);
    jobs[i] = (touch_job){(volatile char *)p + first * ps,
                          PL_MIN(last * ps, bytes) - PL_MIN(first * ps, bytes),
                          ps};
    /* Thread 0's share runs here; a thread that fails to start is done
     * inline too, so the pages are always touched. */
    if (i > 0 && pthread_create(&tids[i], NULL, touch_main, &jobs[i]) == 0)
      started[i] = 1;
  }
  for (int i = 0; i < n; i++)
    if (!started[i])
      touch_range(&jobs[i]);
  for (int i = 1; i < n; i++)
    if (started[i])
      pthread_join(tids[i], NULL);
}

/* Prefer `node` for the range's pages; ignored where mbind is refused
 * (containers often forbid it) or the kernel lacks NUMA. */
static void prefer_node(void *p, uint64_t bytes, int node) {
#ifdef SYS_mbind
  if (node < 0 || node >= NODE_MAX)
    return;
  unsigned long mask[NODE_MAX / (8 * sizeof(unsigned long))] = {0};
  mask[node / (8 * sizeof(unsigned long))] = 1ul
                                             << (node % (8 * sizeof(unsigned long)));
  (void)syscall(SYS_mbind, p, (unsigned long)bytes, MPOL_PREFERRED_, mask,
                (unsigned long)NODE_MAX + 1, 0u);
#else
  (void)p, (void)bytes, (void)node;
#endif
}

void *pl_pages_alloc(uint64_t bytes, int node, int threads) {
  uint64_t n = pl_pages_size(bytes);
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED)
    return NULL;
#ifdef MADV_HUGEPAGE
  if (n >= (2u << 20)) /* fewer pages to fault in and to lock */
    madvise(p, n, MADV_HUGEPAGE);
#endif
  prefer_node(p, n, node);
  pl_pages_touch(p, n, threads);
  return p;
}

void pl_pages_free(void *p, uint64_t bytes) {
  if (p)
    munmap(p, pl_pages_size(bytes));
}

/* "00000000:1B:00.0" or "0000:1b:00.0" -> "0000:1b:00.0". */
static int normalize_bus_id(const char *in, char *out, size_t cap) {
  const char *colon = strchr(in, ':');
  if (!colon || colon - in < 4)
    return -1;
  const char *s = colon - 4; /* keep the last 4 digits of the domain */
  size_t n = strlen(s);
  if (n + 1 > cap)
    return -1;
  for (size_t i = 0; i <= n; i++)
    out[i] = (char)tolower((unsigned char)s[i]);
  return 0;
}

int pl_pci_numa_node(const char *bus_id) {
  char id[64], path[160];
  if (!bus_id || normalize_bus_id(bus_id, id, sizeof id) != 0)
    return -1;
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", id);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  int node = -1;
  if (fscanf(f, "%d", &node) != 1)
    node = -1;
  fclose(f);
  return node >= 0 && node < NODE_MAX ? node : -1;
}
