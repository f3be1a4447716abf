#!/usr/bin/env bash
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*"; }
rm -rf /tmp/plpy; python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/pip.log 2>&1 || { tail -30 $OUT/pip.log; exit 1; }
since built
export PYTHONPATH=/tmp/plpy
timeout 150 python3 .session/seedprobe.py > $OUT/seedprobe.txt 2>&1; tail -32 $OUT/seedprobe.txt
since seedprobe
mkdir -p $OUT/r
timeout 330 python3 bench/python_workers.py --out $OUT/r --parts aug,seed,tv --workers 6,14 --epochs 2 2>&1 | grep -v "^ " | tail -20
since pyworkers
