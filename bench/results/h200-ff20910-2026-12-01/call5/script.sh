#!/usr/bin/env bash
# Session 8, call 5: aug at 6 and 14 workers, 4 rounds (torch, pinloader, bare processes in turn); the seeds benchmark, 10 runs.
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/r/times.txt; }
mkdir -p $OUT/r/pw
rm -rf /tmp/plpy
python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/r/pip.log 2>&1 || { tail -30 $OUT/r/pip.log; exit 1; }
since built
(cd bench && PYTHONPATH=/tmp/plpy PL_COMMIT=$PL_COMMIT timeout 330 python3 python_workers.py --parts aug,seed --workers 6,14 --epochs 3 --rounds 4 --ceiling --out $OUT/r/pw > $OUT/r/pw/log.txt 2>&1); grep -E "workers=|seed " $OUT/r/pw/log.txt; tail -2 $OUT/r/pw/log.txt
since bench
cd $OUT && tar czf r.tgz r && rm -rf r
