#!/bin/bash
# Build a sparse that v7.3 accepts. bookworm's 0.6.4 lacks
# __typeof_unqual__, so the kernel's checker-valid.sh rejects it and C=1
# silently checks nothing. Debian's sid has 0.6.5~rc1, built there against
# a newer glibc: take its source package from Debian's archive (private apt
# state, as fetch.sh) and build it here. Prints the path of the binary.
#
# The source package is kept in BUILD_DIR/tools/sparse-dl once fetched:
# later builds take it from there, without the network (the version sid
# had then, until that directory is removed). FETCH_ONLY=1 (make fetch):
# only fetch it.
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

dl=$BUILD/tools/sparse-dl
if ! [ -f "$dl/.complete" ]; then
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
	rm -rf "$dl"
	mkdir -p "$dl"
	# apt-get source checks each file against the signed Sources index.
	(cd "$dl" && apt-get "${o[@]}" -qq --download-only source sparse >&2)
	: > "$dl/.complete"
	echo "sparse: fetched $(cd "$dl" && echo sparse_*.dsc)" >&2
fi
[ "${FETCH_ONLY:-}" != 1 ] || exit 0
src=$BUILD/tools/sparse-src
rm -rf "$src" "$out"
mkdir -p "$src"
(cd "$dl" && dpkg-source -x sparse_*.dsc "$src/build" >/dev/null)
# Debian's patch makes it call gcc-16; bookworm has gcc.
make -s -C "$src/build" -j"$(nproc)" CC=gcc sparse >&2
mkdir -p "$out"
cp "$src/build/sparse" "$out/sparse"
"$BUILD/linux-src/scripts/checker-valid.sh" "$out/sparse" -m64 | grep -qx 1 || {
	echo "sparse: the built sparse does not pass the kernel's checker-valid.sh" >&2
	exit 1
}
echo "$out/sparse"
