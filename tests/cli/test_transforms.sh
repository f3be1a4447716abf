#!/usr/bin/env bash
# `pinloader run` with transforms: flag errors, and a CPU run over a
# CIFAR-10 file whose checksum of the delivered (transformed) bytes equals
# an independent numpy computation of the recipe (pad, crop, flip, x / 255,
# normalize, fp16) for 0 and 3 workers. Usage: test_transforms.sh PATH/TO/pinloader
set -u
CLI=${1:?usage: $0 PATH/TO/pinloader}
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3 # Debian's, with numpy
"$PY" -c "import numpy" 2>/dev/null || { echo "no numpy: skip"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

expect_usage_error() {
  local want=$1; shift
  "$CLI" run --device cpu "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "run $* exited $rc, want 2"
  grep -qF -- "$want" "$T/err" || fail "run $*: stderr lacks '$want': $(cat "$T/err")"
}
expect_usage_error "--to must be float32, bf16 or fp16, got int8" --to int8
expect_usage_error "--normalize must be MEAN,STD or M1,..,Mc,S1,..,Sc (at most 16 channels), got 0.5" --normalize 0.5
expect_usage_error "got 1,2,3" --normalize 1,2,3
expect_usage_error "--random-crop must be " --random-crop -1

"$PY" - "$T" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(5)
rec = rng.integers(0, 256, (77, 3073), dtype=np.uint8)
rec[:, 0] %= 10
rec.tofile(sys.argv[1] + "/data_batch_1.bin")
PY
for w in 0 3; do
  "$CLI" run --device cpu --dataset "cifar10:$T/data_batch_1.bin" --batch-size 10 --workers $w \
    --shuffle --seed 7 --random-crop 4 --flip --to fp16 --normalize 0.5,0.4,0.3,0.2,0.25,0.3 \
    --int64-labels --checksum --quiet >"$T/run$w" 2>"$T/err$w" || fail "run with $w workers: $(cat "$T/err$w")"
done
got0=$(sed -n 's/^checksum: //p' "$T/run0")
got3=$(sed -n 's/^checksum: //p' "$T/run3")
[ -n "$got0" ] && [ "$got0" = "$got3" ] || fail "checksums differ by workers: '$got0' '$got3'"

# The same bytes in numpy: order from --order-out, draws by the documented formula.
"$CLI" run --device cpu --dataset "cifar10:$T/data_batch_1.bin" --batch-size 10 --shuffle --seed 7 \
  --order-out "$T/order" --quiet >/dev/null 2>&1 || fail "order run"
want=$("$PY" - "$T" <<'PY'
import math, sys, numpy as np
d = sys.argv[1]
rec = np.fromfile(d + "/data_batch_1.bin", np.uint8).reshape(-1, 3073)
order = [int(l) for l in open(d + "/order")]
M = (1 << 64) - 1
def mix(z):
    z = (z + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)
mean = np.array([0.5, 0.4, 0.3], np.float32)[:, None, None]
std = np.array([0.2, 0.25, 0.3], np.float32)[:, None, None]
out = bytearray()
for b in range(0, len(order), 10):
    idxs = order[b:b + 10]
    xs, ys = [], []
    for i in idxs:
        key = mix(7 ^ mix(0 ^ mix(i ^ mix(0))))
        oy = ((mix((key + 1) & M) >> 32) * 9) >> 32
        ox = ((mix((key + 2) & M) >> 32) * 9) >> 32
        flip = (mix((key + 3) & M) >> 40) < 2 ** 23
        p = np.zeros((3, 40, 40), np.uint8)
        p[:, 4:36, 4:36] = rec[i, 1:].reshape(3, 32, 32)
        img = p[:, oy:oy + 32, ox:ox + 32]
        img = img[:, :, ::-1] if flip else img
        x = ((img.astype(np.float32) / np.float32(255)) - mean) / std
        xs.append(np.ascontiguousarray(x.astype(np.float16)).tobytes())
        ys.append(np.int64(rec[i, 0]).tobytes())
    for k in range(len(idxs)):  # samples in order, fields in order
        out += xs[k] + ys[k]
h = 0xCBF29CE484222325
for byte in bytes(out):
    h = ((h ^ byte) * 0x100000001B3) & M
print("%016x" % h)
PY
)
[ "$got0" = "$want" ] || fail "checksum $got0, numpy says $want"

[ $fails -eq 0 ] && echo "test_transforms.sh: all passed"
exit $((fails > 0))
