#!/usr/bin/env bash
# Installation as users do it, checked from the outside (scripts/test.sh runs
# it after the release build):
#   1. `cmake --install` into a fresh prefix: libraries, header, CLI,
#      pkg-config file (relocatable; CUDA named only when built in), CMake
#      package;
#   2. the README's C example, taken from README.md as it stands, compiled
#      (-Wall -Wextra -Werror) against that prefix with pkg-config and with
#      find_package (shared and static), and run: exact output, and the no-GPU notice in plain words;
#   3. python/README.md's install steps in a fresh venv (Debian's packages
#      seen through --system-site-packages, no network): the package imports
#      and `pinloader` on PATH behaves exactly as build/pinloader;
#   4. a wheel (`pip wheel`), installed into another fresh venv, passes the
#      Python tests there.
# Usage: scripts/install-test.sh [BUILD_DIR]   (default build/, already built)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(realpath "${1:-build}")
PY=${PYTHON:-/usr/bin/python3}
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
unset RANK WORLD_SIZE LOCAL_RANK
T=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
step() { printf -- '-- %s\n' "$*"; }
[ -x "$build/pinloader" ] || { echo "install-test: no $build/pinloader: build first" >&2; exit 1; }

"$build/pinloader" bench gendata "$T/data" --records 823 --files 2 >/dev/null || fail "gendata"
spec="cifar10:$T/data/data_batch_1.bin,$T/data/data_batch_2.bin"
gpu=0 # a usable GPU: the examples run there, without the no-GPU notice
"$build/pinloader" run --dataset "$spec" --quiet 2>/dev/null | grep -q "^device: cuda" && gpu=1

# The README example's output on this machine: 823 records, batch 256.
check_example() {
  local exe=$1
  "$exe" "$spec" >"$T/out" 2>"$T/err" || { fail "$exe exited $?: $(cat "$T/err")"; return; }
  local dev=cpu
  ((gpu)) && dev=$(sed -n 's/^epoch 0: .* on //p' "$T/out")
  local want="epoch 0: 823 samples in 4 batches on $dev
epoch 1: 823 samples in 4 batches on $dev"
  [ "$(cat "$T/out")" = "$want" ] || fail "$exe: stdout
$(cat "$T/out")
want
$want"
  if ((!gpu)); then
    case $(cat "$T/err") in
      "pinloader: no NVIDIA driver found; using the CPU" | \
      "pinloader: this build of pinloader has no CUDA support; using the CPU") ;;
      *) fail "$exe: the no-GPU notice is '$(cat "$T/err")'" ;;
    esac
  fi
  # A bad data set: the example reports it and exits 1.
  "$exe" "cifar10:$T/missing.bin" >/dev/null 2>"$T/err" && fail "$exe: a missing file exited 0"
  [ "$(cat "$T/err")" = "dataset spec 'cifar10:$T/missing.bin': $T/missing.bin: cannot open: No such file or directory" ] ||
    fail "$exe: missing-file message '$(cat "$T/err")'"
}

# `pinloader` as installed behaves exactly as build/pinloader: same output
# (timings aside), same exit status.
same_as_build() {
  local exe=$1 a
  for a in "--help" "run --help" "bench --help" "version" "nonsense" \
           "run --dataset idx:$T/x,$T/x" "run --dataset cifar10:$T/data/data_batch_1.bin,$T/nope"; do
    # shellcheck disable=SC2086
    "$build/pinloader" $a >"$T/w.out" 2>"$T/w.err"
    local want_rc=$?
    # shellcheck disable=SC2086
    "$exe" $a >"$T/g.out" 2>"$T/g.err"
    local rc=$?
    [ $rc -eq $want_rc ] || fail "$exe $a: exit $rc, build/pinloader exits $want_rc"
    cmp -s "$T/w.out" "$T/g.out" && cmp -s "$T/w.err" "$T/g.err" ||
      fail "$exe $a: output differs from build/pinloader's"
  done
  local keep='^\(device\|checksum: \|loaded: [0-9]* samples in [0-9]* batches\)'
  "$build/pinloader" run --dataset "$spec" --device cpu --quiet --checksum 2>&1 |
    grep -o "$keep[^,]*" >"$T/w.out"
  "$exe" run --dataset "$spec" --device cpu --quiet --checksum 2>&1 | grep -o "$keep[^,]*" >"$T/g.out"
  grep -q "^checksum: " "$T/w.out" && cmp -s "$T/w.out" "$T/g.out" ||
    fail "$exe run: $(cat "$T/g.out") / build/pinloader: $(cat "$T/w.out")"
}

