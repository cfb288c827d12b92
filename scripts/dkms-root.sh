#!/bin/bash
# A stock Debian system of RELEASE in build/dkms/roots/RELEASE, for the DKMS
# check (scripts/dkms-check.sh) to chroot into: debootstrap (minbase), the
# release's security and point updates, then, with the release's own apt,
# dkms and the kernel (image, modules, headers) that scripts/dkms-fetch.sh
# fetched for each SUITE. Nothing of the package is in it: the check adds
# and builds it in a throw-away overlay on top.
# Kept until RELEASE, the kernels or this script change. Needs root.
#
# usage: scripts/dkms-root.sh [-n NAME] RELEASE SUITE...
#   e.g. scripts/dkms-root.sh trixie trixie trixie-backports
#   SUITE=DIR: that suite's kernel from DIR (*.deb and a `kernel` file as
#   scripts/dkms-fetch.sh writes it), e.g. the pinned base's (scripts/deb-check.sh)
#   -n  the root's name (default RELEASE): build/dkms/roots/NAME
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian),
#   DEBIAN_SECURITY_MIRROR (default http://deb.debian.org/debian-security)
set -eu

args=("$@")
rname=
while getopts n: o; do
	case $o in
	n) rname=$OPTARG ;;
	*) sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "dkms-root: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null ||
	{ echo "dkms-root: no debootstrap: run scripts/deps.sh --dkms" >&2; exit 1; }
# Mounts (proc, dev) live in a mount namespace of our own and go with it.
if [ -z "${DKMS_ROOT_UNSHARED:-}" ]; then
	DKMS_ROOT_UNSHARED=1 exec unshare --mount --propagation private "$0" "${args[@]}"
fi

top=$(cd "$(dirname "$0")/.." && pwd)
release=$1
shift
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
secmirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
roots=$top/build/dkms/roots
rname=${rname:-$release}
root=$roots/$rname
debs=$top/build/dkms/debs
# Where SUITE's kernel is: build/dkms/debs/SUITE, or DIR of SUITE=DIR.
kdir_of() {
	case $1 in
	*=*) echo "${1#*=}" ;;
	*) echo "$debs/$1" ;;
	esac
}

for s in "$@"; do
	[ -f "$(kdir_of "$s")/kernel" ] ||
		{ echo "dkms-root: no kernel of $s: run scripts/dkms-fetch.sh ${s%%=*}" >&2; exit 1; }
done
stamp=$( { echo "$rname $release $mirror $secmirror"; sha256sum < "$0";
	   for s in "$@"; do cat "$(kdir_of "$s")/kernel"; done; } | sha256sum | cut -d' ' -f1)
if [ -f "$root/.dkms-root" ] && [ "$(cat "$root/.dkms-root")" = "$stamp" ]; then
	echo "dkms-root: $root is up to date"
	exit 0
fi

new=$roots/$rname.new
rm -rf "$new"
mkdir -p "$roots"
echo "dkms-root: debootstrap $release into $new"
debootstrap --variant=minbase "$release" "$new" "$mirror" > "$roots/$rname.log" 2>&1 ||
	{ tail -n 30 "$roots/$rname.log" >&2; exit 1; }

key=/usr/share/keyrings/debian-archive-keyring.gpg
{
	echo "deb $mirror $release main"
	echo "deb $mirror $release-updates main"
	echo "deb $secmirror $release-security main"
	for s in "$@"; do
		s=${s%%=*}
		[ "$s" = "$release" ] || echo "deb $mirror $s main"
	done
} > "$new/etc/apt/sources.list"
[ -f "$new$key" ] || { echo "dkms-root: $release has no $key" >&2; exit 1; }

mount -t proc proc "$new/proc"
mount --rbind /dev "$new/dev"
in_root() {
	chroot "$new" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}
mkdir -p "$new/root/kernel-debs"
# (A subshell whose steps check themselves: set -e does not act in a ||
# list.)
(
	in_root apt-get -q update &&
	in_root apt-get -q -y upgrade &&
	in_root apt-get -q -y install --no-install-recommends dkms || exit 1
	# The kernels as a user installs them, a backports one from its suite
	# (-t): apt resolves what they need (compiler, kmod, initramfs-tools).
	for s in "$@"; do
		kdebs=()
		for f in "$(kdir_of "$s")"/*.deb; do
			cp "$f" "$new/root/kernel-debs/" || exit 1
			kdebs+=("/root/kernel-debs/${f##*/}")
		done
		target=()
		[ "${s%%=*}" = "$release" ] || target=(-t "${s%%=*}")
		in_root apt-get -q -y install --no-install-recommends \
			"${target[@]}" "${kdebs[@]}" || exit 1
	done
	in_root apt-get clean
) >> "$roots/$rname.log" 2>&1 || { tail -n 30 "$roots/$rname.log" >&2; exit 1; }
rm -rf "$new/root/kernel-debs"
umount -R "$new/dev"
umount "$new/proc"

{
	echo "release $release"
	# shellcheck disable=SC2016 # dpkg-query's fields, not the shell's
	in_root dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n' |
		sed -n 's/^ii  *//p' |
		grep -E '^(dkms|gcc-[0-9]+|make|linux-(image|headers|kbuild|binary|modules)-[^ ]*) '
} > "$new/.dkms-packages"
echo "$stamp" > "$new/.dkms-root"
rm -rf "$root"
mv "$new" "$root"
echo "dkms-root: $root"
sed 's/^/dkms-root:   /' "$root/.dkms-packages"
