#!/usr/bin/env bash
# bench/vs_torch.py and bench/cpu_vs_torch.py run end to end on this
# machine's CPU (small sizes) against the CLI under test: they parse the
# CLI's JSON, print their ratio tables and write their result files.
# Skipped (77) where no python3 has torch and numpy.
set -u
CLI=${1:?usage: $0 PATH/TO/pinloader}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PY=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import torch, numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "no python3 with torch: skip"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

for s in vs_torch cpu_vs_torch; do
  "$PY" -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$HERE/bench/$s.py" || fail "$s.py does not parse"
done

"$PY" "$HERE/bench/cpu_vs_torch.py" --cli "$CLI" --records 8192 --epochs 1 --out "$T/r" \
  >"$T/cpu.out" 2>"$T/cpu.err" || fail "cpu_vs_torch.py exited $?: $(tail -5 "$T/cpu.err")"
grep -q "^| torch map-style (memmap) | [0-9,]* | [0-9.]*x |$" "$T/cpu.out" || fail "cpu_vs_torch table: $(cat "$T/cpu.out")"
grep -q "^target (>= 20x the map-style loader): " "$T/cpu.out" || fail "cpu_vs_torch verdict"
"$PY" - "$T/r/cpu_vs_torch.json" <<'PYEOF' || fail "cpu_vs_torch.json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["records"] == 8192 and d["workers"] == 2 and d["batch_size"] == 1024, d
assert d["pinloader_samples_per_s"] > 0 and d["torch_map_samples_per_s"] > 0
assert abs(d["ratio_map"] - d["pinloader_samples_per_s"] / d["torch_map_samples_per_s"]) < 1e-9
PYEOF
[ -s "$T/r/cpu_vs_torch.md" ] || fail "cpu_vs_torch.md missing"

"$PY" "$HERE/bench/vs_torch.py" --quick --force-cli --cli "$CLI" --records 3000 --workers 2 \
  --sweep 0,1 --out "$T/v" >"$T/vs.out" 2>"$T/vs.err" || fail "vs_torch.py exited $?: $(tail -5 "$T/vs.err")"
grep -q "pinloader via CLI" "$T/vs.out" || fail "vs_torch does not say how it ran pinloader"
grep -qE "^      1 (off|on) +[0-9]+ +[0-9]+ +[0-9.]+x$" "$T/vs.out" || fail "vs_torch sweep table: $(cat "$T/vs.out")"
"$PY" - "$T/v/vs_torch.json" <<'PYEOF' || fail "vs_torch.json"
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["workers"] for r in d["sweep"]][:1] == [0], d["sweep"]
assert all(r["pinloader_samples_per_s"] > 0 for r in d["sweep"]), d["sweep"]
assert len(d["seed"]) >= 1 and d["seed"][0]["pinloader_mean_s"] > 0, d["seed"]
PYEOF

[ $fails -eq 0 ] && echo "test_bench_py: ok" || echo "test_bench_py: $fails failure(s)"
[ $fails -eq 0 ]
