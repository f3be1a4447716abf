#!/usr/bin/env bash
# Installs what pinloader's build, tests and default data set need, from
# Debian's packages, only where missing. Safe to run again.
set -euo pipefail

pkgs=(cmake gcc make zlib1g-dev libjpeg62-turbo-dev libpng-dev pkg-config dataset-fashion-mnist
      python3 python3-dev python3-venv python3-pip python3-setuptools python3-wheel python3-numpy
      python3-pytest python3-torch python3-pil python3-psutil clang libclang-rt-14-dev
      nginx libcurl4 python3-yaml python3-torchvision)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
# The tar shards tests' oracle (python/tests/test_shards.py): webdataset
# from PyPI, without its dependencies (numpy and PyYAML come from Debian
# above; pip must not replace them).
if ! /usr/bin/python3 -c "import webdataset" 2>/dev/null; then
  PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    /usr/bin/python3 -m pip install -q --no-deps webdataset braceexpand
fi
# The codecs' headers and archives, for builds on the GPU box (no -dev
# packages there): .data/codecs travels with the device call's .data.
"$(dirname "$0")/codecs-bundle.sh" >/dev/null
# Fashion-MNIST (the default data set, 30 MB) likewise: the GPU box has no
# Debian package of it, and test_cli_checksum needs it there.
fm=/usr/share/datasets/fashion-mnist
dest="$(dirname "$0")/../.data/fashion-mnist"
if [ -f "$fm/t10k-labels-idx1-ubyte.gz" ] && [ ! -f "$dest/t10k-labels-idx1-ubyte.gz" ]; then
  mkdir -p "$dest" && cp "$fm"/*.gz "$dest"/
fi
