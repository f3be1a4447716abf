#!/usr/bin/env bash
# Copies nvJPEG's library (libnvjpeg.so.13, from the nvidia-nvjpeg wheel on
# PyPI) into .data/nvjpeg/ (git-ignored), so that a machine without network
# or the wheel - the GPU box - finds it: scripts/gpu/66-nvjpeg.sh points
# PL_NVJPEG_LIB there. pinloader opens it at run time (dlopen); nothing
# links against it. The device call carries .data.
#   scripts/nvjpeg-bundle.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.data/nvjpeg}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  /usr/bin/python3 -m pip download -q --no-deps -d "$tmp" nvidia-nvjpeg
whl=$(ls "$tmp"/nvidia_nvjpeg-*.whl | head -1)
(cd "$tmp" && python3 -m zipfile -e "$whl" x)
lib=$(find "$tmp/x" -name libnvjpeg.so.13 | head -1)
[ -n "$lib" ] || { echo "nvjpeg-bundle: no libnvjpeg.so.13 in $whl" >&2; exit 1; }
mkdir -p "$dest"
cp "$lib" "$dest/"
find "$tmp/x" -name 'License.txt' -exec cp {} "$dest/" \; -quit
echo "made $(date -u +%FT%TZ) from $(basename "$whl")" >"$dest/VERSIONS"
echo "nvjpeg-bundle: $(du -sh "$dest" | cut -f1) in $dest"
