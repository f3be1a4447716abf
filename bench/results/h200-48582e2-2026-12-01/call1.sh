#!/usr/bin/env bash
# Session 7, call 1: the next epoch's order drawn early (working tree) against
# c676a50 (.session/old), same call; then the whole Python suite with CUDA and ctest -L gpu.
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/times.txt; }
rm -rf /tmp/plpy /tmp/plold
python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/pip.log 2>&1 || { tail -30 $OUT/pip.log; exit 1; }
(cd .session/old &&  python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plold . > $OUT/pip-old.log 2>&1) || { tail -30 $OUT/pip-old.log; exit 1; }
since built
mkdir -p $OUT/pw $OUT/old $OUT/pw2
(cd bench && PYTHONPATH=/tmp/plpy timeout 220 python3 python_workers.py --parts seed,aug,tv --workers 6,14 --epochs 3 --out $OUT/pw > $OUT/pw/log.txt 2>&1); grep -E "seed pinloader|seed torch|workers=" $OUT/pw/log.txt
since bench-new
(cd bench && PYTHONPATH=/tmp/plold timeout 100 python3 python_workers.py --parts aug --workers 6,14 --epochs 3 --out $OUT/old > $OUT/old/log.txt 2>&1); grep -E "workers=" $OUT/old/log.txt
since bench-old
(cd bench && PYTHONPATH=/tmp/plpy timeout 100 python3 python_workers.py --parts aug --workers 6,14 --epochs 3 --out $OUT/pw2 > $OUT/pw2/log.txt 2>&1); grep -E "workers=" $OUT/pw2/log.txt
since bench-new-again
(cd python/tests && PYTHONPATH=/tmp/plpy timeout 200 python3 -m pytest -q -p no:cacheprovider -rs . > $OUT/pytest-full.txt 2>&1); tail -4 $OUT/pytest-full.txt
since pytest
mkdir -p $OUT/c
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo > $OUT/c/configure.log 2>&1 && timeout 120 cmake --build build-gpu -j16 > $OUT/c/build.log 2>&1 && timeout 60 ctest --test-dir build-gpu -L gpu --timeout 50 --output-on-failure > $OUT/c/ctest-gpu.log 2>&1); tail -4 $OUT/c/ctest-gpu.log; grep -E "error" $OUT/c/build.log | head -5
since ctest
