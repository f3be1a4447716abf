#!/usr/bin/env bash
# `pinloader run` flags from the outside: unknown flags are called unknown
# (with the closest known one), --flag=value works for every flag, numbers
# are read as a person writes them and errors state the range, and
# --max-batches 0 is refused rather than meaning "no limit", and --epoch
# past --epochs is refused rather than loading nothing. Exact messages.
# Usage: test_flags.sh PATH-TO-pinloader (exit 77: no CLI yet).
set -euo pipefail
. "$(dirname "$0")/prologue.sh"
head -c $((3073 * 10)) /dev/urandom >"$dir/a.bin"
ds="cifar10:$dir/a.bin"

# usage_error WANT ARGS...: exit status 2 and exactly WANT on stderr.
usage_error() {
  local want=$1 rc=0
  shift
  "$cli" run "$@" >"$dir/out" 2>"$dir/err" || rc=$?
  [[ $rc -eq 2 ]] || fail "pinloader run $*: exit $rc, want 2"
  [[ $(cat "$dir/err") == "$want" ]] ||
    fail "pinloader run $*: stderr '$(cat "$dir/err")', want '$want'"
}

usage_error "pinloader run: unknown option --shufle (did you mean --shuffle?)" --shufle
usage_error "pinloader run: unknown option --batchsize (did you mean --batch-size?)" --batchsize 4
usage_error "pinloader run: unknown option --frobnicate" --frobnicate
usage_error "pinloader run: --epochs must be an integer in [1, 18446744073709551615], got \" -1\"" --epochs " -1"
usage_error "pinloader run: --epochs must be an integer in [1, 18446744073709551615], got \"+2\"" --epochs=+2
usage_error "pinloader run: --epochs must be in [1, 18446744073709551615], got 0" --epochs 0
usage_error "pinloader run: --max-batches must be in [1, 18446744073709551615], got 0 (leave it out for no limit)" --max-batches 0
usage_error "pinloader run: --batch-size: batch_size must be in [1, 4294967295], got 0" --batch-size 0
usage_error "pinloader run: --batch-size: batch_size must be in [1, 4294967295], got 4294967296" --batch-size=4294967296
usage_error "pinloader run: --batch-size: batch_size must be an integer in [1, 4294967295], got \" 8\"" --batch-size " 8"
usage_error "pinloader run: --workers: num_workers must be in [0, 1024] or auto, got 5000" --workers 5000
usage_error "pinloader run: --seed: seed must be an integer in [0, 18446744073709551615], got \"-\"" --seed -
usage_error "pinloader run: --timeout: timeout_s must be in [0, 1e+09], got -1" --timeout -1
usage_error "pinloader run: --device: device must be auto, cpu, cuda or cuda:N, got \"gpu\"" --device gpu
usage_error "pinloader run: --log-level: log_level must be debug, info, warn or error, got \"loud\"" --log-level loud
usage_error "pinloader run: --max-batch-buffers: max_batch_buffers must be in [0, 1048576], got 1048577" --max-batch-buffers 1048577
usage_error "pinloader run: --dataset needs a value (SPEC) (pinloader run --help lists the options)" --dataset
usage_error "pinloader run: --quiet takes no value (pinloader run --help lists the options)" --quiet=1
usage_error "pinloader run: unexpected argument 'extra' (pinloader run --help lists the options)" extra

# --flag=value for every kind of flag, and the new ones (max_batch_buffers,
# log level): 10 samples, batch 3, 2 batches.
"$cli" run --dataset="$ds" --batch-size=3 --workers=2 --max-batches=2 --epochs=1 \
  --order-out="$dir/order" --quiet --max-batch-buffers=8 --log-level=error \
  --device=cpu --shuffle --seed=7 >"$dir/out" 2>"$dir/err" ||
  fail "--flag=value run: $(cat "$dir/err")"
