#!/usr/bin/env bash
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*"; }
rm -rf /tmp/plpy; python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/pip.log 2>&1 || { tail -30 $OUT/pip.log; exit 1; }
since built
export PYTHONPATH=/tmp/plpy
python3 .session/seedprobe.py 2>&1 | tee $OUT/seedprobe.txt
since seedprobe
mkdir -p $OUT/r
PL_COMMIT=${PL_COMMIT:-x} timeout 300 python3 bench/images_vs_torch.py --device cuda --require-torchvision --out $OUT/r 2>&1 | tail -15
since images
