#!/usr/bin/env bash
# Chaos test (issue 17; not part of CI's time budget): a Python loader
# (scripts/chaos_loader.py) loads four CIFAR-10-format files for N minutes
# with random configurations (0-3 workers, batch sizes, shuffle), checking
# every delivered batch byte for byte against the generator of the data,
# and forking children now and then; meanwhile this script truncates files
# (to page-aligned sizes, see docs/reliability.md), rewrites them in place
# (cp over them: truncate, then write), replaces them (cp + mv), and sends
# the loader SIGINT. Passes when nothing crashes, nothing hangs (a status
# file must advance every 60 s, the loader must exit on time), no batch is
# wrong and every fork child exits cleanly.
#
#   scripts/chaos.sh [--minutes N (10)] [--seed S (1)] [--python PY]
# CHAOS_KEEP=1 keeps the scratch folder (data, loader.out, the whole of
# loader.err, status.json) and prints its path, for a failure's post-mortem.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=10 seed=1 PY=/usr/bin/python3
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    *) echo "usage: $0 [--minutes N] [--seed S] [--python PY]" >&2; exit 2 ;;
  esac
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-chaos.XXXXXX")
loader_pid=
cleanup() {
  [[ -n $loader_pid ]] && kill -KILL "$loader_pid" 2>/dev/null
  if [[ ${CHAOS_KEEP:-0} != 0 ]]; then echo "chaos: kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT
fail() { echo "chaos: FAIL: $*" >&2; exit 1; }

echo "chaos: building the extension into $dir/py"
"$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$dir/py" . 2>&1 |
  grep -v "Running pip as the 'root'" || true
export PYTHONPATH="$dir/py"
mkdir "$dir/data"
"$PY" scripts/chaos_loader.py --write "$dir/data"

seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
"$PY" scripts/chaos_loader.py "$dir/data" "$seconds" "$seed" "$dir/status.json" \
  >"$dir/loader.out" 2>"$dir/loader.err" &
loader_pid=$!
# Mutations begin once the loader has written its first status (past its
# imports and first loader): a SIGINT inside `import torch` is torch's own
# RuntimeError, not a loader outcome.
for _ in $(seq 600); do
  [[ -f $dir/status.json ]] || ! kill -0 "$loader_pid" 2>/dev/null && break
  sleep 0.1
done
RANDOM=$seed
declare -A done_count=()
t_end=$(( $(date +%s) + seconds ))
last_progress=$(date +%s) last_status=
files=("$dir"/data/data_*.bin)
size=$(stat -c %s "${files[0]}")
while (( $(date +%s) < t_end )) && kill -0 "$loader_pid" 2>/dev/null; do
  f=${files[RANDOM % ${#files[@]}]}
  case $(( RANDOM % 4 )) in
    0) # truncate to a page-aligned size, then put it back in place
       truncate -s $(( (RANDOM * 32768 + RANDOM) % (size / 4096) * 4096 )) "$f"
       sleep "0.$(( RANDOM % 3 ))"
       cp "$f.pristine" "$f"; done_count[truncate]=$(( ${done_count[truncate]:-0} + 1 )) ;;
    1) cp "$f.pristine" "$f"; done_count[rewrite]=$(( ${done_count[rewrite]:-0} + 1 )) ;;
    2) cp "$f.pristine" "$f.new" && mv "$f.new" "$f"
       done_count[replace]=$(( ${done_count[replace]:-0} + 1 )) ;;
    3) kill -INT "$loader_pid" 2>/dev/null || true
       done_count[sigint]=$(( ${done_count[sigint]:-0} + 1 )) ;;
  esac
  sleep "0.$(( RANDOM % 4 ))$(( RANDOM % 10 ))"
  now=$(date +%s)
  if [[ -f $dir/status.json ]]; then
    s=$(stat -c %Y "$dir/status.json")
    [[ $s != "$last_status" ]] && last_status=$s last_progress=$now
  fi
  if (( now - last_progress > 60 )); then
    kill -ABRT "$loader_pid" 2>/dev/null || true
    fail "no progress for 60 s: the loader hangs (stderr: $(tail -5 "$dir/loader.err"))"
  fi
done
# The loader stops by itself at the deadline: give it 120 s more.
rc=0
for _ in $(seq 120); do kill -0 "$loader_pid" 2>/dev/null || break; sleep 1; done
if kill -0 "$loader_pid" 2>/dev/null; then
  kill -ABRT "$loader_pid"; fail "the loader did not exit 120 s after its deadline"
fi
wait "$loader_pid" || rc=$?
loader_pid=
echo "chaos: mutations: $(for k in "${!done_count[@]}"; do printf '%s=%s ' "$k" "${done_count[$k]}"; done)"
echo "chaos: loader exit code $rc; its summary:"
cat "$dir/loader.out"
if [[ -s $dir/loader.err ]]; then
  echo "chaos: loader stderr (last lines):"; tail -20 "$dir/loader.err"
fi
(( rc < 128 )) || fail "the loader died of signal $(( rc - 128 ))"
(( rc == 0 )) || fail "the loader found wrong batches or bad fork children (exit $rc)"
echo "chaos: PASS ($minutes min, seed $seed)"
