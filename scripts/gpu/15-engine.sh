#!/usr/bin/env bash
# GPU part 15: the transfer engine's targets, through `pinloader run`:
#   - CIFAR-10-format uint8 samples (3,072-byte images), shuffled, batch 1024,
#     14 workers: samples/s into device memory; again with --no-pin and --sync;
#   - large batches (77 MB of 150 KB images; 96 MiB of CIFAR images): bytes/s
#     into device memory, gathered whole or in chunks, or copied straight
#     from the files (direct mode), next to plain cudaMemcpyAsync from pinned
#     memory (`pinloader bench bandwidth`) measured in the same run;
#   - --checksum on the GPU (bytes read back from device memory) equals the
#     CPU backend's checksum on the same files and order.
# Results: $PL_GPU_LOGS/15-engine.txt (packed by gpu-check.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
logs=${PL_GPU_LOGS:-$PWD/gpu-out}
mkdir -p "$logs"
cli=${PL_CLI:-build-gpu/pinloader}
[ -x "$cli" ] || { echo "15-engine: $cli not built (run part 10 first)"; exit 1; }
data=$(mktemp -d /tmp/pl-engine.XXXXXX)
trap 'rm -rf "$data"' EXIT
"$cli" bench gendata "$data" --records 500000 --files 5 >/dev/null || exit 1
spec="cifar10:$(ls "$data"/*.bin | paste -sd,)"
res=$logs/15-engine.txt
: >"$res"
rc=0

run() { # label, then run flags
  local label=$1; shift
  local o
  o=$("$cli" run --dataset "${spec}" --quiet "$@" 2>&1) || { echo "$label: FAILED: $o"; rc=1; return; }
  local sps bps st
  sps=$(sed -n 's/^samples\/s: \([0-9]*\).*/\1/p' <<<"$o")
  bps=$(sed -n 's/^bytes\/s: \([0-9]*\).*/\1/p' <<<"$o")
  st=$(grep '^stats:' <<<"$o")
  awk -v l="$label" -v s="$sps" -v b="$bps" -v t="$st" \
    'BEGIN { printf "%-34s %8.2f M samples/s %7.2f GB/s | %s\n", l, s / 1e6, b / 1e9, t }' | tee -a "$res"
  grep -E "page-locked in place|straight from the dataset" <<<"$o" | sed 's/^/    /' | tee -a "$res"
}

echo "== CIFAR-10 uint8, shuffled, batch 1024, 500,000 samples x 20 epochs" | tee -a "$res"
for w in 14 8; do
  run "pinned async, $w workers" --device cuda --batch-size 1024 --workers $w --shuffle --epochs 20
done
run "no-pin, 14 workers" --device cuda --batch-size 1024 --workers 14 --shuffle --epochs 20 --no-pin
run "sync, 14 workers" --device cuda --batch-size 1024 --workers 14 --shuffle --epochs 20 --sync
run "no-pin + sync, 14 workers" --device cuda --batch-size 1024 --workers 14 --shuffle --epochs 20 --no-pin --sync
run "cpu backend, 14 workers" --device cpu --batch-size 1024 --workers 14 --shuffle --epochs 20

echo "== large batches: ImageNet-sized uint8 images (224x224x3 = 150,528 bytes), batch 512 = 77 MB" | tee -a "$res"
python3 - "$data" <<'PY' || exit 1
import sys, numpy as np
d, n = sys.argv[1], 8192
hdr = lambda magic, *dims: np.array([magic, *dims], dtype=">u4").tobytes()
with open(f"{d}/img-idx3-ubyte", "wb") as f:
    f.write(hdr(0x803, n, 224, 672))
    f.write(np.random.default_rng(0).integers(0, 256, n * 150528, dtype=np.uint8).tobytes())
with open(f"{d}/lbl-idx1-ubyte", "wb") as f:
    f.write(hdr(0x801, n))
    f.write(np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8).tobytes())
PY
big="idx:$data/img-idx3-ubyte,$data/lbl-idx1-ubyte"
# The default gather copies 4 MiB chunks as soon as each is full; whole
# batches (--copy-chunk off) was the engine before that.
spec=$big run "gather whole batches, 14 wk" --device cuda --batch-size 512 --workers 14 --shuffle --epochs 40 --copy-chunk off
for w in 14 16 8; do
  spec=$big run "gather 4M chunks (default), $w wk" --device cuda --batch-size 512 --workers $w --shuffle --epochs 40
done
for ch in 1M 2M 8M; do
  spec=$big run "gather $ch chunks, 14 wk" --device cuda --batch-size 512 --workers 14 --shuffle --epochs 40 --copy-chunk $ch
done
spec=$big run "gather 4M chunks, sequential, 14" --device cuda --batch-size 512 --workers 14 --epochs 40
# Direct mode (--direct): the loader page-locks the files (1.2 GB) in
# place; the images are copied straight from them, one
# cudaMemcpyBatchAsync per batch, and only the labels are gathered.
for w in 14 4 1; do
  spec=$big run "direct, shuffled, $w wk" --device cuda --batch-size 512 --workers $w --shuffle --epochs 120 --direct
done
spec=$big run "direct, sequential, 4 wk" --device cuda --batch-size 512 --workers 4 --epochs 120 --direct
spec=$big run "direct, shuffled, 4 wk, --sync" --device cuda --batch-size 512 --workers 4 --shuffle --epochs 120 --direct --sync
run "CIFAR, batch 32768 (96 MiB), 14 wk" --device cuda --batch-size 32768 --workers 14 --shuffle --epochs 10
run "CIFAR, batch 32768, whole batches" --device cuda --batch-size 32768 --workers 14 --shuffle --epochs 10 --copy-chunk off
echo "-- plain cudaMemcpyAsync from pinned memory, same run:" | tee -a "$res"
"$cli" bench bandwidth --quiet --no-plot --min-size 67108864 --max-size 268435456 2>&1 | tee -a "$res"

echo "== checksum: GPU (read back from device memory) vs CPU backend" | tee -a "$res"
g=$("$cli" run --dataset "$spec" --quiet --device cuda --batch-size 1000 --workers 8 --shuffle --seed 3 --checksum | grep '^checksum: ')
c=$("$cli" run --dataset "$spec" --quiet --device cpu --batch-size 1000 --workers 8 --shuffle --seed 3 --checksum | grep '^checksum: ')
echo "gpu $g | cpu $c" | tee -a "$res"
[ -n "$g" ] && [ "$g" = "$c" ] && echo "checksums match" | tee -a "$res" || { echo "CHECKSUM MISMATCH" | tee -a "$res"; rc=1; }
exit $rc
