/* Reusable working memory (see scratch.h). */
#include "core/scratch.h"

#include <stdlib.h>

void *pl_scratch_get(pl_scratch *s, int slot, size_t n) {
  if (n <= s->cap[slot])
    return s->buf[slot];
  free(s->buf[slot]);
  /* Grow by half again, so a slowly growing size reallocates rarely. */
  size_t want = PL_MAX(n, s->cap[slot] + s->cap[slot] / 2);
  want = pl_align_up(PL_MAX(want, 64), 64);
  void *p = NULL;
  if (want < n || PL_FAULT(PL_FAULT_ALLOC) || posix_memalign(&p, 64, want))
    p = NULL;
  s->buf[slot] = p;
  s->cap[slot] = p ? want : 0;
  return p;
}

void pl_scratch_release_all(pl_scratch *s) {
  for (int i = 0; i < PL_SCRATCH_SLOTS; i++) {
    free(s->buf[i]);
    s->buf[i] = NULL;
    s->cap[i] = 0;
  }
}

void pl_scratch_pool_init(pl_scratch_pool *p) {
  pthread_mutex_init(&p->mu, NULL);
  p->free_list = NULL;
}

pl_scratch *pl_scratch_take(pl_scratch_pool *p) {
  pthread_mutex_lock(&p->mu);
  pl_scratch *s = p->free_list;
  if (s)
    p->free_list = s->next;
  pthread_mutex_unlock(&p->mu);
  return s ? s : pl_calloc(1, sizeof *s);
}

void pl_scratch_give(pl_scratch_pool *p, pl_scratch *s) {
  if (!s)
    return;
  for (int i = 0; i < PL_SCRATCH_SLOTS; i++)
    if (s->cap[i] > PL_SCRATCH_KEEP_BYTES) {
      free(s->buf[i]);
      s->buf[i] = NULL;
      s->cap[i] = 0;
    }
  pthread_mutex_lock(&p->mu);
  s->next = p->free_list;
  p->free_list = s;
  pthread_mutex_unlock(&p->mu);
}

void pl_scratch_pool_destroy(pl_scratch_pool *p) {
  pl_scratch *s = p->free_list;
  while (s) {
    pl_scratch *next = s->next;
    pl_scratch_release_all(s);
    free(s);
    s = next;
  }
  p->free_list = NULL;
  pthread_mutex_destroy(&p->mu);
}
