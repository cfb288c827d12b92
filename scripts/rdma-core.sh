#!/bin/bash
# Build rdma-core's rxe provider with rdma-core/patches applied (the user
# space half of rxe's dma-buf MRs: ibv_reg_dmabuf_mr), for the test VM;
# scripts/vm/guest-init mounts the result over the distro's files.
#
# Source: Debian's rdma-core source package from trixie (56.1), through a
# private apt state as scripts/fetch.sh does: each file is checked against
# the SHA256 of the archive's signed Sources index. Not bookworm's 44.0,
# which matches the host's libibverbs1: its ibv_cmd_reg_dmabuf_mr() lacks
# the argument the patch (written for current upstream) passes, and its
# orig tarball is missing from the mirror.
#
# 56.1 keeps the provider ABI name of 44.0 (IBVERBS_PRIVATE_34,
# lib*-rdmav34.so) but not its layout: struct ibv_qp_ex grew, which moves
# verbs_qp's fields, so a 56.1 provider under 44.0's libibverbs breaks the
# extended QP API. The output is therefore a matched pair, the provider and
# the libibverbs of the same build, and the script checks that this
# libibverbs exports every versioned symbol the host's does (so the host's
# programs and libraries run on it).
#
# usage: scripts/rdma-core.sh [BUILD_DIR]
#   RDMA_CORE_VERSION=V  take source version V instead of the newest in
#                        RDMA_CORE_SUITE (default trixie)
# Output (prints the provider's path): BUILD_DIR/rdma-core/librxe-rdmavNN.so
# and BUILD_DIR/rdma-core/libibverbs.so.1, NN as the host's provider.
# Does nothing when they are built from the same source and patches.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$top/build}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${RDMA_CORE_SUITE:-trixie}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
out=$BUILD/rdma-core
dl=$out/dl
pdir=$top/rdma-core/patches
die() { echo "rdma-core: $*" >&2; exit 1; }

ma=$(gcc -print-multiarch)
hostlib=/usr/lib/$ma/libibverbs.so.1
hostprov=$(ls /usr/lib/"$ma"/libibverbs/librxe-rdmav*.so 2>/dev/null | head -n1)
[ -e "$hostlib" ] && [ -n "$hostprov" ] ||
	die "no libibverbs1 / rxe provider on the host (ibverbs-providers): run make deps"
