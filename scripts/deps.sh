#!/bin/bash
# Host packages the harness needs, from the host's own suite (bookworm):
# never from trixie, which would pull a newer libc (pipeline.md).
#
# usage: scripts/deps.sh [--check] [--dkms]
#   --check: only report what is missing
#   --dkms: also what `make dkms-check` needs (debootstrap)
set -eu

pkgs=(qemu-system-x86 qemu-utils ccache dwarves rdma-core ibverbs-utils
      ibverbs-providers rdmacm-utils perftest busybox-static flex bison
      libelf-dev libssl-dev bc cpio kmod iputils-ping iproute2 sparse
      libibverbs-dev librdmacm-dev xz-utils zstd gcc make git python3 file
      gzip rsync python3-ply dpkg-dev cmake ninja-build pkg-config
      libnl-3-dev libnl-route-3-dev libmnl-dev patch python3-sphinx
      python3-sphinx-rtd-theme gnuplot-nox linux-perf)
check='' fix='make deps'
for a in "$@"; do
	case $a in
	--check) check=1 ;;
	--dkms) pkgs+=(debootstrap) fix="scripts/deps.sh --dkms" ;;
	*) sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} = 0 ]; then
	exit 0
fi
if [ -n "$check" ]; then
	echo "deps: missing host packages: ${missing[*]} (run $fix as root)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
