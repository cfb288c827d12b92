#!/bin/bash
# Build iproute2's rdma tool with iproute2/patches applied (`rdma resource
# show mr` prints the kernel's RDMA_NLDEV_ATTR_RES_MR_DMABUF and _REVOKED),
# for the test VM; scripts/vm/guest-init mounts the result over the host's
# rdma.
#
# Source: the upstream tarball of Debian's iproute2 source package, fetched
# through a private apt state as scripts/rdma-core-pr.sh does and checked
# against the SHA256 of the archive's signed Sources index. The version is
# pinned (IPROUTE2_VERSION, default 7.2.0-1, forky's): trixie's 6.15.0-1
# (and bookworm-backports' 6.15.0-1~bpo12+1) are in the index, but the
# mirror answers 404 for their tarballs, and trixie-backports has no
# iproute2. The debian tarball of 7.2.0-1 is missing from the mirror as
# well, so Debian's own patches are not applied: the build is upstream
# 7.2.0 + iproute2/patches/*.patch.
#
# Only lib/ and rdma/ are built, against the host's libc and libmnl (the
# guests run the host's root file system), with --as-needed so that the
# libraries configure finds for the other tools (libelf, libtirpc) are not
# linked in; the script checks that the binary needs nothing but libc and
# libmnl and that it runs.
#
# usage: scripts/iproute2.sh [BUILD_DIR]
#   IPROUTE2_VERSION=V  take source version V (any of trixie,
#                       trixie-backports, forky, sid)
# Output (prints its path): BUILD_DIR/iproute2/rdma. Does nothing when it
# was built from the same source and patches. FETCH_ONLY=1 (make fetch):
# only download the tarball, if not cached.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$top/build}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITES=${IPROUTE2_SUITES:-trixie trixie-backports forky sid}
VERSION=${IPROUTE2_VERSION:-7.2.0-1}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
out=$BUILD/iproute2
dl=$out/dl
pdir=$top/iproute2/patches
die() { echo "iproute2: $*" >&2; exit 1; }

patches=()
for p in "$pdir"/*.patch; do
	[ -f "$p" ] && patches+=("${p##*/}")
done

# shellcheck disable=SC2054 # -Wl,--as-needed is one word
make_flags=(SUBDIRS="lib rdma" LDFLAGS=-Wl,--as-needed)

# What the output is made of: source version, patches, build flags.
stamp_of() {
	{
		echo "$1"
		echo "${make_flags[*]}"
		for p in "${patches[@]}"; do
			echo "$p"
			cat "$pdir/$p"
		done
	} | sha256sum | cut -d' ' -f1
}

# Cached source: dl/source names the version, dl/source.sha256 its tarball.
cached=
if [ -f "$dl/source" ] && (cd "$dl" && sha256sum --quiet -c source.sha256) >/dev/null 2>&1; then
	cached=$(cat "$dl/source")
fi
if [ "$cached" = "$VERSION" ] && [ -x "$out/rdma" ] &&
   [ "$(cat "$out/.stamp" 2>/dev/null)" = "$(stamp_of "$cached")" ]; then
	echo "$out/rdma"
	exit 0
fi

