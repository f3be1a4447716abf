#!/usr/bin/env bash
# What a new user meets first, through the CLI, with exact messages: the
# no-GPU notice and error, swapped or duplicated IDX files, an empty CIFAR-10
# file, --resume with --epochs (the whole run), --checksum timed apart from
# loading, the CPU stats line, `bench loader` on a missing file (no plot),
# and no project-internal words in the help texts and docs.
# Usage: test_first_contact.sh PATH/TO/pinloader
set -u
CLI=$(realpath "${1:?usage: $0 PATH/TO/pinloader}")
HERE=$(cd "$(dirname "$0")/../.." && pwd)
command -v python3 >/dev/null || { echo "no python3: skip"; exit 77; }
unset RANK WORLD_SIZE LOCAL_RANK OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE \
  OMPI_COMM_WORLD_LOCAL_RANK PMI_RANK PMI_SIZE
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect RC WANT_STDERR args...: the exit status and the exact stderr.
expect() {
  local rc=$1 want=$2
  shift 2
  "$CLI" "$@" >"$T/out" 2>"$T/err"
  local got=$?
  [ "$got" -eq "$rc" ] || fail "pinloader $*: exit $got, want $rc"
  [ "$(cat "$T/err")" = "$want" ] || fail "pinloader $*: stderr
  got:  $(cat "$T/err")
  want: $want"
}


# --- data: IDX images [12, 2, 3] and labels [12]; CIFAR-10 with 51 records.
python3 - "$T" <<'EOF'
import struct, sys
t = sys.argv[1]
def idx(path, dims, data):
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data)
idx(f"{t}/images", [12, 2, 3], bytes(range(72)))
idx(f"{t}/labels", [12], bytes(i % 10 for i in range(12)))
EOF
head -c $((3073 * 51)) /dev/urandom >"$T/c.bin"
: >"$T/empty.bin"
I=$T/images L=$T/labels
# A usable GPU makes the no-GPU cases moot: they run where there is none
# (CI), the rest everywhere.
gpu=0
"$CLI" run --dataset "cifar10:$T/c.bin" --quiet 2>/dev/null | grep -q "^device: cuda" && gpu=1

# --- 1. the right files load.
"$CLI" run --dataset "idx:$I,$L" --device cpu --quiet >"$T/out" 2>"$T/err" ||
  fail "idx:IMAGES,LABELS exited $?: $(cat "$T/err")"
grep -qx "loaded: 12 samples in 1 batches, [0-9.]* s" "$T/out" || fail "idx load: $(cat "$T/out")"

# --- 2. IDX roles: labels have 1 dim, images 2 or more.
expect 1 "pinloader: error: --dataset: dataset spec 'idx:$I,$I': $I: an IDX labels file has 1 dim, this one has 3: it looks like an images file (the images file comes first, then the labels)" \
  run --dataset "idx:$I,$I" --device cpu --quiet
expect 1 "pinloader: error: --dataset: dataset spec 'idx:$L,$I': $L: an IDX images file has 2 or more dims, this one has 1: it looks like a labels file (the images file comes first, then the labels)" \
  run --dataset "idx:$L,$I" --device cpu --quiet
[ ! -s "$T/out" ] || fail "a refused data set printed results: $(cat "$T/out")"

# --- 3. an empty CIFAR-10 file, alone or among others with no records.
expect 1 "pinloader: error: --dataset: dataset spec 'cifar10:$T/empty.bin': $T/empty.bin: empty: no records" \
  run --dataset "cifar10:$T/empty.bin" --device cpu --quiet
expect 1 "pinloader: error: --dataset: dataset spec 'cifar10:$T/empty.bin,$T/empty.bin': $T/empty.bin and the 1 other files: empty: no records" \
  run --dataset "cifar10:$T/empty.bin,$T/empty.bin" --device cpu --quiet
# An empty file beside a full one is a shard that happens to be empty: fine.
"$CLI" run --dataset "cifar10:$T/c.bin,$T/empty.bin" --device cpu --quiet >"$T/out" 2>&1 ||
  fail "a full file plus an empty one: $(cat "$T/out")"

# --- 4. --resume continues the same run: --epochs counts the whole run.
ds="cifar10:$T/c.bin"
run() { "$CLI" run --dataset "$ds" --batch-size 7 --shuffle --seed 3 --workers 2 \
  --device cpu --quiet --epochs 2 "$@" >"$T/log" 2>&1 || { cat "$T/log" >&2; fail "run $*"; }; }
run --order-out "$T/C"                                  # epochs 0 and 1: 2 x 51
[ "$(wc -l <"$T/C")" -eq 102 ] || fail "2 epochs delivered $(wc -l <"$T/C") samples, want 102"
run --max-batches 10 --save-state "$T/S" --order-out "$T/A" # epoch 0 and 2 batches of epoch 1
[ "$(wc -l <"$T/A")" -eq 65 ] || fail "stopped run: $(wc -l <"$T/A") samples, want 65"
run --resume "$T/S" --order-out "$T/B" --save-state "$T/S2"
[ "$(wc -l <"$T/B")" -eq 37 ] || fail "resumed run: $(wc -l <"$T/B") samples, want the 37 left of epoch 1"
cat "$T/A" "$T/B" | cmp -s - "$T/C" || fail "stopped + resumed runs differ from one run of 2 epochs"
grep -qx "loaded: 37 samples in 6 batches, [0-9.]* s" "$T/log" || fail "resumed run report: $(cat "$T/log")"
expect 0 "pinloader run: --resume $T/S2 is at epoch 2; --epochs 2 counts the whole run, so nothing is left to load" \
  run --dataset "$ds" --batch-size 7 --shuffle --seed 3 --device cpu --quiet --epochs 2 --resume "$T/S2"
