#!/usr/bin/env bash
# GPU checks of the CUDA engine (run on a machine with a GPU):
#   1. build with fault injection into build-gpu and run `ctest -L gpu`;
#   2. measure what page-locked staging memory costs per GiB, cudaHostAlloc
#      against pages faulted in by threads and then cudaHostRegister'ed
#      (docs/gpu-engine.md explains the choice), and H2D bandwidth from
#      pinned and pageable memory.
# Logs go to $PL_GPU_LOGS (set by scripts/gpu-check.sh), else build-gpu/logs.
set -euo pipefail
cd "$(dirname "$0")/../.."
LOG=${PL_GPU_LOGS:-build-gpu/logs} # many files: packed by gpu-check.sh
mkdir -p "$LOG" build-gpu
JOBS=$(nproc 2>/dev/null || echo 4)

{ nvidia-smi -L || true; nvidia-smi topo -m 2>/dev/null | head -5 || true; \
  uname -a; nproc; } 2>&1 | tee "$LOG/machine.log"

cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPL_FAULT_INJECTION=ON >"$LOG/configure.log" 2>&1 ||
  { tail -30 "$LOG/configure.log"; exit 1; }
grep 'CUDA backend' "$LOG/configure.log" || true
targets=$(cd tests/gpu && ls test_*.c | sed 's/\.c$//')
rc=0
# The whole tree: later parts use build-gpu/pinloader.
cmake --build build-gpu -j"$JOBS" >"$LOG/build.log" 2>&1 ||
  { rc=1; grep -E 'error|Error' "$LOG/build.log" | head -30; }

# The CPU suite too: on this box the CLI's default device is the GPU, so
# test_cli_checksum checks bytes read back from device memory against an
# independent checksum of the files.
ctest --test-dir build-gpu -LE gpu -j8 --timeout 300 --output-on-failure 2>&1 |
  tee "$LOG/ctest-cpu.log" | tail -25 || rc=$?

# -V: the tests print timings and the loader's throughput even when passing.
ctest --test-dir build-gpu -L gpu --timeout 200 --output-on-failure -V 2>&1 |
  tee "$LOG/ctest.log" || rc=$?

# A test that crashed: run it again under cuda-gdb (there is no gdb) for a
# backtrace.
for t in $targets; do
  [ "$rc" -ne 0 ] || break
  bin=build-gpu/tests/$t
  [ -x "$bin" ] || continue
  trc=0; timeout 200 "$bin" >/dev/null 2>&1 || trc=$?
  if [ "$trc" -ge 128 ] && command -v cuda-gdb >/dev/null; then
    echo "== $t died (rc $trc); backtrace:"
    timeout 200 cuda-gdb -q -batch -ex run -ex bt -ex 'info threads' \
      --args "$bin" 2>&1 | tail -60 | tee "$LOG/$t.gdb.log" || true
  fi
done

# gpu-check.sh --tests: the tests only, not the pinning measurements.
if [[ ${PL_GPU_TESTS_ONLY:-0} != 0 ]]; then
  exit $rc
fi

# ---- pinning cost, measured with the library's own page code
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
cat >build-gpu/pin_bench.c <<'C'
#include "backend/host_pages.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
#define CK(x) do { cudaError_t e_ = (x); if (e_) { \
  printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
static const size_t G = 1ull << 30;
static double per_gib(double s, size_t n) { return s * 1e3 * G / n; }
/* Pages faulted in by `thr` threads (hugepages: THP advice), then registered. */
static void reg(const char *what, size_t n, int thr, int huge, int node) {
  double t0 = now();
  char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) { printf("mmap failed\n"); exit(1); }
  madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  if (thr > 0) pl_pages_touch(p, n, thr);
  double t1 = now();
  CK(cudaHostRegister(p, n, cudaHostRegisterDefault));
  double t2 = now();
  CK(cudaHostUnregister(p));
  munmap(p, n);
  printf("%-44s fault-in %7.1f ms/GiB  register %7.1f ms/GiB  total %7.1f ms/GiB\n",
         what, per_gib(t1 - t0, n), per_gib(t2 - t1, n), per_gib(t2 - t0, n));
  (void)node;
}
static double h2d(void *src, void *dst, size_t n, cudaStream_t s) {
  cudaEvent_t a, b; float ms = 0;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s)); /* warm */
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < 5; i++) CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
  CK(cudaEventRecord(b, s)); CK(cudaEventSynchronize(b));
  CK(cudaEventElapsedTime(&ms, a, b));
  return 5.0 * n / (ms * 1e-3) / 1e9;
}
int main(void) {
  size_t n = G;
  CK(cudaFree(0)); /* context creation is not part of any measurement */
  char bus[32] = "?"; cudaDeviceGetPCIBusId(bus, sizeof bus, 0);
  int node = pl_pci_numa_node(bus);
  printf("GPU 0 at %s, NUMA node %d; sizes 1 GiB, best of 2\n", bus, node);
  for (int rep = 0; rep < 2; rep++) {
    printf("-- run %d\n", rep + 1);
    void *p; double t0 = now();
    CK(cudaHostAlloc(&p, n, cudaHostAllocDefault));
    double t1 = now(); CK(cudaFreeHost(p)); double t2 = now();
    printf("%-44s total %7.1f ms/GiB  (free %.1f ms)\n", "cudaHostAlloc",
           per_gib(t1 - t0, n), (t2 - t1) * 1e3);
    reg("register, untouched pages (4K)", n, 0, 0, node);
    reg("fault-in 1 thread + register (4K)", n, 1, 0, node);
    reg("fault-in 8 threads + register (4K)", n, 8, 0, node);
    reg("fault-in 1 thread + register (THP)", n, 1, 1, node);
    reg("fault-in 8 threads + register (THP)", n, 8, 1, node);
    t0 = now(); void *q = pl_pages_alloc(n, node, 0); t1 = now();
    CK(cudaHostRegister(q, n, cudaHostRegisterDefault)); t2 = now();
    printf("%-44s fault-in %7.1f ms/GiB  register %7.1f ms/GiB  total %7.1f ms/GiB\n",
           "library: pl_pages_alloc + register", per_gib(t1 - t0, n),
           per_gib(t2 - t1, n), per_gib(t2 - t0, n));
    CK(cudaHostUnregister(q)); pl_pages_free(q, n);
  }
  size_t m = 256u << 20; void *d, *pin, *page; cudaStream_t s;
  CK(cudaMalloc(&d, m)); CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  pin = pl_pages_alloc(m, node, 0); CK(cudaHostRegister(pin, m, 0));
  page = pl_pages_alloc(m, node, 0);
  printf("H2D 256 MiB: pinned %.1f GB/s, pageable %.1f GB/s\n",
         h2d(pin, d, m, s), h2d(page, d, m, s));
  return 0;
}
C
gcc -O2 -std=gnu11 -Iinclude -Isrc -I"$CUDA_HOME/include" build-gpu/pin_bench.c \
  src/backend/host_pages.c -o build-gpu/pin_bench -L"$CUDA_HOME/lib64" -lcudart_static \
  -lpthread -ldl -lrt 2>&1 | tee "$LOG/pin_bench_build.log"
./build-gpu/pin_bench 2>&1 | tee "$LOG/pin_bench.log" || rc=$?
exit $rc
