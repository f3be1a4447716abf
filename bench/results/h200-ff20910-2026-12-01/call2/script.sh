#!/usr/bin/env bash
# Session 8, call 2: the benchmarks at the working tree's commit (SampleWriter),
# with the bare-process ceiling; then pinloader alone, old (952210a) and new in turns.
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/r/times.txt; }
mkdir -p $OUT/r/pw
build() { (cd $1 && python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/$2 . > $OUT/r/pip-$2.log 2>&1) || { echo "build $2 failed"; tail -20 $OUT/r/pip-$2.log; }; }
rm -rf /tmp/plpy /tmp/plold
build . plpy & build .session/v_old plold & wait
since built
(cd bench && PYTHONPATH=/tmp/plpy PL_COMMIT=$PL_COMMIT timeout 400 python3 python_workers.py --parts aug,seed,tv,tokens,pss --workers 6,14 --epochs 3 --rounds 2 --ceiling --out $OUT/r/pw > $OUT/r/pw/log.txt 2>&1); grep -E "seed pinloader|seed torch|workers=|pss" $OUT/r/pw/log.txt; tail -2 $OUT/r/pw/log.txt
since bench
for round in 1 2 3; do for v in plold plpy; do PYTHONPATH=/tmp/$v timeout 40 python3 .session/oldnew.py 6 aug 2>&1 | grep '{' | tee -a $OUT/r/oldnew.jsonl; done; done
since oldnew
cd $OUT && tar czf r.tgz r && rm -rf r
