/* Probe: does gathering a batch in small pinned chunks, each copied to the
 * GPU as soon as it is full (while it may still sit in the last-level
 * cache), beat gathering the whole batch first? The whole-batch gather on
 * the H200 machine moves each byte through DRAM three times (read source,
 * write staging, DMA reads staging) and stops near 44 GB/s; a chunk the DMA
 * reads from cache would make it two.
 *
 * T threads each gather random samples of S bytes from a 2 GiB pageable
 * buffer (the page cache stand-in) into a ring of R pinned chunks of C
 * bytes, and queue a cudaMemcpyAsync of each full chunk on one shared
 * stream; a chunk is reused after its event completes. GB/s over a fixed
 * number of bytes. Not part of the library; scripts/gpu/probe-chunk.sh builds
 * it. Usage: chunk_probe [threads] */
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
  const uint8_t *src;
  uint64_t nsamples, s, chunk, bytes; /* bytes: this thread's share */
  int ring;
  cudaStream_t stream;
  uint8_t *dev; /* 256 MiB device target, written round-robin */
  uint64_t seed;
  int fail;
  pthread_barrier_t *start, *end; /* timing excludes pinning the rings */
} job;

static uint64_t rnd(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static void *worker(void *arg) {
  job *j = arg;
  uint8_t **ring = calloc((size_t)j->ring, sizeof *ring);
  cudaEvent_t *ev = calloc((size_t)j->ring, sizeof *ev);
  int *used = calloc((size_t)j->ring, sizeof *used);
  for (int r = 0; r < j->ring; r++) {
    ring[r] = mmap(NULL, j->chunk, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(ring[r], j->chunk, MADV_HUGEPAGE);
    memset(ring[r], 0, j->chunk);
    if (cudaHostRegister(ring[r], j->chunk, 0) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev[r], cudaEventDisableTiming) !=
            cudaSuccess) {
      j->fail = 1;
    }
  }
  pthread_barrier_wait(j->start);
  uint64_t per = j->chunk / j->s, done = 0, doff = 0;
  int r = 0;
  while (!j->fail && done < j->bytes) {
    if (used[r])
      cudaEventSynchronize(ev[r]);
    uint8_t *c = ring[r];
    for (uint64_t i = 0; i < per; i++)
      memcpy(c + i * j->s, j->src + (rnd(&j->seed) % j->nsamples) * j->s,
             j->s);
    uint64_t len = per * j->s;
    if (doff + len > (256u << 20))
      doff = 0;
    cudaMemcpyAsync(j->dev + doff, c, len, cudaMemcpyHostToDevice, j->stream);
    cudaEventRecord(ev[r], j->stream);
    used[r] = 1;
    doff += len;
    done += len;
    r = (r + 1) % j->ring;
  }
  for (int k = 0; k < j->ring; k++)
    cudaEventSynchronize(ev[k]);
  pthread_barrier_wait(j->end);
  for (int k = 0; k < j->ring; k++) {
    cudaHostUnregister(ring[k]);
    munmap(ring[k], j->chunk);
    cudaEventDestroy(ev[k]);
  }
  free(ring);
  free(ev);
  free(used);
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 14;
  const uint64_t src_bytes = 2ull << 30, total = 24ull << 30;
  uint8_t *src = mmap(NULL, src_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(src, src_bytes, MADV_HUGEPAGE);
  for (uint64_t i = 0; i < src_bytes; i += 8)
    *(uint64_t *)(src + i) = i * 0x9E3779B97F4A7C15ull;
  cudaStream_t st;
  uint8_t *dev;
  if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc((void **)&dev, 256u << 20) != cudaSuccess) {
    printf("no CUDA\n");
    return 1;
  }
  const uint64_t sizes[] = {150528, 3072};
  const uint64_t chunks[] = {256u << 10, 1u << 20, 4u << 20, 16u << 20,
                             77070336};
  const int rings[] = {2, 4};
  printf("threads %d, %.0f GiB per row\n", threads, (double)total / (1 << 30));
  for (int si = 0; si < 2; si++)
    for (int ci = 0; ci < 5; ci++)
      for (int ri = 0; ri < 2; ri++) {
        uint64_t s = sizes[si], c = chunks[ci];
        if (c < s)
          continue;
        if (ci == 4 && ri == 1)
          continue; /* whole batches: as the loader's staging, ring 2 */
        job *js = calloc((size_t)threads, sizeof *js);
        pthread_t *tid = calloc((size_t)threads, sizeof *tid);
        pthread_barrier_t b0, b1;
        pthread_barrier_init(&b0, NULL, (unsigned)threads + 1);
        pthread_barrier_init(&b1, NULL, (unsigned)threads + 1);
        for (int t = 0; t < threads; t++) {
          js[t] = (job){src, src_bytes / s, s, c / s * s, total / threads,
                        rings[ri], st, dev, 0x9E3779B97F4A7C15ull * (t + 1),
                        0, &b0, &b1};
          pthread_create(&tid[t], NULL, worker, &js[t]);
        }
        pthread_barrier_wait(&b0);
        double t0 = now();
        pthread_barrier_wait(&b1);
        double secs = now() - t0;
        int fail = 0;
        for (int t = 0; t < threads; t++) {
          pthread_join(tid[t], NULL);
          fail |= js[t].fail;
        }
        pthread_barrier_destroy(&b0);
        pthread_barrier_destroy(&b1);
        printf("sample %6llu chunk %8llu ring %d: %6.2f GB/s%s\n",
               (unsigned long long)s, (unsigned long long)c, rings[ri],
               (double)total / secs / 1e9, fail ? " (FAILED)" : "");
        fflush(stdout);
        free(js);
        free(tid);
      }
  return 0;
}
