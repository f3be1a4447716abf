/* The staging pool (see staging_pool.h for its budget and locking). */
#include "backend/cuda/staging_pool.h"
#include "backend/cuda/device.h"
#include "backend/host_pages.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ memory */

/* The one place staging pages come from: mapped, placed on the GPU's NUMA
 * node and faulted in (host_pages.h), pageable until registered. A
 * staging buffer that another process writes would be mapped here from a
 * shared memory file instead. */
static void *stage_pages_alloc(const pl_stage_pool *p, pl_stage *st) {
  st->fd = -1;
  if (PL_FAULT(PL_FAULT_HOST_ALLOC))
    return NULL;
  if (p->cfg.shared) /* pyworkers: a worker process maps the memfd */
    return pl_pages_alloc_shared(p->cfg.bytes, p->cfg.numa_node, 0, &st->fd);
  return pl_pages_alloc(p->cfg.bytes, p->cfg.numa_node, 0);
}

static void stage_pages_free(const pl_stage_pool *p, pl_stage *st) {
  if (p->cfg.shared)
    pl_pages_free_shared(st->p, p->cfg.bytes, st->fd);
  else
    pl_pages_free(st->p, p->cfg.bytes);
}

/* One warning per pool; later fallbacks only count. */
static void warn_fallback(pl_stage_pool *p, const char *why) {
  atomic_fetch_add(&p->fallbacks, 1);
  if (atomic_exchange(&p->warned, 1))
    return;
  pl_log(p->cfg.log, PL_LOG_WARN,
         "%s: %s; using pageable staging memory instead (slower copies; "
         "further fallbacks are counted in pinned_fallbacks, not logged)",
         p->cfg.name, why);
}

/* Page-locks st (pages registered in place, or cudaHostAlloc for
 * PL_CUDA_PIN=hostalloc). Returns 0 on success; on failure fills why and
 * leaves any pages it made in st->p. */
static int stage_pin(pl_stage_pool *p, pl_stage *st, char *why, size_t cap) {
  int hostalloc = p->cfg.method == PIN_HOSTALLOC && !p->cfg.shared;
  cudaError_t rc;
  double t0 = pl_now(), t1 = t0;
  if (PL_FAULT(PL_FAULT_PIN_ALLOC))
    rc = cudaErrorMemoryAllocation;
  else if (hostalloc)
    rc = cudaHostAlloc(&st->p, p->cfg.bytes, cudaHostAllocDefault);
  else if (!(st->p = stage_pages_alloc(p, st)))
    rc = cudaErrorMemoryAllocation;
  else {
    t1 = pl_now();
    rc = cudaHostRegister(st->p, p->cfg.bytes, cudaHostRegisterDefault);
  }
  /* Where a loader's start goes (the first batch waits for its buffer). */
  pl_log(p->cfg.log, PL_LOG_DEBUG,
         "%s: staging buffer of %llu bytes: pages %.2f ms, %s %.2f ms",
         p->cfg.name, (unsigned long long)p->cfg.bytes, (t1 - t0) * 1e3,
         hostalloc ? "cudaHostAlloc" : "cudaHostRegister",
         (pl_now() - t1) * 1e3);
  if (rc == cudaSuccess) {
    st->pinned = 1;
    st->registered = !hostalloc;
    atomic_fetch_add(&p->pinned_bytes, p->cfg.bytes);
    return 0;
  }
  (void)cudaGetLastError();
  if (hostalloc)
    st->p = NULL;
  snprintf(why, cap, "pinning a %llu-byte staging buffer failed (%s: %s)",
           (unsigned long long)p->cfg.bytes,
           hostalloc ? "cudaHostAlloc" : "cudaHostRegister",
           cudaGetErrorString(rc));
  return -1;
}

/* Makes buffer st (all zero but its state): pinned when `pin` (its budget
 * already reserved) and possible, else pageable. Lock not held. On
 * failure the caller frees what was made (stage_unmake). */
