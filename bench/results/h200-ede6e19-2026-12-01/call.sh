#!/usr/bin/env bash
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*"; }
rm -rf /tmp/plpy; python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/pip.log 2>&1 || { tail -30 $OUT/pip.log; exit 1; }
since built
PYTHONPATH=/tmp/plpy timeout 100 python3 bench/timing_cost.py --rounds 60 --turn-batches 2000 --json $OUT/timing-cost.json 2>&1 | tee $OUT/report-timing-cost.txt
since timing
mkdir -p $OUT/r
PYTHONPATH=/tmp/plpy timeout 70 python3 bench/python_workers.py --out $OUT/r --parts aug --workers 6 --epochs 2 --ceiling 2>&1 | grep -v "^ " | tail -4
since aug
