/* The SIGBUS recovery for reads from file mappings: read map_guard.h first.
 *
 * The registry is a list of nodes that is only ever added to: a node is
 * marked free (start 0) when its mapping goes and reused by the next
 * registration, never freed, so the handler can walk the list at any time
 * without a lock (each node's fields are atomics; `next` never changes once
 * the node is published). It holds as many nodes as there were mappings
 * open at once, and stays reachable, so it is no leak.
 *
 * Writers take a spin lock that records its holder's pid: a child forked
 * while a parent thread held it finds another pid there and takes the lock
 * over (the parent's thread does not exist in the child), so a forked
 * child never hangs here. The critical sections only link or mark nodes. */
#include "data/map_guard.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct map_node {
  _Atomic uintptr_t start, end; /* start 0: free */
  const char *path;             /* [lock] */
  uint64_t size;                /* [lock] bytes when mapped */
  struct map_node *next;        /* immutable once published */
} map_node;

/* The process-global part (map_guard.h says why there is one). */
static _Atomic(map_node *) reg_head;
static _Atomic int reg_lock_pid;
static int reg_count;         /* [lock] mappings registered */
static bool handler_in_chain; /* [lock] ours is in the SIGBUS chain */
static struct sigaction prev_action; /* [lock] written before ours runs */
static _Thread_local pl_map_guard *current_guard;

static void reg_lock(void) {
  int me = (int)getpid();
  for (;;) {
    int cur = 0;
    if (atomic_compare_exchange_weak(&reg_lock_pid, &cur, me))
      return;
    /* Held by another process: a parent thread at fork time. */
    if (cur != 0 && cur != me &&
        atomic_compare_exchange_strong(&reg_lock_pid, &cur, me))
      return;
    sched_yield();
  }
}

static void reg_unlock(void) { atomic_store(&reg_lock_pid, 0); }

static map_node *find_node(uintptr_t addr) {
  for (map_node *n = atomic_load(&reg_head); n; n = n->next) {
    uintptr_t s = atomic_load_explicit(&n->start, memory_order_acquire);
    if (s && addr >= s &&
        addr < atomic_load_explicit(&n->end, memory_order_relaxed))
      return n;
  }
  return NULL;
}

/* ------------------------------------------------------------ handler */

/* Hands a SIGBUS that is not ours to whoever had it before. */
static void chain(int sig, siginfo_t *si, void *uc) {
  const struct sigaction *p = &prev_action;
  if ((p->sa_flags & SA_SIGINFO) && p->sa_sigaction) {
    p->sa_sigaction(sig, si, uc);
    return;
  }
  if (!(p->sa_flags & SA_SIGINFO) && p->sa_handler != SIG_DFL &&
      p->sa_handler != SIG_IGN) {
    p->sa_handler(sig);
    return;
  }
  /* The default action: a fault re-runs the instruction and dies of it; a
   * SIGBUS sent by someone is sent again. */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &dfl, NULL);
  if (!si || si->si_code <= 0)
    raise(sig);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
  /* si_code > 0: raised by the kernel for a memory access, not sent. */
  if (si && si->si_code > 0 && find_node((uintptr_t)si->si_addr)) {
    pl_map_guard *g = current_guard;
    if (g) {
      g->fault_addr = (uintptr_t)si->si_addr;
      siglongjmp(g->jump, 1);
    }
  }
  chain(sig, si, uc);
}

/* [lock] */
static pl_status install(pl_error *err) {
  if (handler_in_chain)
    return PL_OK;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  /* SA_NODEFER: the jump leaves the handler without sigreturn, and with
   * savemask 0 nothing would unblock SIGBUS again. */
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, &prev_action) != 0)
    return pl_errorf(err, PL_IO, "cannot install the SIGBUS handler: %s",
                     strerror(errno));
  handler_in_chain = true;
  return PL_OK;
}

/* [lock] Only while ours is the installed handler: one installed later
 * may chain to ours, and keeps working if ours stays. */
static void uninstall(void) {
  struct sigaction cur;
  if (!handler_in_chain || sigaction(SIGBUS, NULL, &cur) != 0 ||
      !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigbus)
    return;
  sigaction(SIGBUS, &prev_action, NULL);
  handler_in_chain = false;
}

bool pl_map_guard_installed(void) {
  struct sigaction cur;
  return sigaction(SIGBUS, NULL, &cur) == 0 &&
         (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus;
}

/* ------------------------------------------------------------ registry */

/* [lock] A free node, or a new one linked at the head. */
static map_node *take_node(void) {
  for (map_node *n = atomic_load(&reg_head); n; n = n->next)
    if (!atomic_load(&n->start))
      return n;
  map_node *n = calloc(1, sizeof *n);
  if (!n)
    return NULL;
  n->next = atomic_load(&reg_head);
  atomic_store(&reg_head, n);
  return n;
}

pl_status pl_map_guard_register(const void *addr, size_t len,
                                const char *path, pl_error *err) {
  if (!addr || !len)
    return PL_OK;
  reg_lock();
  pl_status s = install(err);
  map_node *n = s == PL_OK ? take_node() : NULL;
  if (s == PL_OK && !n)
    s = pl_errorf(err, PL_NO_MEMORY, "%s: out of memory", path);
  if (n) {
    n->path = path;
    n->size = len;
    atomic_store_explicit(&n->end, (uintptr_t)addr + len,
                          memory_order_relaxed);
    atomic_store_explicit(&n->start, (uintptr_t)addr, memory_order_release);
    reg_count++;
  } else if (reg_count == 0) {
    uninstall();
  }
  reg_unlock();
  return s;
}

void pl_map_guard_unregister(const void *addr) {
  if (!addr)
    return;
  reg_lock();
  map_node *n = find_node((uintptr_t)addr);
  if (n) {
    atomic_store(&n->start, 0);
    atomic_store(&n->end, 0);
    n->path = NULL;
    if (--reg_count == 0)
      uninstall();
  }
  reg_unlock();
}

/* ------------------------------------------------------------ guards */

void pl_map_guard_push(pl_map_guard *g) {
  g->outer = current_guard;
  g->fault_addr = 0;
  atomic_signal_fence(memory_order_seq_cst);
  current_guard = g;
}

void pl_map_guard_leave(pl_map_guard *g) {
  current_guard = g->outer;
  atomic_signal_fence(memory_order_seq_cst);
}

/* SA_NODEFER keeps SIGBUS unblocked through the jump; a wrapper between
 * the kernel and our handler (ThreadSanitizer's does) may block it anyway,
 * and the next fault would then kill the process. Only on the fault path. */
static void unblock_sigbus(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGBUS);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

pl_status pl_map_guard_failed(pl_map_guard *g, pl_error *err) {
  pl_map_guard_leave(g);
  unblock_sigbus();
  char path[4096];
  uint64_t was = 0;
  reg_lock();
  map_node *n = find_node(g->fault_addr);
  snprintf(path, sizeof path, "%s", n && n->path ? n->path : "a data file");
  if (n)
    was = n->size;
  reg_unlock();
  struct stat st;
  int gone = stat(path, &st) != 0;
  if (gone)
    pl_errorf(err, PL_IO,
                     "%s: the file changed while it was being read (it is "
                     "gone now: %s; it was %llu bytes)",
                     path, strerror(errno), (unsigned long long)was);
  else
    pl_errorf(err, PL_IO,
              "%s: the file changed while it was being read (it is %llu "
              "bytes now, was %llu)",
              path, (unsigned long long)st.st_size, (unsigned long long)was);
  pl_error_set_path(err, path);
  return PL_IO;
}
