#!/bin/bash
# scripts/fetch.sh against a pin of made-up packages, served from file://
# mirrors (no network): it downloads exactly what the pin names, keeps a
# file that is already there with the pinned hash and nothing else, takes
# a file the mirror has dropped from the snapshot of the pin's date,
# refuses a file whose hash is not the pinned one (from either), and a
# failed fetch leaves no versions file and no partial download behind.
# Prints TAP.
# shellcheck disable=SC2016 # the checks are eval'd
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/tap-check.sh
. "$top/scripts/tap-check.sh"

mirror=$tmp/mirror snap=$tmp/snapshot date=20261205T000000Z
pin=$tmp/base.pin build=$tmp/build
mkdir -p "$mirror/pool/main/l/linux" "$snap/$date/pool/main/l/linux" "$build"
{
	echo "suite test"
	echo "date $date"
	echo "abi 7.3.9+deb13"
	for p in linux-source-7.3 linux-image-7.3.9+deb13-amd64 linux-kbuild-7.3.9+deb13; do
		f=pool/main/l/linux/${p}_7.3.9-1_all.deb
		head -c 4096 /dev/urandom > "$mirror/$f"
		echo "deb $p 7.3.9-1 4096 $(sha256sum "$mirror/$f" | cut -d' ' -f1) $f"
	done
} > "$pin"
src=$mirror/pool/main/l/linux/linux-source-7.3_7.3.9-1_all.deb
kb=$mirror/pool/main/l/linux/linux-kbuild-7.3.9+deb13_7.3.9-1_all.deb
debs=$build/debs

fetch() {
	BASE_PIN=$pin DEBIAN_MIRROR=file://$mirror DEBIAN_SNAPSHOT=file://$snap \
		"$top/scripts/fetch.sh" "$build" > "$tmp/out" 2>&1
}
same() { cmp -s "$1" "$debs/${1##*/}"; }
versions_match() {
	awk '/^deb /{print $2, $3, $5}' "$pin" | diff -q - "$build/versions" > /dev/null
}

echo "TAP version 13"
echo "1..10"
check "every pinned file is fetched from the mirror, versions says what was pinned" \
	eval 'fetch && same "$src" && same "$kb" && [ ! -L "$debs/${src##*/}" ] && versions_match &&
	      grep -qx "KREL=7.3.9+deb13-amd64" "$build/versions.mk" &&
	      grep -qx "SRCVER=7.3.9-1" "$build/versions.mk"'

# The mirror gone: what is there with the right hash is enough.
mv "$mirror" "$mirror.off"
check "files already there with the pinned hash are kept, nothing is downloaded" \
	eval 'fetch && ! grep -q "file://" "$tmp/out"'
mv "$mirror.off" "$mirror"

echo garbage > "$debs/${src##*/}"
check "a file there with another hash is fetched again" \
	eval 'fetch && same "$src" && grep -q "linux-source-7.3 (0 MiB): file://$mirror/" "$tmp/out"'

# The mirror has dropped the pinned upload; the snapshot of the pin's date
# has it.
rm -f "$debs/${kb##*/}"
mv "$kb" "$snap/$date/pool/main/l/linux/"
check "a file the mirror dropped comes from the snapshot of the pin's date" \
	eval 'fetch && same "$snap/$date/pool/main/l/linux/${kb##*/}" &&
	      grep -q "linux-kbuild-7.3.9+deb13 (0 MiB): file://$snap/$date/" "$tmp/out"'

# Neither serves it with the pinned hash.
rm -f "$debs/${kb##*/}" "$build/versions"
echo tampered > "$snap/$date/pool/main/l/linux/${kb##*/}"
check "a file whose hash is not the pinned one is refused" \
	eval '! fetch && grep -q "^fetch: not fetched: linux-kbuild-7.3.9+deb13\." "$tmp/out"'
check "the refusal says how to go on (DEBIAN_MIRROR, make pin)" \
	eval 'grep -q "DEBIAN_MIRROR" "$tmp/out" && grep -q "make pin" "$tmp/out"'
check "a failed fetch leaves no versions file, no refused or partial file" \
	eval '[ ! -e "$build/versions" ] && [ ! -e "$build/versions.new" ] &&
	      [ ! -e "$debs/${kb##*/}" ] && ! ls "$debs" | grep -q "\.part$\|\.log$"'
rm -f "$snap/$date/pool/main/l/linux/${kb##*/}"
check "a file served by neither fails the fetch" \
	eval '! fetch && grep -q "^fetch: not fetched: linux-kbuild-7.3.9+deb13\." "$tmp/out"'

sed -i '/^abi /d' "$pin"
check "a pin without its abi is refused" \
	eval '! fetch && grep -q "lacks its abi" "$tmp/out"'

# The repository's own pin: one linux-source-7.3, every hash a SHA256,
# the packages of one ABI.
pin=$top/configs/base.pin
check "configs/base.pin: one source, one ABI, SHA256s and pool paths" \
	eval 'abi=$(sed -n "s/^abi //p" "$pin") && [ -n "$abi" ] &&
	      [ "$(grep -c "^deb linux-source-7\.3 " "$pin")" = 1 ] &&
	      [ "$(grep -c "^deb linux-image-$abi-amd64 " "$pin")" = 1 ] &&
	      ! awk "/^deb /{ if (length(\$5) != 64 || \$6 !~ /^pool\\//) bad = 1 } END { exit !bad }" "$pin"'
[ "$failed" = 0 ]
