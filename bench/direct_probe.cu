// Probe for issue 3's large-batch target: which way of moving shuffled
// samples from host memory into a device batch comes closest to one plain
// cudaMemcpyAsync of the same bytes from pinned memory?
//
//   memcpy     one cudaMemcpyAsync of a whole batch (the ceiling)
//   per-sample one cudaMemcpyAsync per sample, from a pinned copy of the data
//   batchcopy  cudaMemcpyBatchAsync, one call per batch
//   kernel     a gather kernel reading the pinned data over PCIe (mapped)
//   file       the same from a file mapping registered in place
//              (cudaHostRegisterReadOnly), run in a child process with an
//              alarm so a hang shows up as a line, not a lost call
//
// Not part of the library; built by scripts/gpu/probe-direct.sh with nvcc.
// Every step prints a line before it starts, so a hang names its step.
#include <cuda_runtime.h>

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(call)                                                          \
  do {                                                                    \
    cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) {                                              \
      printf("FAIL %s: %s\n", #call, cudaGetErrorString(e_));             \
      fflush(stdout);                                                     \
      return 1;                                                           \
    }                                                                     \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

// Copies batch sample i (size 16*w bytes) from src + idx[i] * 16*w; four
// 16-byte loads in flight per thread before any store.
__global__ void gather(uint4 *dst, const uint4 *src, const uint32_t *idx,
                       uint64_t w, uint64_t total) {
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t u = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
       u < total; u += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      uint64_t x = u + k * stride;
      if (x < total) v[k] = src[(uint64_t)idx[x / w] * w + x % w];
    }
#pragma unroll
    for (int k = 0; k < 4; k++) {
      uint64_t x = u + k * stride;
      if (x < total) dst[x] = v[k];
    }
  }
}

struct setup {
  uint64_t n, s, batch, nb; // samples, sample bytes, batch size, batches timed
  const char *name;
};

static uint32_t *perm_new(uint64_t n, uint64_t count, unsigned seed) {
  uint32_t *p = (uint32_t *)malloc(count * sizeof *p);
  srand(seed);
  for (uint64_t i = 0; i < count; i++)
    p[i] = (uint32_t)(((uint64_t)rand() * RAND_MAX + rand()) % n);
  return p;
}

static double gbs(uint64_t bytes, double s) { return (double)bytes / s / 1e9; }