step "cmake --install into $T/prefix"
cmake --install "$build" --prefix "$T/prefix" >/dev/null || fail "cmake --install"
pc=$(find "$T/prefix" -name pinloader.pc)
for f in include/pinloader.h include/pinloader/datasets.h include/pinloader/transforms.h \
         include/pinloader/loader.h bin/pinloader; do
  [ -e "$T/prefix/$f" ] || fail "not installed: $f"
done
for f in libpinloader.so libpinloader.a pinloaderConfig.cmake pinloaderTargets.cmake pinloader.pc; do
  [ -n "$(find "$T/prefix" -name "$f")" ] || fail "not installed: $f"
done
# Nothing installed may point back into the build tree (it may be gone).
refs=$(grep -rl --include='*.cmake' --include='*.pc' -e "$build" "$T/prefix/lib")
[ -z "$refs" ] || fail "installed files refer to the build tree $build: $refs"
same_as_build "$T/prefix/bin/pinloader"
# pinloader.pc: Libs and Libs.private name no absolute path (only ${...}
# directories), the static CUDA runtime as -L${cudalibdir} -lcudart_static
# where the CUDA backend is built in (cudalibdir: where CMake found it), and
# no CUDA at all in a build without it.
grep '^Libs' "$pc" | grep -q '[ :]/' && fail "pinloader.pc names an absolute path: $(grep '^Libs' "$pc")"
if grep -q 'set(pinloader_HAVE_CUDA ON)' "$(find "$T/prefix" -name pinloaderConfig.cmake)"; then
  cudalibdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=cudalibdir pinloader)
  [ -e "$cudalibdir/libcudart_static.a" ] || fail "pinloader.pc: no libcudart_static.a in cudalibdir '$cudalibdir'"
  grep -qF 'Libs.private: -L${cudalibdir} -lcudart_static -ldl -lrt ' "$pc" ||
    fail "pinloader.pc: $(grep '^Libs.private' "$pc")"
else
  grep -qi cuda "$pc" && fail "pinloader.pc of a build without CUDA mentions CUDA: $(grep -i cuda "$pc")"
fi

step "the README's C example against the installed library"
awk '/^## The C API in one screen/ {s = 1} s && /^```c$/ {f = 1; next} f && /^```$/ {exit} f' \
  README.md >"$T/first.c"
grep -q "int main" "$T/first.c" || fail "no C example with a main() in README.md"
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir pinloader)
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$T/first.c" $(pkg-config --cflags --libs pinloader) \
  -Wl,-rpath,"$libdir" -o "$T/first-pc" || fail "the example does not build with pkg-config"
[ -x "$T/first-pc" ] && check_example "$T/first-pc"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$T/first.c" $(pkg-config --cflags pinloader) "$libdir/libpinloader.a" \
  $(pkg-config --static --libs pinloader | sed 's/-lpinloader//') \
  -o "$T/first-pc-static" || fail "the example does not link statically with pkg-config --static"
[ -x "$T/first-pc-static" ] && check_example "$T/first-pc-static"
mkdir -p "$T/app"
cp "$T/first.c" "$T/app/"
cat >"$T/app/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(first C)
find_package(pinloader 0.1 REQUIRED)
add_executable(first first.c)
target_link_libraries(first PRIVATE pinloader::pinloader)
add_executable(first_static first.c)
target_link_libraries(first_static PRIVATE pinloader::pinloader_static)
target_compile_options(first PRIVATE -Wall -Wextra -Werror)
target_compile_options(first_static PRIVATE -Wall -Wextra -Werror)
EOF
if cmake -S "$T/app" -B "$T/app/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/cmake.log" 2>&1 &&
   cmake --build "$T/app/build" >>"$T/cmake.log" 2>&1; then
  check_example "$T/app/build/first"
  check_example "$T/app/build/first_static"
  ldd "$T/app/build/first_static" | grep -q libpinloader && fail "first_static links libpinloader.so"
else
  fail "the example does not build with find_package: $(tail -20 "$T/cmake.log")"
fi

step "python/README.md's install: a venv with Debian's packages, no network"
"$PY" -m venv --system-site-packages "$T/venv" || fail "venv"
(cd "$root" && "$T/venv/bin/pip" install -q --no-build-isolation .) >"$T/pip.log" 2>&1 ||
  fail "pip install --no-build-isolation . failed: $(tail -20 "$T/pip.log")"
