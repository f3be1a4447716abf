#!/usr/bin/env bash
# Session 8, call 3: where a worker's extra per-sample cost goes (.session/wprobe.py),
# then the whole Python suite with CUDA and ctest -L gpu, at the working tree.
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*" | tee -a $OUT/r/times.txt; }
mkdir -p $OUT/r/c
rm -rf /tmp/plpy
python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/r/pip.log 2>&1 || { tail -30 $OUT/r/pip.log; exit 1; }
since built
for round in 1 2 3; do for v in bare base nowrite private; do PYTHONPATH=/tmp/plpy timeout 40 python3 .session/wprobe.py $v 2>&1 | grep '{' | tee -a $OUT/r/wprobe.jsonl; done; done
since wprobe
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo > $OUT/r/c/configure.log 2>&1 && timeout 150 cmake --build build-gpu -j16 > $OUT/r/c/build.log 2>&1)
since cbuild
(cd python/tests && PL_CLI=$PWD/../../build-gpu/pinloader PYTHONPATH=/tmp/plpy timeout 240 python3 -m pytest -q -p no:cacheprovider -rs . > $OUT/r/pytest-full.txt 2>&1); tail -6 $OUT/r/pytest-full.txt
since pytest
(timeout 100 ctest --test-dir build-gpu -L gpu --timeout 60 --output-on-failure > $OUT/r/c/ctest-gpu.log 2>&1); tail -4 $OUT/r/c/ctest-gpu.log; grep -E " error" $OUT/r/c/build.log | head -5
since ctest
cd $OUT && tar czf r.tgz r && rm -rf r