// All modes over `data` (host, pinned or registered, `n*s` bytes).
static int run_modes(const setup &c, const char *data, const char *label) {
  uint64_t bb = c.batch * c.s, total = c.nb * bb;
  void *dev[2];
  CK(cudaMalloc(&dev[0], bb));
  CK(cudaMalloc(&dev[1], bb));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  uint32_t *idx = perm_new(c.n, c.nb * c.batch, 7), *didx;
  CK(cudaMalloc(&didx, c.nb * c.batch * sizeof *idx));
  CK(cudaMemcpy(didx, idx, c.nb * c.batch * sizeof *idx, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float ms;
  for (int rep = 0; rep < 2; rep++) {
    // memcpy: whole contiguous batches (the ceiling)
    CK(cudaEventRecord(e0, st));
    for (uint64_t k = 0; k < c.nb; k++)
      CK(cudaMemcpyAsync(dev[k & 1], data + (k * bb) % (c.n * c.s - bb + 1), bb,
                         cudaMemcpyHostToDevice, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    say("%-10s %-9s memcpy      %6.2f GB/s\n", c.name, label, gbs(total, ms / 1e3));

    // per-sample cudaMemcpyAsync
    double t0 = now();
    CK(cudaEventRecord(e0, st));
    for (uint64_t k = 0; k < c.nb; k++)
      for (uint64_t i = 0; i < c.batch; i++)
        CK(cudaMemcpyAsync((char *)dev[k & 1] + i * c.s,
                           data + (uint64_t)idx[k * c.batch + i] * c.s, c.s,
                           cudaMemcpyHostToDevice, st));
    double issue = now() - t0;
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    say("%-10s %-9s per-sample  %6.2f GB/s (issue %.2f us/copy)\n", c.name,
        label, gbs(total, ms / 1e3), issue * 1e6 / (double)(c.nb * c.batch));

    // cudaMemcpyBatchAsync, one call per batch
    void **dsts = (void **)malloc(c.batch * sizeof(void *));
    const void **srcs = (const void **)malloc(c.batch * sizeof(void *));
    size_t *sizes = (size_t *)malloc(c.batch * sizeof(size_t));
    cudaMemcpyAttributes at;
    memset(&at, 0, sizeof at);
    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t ai = 0;
    t0 = now();
    CK(cudaEventRecord(e0, st));
    for (uint64_t k = 0; k < c.nb; k++) {
      for (uint64_t i = 0; i < c.batch; i++) {
        dsts[i] = (char *)dev[k & 1] + i * c.s;
        srcs[i] = data + (uint64_t)idx[k * c.batch + i] * c.s;
        sizes[i] = c.s;
      }
      CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, c.batch, &at, &ai, 1, st));
    }
    issue = now() - t0;
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    say("%-10s %-9s batchcopy   %6.2f GB/s (issue %.2f us/copy)\n", c.name,
        label, gbs(total, ms / 1e3), issue * 1e6 / (double)(c.nb * c.batch));
    free(dsts);
    free(srcs);
    free(sizes);

    // gather kernel reading host memory through its device mapping
    void *dp = NULL;
    if (cudaHostGetDevicePointer(&dp, (void *)data, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      say("%-10s %-9s kernel      (no device pointer)\n", c.name, label);
    } else {
      for (int blocks : {264, 1056, 4224}) {
        CK(cudaEventRecord(e0, st));
        for (uint64_t k = 0; k < c.nb; k++)
          gather<<<blocks, 256, 0, st>>>((uint4 *)dev[k & 1], (const uint4 *)dp,
                                         didx + k * c.batch, c.s / 16,
                                         bb / 16);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        say("%-10s %-9s kernel/%-4d %6.2f GB/s\n", c.name, label, blocks,
            gbs(total, ms / 1e3));
      }
      // correctness of the last kernel batch
      char *h = (char *)malloc(bb);
      CK(cudaMemcpy(h, dev[(c.nb - 1) & 1], bb, cudaMemcpyDeviceToHost));
      uint64_t bad = 0;
      for (uint64_t i = 0; i < c.batch; i++)
        bad += memcmp(h + i * c.s,
                      data + (uint64_t)idx[(c.nb - 1) * c.batch + i] * c.s,
                      c.s) != 0;
      say("%-10s %-9s kernel      %llu bad samples\n", c.name, label,
          (unsigned long long)bad);
      free(h);
    }
  }
  cudaFree(dev[0]);
  cudaFree(dev[1]);
  cudaFree(didx);
  free(idx);
  cudaStreamDestroy(st);
  return 0;
}

static char *anon(uint64_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  madvise(p, bytes, MADV_HUGEPAGE);
  for (uint64_t i = 0; i < bytes; i += 8)
    *(uint64_t *)((char *)p + i) = i * 0x9E3779B97F4A7C15ull;
  return (char *)p;
}

static int resident(const setup &c) {
  uint64_t bytes = c.n * c.s;
  say("%-10s resident: filling %llu bytes\n", c.name, (unsigned long long)bytes);
  char *p = anon(bytes);
  if (!p) { say("mmap failed\n"); return 1; }
  double t0 = now();
  CK(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
  say("%-10s resident: cudaHostRegister %.0f ms/GiB\n", c.name,
      (now() - t0) * 1e3 / ((double)bytes / (1 << 30)));
  int rc = run_modes(c, p, "pinned");
  CK(cudaHostUnregister(p));
  munmap(p, bytes);
  return rc;
}

// A file mapping registered in place. In a child: a hang is killed by the
// alarm and reported by the parent.
static int file_child(const setup &c, const char *dir, int shared) {
  uint64_t bytes = c.n * c.s;
  char path[512];
  snprintf(path, sizeof path, "%s/pl-probe-%d.bin", dir, (int)getpid());
  say("file %s: writing %s\n", shared ? "shared" : "private", path);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) { say("open failed\n"); return 1; }
  char *buf = anon(64 << 20);
  for (uint64_t off = 0; off < bytes; off += 64 << 20) {
    uint64_t n = bytes - off < (64u << 20) ? bytes - off : 64u << 20;
    if (write(fd, buf, n) != (ssize_t)n) { say("write failed\n"); return 1; }
  }
  fsync(fd);
  char *m = (char *)mmap(NULL, bytes, PROT_READ,
                         shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) { say("mmap failed\n"); return 1; }
  unlink(path);
  say("file %s: touching pages\n", shared ? "shared" : "private");
  volatile uint64_t sum = 0;
  for (uint64_t i = 0; i < bytes; i += 4096) sum += (uint8_t)m[i];
  say("file %s: cudaHostRegister(ReadOnly)\n", shared ? "shared" : "private");
  double t0 = now();
  cudaError_t rc = cudaHostRegister(m, bytes, cudaHostRegisterReadOnly);
  say("file %s: cudaHostRegister -> %s, %.0f ms/GiB\n",
      shared ? "shared" : "private", cudaGetErrorString(rc),
      (now() - t0) * 1e3 / ((double)bytes / (1 << 30)));
  if (rc != cudaSuccess) return 1;
  int r = run_modes(c, m, shared ? "file-shr" : "file-prv");
  say("file: cudaHostUnregister\n");
  CK(cudaHostUnregister(m));
  munmap(m, bytes);
  close(fd);
  return r;
}

static void file_test(const setup &c, const char *dir, int shared) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(90);
    _exit(file_child(c, dir, shared));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    say("file %s in %s: child killed by signal %d (hang or crash)\n",
        shared ? "shared" : "private", dir, WTERMSIG(status));
  else
    say("file %s in %s: child exit %d\n", shared ? "shared" : "private", dir,
        WEXITSTATUS(status));
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "/tmp";
  setup imagenet = {8192, 150528, 512, 48, "imagenet"};
  setup cifar = {500000, 3072, 1024, 300, "cifar"};
  setup cifar_big = {500000, 3072, 32768, 10, "cifar32k"};
  // Files first: a child must fork before this process touches CUDA.
  file_test(imagenet, dir, 1);
  file_test(imagenet, dir, 0);
  int v = 0;
  say("probe: host-register read-only supported: ");
  cudaDeviceGetAttribute(&v, cudaDevAttrHostRegisterReadOnlySupported, 0);
  say("%d; ", v);
  cudaDeviceGetAttribute(&v, cudaDevAttrCanUseHostPointerForRegisteredMem, 0);
  say("host pointer usable on device: %d; ", v);
  cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, 0);
  say("pageable access: %d\n", v);
  if (resident(imagenet) || resident(cifar) || resident(cifar_big)) return 1;
  say("probe: done\n");
  return 0;
}
