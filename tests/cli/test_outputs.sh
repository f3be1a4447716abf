#!/usr/bin/env bash
# `pinloader run`'s output files (--order-out, --save-state) are checked
# before anything is loaded and written whole or not at all: a character
# device, a FIFO, a symbolic link or a directory is refused and left as it
# is; a directory that is not there is named before the run; one file given
# for two roles is refused; a run that fails leaves the old files as they
# were, with no temporary file behind. Exit 1 and "pinloader: error: OPTION
# PATH: ..." each time. Usage: test_outputs.sh PATH-TO-pinloader (77: no CLI).
set -euo pipefail
. "$(dirname "$0")/prologue.sh"

head -c $((3073 * 20)) /dev/urandom >"$dir/data.bin"
ds="cifar10:$dir/data.bin"

# refused ARGS... EXPECTED-MESSAGE: exit 1, that one line on stderr, nothing
# on stdout (nothing was loaded). `timeout`: opening a FIFO to write it
# would block, which must fail the test, not hang it.
refused() {
  local want=${*: -1} rc=0
  timeout 60 "$cli" run --dataset "$ds" --device cpu --quiet "${@:1:$#-1}" \
    >"$dir/out" 2>"$dir/err" || rc=$?
  [[ $rc -eq 1 ]] || fail "${*:1:$#-1}: exit $rc, want 1: $(cat "$dir/err")"
  [[ $(cat "$dir/err") == "$want" ]] || fail "${*:1:$#-1}: stderr
$(cat "$dir/err")
want
$want"
  [[ ! -s $dir/out ]] || fail "${*:1:$#-1}: ran before refusing: $(cat "$dir/out")"
}
no_tmp() { ! ls -a "$dir" | grep -q '\.tmp' || fail "$1: a temporary file was left: $(ls -a "$dir")"; }

# A character device. Never /dev/null itself as root: a regressed CLI would
# replace it for the whole machine. Root makes its own (the null device's
# numbers, in the temporary directory); anyone else cannot replace /dev/null
# (/dev is not theirs), so uses it.
chr=/dev/null
if [[ $(id -u) -eq 0 ]]; then
  chr=$dir/null
  mknod "$chr" c 1 3 2>/dev/null || { echo "note: no mknod here: no character device case"; chr=; }
fi
for opt in ${chr:+--save-state --order-out}; do
  refused $opt "$chr" \
    "pinloader: error: $opt $chr: not a regular file (a character device); refusing to replace it"
  [[ -c $chr ]] || fail "$opt $chr: no longer a character device"
done

# A FIFO and a directory: refused, left as they are.
mkfifo "$dir/fifo"
mkdir "$dir/sub"
for opt in --save-state --order-out; do
  refused $opt "$dir/fifo" \
    "pinloader: error: $opt $dir/fifo: not a regular file (a FIFO); refusing to replace it"
  [[ -p $dir/fifo ]] || fail "$opt FIFO: no longer a FIFO"
  refused $opt "$dir/sub" \
    "pinloader: error: $opt $dir/sub: not a regular file (a directory); refusing to replace it"
  [[ -d $dir/sub ]] || fail "$opt directory: no longer a directory"
done

# A symbolic link: refused (a rename would replace the link, not write
# through it); the link and its target stay as they were.
printf 'keep\n' >"$dir/target"
ln -s "$dir/target" "$dir/link"
for opt in --save-state --order-out; do
  refused $opt "$dir/link" \
    "pinloader: error: $opt $dir/link: is a symbolic link; refusing to replace it (give the path of the file it points to)"
  [[ -L $dir/link && $(cat "$dir/target") == keep ]] || fail "$opt link: changed"
done

# A directory that is not there: named before the run, not after it.
for opt in --save-state --order-out; do
  refused $opt "$dir/nodir/F" \
    "pinloader: error: $opt $dir/nodir/F: cannot create a file in $dir/nodir: No such file or directory"
done
no_tmp "refused outputs"

# One file for two roles. --order-out and --save-state: neither is written.
refused --order-out "$dir/X" --save-state "$dir/X" \
  "pinloader: error: --order-out $dir/X and --save-state $dir/X are the same file; give each its own"
[[ ! -e $dir/X ]] || fail "--order-out X --save-state X wrote X"
# The same through another spelling of the path, and through a hard link.
refused --order-out "$dir/sub/../X" --save-state "$dir/X" \
  "pinloader: error: --order-out $dir/sub/../X and --save-state $dir/X are the same file; give each its own"
"$cli" run --dataset "$ds" --device cpu --quiet --max-batches 1 \
  --save-state "$dir/S" >/dev/null 2>&1 || fail "saving a state"
[[ $(stat -c %s "$dir/S") -eq 64 ]] || fail "the state is $(stat -c %s "$dir/S") bytes, want 64"
cp "$dir/S" "$dir/S.orig"
refused --resume "$dir/S" --order-out "$dir/S" \
  "pinloader: error: --order-out $dir/S and --resume $dir/S are the same file; give each its own"
ln "$dir/S" "$dir/S.hard"
refused --resume "$dir/S" --order-out "$dir/S.hard" \
  "pinloader: error: --order-out $dir/S.hard and --resume $dir/S are the same file; give each its own"
rm "$dir/S.hard"
cmp -s "$dir/S" "$dir/S.orig" || fail "the refused runs changed the state"

# --resume S --save-state S is one file in two roles that do not clash: S
# is read before the run and replaced after it.
"$cli" run --dataset "$ds" --device cpu --quiet --batch-size 4 --resume "$dir/S" \
  --max-batches 1 --save-state "$dir/S" >/dev/null 2>"$dir/err" || fail "resume S, save S: $(cat "$dir/err")"
[[ $(stat -c %s "$dir/S") -eq 64 ]] || fail "resume S, save S: $(stat -c %s "$dir/S") bytes"
cmp -s "$dir/S" "$dir/S.orig" && fail "resume S, save S: the state did not move"
no_tmp "resume S, save S"

# A run that fails while loading (an image that is not one) leaves the old
# order and state files byte for byte as they were.
mkdir -p "$dir/img/a"
head -c 500 /dev/zero >"$dir/img/a/x.png"
seq 1 5 >"$dir/O"
cp "$dir/O" "$dir/O.orig"
cp "$dir/S" "$dir/S.orig"
rc=0
"$cli" run --dataset "images:$dir/img?size=8" --device cpu --quiet \
  --order-out "$dir/O" --save-state "$dir/S" >/dev/null 2>"$dir/err" || rc=$?
[[ $rc -eq 1 ]] || fail "the failing run: exit $rc, want 1: $(cat "$dir/err")"
cmp -s "$dir/O" "$dir/O.orig" || fail "the failing run changed --order-out's file: $(wc -c <"$dir/O") bytes"
cmp -s "$dir/S" "$dir/S.orig" || fail "the failing run changed --save-state's file"
no_tmp "the failing run"

# A regular file is replaced whole, with the run's order.
"$cli" run --dataset "$ds" --device cpu --quiet --batch-size 4 \
  --order-out "$dir/O" >/dev/null 2>&1 || fail "order run"
seq 0 19 | cmp -s - "$dir/O" || fail "--order-out over a file: $(cat "$dir/O")"
no_tmp "order run"
echo "test_outputs: ok"
