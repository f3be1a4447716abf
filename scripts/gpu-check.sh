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
#
# Every part also leaves its record in $OUT/parts/NAME.txt (commit, rc,
# seconds, its pass counts). When the test parts do not fit in one call
# (10 minutes at most), run them in several and merge the records here:
#   gpu-check.sh --merge OUTDIR...   writes bench/results/gpu-pass.txt only
# when every test part has a record with rc=0, all at one commit.
set -uo pipefail
# The parts that test (the rest benchmark): the core with ctest -L gpu
# (fault injection), the Python suite with CUDA, the differential suite on
# CUDA, the transforms' equality tests, JPEG decode on the GPU (66).
TEST_PARTS=(10 30 35 65 66)
pass_lines() { # LOG...: the lines that count what passed
  grep -h -E '^[0-9]+ passed|tests passed|^100% tests|^python-test: [0-9]|^shard [0-9]+ .*passed' "$@" 2>/dev/null | sed 's/^/  /'
}
if [[ ${1:-} == --merge ]]; then
  shift
  cd "$(dirname "$0")/.."
  declare -A rec=()
  commit=
  for d in "$@"; do
    for f in "$d"/parts/*.txt; do
      [ -f "$f" ] || continue
      c=$(sed -n 's/^commit: //p' "$f")
      [[ $c == unknown || -z $c ]] && { echo "merge: $f names no commit (pass PL_COMMIT)" >&2; exit 1; }
      [[ -z $commit ]] && commit=$c
      [[ $c == "$commit" ]] || { echo "merge: $f is of commit $c, not $commit" >&2; exit 1; }
      n=$(basename "$f" .txt)
      rec[${n%%-*}]=$f
    done
  done
  for t in "${TEST_PARTS[@]}"; do
    f=${rec[$t]:-}
    [[ -n $f ]] || { echo "merge: no record of test part $t" >&2; exit 1; }
    grep -q '^rc: 0$' "$f" || { echo "merge: part $t failed: $f" >&2; exit 1; }
  done
  {
    echo "gpu-pass: every test part of scripts/gpu-check.sh passed (records of ${#@} calls merged)"
    echo "commit: $commit"
    for t in "${TEST_PARTS[@]}"; do
      f=${rec[$t]}
      echo "part $(sed -n 's/^part: //p' "$f") rc=0 $(sed -n 's/^seconds: //p' "$f")s on $(sed -n 's/^device: //p' "$f") at $(sed -n 's/^date: //p' "$f")"
      sed -n 's/^  /  /p' "$f"
    done
  } >bench/results/gpu-pass.txt
  cat bench/results/gpu-pass.txt
  exit 0
fi
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
if [ ! -f "${PL_FASHION_DIR:-/usr/share/datasets/fashion-mnist}/t10k-labels-idx1-ubyte.gz" ]; then
  echo "gpu-check: no Fashion-MNIST (test_cli_checksum of part 10 fails without it): run" \
       "scripts/setup.sh where the call is made and carry .data"
fi
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
  mkdir -p "$out/parts"
  {
    echo "part: $name"
    echo "commit: ${PL_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
    echo "rc: $rc"
    echo "seconds: $(($(date +%s) - t0))"
    echo "date: $(date -u +%FT%TZ)"
    echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
    pass_lines "$logs/$name.log"
  } >"$out/parts/$name.txt"
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
    pass_lines "$logs"/*.log
  } >"$out/gpu-pass.txt"
  mkdir -p bench/results && cp "$out/gpu-pass.txt" bench/results/gpu-pass.txt
  echo "gpu-pass.txt written"
else
  echo "no gpu-pass.txt: a test part failed or did not run (${TEST_PARTS[*]})"
fi
tar -C "$logs" -czf "$out/logs.tar.gz" .
echo "logs in $out/logs.tar.gz"
