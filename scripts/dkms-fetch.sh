#!/bin/bash
# Fetch the current Debian kernel (image, modules, headers, kbuild) of each
# SUITE, the way scripts/fetch.sh fetches 7.3: private apt state, nothing
# of the host's apt touched, every file checked against the signed indexes.
# The kernel of a suite is the one its linux-image-amd64 meta package
# depends on.
#
# usage: scripts/dkms-fetch.sh [-o DIR] SUITE...
#   -o  where to put them (default build/dkms/debs): DIR/SUITE/*.deb and
#       DIR/SUITE/kernel, lines "KREL=<uname -r>" and "PKG VERSION SHA256"
# Example: scripts/dkms-fetch.sh bookworm trixie trixie-backports
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/dkms/debs
while getopts o: o; do
	case $o in
	o) out=$(realpath -m "$OPTARG") ;;
	*) sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2; }

# shellcheck source=scripts/apt-private.sh
. "$top/scripts/apt-private.sh"

for suite in "$@"; do
	dir=$out/$suite
	apt_private "$dir/apt" "$suite"
	apt_private_update "$dir/apt"
	img=$(apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null |
	      sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1)
	[ -n "$img" ] || { echo "dkms-fetch: no linux-image-amd64 in $suite" >&2; exit 1; }
	krel=${img#linux-image-}
	abi=${krel%-amd64}
	# The image and headers and what they depend on of the same build:
	# linux-{binary,modules,base}-ABI (7.3), linux-headers-ABI-common,
	# linux-kbuild-ABI or linux-kbuild-MAJOR.MINOR (6.1). Everything else
	# (compiler, kmod, initramfs-tools) is the installing system's.
	want=() queue=("$img" "linux-headers-$krel")
	while [ ${#queue[@]} -gt 0 ]; do
		p=${queue[0]}
		queue=("${queue[@]:1}")
		case " ${want[*]} " in *" $p "*) continue ;; esac
		want+=("$p")
		# (Pre-)Depends of its first stanza, first of each alternative.
		for d in $(apt-cache "${apt_opts[@]}" show "$p" 2>/dev/null |
			   sed -n '/^$/q; s/^\(Pre-\)\{0,1\}Depends: //p' |
			   tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/:any//; s/ //g'); do
			case $d in
			linux-*-"$abi"|linux-*-"$abi"-*|linux-kbuild-*) queue+=("$d") ;;
			esac
		done
	done
	mkdir -p "$dir"
	# Files another fetch already has (scripts/fetch.sh's 7.3) are linked,
	# not downloaded again; apt-get download still checks their hashes.
	for p in "${want[@]}"; do
		for f in "$top/build/debs/${p}"_*.deb; do
			if [ -f "$f" ] && [ ! -e "$dir/${f##*/}" ]; then
				ln "$f" "$dir/" 2>/dev/null || true
			fi
		done
	done
	(cd "$dir" && apt-get "${apt_opts[@]}" -qq download "${want[@]}")
	{
		echo "KREL=$krel"
		for p in "${want[@]}"; do
			v=$(apt-cache "${apt_opts[@]}" show "$p" | sed -n 's/^Version: //p' | sort -V | tail -n1)
			f=$(find "$dir" -maxdepth 1 -name "${p}_${v##*:}_*.deb" | head -n1)
			[ -n "$f" ] || { echo "dkms-fetch: $p $v not downloaded" >&2; exit 1; }
			printf '%s %s %s\n' "$p" "$v" "$(sha256sum "$f" | cut -d' ' -f1)"
		done
	} > "$dir/kernel.new"
	mv "$dir/kernel.new" "$dir/kernel"
	# Older builds of the same packages: gone, so that DIR/SUITE/*.deb is
	# the kernel above.
	for f in "$dir"/*.deb; do
		grep -q " $(sha256sum "$f" | cut -d' ' -f1)\$" "$dir/kernel" || rm -f "$f"
	done
	echo "dkms-fetch: $suite: $krel"
	sed -n 's/^linux/dkms-fetch:   linux/p' "$dir/kernel"
done
