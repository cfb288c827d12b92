#!/bin/bash
# Unpack what scripts/fetch.sh downloaded:
#   build/deb-root/   the prebuilt image, modules, headers and kbuild (dpkg -x)
#   build/linux-src/  pristine v7.3 source tarball contents (read-only reference)
# Idempotent: a stamp holding the versions file's hash skips the work.
#
# usage: scripts/unpack.sh [BUILD_DIR]
set -eu

BUILD=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
. "$BUILD/versions.mk"
stamp=$BUILD/.unpacked
want=$(sha256sum "$BUILD/versions" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	# Newer than the scripts now, or make runs fetch again each time after
	# a change to them. A new file: the stamp of a build directory made
	# with cp -al is another checkout's too.
	echo "$want" > "$stamp.new"
	mv "$stamp.new" "$stamp"
	exit 0
fi

echo "unpack: the image, modules and headers into $BUILD/deb-root, the source into $BUILD/linux-src (1-2 min)" >&2
rm -rf "$BUILD/deb-root" "$BUILD/linux-src"
mkdir -p "$BUILD/deb-root" "$BUILD/linux-src"
for deb in "$BUILD"/debs/*_"$SRCVER"_*.deb; do
	case $deb in */linux-source-*) continue ;; esac
	dpkg -x "$deb" "$BUILD/deb-root"
done
# Debian ships no modules.dep (pipeline.md).
depmod -b "$BUILD/deb-root/usr" "$KREL" 2>/dev/null ||
	depmod -b "$BUILD/deb-root" "$KREL"

dpkg-deb --fsys-tarfile "$BUILD"/debs/linux-source-7.3_"$SRCVER"_all.deb |
	tar -xO ./usr/src/linux-source-7.3.tar.xz |
	tar -xJ -C "$BUILD/linux-src" --strip-components=1
echo "$want" > "$stamp"
echo "unpack: $BUILD/linux-src ($(make -s -C "$BUILD/linux-src" kernelversion)), $BUILD/deb-root ($KREL)"