# Fetch, unless the cache already has the version asked for.
if [ "$cached" != "$VERSION" ]; then
	apt=$out/apt
	mkdir -p "$apt/lists/partial" "$apt/parts" "$dl"
	: > "$apt/sources.list"
	for s in $SUITES; do
		echo "deb-src [signed-by=$KEYRING] $MIRROR $s main" >> "$apt/sources.list"
	done
	: > "$apt/status"
	o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/parts"
	   -o "Dir::State=$apt" -o "Dir::State::Lists=$apt/lists"
	   -o "Dir::State::status=$apt/status" -o "Debug::NoLocking=1"
	   -o "APT::Sandbox::User=root")
	if ! apt-get "${o[@]}" -qq update 2>"$apt/update.err" ||
	   grep -q '^[EW]:' "$apt/update.err"; then
		cat "$apt/update.err" >&2
		die "cannot read the sources of $SUITES from $MIRROR"
	fi
	# 'URI' NAME SIZE SHA256:HEX, the hash from the signed index.
	uris=$(apt-get "${o[@]}" -qq --print-uris source "iproute2=$VERSION") ||
		die "no source package iproute2 $VERSION in $SUITES"
	orig=$(grep -m1 "^'[^']*' iproute2_${VERSION%-*}\.orig\.tar\.[a-z0-9]* " <<< "$uris") ||
		die "iproute2 $VERSION: no orig tarball in the index"
	read -r uri name _size hash <<< "$orig"
	uri=${uri#\'}
	uri=${uri%\'}
	[ "${hash%%:*}" = SHA256 ] || die "no SHA256 for $name in the index"
	if ! echo "${hash#SHA256:}  $dl/$name" | sha256sum --quiet -c >/dev/null 2>&1; then
		rm -f "$dl/$name"
		/usr/lib/apt/apt-helper "${o[@]}" -qq download-file "$uri" "$dl/$name" "$hash" >&2 ||
			die "cannot fetch $uri"
	fi
	echo "${hash#SHA256:}  $name" > "$dl/source.sha256"
	echo "$VERSION" > "$dl/source"
	cached=$VERSION
	echo "iproute2: fetched $name ($VERSION)" >&2
fi
[ "${FETCH_ONLY:-}" != 1 ] || exit 0
for t in gcc make pkg-config bison flex patch; do
	command -v "$t" >/dev/null || die "$t is missing: run make deps"
done
pkg-config --exists libmnl || die "libmnl-dev is missing: run make deps"
stamp=$(stamp_of "$VERSION")

# Unpack the upstream tarball, then our patches.
src=$out/src-$VERSION
rm -rf "$src" "$out/.stamp" "$out/rdma"
mkdir -p "$src"
tar -xf "$(ls "$dl"/iproute2_"${VERSION%-*}".orig.tar.*)" -C "$src" --strip-components=1
for p in "${patches[@]}"; do
	patch -d "$src" -p1 -s --no-backup-if-mismatch < "$pdir/$p" ||
		die "iproute2/patches/$p does not apply to iproute2 $VERSION"
done

mkdir -p "$top/build"
exec 9>"${BUILD_LOCK:-$top/build/.build.lock}"
flock -n 9 || { echo "iproute2: waiting for another build to finish" >&2; flock 9; }
echo "iproute2: building rdma from iproute2 $VERSION + ${#patches[@]} patch(es)" >&2
(cd "$src" && ./configure) > "$out/configure.log" 2>&1 || {
	tail -n 30 "$out/configure.log" >&2
	die "configure failed (log: $out/configure.log)"
}
grep -qx 'HAVE_MNL:=y' "$src/config.mk" || die "configure did not find libmnl"
nice -n 10 make -C "$src" -j2 "${make_flags[@]}" > "$out/make.log" 2>&1 || {
	tail -n 30 "$out/make.log" >&2
	die "build failed (log: $out/make.log)"
}
exec 9>&-

bin=$src/rdma/rdma
# The guests run the host's root file system: only libc and libmnl, both
# the host's, and no path into the build tree.
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | paste -sd' ')
[ "$needed" = "libc.so.6 libmnl.so.0" ] ||
	die "rdma needs $needed; want only libc.so.6 and libmnl.so.0"
if readelf -d "$bin" | grep -qE 'RPATH|RUNPATH'; then
	die "rdma carries an RPATH"
fi
"$bin" -V | grep -q "iproute2-${VERSION%-*}" || die "the built rdma does not run here"
strings "$bin" | grep -qx 'revoked %s ' ||
	die "the built rdma lacks the dma-buf MR attributes (patches not applied?)"

cp "$bin" "$out/rdma.tmp"
mv "$out/rdma.tmp" "$out/rdma"
echo "$stamp" > "$out/.stamp"
echo "iproute2: $out/rdma (iproute2 $VERSION, needs $needed)" >&2
echo "$out/rdma"
