#!/usr/bin/env bash
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/times.txt; }
export PL_COMMIT=4ece407
rm -rf /tmp/plpy; python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/pip.log 2>&1 || { tail -30 $OUT/pip.log; exit 1; }
since built
PYTHONPATH=/tmp/plpy timeout 60 python3 .session/seedprobe4.py > $OUT/seedprobe.txt 2>&1; grep -E "^rep|fork \[|Loader|epochs" $OUT/seedprobe.txt
since probe
mkdir -p $OUT/pw
(cd bench && PYTHONPATH=/tmp/plpy timeout 200 python3 python_workers.py --parts seed,aug,tv --workers 6,14 --epochs 3 --out $OUT/pw > $OUT/pw/log.txt 2>&1); grep -E "seed pinloader|seed torch|workers=" $OUT/pw/log.txt
since bench
