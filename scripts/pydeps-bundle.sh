#!/usr/bin/env bash
# Copies the pure-Python packages that the tar shards benchmark and tests
# use as their peer (webdataset and braceexpand, from PyPI: setup.sh
# installs them) into .data/pydeps (git-ignored), for a machine that cannot
# reach PyPI (the GPU box): scripts/gpu/62-shards.sh puts it on PYTHONPATH.
# The device call carries .data.
#   scripts/pydeps-bundle.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.data/pydeps}
py=${PYTHON:-/usr/bin/python3}
mkdir -p "$dest"
"$py" - "$dest" <<'PY'
import os, shutil, sys
import braceexpand, webdataset
dest = sys.argv[1]
for mod in (webdataset, braceexpand):
    name = mod.__name__
    if os.path.basename(mod.__file__) == "__init__.py":  # a package
        shutil.rmtree(os.path.join(dest, name), ignore_errors=True)
        shutil.copytree(os.path.dirname(mod.__file__), os.path.join(dest, name),
                        ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy(mod.__file__, dest)
print("pydeps: webdataset %s and braceexpand in %s" % (webdataset.__version__, dest))
PY
