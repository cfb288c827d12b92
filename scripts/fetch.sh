#!/bin/bash
# The base: Debian's Linux 7.3 (source, prebuilt image+modules, headers,
# kbuild), exactly the packages that configs/base.pin names, by version and
# SHA256. Nothing here reads or changes the host's apt configuration.
#
# usage: scripts/fetch.sh [BUILD_DIR]
#          download what the pin names into BUILD_DIR/debs (a file already
#          there with the pinned hash is kept) and write BUILD_DIR/versions
#          and versions.mk; no apt index is read
#        scripts/fetch.sh --pin [SUITE]
#          move the base on purpose: rewrite the pin with the newest 7.3.x
#          of SUITE (default: the pin's suite), with the hashes of SUITE's
#          signed index. Commit the pin; the next make fetch takes it
#
# Each file comes from $DEBIAN_MIRROR/<pool path> (default
# http://deb.debian.org/debian). A mirror keeps only the newest upload of a
# backports package: when it has dropped the pinned one, the file comes
# from $DEBIAN_SNAPSHOT/<the pin's date>/<pool path> (default
# https://snapshot.debian.org/archive/debian). Either way apt checks it
# against the pinned SHA256 before it is kept. BASE_PIN=FILE reads another
# pin (the harness's own test of this script).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
PIN=${BASE_PIN:-$top/configs/base.pin}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SNAPSHOT=${DEBIAN_SNAPSHOT:-https://snapshot.debian.org/archive/debian}
helper=/usr/lib/apt/apt-helper

die() { echo "fetch: $*" >&2; exit 1; }

# A field of the pin: "key value".
pin_get() { [ ! -f "$PIN" ] || sed -n "s/^$1 //p" "$PIN" | head -n1; }

pin() {
	local suite=${1:-$(pin_get suite)} apt=$top/build/apt
	[ -n "$suite" ] || suite=trixie-backports
	# shellcheck source=scripts/apt-private.sh disable=SC2154 # apt_opts
	. "$top/scripts/apt-private.sh"
	apt_private "$apt" "$suite"
	apt_private_update "$apt" || exit 1

	# The newest 7.3.x: the version of linux-source-7.3, and the ABI
	# (e.g. 7.3.4-1~bpo13+1 -> 7.3.4+deb13) of the image meta package
	# that matches it.
	local srcver upstream abi p v
	srcver=$(apt-cache "${apt_opts[@]}" show linux-source-7.3 2>/dev/null |
		 sed -n 's/^Version: //p' | sort -V | tail -n1)
	[ -n "$srcver" ] || die "linux-source-7.3 not found in $suite"
	upstream=${srcver%%-*}
	abi=$(apt-cache "${apt_opts[@]}" pkgnames linux-image- 2>/dev/null |
	      sed -n "s/^linux-image-\(${upstream//./\\.}+[a-z0-9]*\)-amd64\$/\1/p" |
	      sort -V | tail -n1)
	[ -n "$abi" ] || die "no linux-image-${upstream}+*-amd64 in $suite"

	# linux-image-<abi>-amd64 is a meta package: the kernel and modules are
	# in linux-binary/linux-modules (pipeline.md). Take whichever exist,
	# and whatever else the meta package depends on in the same ABI.
	local want=(linux-source-7.3 "linux-image-$abi-amd64" "linux-headers-$abi-amd64"
		    "linux-headers-$abi-common" "linux-kbuild-$abi")
	for p in "linux-binary-$abi-amd64" "linux-modules-$abi-amd64"; do
		apt-cache "${apt_opts[@]}" show "$p" >/dev/null 2>&1 && want+=("$p")
	done
	for p in $(apt-cache "${apt_opts[@]}" depends "linux-image-$abi-amd64" 2>/dev/null |
		   sed -n "s/^ *Depends: \(linux-[a-z]*-${abi}[^ ]*\).*/\1/p"); do
		case " ${want[*]} " in *" $p "*) ;; *) want+=("$p") ;; esac
	done

	local new=$PIN.new
	{
		echo "# The base: the Debian packages every kernel, module and guest is built"
		echo "# from (README \"The base\"). scripts/fetch.sh downloads exactly these"
		echo "# and checks each against its SHA256; \`make pin\` rewrites this file."
		echo "suite $suite"
		echo "date $(date -u +%Y%m%dT%H%M%SZ)"
		echo "abi $abi"
		echo "# deb PACKAGE VERSION SIZE SHA256 POOL-PATH"
		for p in "${want[@]}"; do
			v=$(apt-cache "${apt_opts[@]}" show "$p" | sed -n 's/^Version: //p' |
			   sort -V | tail -n1)
			apt-cache "${apt_opts[@]}" show "$p=$v" | awk -v p="$p" -v v="$v" '
				/^Size: /     { s = $2 }
				/^SHA256: /   { h = $2 }
				/^Filename: / { f = $2 }
				/^$/          { exit }
				END           { print "deb", p, v, s, h, f }'
		done
	} > "$new"
	grep -q "^deb linux-source-7.3 $srcver " "$new" || die "cannot read linux-source-7.3 $srcver from $suite"
	mv "$new" "$PIN"
	echo "fetch: pinned linux $upstream (abi $abi, $srcver) from $suite in ${PIN#"$top"/}:"
	grep '^deb ' "$PIN" | sed 's/^/fetch:   /'
}

