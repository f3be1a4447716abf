#!/usr/bin/env bash
# Session 8, call 1: the benchmarks at the working tree's commit.
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/r/times.txt; }
mkdir -p $OUT/r/pw
rm -rf /tmp/plpy
python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/r/pip.log 2>&1 || { tail -30 $OUT/r/pip.log; exit 1; }
since built
nproc; lscpu | grep -E "Model name|Thread|Core|Socket" > $OUT/r/lscpu.txt
(cd bench && PYTHONPATH=/tmp/plpy PL_COMMIT=$PL_COMMIT timeout 480 python3 python_workers.py --parts aug,aug_pad,seed,tv --workers 6,14 --epochs 3 --rounds 2 --out $OUT/r/pw > $OUT/r/pw/log.txt 2>&1); grep -E "seed pinloader|seed torch|workers=" $OUT/r/pw/log.txt; tail -3 $OUT/r/pw/log.txt
since bench
cd $OUT && tar czf r.tgz r && rm -rf r
