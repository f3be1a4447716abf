# Sourced by the CLI tests after `set -euo pipefail`: the CLI binary given
# as $1 (cli; exit 77, ctest's skip, when there is none), no rank variables
# of a launcher around us, a scratch folder (dir) removed at exit, fail().
cli=${1:-}
if [[ -z $cli || ! -x $cli ]]; then
  echo "skip: no CLI binary at '$cli'"
  exit 77
fi
unset RANK WORLD_SIZE LOCAL_RANK OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE \
  OMPI_COMM_WORLD_LOCAL_RANK PMI_RANK PMI_SIZE
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
