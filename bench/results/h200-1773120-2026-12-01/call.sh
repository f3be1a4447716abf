#!/usr/bin/env bash
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/times.txt; }
export PL_COMMIT=1773120
rm -rf /tmp/plpy; python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/pip.log 2>&1 || { tail -30 $OUT/pip.log; exit 1; }
since built
mkdir -p $OUT/pw
(cd bench && PYTHONPATH=/tmp/plpy timeout 200 python3 python_workers.py --parts seed,aug,tv --workers 6,14 --epochs 3 --out $OUT/pw > $OUT/pw/log.txt 2>&1); grep -E "seed pinloader|seed torch|workers=" $OUT/pw/log.txt
since bench
(cd python/tests && PYTHONPATH=/tmp/plpy timeout 60 python3 -m pytest -q -p no:cacheprovider -rs test_gpu.py test_split.py > $OUT/pytest-gpu.txt 2>&1); tail -2 $OUT/pytest-gpu.txt
since pytest
mkdir -p $OUT/c
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo > $OUT/c/configure.log 2>&1 && timeout 150 cmake --build build-gpu -j16 > $OUT/c/build.log 2>&1 && timeout 90 ctest --test-dir build-gpu -L gpu --timeout 60 --output-on-failure > $OUT/c/ctest-gpu.log 2>&1); tail -6 $OUT/c/ctest-gpu.log; grep -E "error" $OUT/c/build.log | head -5
since ctest
