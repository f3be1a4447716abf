/* Reliability regressions (issue 17): data files that shrink under a
 * running loader (a real truncation during a real run: PL_IO naming the
 * file, never SIGBUS), special files (no hang), stuck callbacks (PL_TIMEOUT,
 * destroy returns, the detached worker exits later), real fork() (a clear
 * error in the child, never a hang), gzip bombs (fail early), state blobs
 * (every field checked), long paths (the cause survives), to_float32. */
#include "loader_fixture.h"
#include "data/file_map.h"
#include "data/map_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

enum { WAIT_S = 20 };

static pl_loader *make_loader(pl_dataset *ds, uint32_t bs, int workers,
                              double timeout_s) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  cfg.batch_size = bs;
  cfg.num_workers = workers;
  cfg.timeout_s = timeout_s;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  return ld;
}

static uint64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Checks an IDX batch against pl_test_write_idx's bytes; returns mismatches. */
static int idx_batch_bad(pl_batch *b, uint32_t px) {
  const uint8_t *img = pl_batch_data(b, 0);
  int bad = 0;
  for (uint32_t i = 0; i < pl_batch_size(b); i++) {
    uint64_t idx = pl_batch_sample_index(b, i);
    for (uint32_t j = 0; j < px; j++)
      bad += img[(size_t)i * px + j] != pl_test_byte(idx, j);
  }
  return bad;
}

/* ------------------------------------------------------------ SIGBUS */

/* A loader reads; the images file is truncated to one page while it runs.
 * Every batch delivered is exact, then the loader reports PL_IO naming the
 * file and both sizes. Restoring the file lets the next epoch load again. */
