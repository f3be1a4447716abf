#!/usr/bin/env bash
# Copies the image codecs' headers and static archives (Debian's
# libjpeg62-turbo-dev and libpng-dev, installed by scripts/setup.sh) into
# .data/codecs/{include,lib} (git-ignored), so that a machine without the
# packages - the GPU box - builds the images source from the same files:
# CMakeLists.txt and setup.py look there first (or in $PL_CODECS_DIR). The
# device call carries .data. Archives are linked statically; nothing is
# needed at run time.
#   scripts/codecs-bundle.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.data/codecs}
arch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
inc=/usr/include
lib=/usr/lib/$arch
need=("$inc/jpeglib.h" "$inc/jerror.h" "$inc/jmorecfg.h" "$inc/$arch/jconfig.h"
      "$inc/png.h" "$inc/pngconf.h" "$inc/pnglibconf.h" "$lib/libjpeg.a" "$lib/libpng16.a")
for f in "${need[@]}"; do
  [ -e "$f" ] || { echo "codecs-bundle: $f missing (run scripts/setup.sh)" >&2; exit 1; }
done
mkdir -p "$dest/include" "$dest/lib"
cp -L "${need[@]:0:7}" "$dest/include/"
cp -L "$lib/libjpeg.a" "$lib/libpng16.a" "$dest/lib/"
{
  echo "made $(date -u +%FT%TZ) on $(uname -n) from Debian packages:"
  dpkg-query -W -f '${Package} ${Version}\n' libjpeg62-turbo-dev libpng-dev 2>/dev/null || true
} >"$dest/VERSIONS"
echo "codecs-bundle: $(du -sh "$dest" | cut -f1) in $dest"
