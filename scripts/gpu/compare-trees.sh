#!/usr/bin/env bash
# Before and after in one call: this tree against OLD, a source tree of an
# earlier commit (git archive COMMIT | tar -x -C OLD), on the same machine
# in the same run, for the figures a refactoring must keep (issue 27):
#   1. CIFAR-10 uint8 through the CLI, shuffled, batch 1024, 14 workers,
#      into the GPU (as part 15), the trees taking turns, 3 runs each;
#   2. Python datasets through worker processes (bench/python_workers.py:
#      numpy augmentation at 14 workers, the seeds' CIFAR benchmark), torch
#      measured in each run, new then old then new;
#   3. the image folder (bench/images_vs_torch.py, torchvision in the same
#      run), this tree only unless PL_CMP_IMAGES_OLD=1.
# Usage: PL_COMMIT=new PL_OLD_COMMIT=old scripts/gpu/compare-trees.sh OLD
# Results: $OUT/compare/ (compare.md, each run's output). The machine's
# speed moves by up to 20% between calls, hence one call for both trees.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -d "${1:-}" ] || { echo "usage: $0 OLD_TREE"; exit 2; }
old=$(cd "$1" && pwd)
out=${OUT:-$PWD/gpu-out}/compare
mkdir -p "$out"
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1
export PL_CODECS_DIR=${PL_CODECS_DIR:-$PWD/.data/codecs} # the old tree has no .data
t0=$(date +%s)
since() { echo "+$(($(date +%s) - t0)) s"; }
md=$out/compare.md
{
  echo "# Before and after: ${PL_COMMIT:-this tree} against ${PL_OLD_COMMIT:-$old}"
  echo
  echo "$(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(nproc) cores"
} >"$md"

build() { # tree name: the Python package and the CLI, both Release
  local tree=$1 name=$2
  (cd "$tree" && "$PY" -m pip install -q --no-index --no-build-isolation --no-deps \
      --target "/tmp/cmp-py-$name" .) >"$out/$name-pip.log" 2>&1 || { echo "$name: pip failed"; return 1; }
  # gcc 13 at -O3 sees uninitialized reads where there are none (one in
  # images_decode.c, zeroed since): an old tree must still build.
  { cmake -S "$tree" -B "/tmp/cmp-cli-$name" -DCMAKE_BUILD_TYPE=Release -DPL_BUILD_TESTS=OFF \
      -DCMAKE_C_FLAGS=-Wno-error=maybe-uninitialized &&
    cmake --build "/tmp/cmp-cli-$name" -j8 --target pinloader_cli; } >"$out/$name-cli.log" 2>&1 ||
    { echo "$name: CLI build failed"; return 1; }
}
build "$PWD" new & a=$!
build "$old" old & b=$!
wait $a || exit 1
wait $b || exit 1
echo "built $(since)"

data=$(mktemp -d /tmp/pl-cmp.XXXXXX)
trap 'rm -rf "$data"' EXIT
/tmp/cmp-cli-new/pinloader bench gendata "$data" --records 500000 --files 5 >/dev/null || exit 1
spec="cifar10:$(ls "$data"/*.bin | paste -sd,)"
{ echo; echo "## CIFAR-10 uint8, batch 1024, 14 workers, into the GPU (M samples/s, 20 epochs a run)"; echo; } >>"$md"
for i in 1 2 3; do
  for name in new old; do
    sps=$(/tmp/cmp-cli-$name/pinloader run --dataset "$spec" --quiet --device cuda --batch-size 1024 \
          --workers 14 --shuffle --epochs 20 2>&1 | sed -n 's/^samples\/s: \([0-9]*\).*/\1/p')
    echo "- run $i, $name: $(awk -v s="$sps" 'BEGIN { printf "%.2f", s / 1e6 }')" | tee -a "$md"
  done
done
echo "cifar done $(since)"

pyw() { # name tag
  PYTHONPATH=/tmp/cmp-py-$1 timeout 200 "$PY" bench/python_workers.py --parts aug,seed --workers 14 \
      --epochs 2 --seed-runs 3 --out "$out/pyw-$2" >"$out/pyw-$2.log" 2>&1 ||
    echo "python_workers $2 failed (see pyw-$2.log)"
  { echo; echo "## Python workers, $2"; echo; sed -n '/^## numpy/,$p' "$out/pyw-$2/python_workers.md" 2>/dev/null; } >>"$md"
}
pyw new new-1
pyw old old
pyw new new-2
echo "python workers done $(since)"

imgs() { # name
  PYTHONPATH=/tmp/cmp-py-$1 timeout 170 "$PY" bench/images_vs_torch.py --device cuda --require-torchvision \
      --out "$out" --name "images-$1" >"$out/images-$1.log" 2>&1 || echo "images $1 failed (see images-$1.log)"
  { echo; echo "## Image folder, $1"; echo; cat "$out/images-$1.md" 2>/dev/null; } >>"$md"
}
imgs new
[ "${PL_CMP_IMAGES_OLD:-0}" = 1 ] && imgs old
echo "done $(since)"
cat "$md"
