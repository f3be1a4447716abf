#!/usr/bin/env bash
# Session 8, call 4: 6 workers only, 4 rounds of torch / pinloader / bare processes in turn.
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/r/times.txt; }
mkdir -p $OUT/r/pw
rm -rf /tmp/plpy
python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/r/pip.log 2>&1 || { tail -30 $OUT/r/pip.log; exit 1; }
since built
(cd bench && PYTHONPATH=/tmp/plpy PL_COMMIT=$PL_COMMIT timeout 330 python3 python_workers.py --parts aug,aug_pad --workers 6 --epochs 3 --rounds 4 --ceiling --out $OUT/r/pw > $OUT/r/pw/log.txt 2>&1); grep -E "workers=" $OUT/r/pw/log.txt; tail -2 $OUT/r/pw/log.txt
since bench
cd $OUT && tar czf r.tgz r && rm -rf r
