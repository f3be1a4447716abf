#!/usr/bin/env bash
# Builds the Python package into a scratch directory (not site-packages:
# Debian's pip refuses that) and runs its tests. Used by scripts/test.sh with
# Debian's python3 (CPU torch) and by scripts/gpu/30-python.sh on the GPU box.
# PINLOADER_NO_CUDA=1 builds and tests the host-only extension (no CUDA
# backend compiled in; scripts/test.sh runs both).
# Usage: [PINLOADER_NO_CUDA=1] scripts/python-test.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1

"$PY" -c 'import setuptools, pytest, numpy' || {
  echo "python-test: $PY lacks setuptools, pytest or numpy" >&2
  exit 1
}
# PINLOADER_PY_TARGET: build into that folder and keep it (the GPU parts
# reuse one build); by default a scratch folder, removed at the end.
if [[ -n ${PINLOADER_PY_TARGET:-} ]]; then
  target=$PINLOADER_PY_TARGET
  rm -rf "$target" && mkdir -p "$target"
else
  target=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-py.XXXXXX")
  trap 'rm -rf "$target"' EXIT
fi

echo "python-test: building the extension with $PY"
"$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$target" .
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import pinloader; print("pinloader", pinloader.__version__, "| cuda usable:", pinloader.cuda_available())'
if [[ ${PINLOADER_NO_CUDA:-0} != 0 ]]; then
  # The host-only build imports (every symbol resolved) and has no CUDA.
  "$PY" -c 'import pinloader, sys; sys.exit(pinloader.cuda_available())' ||
    { echo "python-test: PINLOADER_NO_CUDA=1 build reports CUDA" >&2; exit 1; }
fi
# From inside python/tests so that `import pinloader` is the installed one.
cd python/tests
jobs=${PINLOADER_PY_JOBS:-1}
if ((jobs <= 1)); then
  exec "$PY" -m pytest -q -p no:cacheprovider -rfEs .
fi
# PINLOADER_PY_JOBS=N (the GPU box's 16 cores): one pytest per test file, N
# at once, largest files first so that the longest start early; each
# file's log in PINLOADER_PY_LOGS. The same tests as the serial run, in
# less wall time than one device call allows.
logs=${PINLOADER_PY_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/pinloader-pylogs.XXXXXX")}
mkdir -p "$logs"
: >"$logs/rc.txt" # a reused folder: only this run's files count
export PY logs
ls -S test_*.py | xargs -P "$jobs" -I{} sh -c \
  '"$PY" -m pytest -q -p no:cacheprovider -rfEs "$1" >"$logs/$1.log" 2>&1; echo "$? $1" >>"$logs/rc.txt"' _ {}
rc=0
while read -r code file; do
  echo "$file: rc=$code | $(tail -n 1 "$logs/$file.log")"
  if [[ $code != 0 && $code != 5 ]]; then # 5: every test in the file skipped
    rc=1
    grep -E '^(FAILED|ERROR)' "$logs/$file.log" | head -20
  fi
done < <(sort -k2 "$logs/rc.txt")
# One line for the whole run, as the serial run's last line.
totals=$(tail -q -n 1 "$logs"/test_*.log | grep -oE '[0-9]+ (passed|failed|skipped|errors?)' |
  awk '{n[$2] += $1} END {for (k in n) printf "%d %s, ", n[k], k}')
echo "python-test: ${totals%, } in $(ls "$logs"/test_*.log | wc -l) files, $jobs at once"
exit $rc