grep -qx "loaded: 0 samples in 0 batches, [0-9.]* s" "$T/out" || fail "finished run resumed: $(cat "$T/out")"

# --- 5. --checksum: timed on its own line, not in the loading time; the CPU
# stats line says what applies to host batches.
"$CLI" run --dataset "$ds" --device cpu --quiet --checksum >"$T/out" 2>"$T/err" || fail "--checksum exited $?"
grep -qx "checksum: [0-9a-f]\{16\}" "$T/out" || fail "checksum line: $(cat "$T/out")"
grep -qx "checksum time: [0-9]*\.[0-9]\{3\} s (not counted in the loading time)" "$T/out" ||
  fail "checksum time line: $(cat "$T/out")"
grep -qx "stats: batches stay in host memory (no device copies), batch buffers [0-9]*, consumer waited [0-9.]* s, workers busy [0-9.]* s" "$T/out" ||
  fail "CPU stats line: $(grep stats: "$T/out")"
grep -q "copied 0 batches\|pinned 0 bytes" "$T/out" && fail "the CPU stats line reads as if nothing was loaded"
"$CLI" run --dataset "$ds" --device cpu --quiet >"$T/out2" 2>&1
grep -q "^checksum" "$T/out2" && fail "checksum lines without --checksum"

# --- 6. no GPU: plain words, not "driver version is insufficient".
if [ $gpu -eq 0 ]; then
  "$CLI" run --dataset "$ds" --quiet >"$T/out" 2>"$T/err" || fail "device auto exited $?"
  notice=$(cat "$T/err")
  case $notice in
    "pinloader: no NVIDIA driver found; using the CPU" | \
    "pinloader: this build of pinloader has no CUDA support; using the CPU") ;;
    *) fail "device auto without a GPU: stderr '$notice'" ;;
  esac
  grep -qx "device: cpu" "$T/out" || fail "device auto without a GPU: $(head -1 "$T/out")"
  if [ "$notice" = "pinloader: no NVIDIA driver found; using the CPU" ]; then
    expect 1 "pinloader: error: creating the loader: no NVIDIA driver found" \
      run --dataset "$ds" --device cuda --quiet
    expect 1 "pinloader: error: creating the loader: no NVIDIA driver found" \
      run --dataset "$ds" --device cuda:1 --quiet
  fi
fi

# --- 7. bench loader on a missing file: fails, no plot written or announced.
(cd "$T" && "$CLI" bench loader --data "$T/missing.bin" --device cpu --quiet >"$T/out" 2>"$T/err")
rc=$?
[ $rc -eq 1 ] || fail "bench loader --data missing.bin exited $rc, want 1"
[ ! -e "$T/pinloader-bench.svg" ] || fail "a failed bench wrote a plot"
grep -q "^plot:" "$T/out" && fail "a failed bench announced a plot: $(cat "$T/out")"
grep -qx "pinloader bench: error: data set: $T/missing.bin: cannot open: No such file or directory" "$T/err" ||
  fail "bench missing file message: $(cat "$T/err")"
# The simulated step is named for what it is.
"$CLI" bench loader --data "$T/c.bin" --device cpu --quiet --no-plot --workers 1 --work-ms 1 \
  --epochs 1 --no-sweep --batch-size 16 >"$T/out" 2>&1 || fail "bench loader exited $?: $(cat "$T/out")"
grep -qx "== loader with a simulated training step (a sleep, 1 ms per batch): batch 16, 1 workers, float32 images (/255) ==" "$T/out" ||
  fail "bench step heading: $(grep '^==' "$T/out")"

# --- 8. no project-internal words or references where users read.
"$CLI" --help >"$T/h1"; "$CLI" run --help >"$T/h2"; "$CLI" bench --help >"$T/h3"
for f in "$T/h1" "$T/h2" "$T/h3" "$HERE/README.md" "$HERE/python/README.md" "$HERE"/docs/*.md; do
  hits=$(grep -n -i "main job\|seeds'\|seed benchmark\|seed document\|the seed's\|as the seed)" "$f")
  [ -z "$hits" ] || fail "$(basename "$f"): internal words: $hits"
  # the project's own machines, issue numbers, commit hashes as words (a
  # result folder's name, such as h200-dd24a7d-2026-12-01/, is a path), and
  # paths of the project's workspace, not of this repository
  hits=$(grep -n -i -P 'gpu box|\bissues? \d|(?<![\w&])#\d|\bshared/|(?<![\w/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w/.-])' "$f")
  [ -z "$hits" ] || fail "$(basename "$f"): internal references: $hits"
done

[ $fails -eq 0 ] && echo "test_first_contact: ok" || echo "test_first_contact: $fails failure(s)"
[ $fails -eq 0 ]