prov=${hostprov##*/}
pabi=${prov#librxe-rdmav}
pabi=${pabi%.so}

# The patches, in order (comments and blank lines skipped).
patches=()
while read -r p _; do
	case $p in ''|'#'*) continue ;; esac
	[ -f "$pdir/$p" ] || die "$pdir/series names $p, which does not exist"
	patches+=("$p")
done < "$pdir/series"

cmake_flags=(-GNinja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr
	     -DCMAKE_INSTALL_SYSCONFDIR=/etc -DCMAKE_INSTALL_LIBDIR="lib/$ma"
	     -DCMAKE_SKIP_RPATH=ON -DNO_MAN_PAGES=1 -DNO_PYVERBS=1
	     -DENABLE_STATIC=0)

# What the output is made of: source version, patches, build flags.
stamp_of() {
	{
		echo "$1"
		echo "${cmake_flags[*]}"
		for p in "${patches[@]}"; do
			echo "$p"
			cat "$pdir/$p"
		done
	} | sha256sum | cut -d' ' -f1
}

# Cached source: dl/source names the version, dl/source.sha256 its files.
cached=
if [ -f "$dl/source" ] && (cd "$dl" && sha256sum --quiet -c source.sha256) >/dev/null 2>&1; then
	cached=$(cat "$dl/source")
fi
if [ -n "$cached" ] && [ "${RDMA_CORE_VERSION:-$cached}" = "$cached" ] &&
   [ -f "$out/$prov" ] && [ -f "$out/libibverbs.so.1" ] &&
   [ "$(cat "$out/.stamp" 2>/dev/null)" = "$(stamp_of "$cached")" ]; then
	echo "$out/$prov"
	exit 0
fi

for t in cmake ninja pkg-config gcc patch; do
	command -v "$t" >/dev/null || die "$t is missing: run make deps"
done
pkg-config --exists libnl-3.0 libnl-route-3.0 ||
	die "libnl-3-dev / libnl-route-3-dev are missing: run make deps"

# Fetch, unless the cache already has the version asked for.
if [ -z "$cached" ] || [ "${RDMA_CORE_VERSION:-$cached}" != "$cached" ]; then
	apt=$out/apt
	mkdir -p "$apt/lists/partial" "$apt/parts" "$dl"
	echo "deb-src [signed-by=$KEYRING] $MIRROR $SUITE main" > "$apt/sources.list"
	: > "$apt/status"
	o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/parts"
	   -o "Dir::State=$apt" -o "Dir::State::Lists=$apt/lists"
	   -o "Dir::State::status=$apt/status" -o "Debug::NoLocking=1"
	   -o "APT::Sandbox::User=root")
	if ! apt-get "${o[@]}" -qq update 2>"$apt/update.err" ||
	   grep -q '^[EW]:' "$apt/update.err"; then
		cat "$apt/update.err" >&2
		die "cannot read $SUITE's sources from $MIRROR"
	fi
	want=rdma-core/$SUITE
	[ -z "${RDMA_CORE_VERSION:-}" ] || want=rdma-core=$RDMA_CORE_VERSION
	# 'URI' NAME SIZE SHA256:HEX, hashes from the signed index. The .dsc
	# is not needed: the orig and debian tarballs are unpacked here.
	uris=$(apt-get "${o[@]}" -qq --print-uris source "$want") ||
		die "no source package $want in $SUITE"
	version=$(sed -n "s/^'[^']*' rdma-core_\([^ ]*\)\.dsc .*/\1/p" <<< "$uris")
	version=${version#*:}
	[ -n "$version" ] || die "cannot tell the version of $want"
	: > "$dl/source.sha256.new"
	while read -r uri name _size hash; do
		case $name in *.orig.tar.*|*.debian.tar.*) ;; *) continue ;; esac
		uri=${uri#\'}
		uri=${uri%\'}
		[ "${hash%%:*}" = SHA256 ] || die "no SHA256 for $name in the index"
		if ! echo "${hash#SHA256:}  $dl/$name" | sha256sum --quiet -c >/dev/null 2>&1; then
			rm -f "$dl/$name"
			/usr/lib/apt/apt-helper "${o[@]}" -qq download-file "$uri" "$dl/$name" "$hash" >&2 ||
				die "cannot fetch $uri"
		fi
		echo "${hash#SHA256:}  $name" >> "$dl/source.sha256.new"
	done <<< "$uris"
	[ "$(grep -c . "$dl/source.sha256.new")" = 2 ] ||
		die "$want: expected an orig and a debian tarball"
	mv "$dl/source.sha256.new" "$dl/source.sha256"
	echo "$version" > "$dl/source"
	cached=$version
	echo "rdma-core: fetched rdma-core $version ($SUITE)" >&2
fi
version=$cached
stamp=$(stamp_of "$version")

# Unpack: orig, Debian's patches, then ours.
src=$out/src-$version
obj=$out/obj-$version
rm -rf "$src" "$obj" "$out/.stamp" "$out/$prov" "$out/libibverbs.so.1"
mkdir -p "$src"
upstream=${version%-*}
tar -xf "$dl/rdma-core_$upstream.orig.tar."* -C "$src" --strip-components=1
tar -xf "$dl/rdma-core_$version.debian.tar."* -C "$src"
if [ -f "$src/debian/patches/series" ]; then
	while read -r p _; do
		case $p in ''|'#'*) continue ;; esac
		patch -d "$src" -p1 -s --no-backup-if-mismatch < "$src/debian/patches/$p" ||
			die "Debian's $p does not apply to $version"
	done < "$src/debian/patches/series"
fi
for p in "${patches[@]}"; do
	patch -d "$src" -p1 -s --no-backup-if-mismatch < "$pdir/$p" ||
		die "rdma-core/patches/$p does not apply to rdma-core $version"
done
srcpabi=$(sed -n 's/^set(IBVERBS_PABI_VERSION "\([0-9]*\)")/\1/p' "$src/CMakeLists.txt")
[ "$srcpabi" = "$pabi" ] ||
	die "rdma-core $version has provider ABI $srcpabi, the host's is $pabi ($hostprov)"

# Only the provider and what it links (libibverbs, util, ccan).
mkdir -p "$top/build"
exec 9>"${BUILD_LOCK:-$top/build/.build.lock}"
flock -n 9 || { echo "rdma-core: waiting for another build to finish" >&2; flock 9; }
echo "rdma-core: building $prov from rdma-core $version + ${#patches[@]} patch(es)" >&2
nice -n 10 cmake -S "$src" -B "$obj" "${cmake_flags[@]}" > "$out/cmake.log" 2>&1 || {
	tail -n 30 "$out/cmake.log" >&2
	die "cmake failed (log: $out/cmake.log)"
}
nice -n 10 ninja -C "$obj" -j2 "rxe-rdmav$pabi" > "$out/ninja.log" 2>&1 || {
	tail -n 30 "$out/ninja.log" >&2
	die "build failed (log: $out/ninja.log)"
}
exec 9>&-

builtprov=$obj/lib/$prov
builtlib=$(readlink -f "$obj/lib/libibverbs.so.1")
# The pair must stand in for the host's libibverbs: every versioned symbol
# the host's exports (what the host's programs and providers may use) must
# be exported by the built one, and the provider must need nothing else.
syms() {
	objdump -T "$1" | awk -v want="$2" '{
		if (NF < 3) next
		v = $(NF-1); gsub(/[()]/, "", v)
		und = ($0 ~ /\*UND\*/)
		if (v ~ /^IBVERBS_/ && ((want == "und") == und)) print $NF "@" v
	}' | sort -u
}
exports() { syms "$1" def; }
missing=$(comm -23 <(exports "$hostlib") <(exports "$builtlib"))
[ -z "$missing" ] || die "the built libibverbs lacks symbols of the host's: $missing"
missing=$(comm -23 <(syms "$builtprov" und) <(exports "$builtlib"))
[ -z "$missing" ] || die "$prov needs symbols the built libibverbs lacks: $missing"
if readelf -d "$builtprov" "$builtlib" | grep -qE 'RPATH|RUNPATH'; then
	die "the built libraries carry an RPATH into the build tree"
fi
strings "$builtlib" | grep -qxF "/usr/lib/$ma/libibverbs/lib%s-rdmav$pabi.so" ||
	die "the built libibverbs does not load providers from /usr/lib/$ma/libibverbs"

for f in "$builtprov:$prov" "$builtlib:libibverbs.so.1"; do
	cp "${f%%:*}" "$out/${f#*:}.tmp"
	mv "$out/${f#*:}.tmp" "$out/${f#*:}"
done
echo "$stamp" > "$out/.stamp"
echo "rdma-core: $out/$prov and $out/libibverbs.so.1 (rdma-core $version)" >&2
echo "$out/$prov"