# Download one file of the pin to $debs, from the mirror or else from the
# snapshot; apt-helper refuses a file whose SHA256 is not the pinned one.
get() {
	local name=$1 sha=$2 path=$3 date=$4 size=$5 f url
	f=$debs/${path##*/}
	if [ -f "$f" ] && [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$sha" ]; then
		return 0
	fi
	rm -f "$f" "$f.part"
	for url in "$MIRROR/$path" "$SNAPSHOT/$date/$path"; do
		echo "fetch: $name ($((size / 1048576)) MiB): $url" >&2
		if "$helper" -o APT::Sandbox::User=root -qq download-file "$url" "$f.part" \
			"SHA256:$sha" > "$f.log" 2>&1; then
			# apt's file: method links to the mirror's file: keep a copy.
			if [ -L "$f.part" ]; then
				cp -L "$f.part" "$f.copy" && mv "$f.copy" "$f.part"
			fi
		fi
		if [ -f "$f.part" ] && [ ! -L "$f.part" ] &&
		   [ "$(sha256sum "$f.part" | cut -d' ' -f1)" = "$sha" ]; then
			mv "$f.part" "$f"
			rm -f "$f.log"
			return 0
		fi
		sed -n 's/^E: //p' "$f.log" | head -n3 | sed 's/^/fetch:   /' >&2
		rm -f "$f.part"
	done
	rm -f "$f.log"
	return 1
}

if [ "${1:-}" = --pin ]; then
	pin "${2:-}"
	exit 0
fi
case ${1:-} in -*) sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;; esac

BUILD=${1:-$top/build}
debs=$BUILD/debs
[ -f "$PIN" ] || die "no pin at $PIN (make pin writes one)"
[ -x "$helper" ] || die "$helper not found (Debian's apt package has it)"
abi=$(pin_get abi)
date=$(pin_get date)
srcver=$(sed -n 's/^deb linux-source-7\.3 \([^ ]*\) .*/\1/p' "$PIN")
if [ -z "$abi" ] || [ -z "$date" ] || [ -z "$srcver" ]; then
	die "$PIN lacks its abi, date or linux-source-7.3 line"
fi
mkdir -p "$debs"

failed=()
: > "$BUILD/versions.new"
while read -r kind name ver size sha path; do
	[ "$kind" = deb ] || continue
	if [ -z "$path" ] || [ "${#sha}" != 64 ]; then
		die "bad line in $PIN: deb $name $ver $size $sha $path"
	fi
	if get "$name" "$sha" "$path" "$date" "$size"; then
		printf '%s %s %s\n' "$name" "$ver" "$sha" >> "$BUILD/versions.new"
	else
		failed+=("$name")
	fi
done < "$PIN"
if [ ${#failed[@]} != 0 ]; then
	rm -f "$BUILD/versions.new"
	die "not fetched: ${failed[*]}. The pin (${PIN#"$top"/}) names them by" \
	    "version and hash; neither $MIRROR nor $SNAPSHOT/$date served them." \
	    "Set DEBIAN_MIRROR to a mirror that has them, or move the base on" \
	    "purpose with make pin (then commit the pin)"
fi

upstream=${srcver%%-*}
{
	echo "KVER_UPSTREAM=$upstream"
	echo "KABI=$abi"
	echo "KREL=$abi-amd64"
	echo "SRCVER=$srcver"
} > "$BUILD/versions.mk"
mv "$BUILD/versions.new" "$BUILD/versions"

echo "fetch: linux $upstream (abi $abi), as pinned in ${PIN#"$top"/}"
sed 's/^/fetch:   /' "$BUILD/versions"
