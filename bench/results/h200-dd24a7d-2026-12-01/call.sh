#!/usr/bin/env bash
set -uo pipefail
T0=$(date +%s); since() { echo "[+$(($(date +%s)-T0)) s] $*"; }
rm -rf /tmp/plpy; python3 -m pip install -q --no-index --no-build-isolation --no-deps --target /tmp/plpy . > $OUT/pip.log 2>&1 || { tail -30 $OUT/pip.log; exit 1; }
since built
export PYTHONPATH=/tmp/plpy
cd bench && timeout 330 python3 autotune.py --seconds 3 --warmup 3 --auto-warmup 10 --json $OUT/autotune.json > $OUT/autotune.txt 2>&1; echo "autotune rc=$?"; cd ..
grep -v "^- \|^report\|^bound" $OUT/autotune.txt | grep -v "^$"
since autotune
cd python/tests && timeout 200 python3 -m pytest -q -p no:cacheprovider . > $OUT/pytest-gpu.log 2>&1; echo "pytest rc=$?"; tail -5 $OUT/pytest-gpu.log
since pytest
