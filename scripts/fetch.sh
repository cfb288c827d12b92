#!/bin/bash
# Fetch Linux v7.3 (source, prebuilt image+modules, headers, kbuild) from
# Debian's trixie-backports suite into build/debs, without touching the
# host's apt configuration, and unpack them.
#
# usage: scripts/fetch.sh [BUILD_DIR]
set -eu

BUILD=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
SUITE=${DEBIAN_SUITE:-trixie-backports}

APT=$BUILD/apt
DEBS=$BUILD/debs
mkdir -p "$DEBS"
# shellcheck source=scripts/apt-private.sh
. "$(dirname "$0")/apt-private.sh"
apt_private "$APT" "$SUITE"
apt_private_update "$APT" || exit 1

# The newest 7.3.x: take the version of linux-source-7.3 and derive the ABI
# (e.g. 7.3.4-1~bpo13+1 -> 7.3.4+deb13) from the image meta package that
# matches it.
srcver=$(apt-cache "${apt_opts[@]}" show linux-source-7.3 2>/dev/null |
	 sed -n 's/^Version: //p' | sort -V | tail -n1)
if [ -z "$srcver" ]; then
	echo "fetch: linux-source-7.3 not found in $SUITE" >&2
	exit 1
fi
upstream=${srcver%%-*}
abi=$(apt-cache "${apt_opts[@]}" pkgnames linux-image- 2>/dev/null |
      sed -n "s/^linux-image-\(${upstream//./\\.}+[a-z0-9]*\)-amd64\$/\1/p" |
      sort -V | tail -n1)
if [ -z "$abi" ]; then
	echo "fetch: no linux-image-${upstream}+*-amd64 in $SUITE" >&2
	exit 1
fi

# linux-image-<abi>-amd64 is a meta package: the kernel and modules are in
# linux-binary/linux-modules (pipeline.md). Take whichever exist.
want=(linux-source-7.3 "linux-image-$abi-amd64" "linux-headers-$abi-amd64"
      "linux-headers-$abi-common" "linux-kbuild-$abi")
for p in "linux-binary-$abi-amd64" "linux-modules-$abi-amd64"; do
	if apt-cache "${apt_opts[@]}" show "$p" >/dev/null 2>&1; then
		want+=("$p")
	fi
done
# Whatever else the image meta package depends on in the same ABI.
for p in $(apt-cache "${apt_opts[@]}" depends "linux-image-$abi-amd64" 2>/dev/null |
	   sed -n "s/^ *Depends: \(linux-[a-z]*-$abi[^ ]*\).*/\1/p"); do
	case " ${want[*]} " in *" $p "*) ;; *) want+=("$p") ;; esac
done

# apt-get download verifies each file against the signed Release/Packages
# hashes; it skips files already present with the right hash.
(cd "$DEBS" && apt-get "${apt_opts[@]}" -qq download "${want[@]}")

: > "$BUILD/versions.new"
for p in "${want[@]}"; do
	v=$(apt-cache "${apt_opts[@]}" show "$p" | sed -n 's/^Version: //p' | sort -V | tail -n1)
	f=$(ls "$DEBS/${p}_"*"${v##*:}"*_*.deb 2>/dev/null | head -n1 || true)
	[ -n "$f" ] || f=$(ls "$DEBS/${p}_"*.deb | tail -n1)
	printf '%s %s %s\n' "$p" "$v" "$(sha256sum "$f" | cut -d' ' -f1)" >> "$BUILD/versions.new"
done
{
	echo "KVER_UPSTREAM=$upstream"
	echo "KABI=$abi"
	echo "KREL=$abi-amd64"
	echo "SRCVER=$srcver"
} > "$BUILD/versions.mk"
mv "$BUILD/versions.new" "$BUILD/versions"

echo "fetch: $SUITE: linux $upstream (abi $abi)"
sed 's/^/fetch:   /' "$BUILD/versions"
