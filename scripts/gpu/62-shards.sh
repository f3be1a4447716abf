#!/usr/bin/env bash
# GPU part 62: tar shards (docs/sources.md, "Tar shards"), through the
# Python package built here with the CUDA backend:
#   1. python/tests/test_shards.py (local shards always; the HTTP tests need
#      nginx and skip without it; the fault-server tests need only Python);
#   2. bench/shards_vs_webdataset.py --device cuda: pinloader.datasets.Shards
#      local and over loopback HTTP (nginx, else Python's http.server) vs
#      webdataset.WebDataset + torch's DataLoader, 12,000 generated JPEGs in
#      shards of 200, RandomResizedCrop(224) + flip, 16 workers, batch 256,
#      into the GPU (--quick first).
# The box cannot reach PyPI: webdataset and braceexpand come from
# .data/pydeps (scripts/pydeps-bundle.sh, run where they are installed; the
# device call carries .data), the codecs from .data/codecs.
# Results (NAME.json, NAME.md) go to $PL_GPU_LOGS, else $OUT (default
# ./gpu-out), and are copied to $OUT/shards/.
# Budget: about 6 minutes (module build ~1, folder ~1, bench ~3).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
logs=${PL_GPU_LOGS:-$out}
mkdir -p "$out/shards" "$logs"
PY=${PYTHON:-python3}
if [ -z "${PYTHON:-}" ] && ! "$PY" -c 'import torch' 2>/dev/null && [ -x /usr/bin/python3 ]; then
  PY=/usr/bin/python3
fi
[ -d .data/pydeps ] && export PYTHONPATH="$PWD/.data/pydeps${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import torch, webdataset, PIL, numpy' ||
  { echo "$PY lacks torch, webdataset, PIL or numpy (webdataset: scripts/pydeps-bundle.sh)"; exit 1; }
target=$(mktemp -d /tmp/pinloader-py62.XXXXXX)
if ! PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip install -q --no-index \
     --no-build-isolation --no-deps --target "$target" . >"$target.pip.log" 2>&1; then
  echo "python build failed:"; tail -n 40 "$target.pip.log"; exit 1
fi
export PYTHONPATH="$target:$PYTHONPATH"
"$PY" -c 'import pinloader; print("pinloader", pinloader.__version__, "cuda usable:", pinloader.cuda_available())'
rc=0
(cd python/tests && timeout 300 "$PY" -m pytest -q -p no:cacheprovider test_shards.py) 2>&1 |
  tee "$logs/62-test_shards.log" | tail -5
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
if timeout 120 "$PY" bench/shards_vs_webdataset.py --quick --device cuda --out "$logs" --name shards-quick; then
  timeout 420 "$PY" bench/shards_vs_webdataset.py --device cuda --out "$logs" || rc=1
else
  rc=1
fi
cp "$logs"/shards-*.json "$logs"/shards-*.md "$out/shards/" 2>/dev/null
rm -rf "$target" "$target.pip.log"
exit $rc
