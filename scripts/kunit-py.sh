#!/bin/bash
# KUnit the upstream way: tools/testing/kunit/kunit.py run with a
# .kunitconfig of the patched tree (build/linux), on x86_64 under QEMU, in
# build/kunit-<name>/. Not part of make test (each config is a kernel build
# of its own, about 6 minutes the first time).
#
# kunit.py asks QEMU for -accel kvm before tcg, and this machine's /dev/kvm
# answers but cannot run a guest (pipeline.md): scripts/kunit-qemu/ goes
# first on PATH with a qemu-system-x86_64 that drops -accel kvm and hvf.
#
# usage: scripts/kunit-py.sh [DIR...]   (default: drivers/infiniband/core
#                                        drivers/dma-buf; each a directory
#                                        with a .kunitconfig)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
[ -d "$tree/.git" ] || { echo "kunit-py: no tree at $tree: run make tree" >&2; exit 1; }
[ $# -gt 0 ] || set -- drivers/infiniband/core drivers/dma-buf
export CCACHE_DIR=${CCACHE_DIR:-$top/build/ccache}
exec 9>"${BUILD_LOCK:-$top/build/.build.lock}"
flock -n 9 || { echo "kunit-py: waiting for another build to finish" >&2; flock 9; }
rc=0
for d in "$@"; do
	[ -f "$tree/$d/.kunitconfig" ] || { echo "kunit-py: no $d/.kunitconfig in the tree" >&2; rc=1; continue; }
	out=$top/build/kunit-$(echo "$d" | tr / -)
	echo "kunit-py: $d in ${out#"$top"/}" >&2
	(cd "$tree" && PATH=$top/scripts/kunit-qemu:$PATH python3 tools/testing/kunit/kunit.py run \
		--arch=x86_64 --kunitconfig="$d" --build_dir="$out" --jobs="$(nproc)" \
		--make_options "CC=ccache gcc" --timeout 900) || rc=1
done
exit $rc
