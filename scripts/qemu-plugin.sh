#!/bin/bash
# Build the markcount TCG plugin (userspace/qemu-plugin/markcount.c) for the
# host's QEMU: it counts guest instructions and logs the count at each
# marker of userspace/insn_marker.h (see the plugin's header comment).
#
# A plugin must be compiled against the qemu-plugin.h of the QEMU that loads
# it, and Debian ships that header in no binary package. So this takes it
# from Debian's source package of exactly the installed qemu-system-x86
# (its Source: version, which has no binNMU suffix), found in bookworm,
# bookworm-updates or bookworm-security through a private apt state as
# scripts/fetch.sh does (the host's apt configuration is not touched). The
# tarballs are checked against the SHA256 of the archive's signed Sources
# index; only include/qemu/qemu-plugin.h is extracted, with any change
# Debian's patches make to it, and is cached with the version it came from.
#
# usage: scripts/qemu-plugin.sh [BUILD_DIR]
# Output (prints its path): BUILD_DIR/qemu-plugin/libmarkcount.so.
# Does nothing when the .so is newer than its sources and the cached header
# is the installed QEMU's; refetches the header when QEMU's version changes.
# FETCH_ONLY=1 (make fetch): only fetch the header, if not cached.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$top/build}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECMIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
out=$BUILD/qemu-plugin
hdr=$out/include/qemu-plugin.h
so=$out/libmarkcount.so
src=$top/userspace/qemu-plugin/markcount.c
member=include/qemu/qemu-plugin.h
die() { echo "qemu-plugin: $*" >&2; exit 1; }

# Source version of the installed QEMU, e.g. 1:7.2+dfsg-7+deb12u18 (the
# binary's is 1:7.2+dfsg-7+deb12u18+b3, a rebuild of the same source).
srcver=$(dpkg-query -W -f='${source:Version}' qemu-system-x86 2>/dev/null) ||
	die "qemu-system-x86 is not installed: run make deps"
[ -n "$srcver" ] || die "cannot tell qemu-system-x86's source version"

if [ -f "$hdr" ] && [ "$(cat "$hdr.version" 2>/dev/null)" = "$srcver" ] &&
   [ -f "$so" ] && [ "$so" -nt "$src" ] && [ "$so" -nt "$hdr" ] &&
   [ "$so" -nt "$0" ]; then
	echo "$so"
	exit 0
fi

