#!/usr/bin/env bash
# Resumable runs through the CLI: a run stopped after 5 batches with
# --save-state, then resumed with --resume, delivers exactly what one
# uninterrupted run does; two ranks together cover the data set (with
# DistributedSampler's padding: the order's first sample once more); and a
# state saved by a rank of world 2 resumes under world 1 at the same global
# position. Usage: test_resume.sh PATH-TO-pinloader (exit 77: no CLI yet).
set -euo pipefail
. "$(dirname "$0")/prologue.sh"

# 51 CIFAR-10 records (1 label byte + 3072 pixels) in two files: n is odd,
# so world 2 pads one sample.
head -c $((3073 * 30)) /dev/urandom >"$dir/a.bin"
head -c $((3073 * 21)) /dev/urandom >"$dir/b.bin"
n=51
ds="cifar10:$dir/a.bin,$dir/b.bin"
run() { "$cli" run --dataset "$ds" --batch-size 7 --shuffle --seed 3 \
  --epochs 1 --workers 2 --quiet "$@" >"$dir/log" 2>&1 ||
  { cat "$dir/log" >&2; fail "pinloader run $*"; }; }

run --order-out "$dir/C"
[[ $(wc -l <"$dir/C") -eq $n ]] || fail "uninterrupted run: $(wc -l <"$dir/C") samples, want $n"
[[ $(sort -n "$dir/C" | uniq | wc -l) -eq $n ]] || fail "uninterrupted run repeats samples"
seq 0 $((n - 1)) | cmp -s - <(sort -n "$dir/C") || fail "uninterrupted run is not a permutation of 0..$((n - 1))"
seq 0 $((n - 1)) | cmp -s - "$dir/C" && fail "--shuffle gave the identity order"

# Stop after 5 batches (35 samples), then resume: the rest of the epoch.
run --max-batches 5 --save-state "$dir/S" --order-out "$dir/A"
[[ $(wc -l <"$dir/A") -eq 35 ]] || fail "stopped run: $(wc -l <"$dir/A") samples, want 35"
[[ $(stat -c %s "$dir/S") -eq 64 ]] || fail "state file is $(stat -c %s "$dir/S") bytes, want 64"
run --resume "$dir/S" --workers 0 --order-out "$dir/B"
cat "$dir/A" "$dir/B" | cmp -s - "$dir/C" || fail "A+B differs from the uninterrupted order"

# A damaged state file is refused with a clear message.
cp "$dir/S" "$dir/bad"
printf '\xff' | dd of="$dir/bad" bs=1 seek=20 conv=notrunc status=none
if "$cli" run --dataset "$ds" --batch-size 7 --shuffle --seed 3 --quiet \
  --resume "$dir/bad" >"$dir/log" 2>&1; then
  fail "a corrupt state file was accepted"
fi
grep -q "corrupt" "$dir/log" || { cat "$dir/log" >&2; fail "no 'corrupt' in the message"; }
# So is a state from another seed.
if "$cli" run --dataset "$ds" --batch-size 7 --shuffle --seed 4 --quiet \
  --resume "$dir/S" >"$dir/log" 2>&1; then
  fail "a state saved with another seed was accepted"
fi
grep -q "seed=3" "$dir/log" || { cat "$dir/log" >&2; fail "no 'seed=3' in the message"; }

# Two ranks: 26 samples each; rank r has global positions r, r+2, ...
run --rank 0 --world-size 2 --order-out "$dir/R0"
run --rank 1 --world-size 2 --order-out "$dir/R1"
[[ $(wc -l <"$dir/R0") -eq 26 && $(wc -l <"$dir/R1") -eq 26 ]] ||
  fail "ranks got $(wc -l <"$dir/R0") and $(wc -l <"$dir/R1") samples, want 26 each"
paste -d'\n' "$dir/R0" "$dir/R1" | head -n $n | cmp -s - "$dir/C" ||
  fail "the ranks' interleaving is not the global order"
[[ $(tail -n 1 "$dir/R1") == $(head -n 1 "$dir/C") ]] ||
  fail "the padding sample is not the order's first"
[[ $(cat "$dir/R0" "$dir/R1" | sort -n | uniq | wc -l) -eq $n ]] ||
  fail "the two ranks do not cover the data set"

# The ranks also read RANK / WORLD_SIZE from the environment (torchrun).
RANK=1 WORLD_SIZE=2 run --order-out "$dir/E1"
cmp -s "$dir/E1" "$dir/R1" || fail "RANK=1 WORLD_SIZE=2 differs from --rank 1 --world-size 2"
RANK=x WORLD_SIZE=2 "$cli" run --dataset "$ds" --quiet >"$dir/log" 2>&1 &&
  fail "RANK=x was accepted"
grep -q 'RANK="x"' "$dir/log" || { cat "$dir/log" >&2; fail "the message does not name RANK"; }

# Elastic: rank 1 of 2 stops after 2 batches (2 * 7 * 2 = 28 global
# samples consumed); one process resumes the rest of the global order.
run --rank 1 --world-size 2 --max-batches 2 --save-state "$dir/S2"
run --resume "$dir/S2" --order-out "$dir/D"
tail -n +29 "$dir/C" | cmp -s - "$dir/D" || fail "world 2 -> 1 resume is not the rest of the global order"
echo "test_resume: ok"
