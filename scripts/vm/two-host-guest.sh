#!/bin/bash
# Runs in each guest of scripts/two-host.sh: the guest's virtio NIC gets a
# plain IPv4 address, soft-RoCE (rxe0) goes on it, and two_host runs its
# side against the other guest. Side a has the series (our out-of-tree
# modules, the patched rxe provider when built) and owns the dma-buf; side
# b must be Debian's stock kernel, modules and rdma-core: this checks so.
#
# usage: two-host-guest.sh a|b
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
side=${1:-}
if [ $# != 1 ] || { [ "$side" != a ] && [ "$side" != b ]; }; then
	echo "usage: $0 a|b" >&2
	exit 2
fi
if [ "$side" = a ]; then
	me=198.18.1.1 peer=198.18.1.2 up=A
else
	me=198.18.1.2 peer=198.18.1.1 up=B
fi
say() { echo "two-host $up: $*"; }
die() { echo "two-host $up: FAILED (this side, $up): $*"; exit 1; }

# No udev: load the NIC's driver by hand.
modprobe virtio_net
nic=
for d in /sys/class/net/*; do
	[ "$(basename "$d")" = lo ] && continue
	[ "$(basename "$(readlink -f "$d/device/driver" 2>/dev/null)")" = virtio_net ] || continue
	nic=$(basename "$d")
	break
done
[ -n "$nic" ] || die "no virtio-net NIC (VM_NETDEV unset?)"
ip addr add "$me/24" dev "$nic"
ip link set "$nic" up

extra=
[ "$side" = a ] && extra=dmabuf_mock
# shellcheck disable=SC2086
modprobe -a rdma_rxe ib_uverbs $extra
for m in ib_core ib_uverbs rdma_rxe $extra; do
	say "module $m: $(modinfo -n "$m")"
done
taint=$(cat /proc/sys/kernel/tainted)
say "kernel $(uname -r), tainted=$taint (out-of-tree flag O: $(( taint >> 12 & 1 )))"
if [ "$side" = b ]; then
	# Nothing of ours: Debian's modules, an untainted kernel, the
	# distro's libibverbs and rxe provider.
	for m in ib_core ib_uverbs rdma_rxe; do
		case $(modinfo -n "$m") in
		*/updates/*) die "module $m is ours, not Debian's" ;;
		esac
	done
	[ $(( taint >> 12 & 1 )) = 0 ] || die "kernel tainted by an out-of-tree module"
	! grep -qE 'libibverbs|librdmacm|librxe' /proc/self/mountinfo ||
		die "rdma-core is not the distro's (bind mount over it)"
	say "stock: Debian's modules, no out-of-tree module, distro rdma-core"
else
	for m in ib_core rdma_rxe dmabuf_mock; do
		case $(modinfo -n "$m") in
		*/updates/*) ;;
		*) die "module $m is not ours" ;;
		esac
	done
	if grep -q libibverbs /proc/self/mountinfo; then
		say "rdma-core: the pull request's (rxe reg_dmabuf_mr)"
	else
		say "rdma-core: distro (the tool uses the raw ioctl)"
	fi
fi
rdma link add rxe0 type rxe netdev "$nic"
rdma link show rxe0/1
exec "$top/build/userspace/two_host" "$side" rxe0 "$peer"