static pl_status stage_make(pl_stage_pool *p, pl_stage *st, int pin,
                            int over_budget, pl_error *err) {
  char why[256];
  PL_TRY(pl_cuda_event_new(&st->start, cudaEventDefault, err));
  PL_TRY(pl_cuda_event_new(&st->done, cudaEventDefault, err));
  int fell_back = pin && stage_pin(p, st, why, sizeof why) != 0;
  if (over_budget) {
    snprintf(why, sizeof why, "the pinned budget of %llu bytes is spent",
             (unsigned long long)p->cfg.budget);
    fell_back = 1;
  }
  if (fell_back)
    warn_fallback(p, why);
  if (!st->p && !(st->p = stage_pages_alloc(p, st)))
    return pl_errorf(err, PL_NO_MEMORY,
                     "cannot allocate a %llu-byte staging buffer",
                     (unsigned long long)p->cfg.bytes);
  return PL_OK;
}

static void stage_unmake(pl_stage_pool *p, pl_stage *st) {
  if (st->p && st->pinned && !st->registered) {
    cudaFreeHost(st->p);
  } else if (st->p) {
    if (st->registered)
      cudaHostUnregister(st->p);
    stage_pages_free(p, st);
  }
  if (st->pinned)
    atomic_fetch_sub(&p->pinned_bytes, p->cfg.bytes);
  if (st->start)
    cudaEventDestroy(st->start);
  if (st->done)
    cudaEventDestroy(st->done);
  (void)cudaGetLastError();
  memset(st, 0, sizeof *st); /* EMPTY */
}

/* ------------------------------------------------------------ the pool */

pl_status pl_stage_pool_init(pl_stage_pool *p, const pl_stage_pool_config *cfg,
                             pl_error *err) {
  memset(p, 0, sizeof *p);
  p->cfg = *cfg;
  p->cfg.count = PL_MAX(cfg->count, 1);
  p->cfg.bytes = cfg->bytes ? pl_pages_size(cfg->bytes) : 0;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->slots = pl_calloc((size_t)p->cfg.count, sizeof *p->slots);
  if (!p->slots)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory for the staging pool");
  return PL_OK;
}

void pl_stage_pool_destroy(pl_stage_pool *p) {
  for (int i = 0; p->slots && i < p->cfg.count; i++)
    if (p->slots[i].state != STAGE_EMPTY) {
      assert(p->slots[i].state == STAGE_FREE); /* nobody is filling it */
      stage_unmake(p, &p->slots[i]);
    }
  assert(atomic_load(&p->pinned_bytes) == 0);
  free(p->slots);
  p->slots = NULL;
  if (p->cfg.count) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
  }
}

/* Adds st's last copy to copy_ns; its `done` is known complete. Called by
 * whoever owns st ([mu], or BUSY). */
static void stage_account(pl_stage_pool *p, pl_stage *st) {
  if (!st->timing)
    return;
  st->timing = 0;
  atomic_fetch_add(&p->copy_ns, pl_cuda_elapsed_ns(st->start, st->done));
}

/* Whether st's last copy finished; accounts it if so. [mu] */
static int stage_idle(pl_stage_pool *p, pl_stage *st) {
  if (!st->copied)
    return 1;
  cudaError_t rc = cudaEventQuery(st->done);
  if (rc == cudaSuccess) {
    stage_account(p, st);
    return 1;
  }
  if (rc != cudaErrorNotReady) /* an error: a wait will report it */
    (void)cudaGetLastError();
  return 0;
}

/* Makes a new buffer in an EMPTY slot. [mu] held on entry and exit,
 * released while allocating. */
static pl_status stage_grow(pl_stage_pool *p, pl_stage *st, pl_error *err) {
  int pin = 0, over = 0;
  if (p->cfg.pin) {
    over = p->reserved + p->cfg.bytes > p->cfg.budget;
    pin = !over;
    if (pin)
      p->reserved += p->cfg.bytes;
  }
  assert(p->reserved <= p->cfg.budget);
  st->state = STAGE_BUSY; /* reserve the slot while unlocked */
  pthread_mutex_unlock(&p->mu);
  pl_status s = stage_make(p, st, pin, over, err);
  pthread_mutex_lock(&p->mu);
  if (pin && !st->pinned)
    p->reserved -= p->cfg.bytes;
  if (s != PL_OK) {
    stage_unmake(p, st);
    pthread_cond_broadcast(&p->cv);
  }
  return s;
}