# Fetch the header, unless the cache has the installed version's.
if [ ! -f "$hdr" ] || [ "$(cat "$hdr.version" 2>/dev/null)" != "$srcver" ]; then
	apt=$out/apt
	dl=$out/dl
	rm -rf "$dl"
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts" "$dl"
	{
		echo "deb-src [signed-by=$KEYRING] $MIRROR bookworm main"
		echo "deb-src [signed-by=$KEYRING] $MIRROR bookworm-updates main"
		echo "deb-src [signed-by=$KEYRING] $SECMIRROR bookworm-security main"
	} > "$apt/sources.list"
	: > "$apt/status"
	apt_opts=(
		-o "Dir::Etc::SourceList=$apt/sources.list"
		-o "Dir::Etc::SourceParts=$apt/parts"
		-o "Dir::Etc::Preferences=/dev/null"
		-o "Dir::Etc::PreferencesParts=$apt/parts"
		-o "Dir::State=$apt"
		-o "Dir::State::Lists=$apt/lists"
		-o "Dir::State::status=$apt/status"
		-o "Dir::Cache=$apt/cache"
		-o "Debug::NoLocking=1"
		-o "APT::Sandbox::User=root"
	)
	if ! apt-get "${apt_opts[@]}" -qq update 2>"$apt/update.err" ||
	   grep -q '^[EW]:' "$apt/update.err"; then
		cat "$apt/update.err" >&2
		die "cannot read bookworm's sources from $MIRROR / $SECMIRROR"
	fi
	# 'URI' NAME SIZE SHA256:HEX per file, hashes from the signed index.
	uris=$(apt-get "${apt_opts[@]}" -qq --print-uris source "qemu=$srcver") ||
		die "source package qemu $srcver is not in bookworm{,-updates,-security} (any more?)"
	orig='' debtar=''
	while read -r uri name _size hash; do
		case $name in
		*.orig.tar.*) orig=$name ;;
		*.debian.tar.*) debtar=$name ;;
		*) continue ;;
		esac
		uri=${uri#\'}
		uri=${uri%\'}
		[ "${hash%%:*}" = SHA256 ] || die "no SHA256 for $name in the index"
		echo "qemu-plugin: fetching $name" >&2
		/usr/lib/apt/apt-helper "${apt_opts[@]}" -qq download-file "$uri" "$dl/$name" "$hash" >&2 ||
			die "cannot fetch $uri"
		echo "${hash#SHA256:}  $dl/$name" | sha256sum --quiet -c ||
			die "$name does not match the index's SHA256"
	done <<< "$uris"
	[ -n "$orig" ] && [ -n "$debtar" ] ||
		die "qemu $srcver: expected an orig and a debian tarball"

	# Only the header: from the orig tarball (its top directory is
	# qemu-<upstream>/), then the hunks of Debian's patches that touch it.
	tmp=$dl/x
	mkdir -p "$tmp/$(dirname "$member")"
	tar -xOf "$dl/$orig" --wildcards --no-wildcards-match-slash \
		"*/$member" > "$tmp/$member" ||
		die "no $member in $orig"
	[ -s "$tmp/$member" ] || die "no $member in $orig"
	tar -xf "$dl/$debtar" -C "$tmp" debian/patches
	if [ -f "$tmp/debian/patches/series" ]; then
		while read -r p _; do
			case $p in ''|'#'*) continue ;; esac
			# The file's part of the patch: from its ---/+++ header to
			# the next file's (or a diff/Index line).
			awk -v want="$member" '
				/^(diff |Index: )/ { on = 0 }
				/^--- / { hdr = $0; next }
				/^\+\+\+ / {
					f = $2; sub(/^[^\/]*\//, "", f)
					on = (f == want)
					if (on) print hdr
				}
				on { print }
			' "$tmp/debian/patches/$p" > "$tmp/part.diff"
			[ -s "$tmp/part.diff" ] || continue
			echo "qemu-plugin: applying Debian's $p to $member" >&2
			patch -d "$tmp" -p1 -s --no-backup-if-mismatch < "$tmp/part.diff" ||
				die "Debian's $p does not apply to $member"
		done < "$tmp/debian/patches/series"
	fi
	grep -q '^#define QEMU_PLUGIN_VERSION ' "$tmp/$member" ||
		die "$member from $orig does not look like QEMU's plugin header"
	mkdir -p "$(dirname "$hdr")"
	mv "$tmp/$member" "$hdr"
	echo "$srcver" > "$hdr.version"
	rm -rf "$dl"
	echo "qemu-plugin: $member from qemu $srcver" >&2
fi
[ "${FETCH_ONLY:-}" != 1 ] || exit 0

# QEMU 7.2's header needs only libc; later ones include <glib.h>.
cflags=()
if grep -q '#include <glib.h>' "$hdr"; then
	if ! dpkg -s libglib2.0-dev >/dev/null 2>&1; then
		echo "qemu-plugin: installing libglib2.0-dev (the plugin header needs glib)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libglib2.0-dev >&2 ||
			die "cannot install libglib2.0-dev"
	fi
	read -ra cflags <<< "$(pkg-config --cflags glib-2.0)"
fi

gcc -shared -fPIC -O2 -Wall -Wextra -Werror "${cflags[@]}" -I "$(dirname "$hdr")" \
	-o "$so.tmp" "$src"
mv "$so.tmp" "$so"
echo "qemu-plugin: built $so for qemu $srcver" >&2
echo "$so"
