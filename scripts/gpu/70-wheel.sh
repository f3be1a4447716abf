#!/usr/bin/env bash
# The built wheel on the GPU machine, which has no compiler step of ours:
# installs dist/pinloader-*-cpXY-*.whl (built elsewhere by scripts/wheel.sh
# for this Python; dist/ is git-ignored, so the device call must carry it)
# into a scratch directory, then checks that its extension sees the GPU, that
# its `pinloader` command loads into device memory with the same checksum as
# the CPU, and runs the Python tests (test_gpu.py included) against it.
# Without a wheel for this Python in dist/ it exits 77 (skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
tag=$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
whl=$(ls dist/pinloader-*-"$tag"-"$tag"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$whl" ]; then
  echo "70-wheel: no $tag wheel in dist/ ($(ls dist 2>&1 | tr '\n' ' ')): build it with" \
    "scripts/wheel.sh PYTHON (a $tag interpreter) and carry dist/; skipped (77)" >&2
  exit 77
fi
echo "70-wheel: $whl on $("$PY" --version), $(nvidia-smi -L 2>&1 | head -1)"
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$target" "$whl"
export PYTHONPATH=$target${PYTHONPATH:+:$PYTHONPATH}
cd python/tests # so that `import pinloader` is the wheel's
"$PY" -c 'import pinloader, sys; print("pinloader", pinloader.__version__, pinloader.__file__,
  "| cuda usable:", pinloader.cuda_available()); sys.exit(0 if pinloader.cuda_available() else 1)'
cli=$target/bin/pinloader
data=$(mktemp -d)
"$cli" bench gendata "$data" --records 5000 --files 2 >/dev/null
spec="cifar10:$data/data_batch_1.bin,$data/data_batch_2.bin"
"$cli" run --dataset "$spec" --device cuda --shuffle --epochs 2 --checksum --quiet | tee "$data/gpu"
"$cli" run --dataset "$spec" --device cpu --shuffle --epochs 2 --checksum --quiet >"$data/cpu"
grep -q "^device: cuda:0" "$data/gpu" || { echo "70-wheel: the wheel's CLI did not load into the GPU" >&2; exit 1; }
[ "$(grep '^checksum:' "$data/gpu")" = "$(grep '^checksum:' "$data/cpu")" ] ||
  { echo "70-wheel: GPU and CPU checksums differ" >&2; exit 1; }
echo "70-wheel: CLI checksum on cuda:0 equals the CPU's: $(grep '^checksum:' "$data/cpu")"
rm -rf "$data"
"$PY" -m pytest -q -p no:cacheprovider -rs .
