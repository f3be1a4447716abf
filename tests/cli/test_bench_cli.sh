#!/usr/bin/env bash
# `pinloader bench`: option errors, the generated data set's exact format,
# and the reports (JSON parses, CSV header, SVG written) of a quick CPU run. Usage: test_bench_cli.sh PATH/TO/pinloader
set -u
CLI=${1:?usage: $0 PATH/TO/pinloader}
command -v python3 >/dev/null || { echo "no python3: skip"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect_usage_error "substring of the message" args...: exit 2 + message.
expect_usage_error() {
  local want=$1; shift
  "$CLI" bench "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "bench $* exited $rc, want 2"
  grep -qF -- "$want" "$T/err" || fail "bench $*: stderr lacks '$want': $(cat "$T/err")"
  [ ! -s "$T/out" ] || fail "bench $*: wrote to stdout on a usage error"
}

expect_usage_error "unknown option '--bogus'" --bogus
expect_usage_error "unknown option '--bogus'" loader --bogus
expect_usage_error "unknown experiment 'nonsense'" nonsense
expect_usage_error "--workers needs a valid value, not -1" --workers -1
expect_usage_error "--max-size needs a valid value, not 12Q" --max-size 12Q
expect_usage_error "--epochs needs a valid value" --epochs
expect_usage_error "--device needs a valid value, not gpu" --device gpu
expect_usage_error "--sweep needs a valid value, not 1,,x" --sweep 1,,x
expect_usage_error "--min-size is above --max-size" bandwidth --min-size 2M --max-size 1M
expect_usage_error "needs a directory" gendata

# --device cuda where none is usable: a clear error, exit 1.
if ! nvidia-smi -L >/dev/null 2>&1; then
  "$CLI" bench bandwidth --device cuda:0 --no-plot >/dev/null 2>"$T/err"
  rc=$?
  [ $rc -eq 1 ] || fail "--device cuda:0 without a GPU exited $rc, want 1"
  grep -q "error: --device cuda:0: no usable CUDA device" "$T/err" || fail "--device cuda:0 message: $(cat "$T/err")"
fi

"$CLI" bench --help >"$T/help" || fail "--help exited $?"
grep -q "usage: pinloader bench" "$T/help" || fail "--help lacks usage"

# --- the generated data set: 1234 records in 3 files of 3073-byte records,
# split 412/411/411, labels < 10, the same bytes for the same seed.
"$CLI" bench gendata "$T/g1" --records 1234 --files 3 --seed 7 >"$T/paths" ||
  fail "gendata exited $?"
"$CLI" bench gendata "$T/g2" --records 1234 --files 3 --seed 7 >/dev/null || fail "gendata g2"
"$CLI" bench gendata "$T/g3" --records 1234 --files 3 --seed 8 >/dev/null || fail "gendata g3"
[ "$(wc -l <"$T/paths")" -eq 3 ] || fail "gendata printed $(wc -l <"$T/paths") paths, want 3"
python3 - "$T" <<'EOF' || fail "generated data set format"
import sys, os
t = sys.argv[1]
paths = [l.strip() for l in open(f"{t}/paths")]
assert [os.path.basename(p) for p in paths] == ["data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin"], paths
sizes = [os.path.getsize(p) for p in paths]
assert sizes == [412 * 3073, 411 * 3073, 411 * 3073], sizes
labels = []
for p in paths:
    b = open(p, "rb").read()
    labels += [b[i] for i in range(0, len(b), 3073)]
assert len(labels) == 1234 and max(labels) < 10, max(labels)
assert len(set(labels)) == 10, sorted(set(labels))  # all classes occur
same = open(paths[0], "rb").read() == open(f"{t}/g2/data_batch_1.bin", "rb").read()
other = open(paths[0], "rb").read() == open(f"{t}/g3/data_batch_1.bin", "rb").read()
assert same and not other, (same, other)
EOF

# --- a loader run on given files: the records are the files' records.
F="$T/g1/data_batch_1.bin,$T/g1/data_batch_2.bin"
"$CLI" bench loader --data "$F" --device cpu --workers 2 --work-ms 0 --epochs 2 \
  --sweep 0,2 --batch-size 100 --no-plot --quiet --json - >"$T/loader.json" 2>"$T/loader.err" ||
  fail "bench loader --data exited $?: $(cat "$T/loader.err")"
python3 - "$T/loader.json" <<'EOF' || fail "bench loader --json - report"
import json, sys
d = json.load(open(sys.argv[1]))
L = d["loader"]
assert L["ran"] is True and L["on_gpu"] is False, L
assert L["records"] == 823, L["records"]
assert L["batch_size"] == 100 and L["workers"] == 2, L
assert len(L["seed"]) == 1 and L["seed"][0]["batches"] == 9, L["seed"]
assert len(L["seed"][0]["epoch_s"]) == 2 and L["seed"][0]["floor_s"] == 0
assert [(r["workers"], r["dtype"]) for r in L["sweep"]] == \
    [(0, "uint8"), (0, "float32"), (2, "uint8"), (2, "float32")], L["sweep"]
assert all(r["samples_per_s"] > 0 and r["gb_per_s"] > 0 for r in L["sweep"])
assert d["bandwidth"]["ran"] is False and d["overlap"]["ran"] is False
EOF
grep -q "loader with a simulated training step" "$T/loader.err" ||
  fail "with --json - the tables belong on stderr"

# --- an epoch too short for steady state (9 batches, under twice the 5
# batch buffers of 2 workers) prints "short run" and why, not a ratio that
# measures the pipeline filling; 83 batches print the ratio. JSON: "steady"
# and "over_floor_pct" (null when short).
for bs in 100 10; do
  "$CLI" bench loader --data "$F" --device cpu --workers 2 --work-ms 1 --epochs 1 \
    --no-sweep --batch-size $bs --no-plot --quiet --json "$T/short$bs.json" >"$T/short$bs.out" 2>"$T/err" ||
    fail "bench loader --batch-size $bs exited $?: $(cat "$T/err")"
done
grep -Eq '^  off +off +9 +[0-9.]+ +0\.009 +short run  [0-9.]+$' "$T/short100.out" ||
  fail "short run row: $(cat "$T/short100.out")"
grep -qF "  short run: 9 batches per epoch, under twice the loader's 5 batch buffers:
  the epoch is mostly the pipeline filling, so over floor is not measured
  (more --records or a smaller --batch-size measure it)" "$T/short100.out" ||
  fail "short run explanation: $(cat "$T/short100.out")"
grep -Eq '^  off +off +83 +[0-9.]+ +0\.083 +-?[0-9]+\.[0-9]%  [0-9.]+$' "$T/short10.out" ||
  fail "a long enough run prints its ratio: $(cat "$T/short10.out")"
grep -q "short run" "$T/short10.out" && fail "83 batches called short: $(cat "$T/short10.out")"
python3 - "$T" <<'EOF' || fail "short run JSON"
import json, sys
short = json.load(open(f"{sys.argv[1]}/short100.json"))["loader"]["seed"][0]
long_ = json.load(open(f"{sys.argv[1]}/short10.json"))["loader"]["seed"][0]
assert (short["batches"], short["batch_buffers"], short["steady"]) == (9, 5, False), short
assert short["over_floor_pct"] is None, short
assert (long_["batches"], long_["batch_buffers"], long_["steady"]) == (83, 5, True), long_
m, f = long_["mean_s"], long_["floor_s"]
assert abs(long_["over_floor_pct"] - 100 * (m - f) / f) < 1e-3 * max(1, abs(long_["over_floor_pct"])), long_
EOF

# --- a malformed data file: exit 1, the loader's message (file and sizes).
printf 'abc' >"$T/bad.bin"
"$CLI" bench loader --data "$T/bad.bin" --no-plot --quiet >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || fail "bench loader on a malformed file exited $rc, want 1"
grep -q "error: data set: $T/bad.bin: .*3073-byte records" "$T/err" || fail "malformed file message: $(cat "$T/err")"
grep -q "^loader: failed: data set: " "$T/out" || fail "the report does not say the loader failed"

# --- the whole quick run, as a CPU-only machine runs it (--device cpu, so
# that the same holds on a GPU machine). How long it takes is a benchmark's
# business, not a test's: what --quick means is checked by counts (sizes,
# records, epochs) in the reports below.
(cd "$T" && "$CLI" bench --quick --device cpu --json r.json --csv r.csv >"$T/quick.out" 2>"$T/quick.err") ||
  fail "bench --quick exited $?: $(tail -5 "$T/quick.err")"
grep -q "^plot: pinloader-bench.svg$" "$T/quick.out" || fail "the plot's path is not printed"
for t in "== bandwidth" "overlap: skipped: no GPU" "== loader with a simulated training step" "== loader sweep"; do
  grep -qF "$t" "$T/quick.out" || fail "quick output lacks '$t'"
done
python3 - "$T" <<'EOF' || fail "quick run reports"
import json, sys, xml.dom.minidom
t = sys.argv[1]
d = json.load(open(f"{t}/r.json"))
assert d["quick"] is True and d["cpus"] >= 1
bw = d["bandwidth"]
assert bw["ran"] and [r["bytes"] for r in bw["rows"]] == [65536 << 2 * i for i in range(6)], bw["rows"]
assert all(r["host_memcpy"] > 0 for r in bw["rows"]) if not bw["on_gpu"] else True
assert d["loader"]["records"] == 10000 and len(d["loader"]["sweep"]) >= 4
assert [len(r["epoch_s"]) for r in d["loader"]["seed"]] == [1] * len(d["loader"]["seed"])  # quick: 1 epoch
assert d["loader"]["work_ms"] == 10  # quick: a 10 ms step
rows = open(f"{t}/r.csv").read().splitlines()
assert rows[0] == "experiment,config,param,value,unit", rows[0]
assert all(len(r.split(",")) == 5 for r in rows), [r for r in rows if len(r.split(",")) != 5]
assert sum(r.startswith("bandwidth,") for r in rows) == len(bw["rows"]) * (8 if bw["on_gpu"] else 1)
assert any(r.startswith("loader_sweep,uint8") for r in rows)
svg = open(f"{t}/pinloader-bench.svg").read()
doc = xml.dom.minidom.parseString(svg)  # well-formed
assert doc.documentElement.tagName == "svg"
assert len(doc.getElementsByTagName("polyline")) >= 3  # memcpy + uint8 + float32
assert "Loader epoch time by workers" in svg and "64 KiB" in svg
EOF

# --- --csv - keeps stdout pure CSV.
"$CLI" bench bandwidth --quick --device cpu --max-size 256K --no-plot --csv - >"$T/bw.csv" 2>/dev/null ||
  fail "bench bandwidth --csv - exited $?"
[ "$(head -1 "$T/bw.csv")" = "experiment,config,param,value,unit" ] || fail "CSV header: $(head -1 "$T/bw.csv")"
[ "$(grep -c '^bandwidth,' "$T/bw.csv")" -eq 2 ] || fail "CSV rows: $(cat "$T/bw.csv")"

# --- an unwritable report path is an error (exit 1), not a silent success.
"$CLI" bench bandwidth --quick --max-size 64K --no-plot --json /nonexistent/dir/r.json \
  >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || fail "unwritable --json exited $rc, want 1"
grep -q "cannot write /nonexistent/dir/r.json" "$T/err" || fail "unwritable --json message: $(cat "$T/err")"

[ $fails -eq 0 ] && echo "test_bench_cli: ok" || echo "test_bench_cli: $fails failure(s)"
[ $fails -eq 0 ]
