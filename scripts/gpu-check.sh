#!/usr/bin/env bash
# One call on a CUDA machine: build, run the GPU tests, benchmark, and
# collect everything under $OUT (or ./gpu-out). Each part is a script in
# scripts/gpu/, run in name order; a failing part is reported and the rest
# still run. Pass part name prefixes to run a subset: gpu-check.sh 10 20
#
# gpu-check.sh --tests runs only the test parts (TEST_PARTS below, their
# benchmarks skipped through PL_GPU_TESTS_ONLY=1; about 8 minutes on the
# H200). When every test part ran and passed, it writes gpu-pass.txt (the
# commit, the device, each part's result) into $OUT and bench/results/:
# the record that a change to CUDA code, GPU tests or the extension passed
# on a GPU. Pass PL_COMMIT=<hash> where the tree carries no .git.
set -uo pipefail
# The parts that test (the rest benchmark): the core with ctest -L gpu
# (fault injection), the Python suite with CUDA, the differential suite on
# CUDA, the transforms' equality tests, JPEG decode on the GPU (66).
TEST_PARTS=(10 30 35 65 66)
if [[ ${1:-} == --tests ]]; then
  shift
  export PL_GPU_TESTS_ONLY=1
  set -- "${TEST_PARTS[@]}"
fi
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
logs=$(mktemp -d)
export PL_GPU_LOGS=$logs
# Fashion-MNIST is a Debian package here but not on the GPU box: a copy in
# .data/ (git-ignored) travels with the tree when the call carries it.
[ -d .data/fashion-mnist ] && export PL_FASHION_DIR=$PWD/.data/fashion-mnist
summary=$out/summary.txt
{
  echo "gpu-check $(date -u +%FT%TZ) commit ${PL_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>&1 | head -4
  nproc
} >"$summary"

parts=(scripts/gpu/[0-9]*.sh)
declare -A part_rc=()
for p in "${parts[@]}"; do
  name=$(basename "$p" .sh)
  if (($#)); then
    keep=0
    for want in "$@"; do [[ $name == "$want"* ]] && keep=1; done
    ((keep)) || continue
  fi
  t0=$(date +%s)
  bash "$p" >"$logs/$name.log" 2>&1
  rc=$?
  echo "$name: rc=$rc $(($(date +%s) - t0))s" | tee -a "$summary"
  part_rc[${name%%-*}]="$name rc=$rc $(($(date +%s) - t0))s"
  tail -n 25 "$logs/$name.log"
  # After every part: a call killed at its time limit still brings these back.
  tar -C "$logs" -czf "$out/logs.tar.gz" .
done

# The pass record: only when every test part ran here and passed.
passed=1
for t in "${TEST_PARTS[@]}"; do
  [[ ${part_rc[$t]:-} == *" rc=0 "* ]] || passed=0
done
if ((passed)); then
  {
    echo "gpu-pass: every test part of scripts/gpu-check.sh passed"
    echo "commit: ${PL_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
    echo "date: $(date -u +%FT%TZ)"
    echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
    for t in "${TEST_PARTS[@]}"; do echo "part ${part_rc[$t]}"; done
    grep -h -E '^[0-9]+ passed|tests passed|^100% tests' "$logs"/*.log 2>/dev/null | sed 's/^/  /'
  } >"$out/gpu-pass.txt"
  mkdir -p bench/results && cp "$out/gpu-pass.txt" bench/results/gpu-pass.txt
  echo "gpu-pass.txt written"
else
  echo "no gpu-pass.txt: a test part failed or did not run (${TEST_PARTS[*]})"
fi
tar -C "$logs" -czf "$out/logs.tar.gz" .
echo "logs in $out/logs.tar.gz"
