#!/usr/bin/env bash
# GPU part 60: the native sources' benchmarks (issue 13), through the Python
# package built here with the CUDA backend:
#   1. bench/images_vs_torch.py: a generated ImageNet-like folder (12,000
#      JPEGs), torchvision ImageFolder + RandomResizedCrop(224) + flip +
#      PILToTensor vs pinloader.datasets.ImageFolder, 16 workers, batch 256,
#      uint8, into the GPU (torchvision required);
#   2. bench/tokens_vs_nanogpt.py: nanoGPT's get_batch and torch's DataLoader
#      vs pinloader.datasets.Tokens, B=32, T=1024, into the GPU, and the
#      loader's wait as a share of a 20 ms step.
# Each runs --quick first (seconds; a crash there stops the part before the
# full run). Results (NAME.json, NAME.md: machine, date, commit, the torch
# peer of the same run) go to $PL_GPU_LOGS (packed into logs.tar.gz by
# scripts/gpu-check.sh) and are copied to $OUT/sources/.
#
# The GPU box has no -dev packages: the codecs come from .data/codecs (made
# here by scripts/codecs-bundle.sh; the device call carries .data).
# Budget: about 4 minutes on the H200 (the module build ~1, the folder ~1).
#
# The same on a machine without a GPU (the CPU-only comparison, 2 workers
# each; torchvision optional, see bench/images_vs_torch.py):
#   OUT=DIR bash scripts/gpu/60-sources.sh --device cpu [--quick]
# --quick: the correctness runs only.
set -uo pipefail
cd "$(dirname "$0")/../.."
device=cuda quick_only=0
while (($#)); do
  case $1 in
    --device) device=$2; shift 2 ;;
    --quick) quick_only=1; shift ;;
    *) echo "usage: $0 [--device cuda|cpu] [--quick]"; exit 2 ;;
  esac
done
out=${OUT:-$PWD/gpu-out}
logs=${PL_GPU_LOGS:-$out}
mkdir -p "$out" "$logs"
[ "$logs" = "$out" ] || mkdir -p "$out/sources"
PY=${PYTHON:-python3}
# Debian's python3 has torch where a PATH python3 (pyenv) may not.
if [ -z "${PYTHON:-}" ] && ! "$PY" -c 'import torch' 2>/dev/null && [ -x /usr/bin/python3 ]; then
  PY=/usr/bin/python3
fi
tv=--require-torchvision peer_mods="torch, torchvision, PIL, numpy"
if [ "$device" = cpu ]; then tv="" peer_mods="torch, PIL, numpy"; fi
t0=$(date +%s)
since() { echo "+$(($(date +%s) - t0)) s"; }

if ! [ -f .data/codecs/include/jpeglib.h ] && ! [ -f /usr/include/jpeglib.h ] && [ -z "${PL_CODECS_DIR:-}" ]; then
  echo "no JPEG headers: run scripts/codecs-bundle.sh where the packages are and carry .data"
  exit 1
fi
"$PY" -c "import $peer_mods" || { echo "$PY lacks one of $peer_mods"; exit 1; }
"$PY" -c 'import torch; print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'

echo "== building the Python package (CUDA backend where the toolkit is) $(since)"
target=$(mktemp -d /tmp/pinloader-py60.XXXXXX)
piplog=$logs/60-pip.log # not among the results when they are the same folder
[ "$logs" != "$out" ] || piplog=$target.pip.log
if ! PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip install -q --no-index \
     --no-build-isolation --no-deps --target "$target" . >"$piplog" 2>&1; then
  echo "python build failed:"; tail -n 40 "$piplog"; exit 1
fi
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
# The module must have the codecs and the CUDA backend, or the numbers are
# of something else.
"$PY" - "$device" <<'PY' || exit 1
import sys, pinloader
try:
    pinloader.datasets.ImageFolder("/nonexistent-pinloader-probe")
except pinloader.Error as e:
    if "lacks" in str(e):
        sys.exit("the module has no image codecs (%s): carry .data/codecs" % e)
print("pinloader", pinloader.__version__, "cuda usable:", pinloader.cuda_available())
if sys.argv[1] == "cuda" and not pinloader.cuda_available():
    sys.exit("the module has no usable CUDA backend")
PY
echo "module built $(since)"

rc=0
step() { # name timeout args...
  local name=$1 limit=$2; shift 2
  echo "== $name $(since)"
  timeout "$limit" "$PY" "$@" --out "$logs"
  local r=$?
  if [ $r -ne 0 ]; then echo "$name: exit $r (124 = over its $limit s)"; rc=1; fi
  return $r
}
# $tv unquoted: empty on the CPU.
if step "images quick" 60 bench/images_vs_torch.py --quick --device "$device" $tv; then
  ((quick_only)) || step "images full" 300 bench/images_vs_torch.py --device "$device" $tv
fi
if step "tokens quick" 45 bench/tokens_vs_nanogpt.py --quick --device "$device"; then
  ((quick_only)) || step "tokens full" 150 bench/tokens_vs_nanogpt.py --device "$device"
fi
if [ "$logs" != "$out" ]; then
  cp "$logs"/images-*.json "$logs"/images-*.md "$logs"/tokens-*.json "$logs"/tokens-*.md \
    "$out/sources/" 2>/dev/null
fi
rm -rf "$target"
echo "60-sources total $(since)"
exit $rc
