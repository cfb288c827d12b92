#!/bin/bash
# blktests' nvme and srp groups over soft-RoCE (use_rxe=1) on the stock
# 7.3 kernel of Debian 13 (trixie) backports, whose rdma_rxe is replaced
# by one built from v7.3.4 plus the stack's rdma-rc fixes of rxe (up to
# "RDMA/rxe: Drop the responder's MR reference when the receive CQ
# overflows"), with the kernel's own NVMe, SRP and LIO modules: the check
# that those fixes do not break the block storage that runs over rxe.
# BLKTESTS_RXE="fixed stock" runs it on the unchanged rdma_rxe too, to
# compare ("stock": only that). Not part of make test (an hour or more
# under TCG): make blktests.
#
# usage: BLKTESTS_DIR=DIR scripts/blktests.sh [TEST...]   (default: nvme srp)
#   BLKTESTS_DIR  a checkout of blktests (https://github.com/osandov/blktests;
#                 not packaged by Debian), copied and built under build/
# Tools the tests need and the host may lack (nvme-cli, fio,
# multipath-tools, xfsprogs, sg3-utils, gawk) come from Debian bookworm through
# apt with private state, unpacked into the guest's overlay root.
# The nvme tests' file-backed namespaces live on the guest's overlay
# root, in its memory: NVME_IMG_SIZE 256M (BLKTESTS_NVME_IMG_SIZE), not
# blktests' 1G, which fills it (ENOSPC in nvme/010's fio).
# The guest's init runs no udev; blktests' srp tests wait for multipath
# devices, which multipathd makes from udev's events, so the guest starts
# systemd-udevd (the host's, through the overlay root) before blktests.
# Output: each guest's log, build/vm/blktests-{fixed,stock}/out.log (with
# the .full log of each failed test at its end), and a summary of each
# test's status on stdout (build/blktests/summary-{fixed,stock}).
# Exit status 0 when the runs were made, whatever the tests gave.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
b=$top/build/blktests
tests=${*:-nvme srp}
src=${BLKTESTS_DIR:?BLKTESTS_DIR: a blktests checkout (no network fetch here)}
mkdir -p "$b"

# blktests, built.
rm -rf "$b/src"
mkdir -p "$b/src"
if [ -d "$src/.git" ] || git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$src" archive HEAD | tar -x -C "$b/src"
	git -C "$src" log -1 --format='blktests %H %s' > "$b/version"
else
	cp -a "$src/." "$b/src/"
	echo "blktests (not a git checkout) $src" > "$b/version"
fi
make -s -C "$b/src" > "$b/build.log" 2>&1 ||
	{ echo "blktests: build failed: $b/build.log" >&2; exit 1; }

# The tools, with whatever they need that the host has not.
if [ ! -f "$b/root/.stamp" ]; then
	apt_opts=()
	# shellcheck source=scripts/apt-private.sh
	. "$top/scripts/apt-private.sh"
	apt_private "$b/apt" bookworm
	apt_private_update "$b/apt" || exit 1
	want=(nvme-cli fio multipath-tools kpartx xfsprogs sg3-utils gawk)
	mapfile -t closure < <(apt-cache "${apt_opts[@]}" depends --recurse \
		--no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances "${want[@]}" 2>/dev/null |
		grep -v '^ ' | grep -v '^<' | sort -u)
	need=()
	for p in "${closure[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			need+=("$p")
	done
	rm -rf "$b/debs" "$b/root"
	mkdir -p "$b/debs" "$b/root"
	(cd "$b/debs" && apt-get "${apt_opts[@]}" download "${need[@]}" > /dev/null)
	for d in "$b"/debs/*.deb; do dpkg -x "$d" "$b/root"; done
	ls "$b/debs" > "$b/root/.stamp"
fi

# rdma_rxe with the fixes.
fix=$(git -C "$top/build/linux" log --format=%H \
	--grep "^RDMA/rxe: Drop the responder's MR reference" -1)
[ -n "$fix" ] || { echo "blktests: no rxe fix in build/linux (make tree)" >&2; exit 1; }
tree=$top/build/linux-fixes
if [ "$(git -C "$tree" rev-parse HEAD 2>/dev/null)" != "$fix" ]; then
	rm -rf "$tree"
	git clone -q --shared --no-checkout "$top/build/linux" "$tree"
	git -C "$tree" checkout -q "$fix"
fi
OOT_TREE=build/linux-fixes OOT_DIRS=drivers/infiniband/sw/rxe \
	"$top/scripts/oot.sh" > "$b/oot.log" 2>&1 ||
	{ echo "blktests: rdma_rxe build failed: $b/oot.log" >&2; exit 1; }
ko=$(find "$top/build/oot/out-linux-fixes" -name rdma_rxe.ko | head -n1)

run() {
	local name=$1
	cat > "$b/config-$name" <<-CFG
	use_rxe=1
	NVMET_TRTYPES=rdma
	NVME_IMG_SIZE=${BLKTESTS_NVME_IMG_SIZE:-256M}
	CFG
	# In the guest: the tools into the overlay root, configfs, a veth
	# pair with an IPv4 address (blktests binds rxe to every interface
	# but lo that has a carrier, and targets the last one's address),
	# then blktests.
	# (Each top directory into its own: /lib and /sbin are links to /usr's.)
	local cmd="for d in $b/root/*/; do d=\${d%/}; cp -a \$d/. /\${d##*/}/; done &&
		ldconfig && modinfo -F filename rdma_rxe &&
		cp /lib/modules/\$(uname -r)/config /boot/config-\$(uname -r) &&
		modprobe configfs && mount -t configfs none /sys/kernel/config &&
		ip link add bt0 type veth peer name bt1 &&
		ip addr add 10.11.0.1/24 dev bt0 && ip link set bt0 up &&
		ip link set bt1 up &&
		/lib/systemd/systemd-udevd --daemon && udevadm trigger &&
		udevadm settle &&
		cd $b/src && { ./check -c $b/config-$name $tests; rc=\$?;
		for bad in results/*/*/*.out.bad; do [ -e \$bad ] || continue;
			echo \"== \${bad%.out.bad}.full\"; tail -n 60 \${bad%.out.bad}.full; done;
		exit \$rc; }"
	echo "blktests: $name rdma_rxe; log: build/vm/blktests-$name/out.log" >&2
	VM_UPDATES=${2:-} "$top/scripts/vm.sh" -k stock -n "blktests-$name" \
		-t "${BLKTESTS_TIMEOUT:-7200}" -- "$cmd" > "$b/$name.log" 2>&1 || true
	# One line per test: its status, and the reason of a skip.
	tr -d '\r' < "$top/build/vm/blktests-$name/out.log" |
		sed 's/\x1b\[[0-9;]*[a-zA-Z]//g' |
		grep -aE '^[a-z]+/[0-9]+ .*\[(passed|failed|not run)\]|^    [a-z_]+ .*' > "$b/summary-$name" || true
	echo "== $name rdma_rxe ($(grep -c '\[passed\]' "$b/summary-$name") passed, $(grep -c '\[failed\]' "$b/summary-$name") failed, $(grep -c '\[not run\]' "$b/summary-$name") not run)"
	cat "$b/summary-$name"
}
case ${BLKTESTS_RXE:-fixed} in
*fixed*) run fixed "$ko" ;;
esac
case ${BLKTESTS_RXE:-fixed} in
*stock*) run stock ;;
esac
cat "$b/version"
