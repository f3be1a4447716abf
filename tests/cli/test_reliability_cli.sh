#!/usr/bin/env bash
# Reliability through the CLI (issue 17): an output that is an input is
# refused and the file is left as it was; a FIFO is refused without
# hanging; a data file truncated during a real run ends it with exit 1 and
# a message naming the file, never a bus error, with 0, 1 and 2 workers.
# Usage: test_reliability_cli.sh PATH-TO-pinloader (exit 77: no CLI).
set -euo pipefail
cli=${1:-}
if [[ -z $cli || ! -x $cli ]]; then
  echo "skip: no CLI binary at '$cli'"
  exit 77
fi
unset RANK WORLD_SIZE LOCAL_RANK
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

head -c $((3073 * 40)) /dev/urandom >"$dir/data.bin"
cp "$dir/data.bin" "$dir/orig.bin"

# --order-out / --save-state naming the data file (or a link to it).
ln -s "$dir/data.bin" "$dir/link.bin"
for opt in --order-out --save-state; do
  for out in "$dir/data.bin" "$dir/link.bin"; do
    for w in 0 2; do
      rc=0
      "$cli" run --dataset "cifar10:$dir/data.bin" --workers $w --quiet \
        $opt "$out" >"$dir/log" 2>&1 || rc=$?
      [[ $rc -eq 1 ]] || { cat "$dir/log" >&2; fail "$opt $out: exit $rc, want 1"; }
      grep -qF "pinloader: error: $opt $out: is one of the data set's files (--dataset cifar10:$dir/data.bin); refusing to overwrite it" "$dir/log" ||
        { cat "$dir/log" >&2; fail "$opt $out: message"; }
      cmp -s "$dir/data.bin" "$dir/orig.bin" || fail "$opt $out changed the data file"
    done
  done
done
# A state file elsewhere is written whole (through a rename).
"$cli" run --dataset "cifar10:$dir/data.bin" --quiet --save-state "$dir/S" >/dev/null
[[ $(stat -c %s "$dir/S") -eq 64 ]] || fail "state file is not 64 bytes"
ls "$dir" | grep -q '\.tmp' && fail "a temporary state file was left behind"

# A FIFO: refused at once (timeout turns a hang into a failure).
mkfifo "$dir/fifo"
rc=0
timeout 20 "$cli" run --dataset "cifar10:$dir/fifo" --quiet >"$dir/log" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || { cat "$dir/log" >&2; fail "FIFO: exit $rc, want 1"; }
grep -qF "$dir/fifo: not a regular file (a FIFO)" "$dir/log" || { cat "$dir/log" >&2; fail "FIFO message"; }

# Truncation during a run: exit 1 with the file named, not SIGBUS (135).
head -c $((3073 * 3000)) /dev/urandom >"$dir/big.bin"
for w in 0 1 2; do
  cp "$dir/big.bin" "$dir/run.bin"
  "$cli" run --dataset "cifar10:$dir/run.bin" --workers $w --batch-size 64 \
    --epochs 1000000 --checksum --quiet >"$dir/log" 2>&1 &
  pid=$!
  sleep 0.5
  truncate -s 4096 "$dir/run.bin"
  rc=0
  wait $pid || rc=$?
  [[ $rc -eq 1 ]] || { cat "$dir/log" >&2; fail "truncated with $w workers: exit $rc, want 1"; }
  grep -qF "pinloader: error: loading: $dir/run.bin: the file changed while it was being read (it is 4096 bytes now, was $((3073 * 3000)))" "$dir/log" ||
    { cat "$dir/log" >&2; fail "truncated with $w workers: message"; }
done
echo "ok"