[[ $(wc -l <"$dir/order") -eq 6 ]] || fail "--max-batches=2 of 3: $(wc -l <"$dir/order") samples, want 6"
grep -q "^loaded: 6 samples in 2 batches" "$dir/out" || fail "run output: $(cat "$dir/out")"
# --no-shuffle undoes --shuffle: the identity order.
"$cli" run --dataset "$ds" --batch-size 5 --shuffle --no-shuffle --quiet \
  --order-out "$dir/order" >/dev/null 2>&1 || fail "--no-shuffle run"
seq 0 9 | cmp -s - "$dir/order" || fail "--no-shuffle did not give index order"

# --help exits 0 and lists the table's options and the command's own flags.
"$cli" run --help >"$dir/help" || fail "--help exit status"
for flag in --dataset --epochs --max-batches --checksum --batch-size \
  "--shuffle, --no-shuffle" --max-batch-buffers --log-level --copy-chunk-bytes; do
  grep -q -- "$flag" "$dir/help" || fail "--help lacks $flag"
done

# Sharding: an explicit --world-size takes RANK from the environment when
# WORLD_SIZE agrees, and the run says so once; disagreeing is an error.
# --epoch N (the first epoch to load) is not --epochs: --epochs E counts the
# whole run from epoch 0, so --epoch N with N >= E would load nothing; it is
# refused, naming the likely typo. A near miss of either is unknown.
usage_error "pinloader run: --epoch 2 is the first epoch to load, and --epochs 1 counts the whole run from epoch 0, so nothing would be loaded (did you mean --epochs 2?)" --dataset "$ds" --epoch 2
usage_error "pinloader run: --epoch 3 is the first epoch to load, and --epochs 3 counts the whole run from epoch 0, so nothing would be loaded (did you mean --epochs 3?)" --dataset "$ds" --epoch=3 --epochs 3
usage_error "pinloader run: unknown option --epocs (did you mean --epochs?)" --epocs 2
usage_error "pinloader run: unknown option --epo (did you mean --epoch?)" --epo 2
[[ ! -s $dir/out ]] || fail "a refused --epoch ran: $(cat "$dir/out")"
# --epoch 1 --epochs 3 loads epochs 1 and 2: 20 samples.
"$cli" run --dataset "$ds" --epoch 1 --epochs 3 --quiet --order-out "$dir/e" >/dev/null 2>&1 ||
  fail "--epoch 1 --epochs 3"
[[ $(wc -l <"$dir/e") -eq 20 ]] || fail "--epoch 1 --epochs 3 loaded $(wc -l <"$dir/e") samples, want 20"

RANK=1 WORLD_SIZE=2 "$cli" run --dataset "$ds" --batch-size 5 --world-size 2 \
  --quiet --order-out "$dir/r1" >/dev/null 2>"$dir/err" || fail "env sharding: $(cat "$dir/err")"
[[ $(cat "$dir/r1" | tr '\n' ' ') == "1 3 5 7 9 " ]] || fail "rank 1 of 2 got $(cat "$dir/r1" | tr '\n' ' ')"
[[ $(grep -c "sharding from the environment" "$dir/err") -eq 1 ]] || fail "announcement: $(cat "$dir/err")"
grep -qx "pinloader: sharding from the environment: rank 1 of 2 (RANK, world_size set)" "$dir/err" ||
  fail "announcement text: $(cat "$dir/err")"
rc=0
RANK=1 WORLD_SIZE=4 "$cli" run --dataset "$ds" --world-size 2 --quiet >/dev/null 2>"$dir/err" || rc=$?
[[ $rc -eq 1 ]] || fail "disagreeing world sizes: exit $rc"
[[ $(cat "$dir/err") == "pinloader: error: sharding: world_size 2 disagrees with the environment's WORLD_SIZE=4: pass rank too, or make them agree" ]] ||
  fail "disagreeing world sizes: $(cat "$dir/err")"
echo "test_flags: ok"