(cd "$T" && "$T/venv/bin/python" -c 'import pinloader; print(pinloader.__version__)') >"$T/v" 2>&1
[ "$(cat "$T/v")" = "0.1.0" ] || fail "import pinloader in the venv: $(cat "$T/v")"
[ -x "$T/venv/bin/pinloader" ] || fail "pip install put no pinloader command in the venv's bin/"
[ -x "$T/venv/bin/pinloader" ] && same_as_build "$T/venv/bin/pinloader"
(PATH=$T/venv/bin:$PATH; cd "$T" && pinloader version) >"$T/v" 2>&1
[ "$(cat "$T/v")" = "pinloader 0.1.0" ] || fail "pinloader on PATH: $(cat "$T/v")"
# The README's first Python example, where its data set is installed.
if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  awk '/^## A first Python example/ {s = 1} s && /^```python$/ {f = 1; next} f && /^```$/ {exit} f' \
    README.md >"$T/first.py"
  (cd "$T" && "$T/venv/bin/python" first.py) >"$T/out" 2>"$T/err" || fail "README's Python example: $(cat "$T/err")"
  [ "$(cat "$T/out")" = "epoch 0: 235 batches, the last (96, 28, 28) (96,)
epoch 1: 235 batches, the last (96, 28, 28) (96,)" ] || fail "README's Python example printed: $(cat "$T/out")"
fi

# Any Python, as the README says: another interpreter than Debian's (the
# first python3 on PATH, or PL_OTHER_PYTHON), in a plain venv, builds with
# pip's build isolation from PyPI and imports; without build isolation and
# without `wheel`, setup.py names the interpreter and the way out.
other=${PL_OTHER_PYTHON:-$(command -v python3 || true)}
if [ -n "$other" ] && [ "$(realpath "$other")" != "$(realpath "$PY")" ] &&
   "$other" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
  step "the README's install with another Python: $other ($("$other" -V 2>&1)), build isolation from PyPI"
  "$other" -m venv "$T/venv-other" || fail "venv with $other"
  if ! "$T/venv-other/bin/python" -c 'import wheel' 2>/dev/null; then
    (cd "$root" && PINLOADER_NO_CUDA=1 "$T/venv-other/bin/pip" install -q --no-build-isolation .) \
      >"$T/pip-other0.log" 2>&1 && fail "pip install --no-build-isolation without wheel succeeded?"
    grep -q "cannot build a wheel: it has neither the 'wheel' package" "$T/pip-other0.log" ||
      fail "no clear message without wheel: $(tail -5 "$T/pip-other0.log")"
  fi
  (cd "$root" && env -u PIP_NO_INDEX PINLOADER_NO_CUDA=1 "$T/venv-other/bin/pip" install -q --retries 5 .) \
    >"$T/pip-other.log" 2>&1 || fail "pip install . with $other: $(tail -20 "$T/pip-other.log")"
  (cd "$T" && "$T/venv-other/bin/python" -c 'import pinloader
print([b.tolist() for b in pinloader.DataLoader([1, 2, 3, 4, 5], batch_size=2)])') >"$T/v" 2>&1
  [ "$(cat "$T/v")" = "[[1, 2], [3, 4], [5]]" ] || fail "pinloader with $other: $(cat "$T/v")"
fi

step "a wheel, installed into a fresh venv, with the Python tests"
(cd "$root" && "$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$T/dist" .) >"$T/wheel.log" 2>&1 ||
  fail "pip wheel: $(tail -20 "$T/wheel.log")"
whl=$(ls "$T"/dist/pinloader-0.1.0-*.whl 2>/dev/null)
if [ -n "$whl" ]; then
  "$PY" - "$whl" <<'EOF' || fail "wheel contents"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
assert "pinloader/bin/pinloader" in names, names
info = z.getinfo("pinloader/bin/pinloader")
assert (info.external_attr >> 16) & 0o111, oct(info.external_attr >> 16)  # executable
ep = [n for n in names if n.endswith("entry_points.txt")]
assert ep and "pinloader = pinloader._cli:main" in z.read(ep[0]).decode(), ep
assert any(n.startswith("pinloader/_pinloader") and n.endswith(".so") for n in names), names
EOF
  "$PY" -m venv --system-site-packages "$T/venv2" && "$T/venv2/bin/pip" install -q "$whl" ||
    fail "installing the wheel"
  (cd "$root/python/tests" && PINLOADER_SKIP_TORCH_SUITE=1 PINLOADER_DIFF_N=0 "$T/venv2/bin/python" -m pytest -q -p no:cacheprovider .) >"$T/pytest.log" 2>&1 ||
    fail "the Python tests against the installed wheel: $(tail -30 "$T/pytest.log")"
  tail -1 "$T/pytest.log"
  [ -x "$T/venv2/bin/pinloader" ] && same_as_build "$T/venv2/bin/pinloader"
else
  fail "no wheel in $T/dist: $(ls "$T/dist" 2>&1)"
fi

[ $fails -eq 0 ] && echo "install-test: ok" || echo "install-test: $fails failure(s)"
[ $fails -eq 0 ]
