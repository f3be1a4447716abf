#!/usr/bin/env bash
# Builds pinloader's wheel into dist/ (git-ignored) for each Python given
# (default: Debian's /usr/bin/python3): the extension and the `pinloader`
# executable, with the CUDA backend and the static CUDA runtime when a
# toolkit is found (setup.py). A wheel is for one Python version: for the GPU
# machine (Python 3.12) run e.g. `scripts/wheel.sh /root/.pyenv/versions/3.12.1/bin/python3`,
# then carry dist/ and run `bash scripts/gpu-check.sh 70` there.
# A Python without setuptools builds in pip's isolated environment (fetches
# setuptools and wheel from PyPI); one with them builds offline.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
(($#)) || set -- /usr/bin/python3
mkdir -p dist
for py in "$@"; do
  iso=--no-build-isolation
  "$py" -c 'import setuptools, wheel' 2>/dev/null || iso=
  "$py" -m pip wheel -q --no-deps $iso -w dist . 
done
for w in dist/pinloader-*.whl; do
  # The newest glibc symbol versions its binaries need: the oldest glibc
  # they run with.
  t=$(mktemp -d)
  "${1}" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$t"
  need=$(objdump -T "$t"/pinloader/*.so "$t"/pinloader/bin/pinloader 2>/dev/null |
    grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  rm -rf "$t"
  echo "$w (needs ${need:-?})"
done
