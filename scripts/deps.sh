#!/bin/bash
# Host packages the harness needs, from the host's own suite (bookworm):
# never from trixie, which would pull a newer libc (pipeline.md). Installs
# the missing ones (as root; apt-get update first), or says which are
# missing.
#
# usage: scripts/deps.sh [--check] [--demo | --dkms | --deb]
#   (none)  what `make test` needs (make test and .ci/run call it)
#   --demo  only what `make demo` needs (make demo calls it)
#   --dkms  also what `make dkms-check` needs (debootstrap)
#   --deb   also what `make deb` and `make deb-check` need (debhelper,
#           dh-dkms, debootstrap)
#   --check only report what is missing (exit 1 if anything is)
set -eu

# make demo: fetch and unpack Debian's kernel, the tree, the out-of-tree
# modules (with rebuilt kbuild host tools), rdma-core's rxe provider, the
# userspace tools, and a guest that shares the host's root (so the host's
# rdma-core, iproute2, ping and busybox are the guest's).
demo=(git python3 make gcc g++ flex bison bc libelf-dev libssl-dev kmod cpio
      xz-utils zstd gzip file patch dpkg-dev cmake ninja-build pkg-config
      libnl-3-dev libnl-route-3-dev libibverbs-dev qemu-system-x86
      busybox-static rdma-core ibverbs-utils ibverbs-providers rdmacm-utils
      iproute2 iputils-ping)
# make test also: the in-tree kernels (ccache, pahole), sparse, docs,
# iproute2's rdma tool, the benchmarks (perftest, perf, gnuplot), the
# kselftests (librdmacm), rdma-core 65.0 with pyverbs for its own tests
# (cython3, python3-dev).
test=(qemu-utils ccache dwarves sparse librdmacm-dev rsync python3-ply
      libmnl-dev python3-sphinx python3-sphinx-rtd-theme gnuplot-nox
      linux-perf perftest b4 cython3 python3-dev)
pkgs=("${demo[@]}" "${test[@]}")
check='' fix='make deps'
for a in "$@"; do
	case $a in
	--check) check=1 ;;
	--demo) pkgs=("${demo[@]}") fix="scripts/deps.sh --demo" ;;
	--dkms) pkgs=("${demo[@]}" "${test[@]}" debootstrap) fix="scripts/deps.sh --dkms" ;;
	--deb) pkgs=("${demo[@]}" "${test[@]}" debhelper dh-dkms debootstrap)
	       fix="scripts/deps.sh --deb" ;;
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
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing host packages: ${missing[*]}; installing them needs root (run $fix as root)" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