/* A FREE buffer whose last copy has finished, else NULL. [mu] */
static pl_stage *find_idle(pl_stage_pool *p) {
  for (int i = 0; i < p->cfg.count; i++) {
    pl_stage *st = &p->slots[i];
    if (st->state == STAGE_FREE && stage_idle(p, st))
      return st;
  }
  return NULL;
}

/* The FREE buffer whose copy was issued first, else NULL. [mu] */
static pl_stage *find_oldest(pl_stage_pool *p) {
  pl_stage *best = NULL;
  for (int i = 0; i < p->cfg.count; i++) {
    pl_stage *st = &p->slots[i];
    if (st->state == STAGE_FREE && (!best || st->seq < best->seq))
      best = st;
  }
  return best;
}

static pl_stage *find_empty(pl_stage_pool *p) {
  for (int i = 0; i < p->cfg.count; i++)
    if (p->slots[i].state == STAGE_EMPTY)
      return &p->slots[i];
  return NULL;
}

/* Waits, unlocked, for the oldest copy out of st (taken BUSY). [mu] */
static pl_status wait_oldest(pl_stage_pool *p, pl_stage *st, pl_error *err) {
  st->state = STAGE_BUSY;
  pthread_mutex_unlock(&p->mu);
  cudaError_t rc = cudaEventSynchronize(st->done);
  pthread_mutex_lock(&p->mu);
  if (rc != cudaSuccess) {
    st->state = STAGE_FREE;
    return pl_cuda_fail(err, rc, "cudaEventSynchronize");
  }
  stage_account(p, st);
  return PL_OK;
}

void pl_stage_pool_first(pl_stage_pool *p) {
  if (!p->cfg.bytes || !p->slots)
    return; /* the plan stages nothing */
  pthread_mutex_lock(&p->mu);
  pl_stage *st = find_empty(p);
  if (st && stage_grow(p, st, NULL) == PL_OK)
    st->state = STAGE_FREE;
  pthread_mutex_unlock(&p->mu);
}

pl_status pl_stage_acquire(pl_stage_pool *p, pl_stage **out, pl_error *err) {
  assert(p->cfg.bytes > 0); /* the plan stages nothing: never called */
  pthread_mutex_lock(&p->mu);
  pl_stage *st;
  pl_status s = PL_OK;
  for (;;) {
    if ((st = find_idle(p))) {
      st->state = STAGE_BUSY;
      break;
    }
    if ((st = find_empty(p))) {
      s = stage_grow(p, st, err);
      break;
    }
    if ((st = find_oldest(p))) {
      s = wait_oldest(p, st, err);
      break;
    }
    pthread_cond_wait(&p->cv, &p->mu); /* all are being filled */
  }
  assert(s != PL_OK || st->state == STAGE_BUSY);
  pthread_mutex_unlock(&p->mu);
  *out = s == PL_OK ? st : NULL;
  return s;
}

void pl_stage_put(pl_stage_pool *p, pl_stage *st, int copied) {
  pthread_mutex_lock(&p->mu);
  assert(st >= p->slots && st < p->slots + p->cfg.count);
  assert(st->state == STAGE_BUSY);
  st->state = STAGE_FREE;
  if (copied) {
    st->copied = 1;
    st->timing = 1;
    st->seq = ++p->seq;
  }
  /* A broadcast: several workers may wait (all stages being filled), and
   * glibc before 2.41 can lose a signal among several waiters (sourceware
   * bug 25847; threads.c). They wait only when every stage is busy. */
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

void pl_stage_pool_poll(pl_stage_pool *p) {
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->cfg.count; i++)
    if (p->slots[i].state == STAGE_FREE)
      (void)stage_idle(p, &p->slots[i]);
  pthread_mutex_unlock(&p->mu);
}