static void shrink_during_run(int workers) {
  enum { N = 4000, ROWS = 28, COLS = 28, BS = 50 };
  char images[512], labels[512];
  snprintf(images, sizeof images, "%s", pl_test_path("shrink-images"));
  snprintf(labels, sizeof labels, "%s", pl_test_path("shrink-labels"));
  CHECK(pl_test_write_idx(images, labels, N, ROWS, COLS, 0) == 0);
  uint64_t was = file_size(images);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_idx(images, labels, &ds, &err), &err);
  pl_loader *ld = make_loader(ds, BS, workers, 0);
  pl_batch *b = NULL;
  CHECK_OK(pl_loader_next_timed(ld, WAIT_S, &b, &err), &err);
  CHECK(b && idx_batch_bad(b, ROWS * COLS) == 0);
  pl_batch_release(b, NULL);
  CHECK(truncate(images, 4096) == 0);
  pl_status s;
  int delivered = 1;
  while ((s = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_OK) {
    CHECK(idx_batch_bad(b, ROWS * COLS) == 0); /* prefetched before */
    pl_batch_release(b, NULL);
    delivered++;
  }
  CHECK_STATUS(s, PL_IO, &err);
  char want[700];
  snprintf(want, sizeof want,
           "%s: the file changed while it was being read (it is 4096 bytes "
           "now, was %llu)", images, (unsigned long long)was);
  CHECK_MSG(&err, want);
  CHECK(delivered < N / BS);
  /* Put the file back: a new stream (batches prefetched meanwhile read
   * the short file, and fail) loads every byte right. */
  CHECK(pl_test_write_idx(images, labels, N, ROWS, COLS, 0) == 0);
  CHECK_OK(pl_loader_set_epoch(ld, 1, &err), &err);
  int n = 0;
  while ((s = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_OK) {
    CHECK_EQ_U64(pl_batch_epoch(b), 1);
    CHECK(idx_batch_bad(b, ROWS * COLS) == 0);
    pl_batch_release(b, NULL);
    n++;
  }
  CHECK_STATUS(s, PL_END_OF_EPOCH, &err);
  CHECK_EQ_U64(n, N / BS);
  /* pl_dataset_read: the same error, with the sample. */
  CHECK(truncate(images, 0) == 0);
  uint8_t img[ROWS * COLS], lab;
  void *dst[2] = {img, &lab};
  CHECK_STATUS(pl_dataset_read(ds, 5, dst, &err), PL_IO, &err);
  snprintf(want, sizeof want,
           "sample 5: %s: the file changed while it was being read (it is 0 "
           "bytes now, was %llu)", images, (unsigned long long)was);
  CHECK_MSG(&err, want);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* CIFAR (records) cut to 10 records while 2 workers read it (what a
 * shorter file copied over it leaves; the copy's own truncate-then-write
 * window is what the chaos test covers). */
static void cifar_rewritten_shorter(void) {
  const char *p = pl_test_path("cifar-shrink.bin");
  CHECK(pl_test_write_cifar(p, 0, 2000) == 0);
  uint64_t was = file_size(p);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_cifar10(&p, 1, &ds, &err), &err);
  pl_loader *ld = make_loader(ds, 100, 2, 0);
  CHECK(truncate(p, 10 * 3073) == 0);
  pl_batch *b;
  pl_status s;
  while ((s = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_OK)
    pl_batch_release(b, NULL);
  CHECK_STATUS(s, PL_IO, &err);
  char want[700];
  snprintf(want, sizeof want, "(it is %llu bytes now, was %llu)",
           (unsigned long long)file_size(p), (unsigned long long)was);
  CHECK_MSG(&err, want);
  CHECK_MSG(&err, "cifar-shrink.bin: the file changed while it was being read");
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* A SIGBUS that is not a read of our mappings still kills the process:
 * the handler chains to the default action (in a child process). */
static void foreign_sigbus_still_kills(void) {
  const char *p = pl_test_path("cifar-keep.bin");
  CHECK(pl_test_write_cifar(p, 0, 4) == 0);
  for (int kind = 0; kind < 2; kind++) {
    pid_t pid = fork();
    if (pid == 0) {
      pl_dataset *ds = NULL;
      pl_error err;
      if (pl_dataset_open_cifar10(&p, 1, &ds, &err) != PL_OK ||
          !pl_map_guard_installed())
        _exit(3);
      if (kind == 0)
        raise(SIGBUS);
      /* A fault in a mapping of our own: not registered. */
      const char *q = pl_test_path("own-map");
      int fd = open(q, O_RDWR | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || ftruncate(fd, 8192) != 0)
        _exit(4);
      volatile uint8_t *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
      if (m == MAP_FAILED || ftruncate(fd, 0) != 0)
        _exit(5);
      (void)m[4096];
      _exit(6);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* The sanitizer's handler was there first: it reports the fault and
     * aborts or exits (codes 3-6 are this test's own). */
    CHECK((WIFSIGNALED(st) && WTERMSIG(st) != SIGALRM) ||
          (WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
           (WEXITSTATUS(st) < 3 || WEXITSTATUS(st) > 6)));
#else
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS);
#endif
  }
}

/* The handler is there while a mapping is, and gone after the last. */
static void handler_refcount(void) {
  CHECK(!pl_map_guard_installed());
  const char *p = pl_test_path("cifar-ref.bin");
  CHECK(pl_test_write_cifar(p, 0, 4) == 0);
  pl_dataset *a = NULL, *b = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_cifar10(&p, 1, &a, &err), &err);
  CHECK_OK(pl_dataset_open_cifar10(&p, 1, &b, &err), &err);
  CHECK(pl_map_guard_installed());
  pl_dataset_destroy(a);
  CHECK(pl_map_guard_installed());
  pl_dataset_destroy(b);
  CHECK(!pl_map_guard_installed());
}

/* ------------------------------------------------------------ special */

static void special_files(void) {
  const char *fifo = pl_test_path("fifo");
  CHECK(mkfifo(fifo, 0600) == 0);
  pl_dataset *ds = NULL;
  pl_error err;
  alarm(30); /* a hang fails the test instead of stalling it */
  CHECK_STATUS(pl_dataset_open_cifar10(&fifo, 1, &ds, &err), PL_IO, &err);
  char want[600];
  snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", fifo);
  CHECK_MSG(&err, want);
  CHECK_STATUS(pl_dataset_open_idx(fifo, fifo, &ds, &err), PL_IO, &err);
  CHECK_MSG(&err, want);
  const char *dir = pl_test_tmpdir();
  CHECK_STATUS(pl_dataset_open_cifar10(&dir, 1, &ds, &err), PL_IO, &err);
  CHECK_MSG(&err, "not a regular file (a directory)");
  const char *dev = "/dev/null";
  CHECK_STATUS(pl_dataset_open_cifar10(&dev, 1, &ds, &err), PL_IO, &err);
  CHECK_MSG(&err, "/dev/null: not a regular file (a character device)");
  /* /proc files say 0 bytes but have data. */
  const char *proc = "/proc/self/status";
  CHECK_STATUS(pl_dataset_open_cifar10(&proc, 1, &ds, &err), PL_IO, &err);
  CHECK_MSG(&err, "/proc/self/status: the file reports a size of 0 but has "
                  "data (a /proc or sysfs file?)");
  /* A truly empty file maps as 0 bytes (the source decides about it). */
  const char *empty = pl_test_path("empty.bin");
  CHECK(pl_test_write_file(empty, "", 0) == 0);
  pl_file_map m;
  CHECK_OK(pl_file_map_open(empty, &m, &err), &err);
  CHECK_EQ_U64(m.size, 0);
  pl_file_map_close(&m);
  alarm(0);
}

/* ------------------------------------------------------------ stuck */

/* A callback that blocks at one index until released (once: later reads
 * of that index pass). `freed` is set when the dataset is freed, which is
 * when the last reference (a detached worker's) goes. */
typedef struct stuck_cb {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int released, blocked_once;
  uint64_t at;
  atomic_int inside, freed;
} stuck_cb;

static int stuck_get(void *user, uint64_t i, void *const *dst, char *msg,
                     size_t len) {
  stuck_cb *s = user;
  (void)msg;
  (void)len;
  pthread_mutex_lock(&s->mu);
  if (i == s->at && !s->blocked_once) {
    s->blocked_once = 1;
    atomic_store(&s->inside, 1);
    while (!s->released)
      pthread_cond_wait(&s->cv, &s->mu);
    atomic_store(&s->inside, 0);
  }
  pthread_mutex_unlock(&s->mu);
  uint8_t *x = dst[0];
  for (int j = 0; j < 4; j++)
    x[j] = pl_test_byte(i, (uint64_t)j);
  int64_t y = (int64_t)i;
  memcpy(dst[1], &y, sizeof y);
  return 0;
}

static void stuck_free(void *user) { atomic_store(&((stuck_cb *)user)->freed, 1); }

static pl_dataset *stuck_dataset(stuck_cb *s, uint64_t n, uint64_t at) {
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->at = at;
  pl_field f[2] = {{.name = "x", .dtype = PL_UINT8, .ndim = 1, .shape = {4}},
                   {.name = "y", .dtype = PL_INT64, .ndim = 0}};
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_from_callback(f, 2, n, stuck_get, s, stuck_free, &ds,
                                    &err), &err);
  return ds;
}

static void release_and_wait_freed(stuck_cb *s) {
  pthread_mutex_lock(&s->mu);
  s->released = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  for (int i = 0; i < 2000 && !atomic_load(&s->freed); i++)
    usleep(10000);
  CHECK(atomic_load(&s->freed)); /* the detached worker let go */
}

/* Every worker stuck: PL_TIMEOUT, then PL_TIMEOUT again (not a hang);
 * destroy returns; the worker exits once its callback returns. */
static void all_workers_stuck(void) {
  stuck_cb s = {0};
  pl_dataset *ds = stuck_dataset(&s, 40, 6);
  pl_loader *ld = make_loader(ds, 4, 1, 0.2);
  pl_dataset_destroy(ds);
  pl_batch *b;
  pl_error err;
  CHECK_OK(pl_loader_next_timed(ld, WAIT_S, &b, &err), &err);
  pl_batch_release(b, NULL);
  CHECK_STATUS(pl_loader_next_timed(ld, WAIT_S, &b, &err), PL_TIMEOUT, &err);
  CHECK_MSG(&err, "sample 6: still loading after");
  for (int k = 0; k < 2; k++) {
    CHECK_STATUS(pl_loader_next_timed(ld, WAIT_S, &b, &err), PL_TIMEOUT,
                 &err);
    CHECK_MSG(&err, "all 1 workers are stuck: sample 6 has been loading for");
    CHECK_MSG(&err, "nothing can be loaded until a callback returns");
  }
  CHECK(atomic_load(&s.inside));
  pl_loader_destroy(ld); /* returns although the callback never does */
  CHECK(atomic_load(&s.inside) && !atomic_load(&s.freed));
  release_and_wait_freed(&s);
}

/* One of two workers stuck: the next epoch is loaded whole by the other. */
static void one_worker_stuck(void) {
  stuck_cb s = {0};
  pl_dataset *ds = stuck_dataset(&s, 40, 13);
  pl_loader *ld = make_loader(ds, 4, 2, 0.2);
  pl_dataset_destroy(ds);
  pl_batch *b;
  pl_error err;
  pl_status st;
  while ((st = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_OK)
    pl_batch_release(b, NULL);
  CHECK_STATUS(st, PL_TIMEOUT, &err);
  CHECK_MSG(&err, "sample 13: still loading after");
  int n = 0;
  while ((st = pl_loader_next_timed(ld, WAIT_S, &b, &err)) == PL_OK) {
    CHECK_EQ_U64(pl_batch_epoch(b), 1);
    CHECK_EQ_U64(pl_batch_index(b), n);
    CHECK(fixture_check_batch(b, 4) == 0);
    pl_batch_release(b, NULL);
    n++;
  }
  CHECK_STATUS(st, PL_END_OF_EPOCH, &err);
  CHECK_EQ_U64(n, 10);
  pl_loader_destroy(ld);
  release_and_wait_freed(&s);
}

static void timeout_needs_workers(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 8, 2);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  cfg.timeout_s = 5;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_STATUS(pl_loader_create(ds, &cfg, &ld, &err), PL_INVALID_ARGUMENT,
               &err);
  CHECK_MSG(&err, "timeout_s 5 needs num_workers >= 1");
  CHECK(ld == NULL);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ fork */

/* The child: the inherited loader refuses with PL_BAD_STATE, its batch
 * release and destroy return at once, and a new loader on the inherited
 * dataset works. Exit code: 0 ok, else the step that failed. */
static int fork_child(pl_loader *ld, pl_batch *held, pl_dataset *ds) {
  pl_batch *b = NULL;
  pl_error err;
  char want[160];
  snprintf(want, sizeof want,
           "this loader was created in process %d; a forked child (process "
           "%d) cannot use it: create a new loader",
           (int)getppid(), (int)getpid());
  if (pl_loader_next(ld, &b, &err) != PL_BAD_STATE || b ||
      strcmp(err.message, want))
    return 10;
  if (pl_loader_set_epoch(ld, 3, &err) != PL_BAD_STATE)
    return 11;
  uint8_t st[64];
  size_t len = sizeof st;
  if (pl_loader_save_state(ld, st, &len, &err) != PL_BAD_STATE)
    return 12;
  pl_batch_release(held, NULL);
  pl_loader_destroy(ld);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  cfg.batch_size = 7;
#if defined(__SANITIZE_THREAD__)
  cfg.num_workers = 0; /* TSan cannot start threads after such a fork */
#else
  cfg.num_workers = 2;
#endif
  pl_loader *mine = NULL;
  if (pl_loader_create(ds, &cfg, &mine, &err) != PL_OK)
    return 13;
  int n = 0;
  pl_status s;
  while ((s = pl_loader_next(mine, &b, &err)) == PL_OK) {
    if (fixture_check_batch(b, 3))
      return 14;
    n += (int)pl_batch_size(b);
    pl_batch_release(b, NULL);
  }
  pl_loader_destroy(mine);
  return s == PL_END_OF_EPOCH && n == 100 ? 0 : 15;
}

static void fork_children(void) {
  fixture fx = {.sleep_s = 0.0005};
  pl_dataset *ds = fixture_dataset(&fx, 100, 3);
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  cfg.batch_size = 5;
  cfg.num_workers = 4;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  /* Forks while the workers are busy (the lock is often held). */
  for (int round = 0; round < 8; round++) {
    pl_batch *held = NULL;
    pl_status s = pl_loader_next_timed(ld, WAIT_S, &held, &err);
    if (s == PL_END_OF_EPOCH)
      s = pl_loader_next_timed(ld, WAIT_S, &held, &err);
    CHECK_OK(s, &err);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(30); /* a hang dies of SIGALRM: the parent sees it */
      _exit(fork_child(ld, held, ds));
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ_U64(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st), 0);
    CHECK(held && fixture_check_batch(held, 3) == 0);
    pl_batch_release(held, NULL);
  }
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ gzip */

/* Writes `zeros` bytes of zeros after `head`, gzip-compressed, streaming. */
static void write_gz_bomb(const char *path, const void *head, size_t hn,
                          uint64_t zeros) {
  gzFile f = gzopen(path, "wb");
  CHECK(f != NULL);
  if (!f)
    return;
  if (hn)
    gzwrite(f, head, (unsigned)hn);
  static uint8_t z[1 << 20];
  for (uint64_t left = zeros; left;) {
    unsigned n = (unsigned)PL_TEST_MIN(left, (uint64_t)sizeof z);
    CHECK(gzwrite(f, z, n) == (int)n);
    left -= n;
  }
  gzclose(f);
}

static long max_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static void gz_bombs(void) {
  const char *labels = pl_test_path("bomb-labels");
  const char *images = pl_test_path("bomb-images");
  CHECK(pl_test_write_idx(images, labels, 10, 28, 28, 0) == 0);
  pl_dataset *ds = NULL;
  pl_error err;
  /* 256 MiB of zeros: a wrong magic fails after the first piece. */
  const char *zero = pl_test_path("zeros-idx.gz");
  write_gz_bomb(zero, NULL, 0, 256ull << 20);
  long rss0 = max_rss_kb();
  CHECK_STATUS(pl_dataset_open_idx(zero, labels, &ds, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "zeros-idx.gz: unknown IDX type code 0x00");
  CHECK(max_rss_kb() - rss0 < (64 << 10)); /* far below the 256 MiB */
  /* A valid header for 10 images, then 256 MiB more: stops at the size
   * the header declares. */
  uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, 10, 0, 0, 0, 28, 0, 0, 0, 28};
  const char *big = pl_test_path("long-idx.gz");
  write_gz_bomb(big, head, sizeof head, 256ull << 20);
  rss0 = max_rss_kb();
  CHECK_STATUS(pl_dataset_open_idx(big, labels, &ds, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "long-idx.gz: decompresses to more than the 7856 bytes "
                  "its header declares");
  CHECK(max_rss_kb() - rss0 < (64 << 10));
  /* A header declaring more than the machine's memory fails before any
   * allocation of that size. */
  uint8_t huge[16] = {0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff,
                      0, 0, 0xff, 0xff, 0, 0, 0xff, 0xff};
  const char *decl = pl_test_path("huge-idx.gz");
  write_gz_bomb(decl, huge, sizeof huge, 1000);
  CHECK_STATUS(pl_dataset_open_idx(decl, labels, &ds, &err), PL_FORMAT, &err);
  /* The cap is the lower of the per-file limit and this machine's memory
   * (a machine of 128 GiB has the 64 GiB per-file limit). */
  uint64_t mem = pl_file_map_memory_limit();
  int by_file = PL_GZ_MAX_BYTES <= mem;
  char want[200];
  snprintf(want, sizeof want,
           "huge-idx.gz: its header declares %llu bytes, more than %llu (%s)",
           16ull + 0xffffffffull * 0xffffull * 0xffffull,
           (unsigned long long)(by_file ? PL_GZ_MAX_BYTES : mem),
           by_file ? "the limit for this file"
                   : "this machine's memory, or its cgroup's memory.max");
  CHECK_MSG(&err, want);
  CHECK(pl_file_map_memory_limit() > (1ull << 26));
  /* A .gz that stops short of what its header declares. */
  const char *shortgz = pl_test_path("short-idx.gz");
  CHECK(pl_test_write_gz(shortgz, head, sizeof head) == 0);
  CHECK_STATUS(pl_dataset_open_idx(shortgz, labels, &ds, &err), PL_FORMAT,
               &err);
  CHECK_MSG(&err, "short-idx.gz: decompresses to 16 bytes, its header "
                  "declares 7856 (truncated)");
}

/* ------------------------------------------------------------ state */

static void put32le(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void state_fields(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 50, 2);
  pl_loader *ld = make_loader(ds, 5, 0, 0);
  uint8_t good[64], blob[64];
  size_t len = sizeof good;
  pl_error err;
  CHECK_OK(pl_loader_save_state(ld, good, &len, &err), &err);
  static const struct {
    int off, width;
    uint64_t value;
    const char *msg;
  } cases[] = {
      {12, 4, 4, "state blob has unknown flags 0x00000004"},
      {12, 4, 0x80000001u, "state blob has unknown flags 0x80000001"},
      {48, 4, 0, "state blob has batch size 0"},
      {52, 4, 0, "state blob has world size 0"},
      {32, 8, 1ull << 62, "state blob's epoch 4611686018427387904 is out of "
                          "range"},
      {40, 8, 51, "state position 51 is past the dataset's 50 samples"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    memcpy(blob, good, 64);
    for (int i = 0; i < cases[k].width; i++)
      blob[cases[k].off + i] = (uint8_t)(cases[k].value >> (8 * i));
    put32le(blob + 60, (uint32_t)crc32(0, blob, 60));
    CHECK_STATUS(pl_loader_load_state(ld, blob, 64, &err), PL_BAD_STATE,
                 &err);
    CHECK_MSG(&err, cases[k].msg);
  }
  CHECK_OK(pl_loader_load_state(ld, good, 64, &err), &err);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

/* ------------------------------------------------------------ messages */

static void long_path_keeps_cause(void) {
  char path[3000];
  int n = snprintf(path, sizeof path, "%s", pl_test_tmpdir());
  while (n < 2000)
    n += snprintf(path + n, sizeof path - (size_t)n, "/%s",
                  "a-rather-long-directory-name-for-testing-messages");
  snprintf(path + n, sizeof path - (size_t)n, "/missing.bin");
  const char *p = path;
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_STATUS(pl_dataset_open_cifar10(&p, 1, &ds, &err), PL_IO, &err);
  CHECK(strlen(err.message) < PL_ERROR_MESSAGE_MAX);
  CHECK(!strncmp(err.message, pl_test_tmpdir(), strlen(pl_test_tmpdir())));
  CHECK_MSG(&err, " ... ");
  CHECK_MSG(&err, "/missing.bin: cannot open: No such file or directory");
}

static void float32_scale(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 4, 2), *f = NULL;
  pl_error err;
  const float bad[3] = {INFINITY, -INFINITY, NAN};
  const char *names[3] = {"inf", "-inf", "nan"};
  for (int i = 0; i < 3; i++) {
    CHECK_STATUS(pl_dataset_to_float32(ds, "x", bad[i], &f, &err),
                 PL_INVALID_ARGUMENT, &err);
    char want[80];
    snprintf(want, sizeof want, "to_float32: scale %s is not a finite number",
             names[i]);
    CHECK_MSG(&err, want);
    CHECK(f == NULL);
  }
  CHECK_OK(pl_dataset_to_float32(ds, "x", 1.0f / 255, &f, &err), &err);
  pl_dataset_destroy(f);
  pl_dataset_destroy(ds);
}

int main(void) {
  handler_refcount();
  shrink_during_run(0);
  shrink_during_run(1);
  shrink_during_run(2);
  cifar_rewritten_shorter();
  foreign_sigbus_still_kills();
  special_files();
  all_workers_stuck();
  one_worker_stuck();
  timeout_needs_workers();
  fork_children();
  gz_bombs();
  state_fields();
  long_path_keeps_cause();
  float32_scale();
  return pl_test_finish("test_reliability");
}
