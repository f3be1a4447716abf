#!/usr/bin/env bash
# Session 7, call 2 (commit 48582e2 + probe): the benchmarks, and where the
# seeds' steady epochs spend their time over the floor (.session/seedgap.py).
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/r/times.txt; }
mkdir -p $OUT/r/pw
rm -rf /tmp/plpy
python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/r/pip.log 2>&1 || { tail -30 $OUT/r/pip.log; exit 1; }
since built
(cd bench && PYTHONPATH=/tmp/plpy timeout 220 python3 python_workers.py --parts seed,aug,tv --workers 6,14 --epochs 3 --out $OUT/r/pw > $OUT/r/pw/log.txt 2>&1); grep -E "seed pinloader|seed torch|workers=" $OUT/r/pw/log.txt
since bench
PYTHONPATH=/tmp/plpy timeout 120 python3 .session/seedgap.py $OUT/r/seedgap.json > $OUT/r/seedgap.txt 2>&1; cat $OUT/r/seedgap.txt | grep -v Warn
since seedgap
cd $OUT && tar czf r.tgz r && rm -rf r
