#!/usr/bin/env bash
# One call on a CUDA machine: build, run the GPU tests, benchmark, and
# collect everything under $OUT (or ./gpu-out). Each part is a script in
# scripts/gpu/, run in name order; a failing part is reported and the rest
# still run. Pass part name prefixes to run a subset: gpu-check.sh 10 20
set -uo pipefail
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
  tail -n 25 "$logs/$name.log"
done
tar -C "$logs" -czf "$out/logs.tar.gz" .
echo "logs in $out/logs.tar.gz"
