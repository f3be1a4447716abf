/* Regression tests for bugs found in code review. */
#include "loader_fixture.h"

#include <math.h>
#include <time.h>

static double thread_cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static pl_loader *slow_loader(fixture *fx, pl_dataset **ds) {
  *ds = fixture_dataset(fx, 4, 2);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.num_workers = 1;
  cfg.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(*ds, &cfg, &ld, &err), &err);
  return ld;
}

/* A huge wait_s (1e300, "practically forever") used to overflow time_t in
 * the timed wait: pthread_cond_timedwait failed at once (EINVAL) without
 * releasing the loader's mutex, so the consumer spun holding it and the
 * worker could never publish: a hang. It must block quietly and deliver. */
static void huge_wait_does_not_spin(void) {
  fixture fx = {.sleep_s = 0.4, .sleep_at = 0};
  pl_dataset *ds;
  pl_loader *ld = slow_loader(&fx, &ds);
  pl_batch *b = NULL;
  pl_error err;
  double cpu0 = thread_cpu_s();
  CHECK_OK(pl_loader_next_timed(ld, 1e300, &b, &err), &err);
  double cpu = thread_cpu_s() - cpu0;
  CHECK_EQ_U64(pl_batch_sample_index(b, 0), 0);
  CHECK_EQ_U64(fixture_check_batch(b, 2), 0);
  if (cpu > 0.1)
    fprintf(stderr, "consumer used %.3f s of CPU waiting 0.4 s\n", cpu);
  CHECK(cpu < 0.1);
  pl_batch_release(b, NULL);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* A NaN wait_s made the same invalid timespec (the same hang). It is
 * rejected, and nothing is lost. */
static void nan_wait_is_rejected(void) {
  fixture fx = {0};
  pl_dataset *ds;
  pl_loader *ld = slow_loader(&fx, &ds);
  pl_batch *b = (pl_batch *)&fx; /* must be overwritten with NULL */
  pl_error err;
  CHECK_STATUS(pl_loader_next_timed(ld, NAN, &b, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_MSG(&err, "wait_s is NaN");
  CHECK(b == NULL);
  CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  CHECK_EQ_U64(pl_batch_sample_index(b, 0), 0);
  CHECK_EQ_U64(fixture_check_batch(b, 2), 0);
  pl_batch_release(b, NULL);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

int main(void) {
  huge_wait_does_not_spin();
  nan_wait_is_rejected();
  return pl_test_finish("test_review_regressions");
}
