#!/usr/bin/env bash
# Session 8, call 6: the final code (review fixes): the whole Python suite with CUDA,
# then aug at 6 and 14 workers, 2 rounds.
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/r/times.txt; }
mkdir -p $OUT/r/pw
rm -rf /tmp/plpy
python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/r/pip.log 2>&1 || { tail -30 $OUT/r/pip.log; exit 1; }
since built
(cd python/tests && PYTHONPATH=/tmp/plpy timeout 200 python3 -m pytest -q -p no:cacheprovider -rs . > $OUT/r/pytest-full.txt 2>&1); tail -4 $OUT/r/pytest-full.txt
since pytest
(cd bench && PYTHONPATH=/tmp/plpy PL_COMMIT=$PL_COMMIT timeout 120 python3 python_workers.py --parts aug --workers 6,14 --epochs 3 --rounds 2 --out $OUT/r/pw > $OUT/r/pw/log.txt 2>&1); grep -E "workers=" $OUT/r/pw/log.txt
since bench
cd $OUT && tar czf r.tgz r && rm -rf r
