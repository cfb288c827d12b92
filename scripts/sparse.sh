#!/bin/bash
# Build a sparse that v7.3 accepts. bookworm's 0.6.4 lacks
# __typeof_unqual__, so the kernel's checker-valid.sh rejects it and C=1
# silently checks nothing. Debian's sid has 0.6.5~rc1, built there against
# a newer glibc: take its source package from Debian's archive (private apt
# state, as fetch.sh) and build it here. Prints the path of the binary.
#
# usage: scripts/sparse.sh [BUILD_DIR]
set -eu

BUILD=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
out=$BUILD/tools/sparse
if [ -x "$out/sparse" ]; then
	echo "$out/sparse"
	exit 0
fi

apt=$BUILD/apt-src
mkdir -p "$apt/lists/partial" "$apt/parts"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR sid main" \
	> "$apt/sources.list"
: > "$apt/status"
o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/parts"
   -o "Dir::State=$apt" -o "Dir::State::Lists=$apt/lists"
   -o "Dir::State::status=$apt/status" -o "Debug::NoLocking=1"
   -o "APT::Sandbox::User=root")
apt-get "${o[@]}" -qq update >&2
src=$BUILD/tools/sparse-src
rm -rf "$src" "$out"
mkdir -p "$src"
(cd "$src" && apt-get "${o[@]}" -qq --download-only source sparse >&2 &&
	dpkg-source -x sparse_*.dsc build >/dev/null)
# Debian's patch makes it call gcc-16; bookworm has gcc.
make -s -C "$src/build" -j"$(nproc)" CC=gcc sparse >&2
mkdir -p "$out"
cp "$src/build/sparse" "$out/sparse"
"$BUILD/linux-src/scripts/checker-valid.sh" "$out/sparse" -m64 | grep -qx 1 || {
	echo "sparse: the built sparse does not pass the kernel's checker-valid.sh" >&2
	exit 1
}
echo "$out/sparse"
