#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# dma-buf MRs on soft-RoCE under fault injection and torn down while live:
# a veth pair, an rxe device on one end for dmabuf_mr_fail_nth (RDMA_DEV),
# the other end left for the test to create and remove an rxe device of
# its own on (RDMA_SCRATCH_NETDEV). The fault injection tests skip on a
# kernel without CONFIG_FAULT_INJECTION; the rest runs anywhere. Skips
# without rdma_rxe, dmabuf_mock (CONFIG_DMABUF_MOCK_EXPORTER), ip or rdma,
# or when dmabuf_mr_fail_nth was not built (no libibverbs at build time).

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"

here=$(cd "$(dirname "$0")" && pwd)
VETH0="vfnth$$a"
VETH1="vfnth$$b"
RXE0="rxe_fnth_$$"
ADDR0=192.168.217.1
ADDR1=192.168.218.1
loaded=()

skip()
{
	ktap_skip_all "$*"
	exit "$KSFT_SKIP"
}

fail()
{
	ktap_print_msg "$*"
	exit "$KSFT_FAIL"
}

cleanup()
{
	local m

	rdma link del "$RXE0" 2>/dev/null
	ip link del "$VETH0" 2>/dev/null
	for m in "${loaded[@]}"; do
		modprobe -r "$m" 2>/dev/null
	done
}

# The sysfs name of the GID that maps IPv4 address $1: ::ffff:a.b.c.d.
gid_of()
{
	local a b c d

	IFS=. read -r a b c d <<< "$1"
	printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' \
		"$a" "$b" "$c" "$d"
}

# Wait up to 30 s (TCG is slow) for the GID of address $2 on device $1.
wait_gid()
{
	local gid

	gid=$(gid_of "$2")
	for _ in $(seq 300); do
		grep -qsx "$gid" /sys/class/infiniband/"$1"/ports/1/gids/* &&
			return 0
		sleep 0.1
	done
	return 1
}

[ "$(id -u)" -eq 0 ] || skip "must be run as root"
[ -x "$here/dmabuf_mr_fail_nth" ] ||
	skip "dmabuf_mr_fail_nth was not built (no libibverbs)"
for cmd in ip rdma modprobe; do
	command -v "$cmd" >/dev/null 2>&1 || skip "no $cmd"
done

trap cleanup EXIT

for m in rdma_rxe dmabuf_mock; do
	[ -d "/sys/module/$m" ] && continue
	modprobe "$m" 2>/dev/null || skip "no module $m"
	loaded+=("$m")
done
[ -c /dev/dmabuf_mock ] || skip "no /dev/dmabuf_mock"

ip link add "$VETH0" type veth peer name "$VETH1" || fail "no veth pair"
ip link set "$VETH0" mtu 9000
ip link set "$VETH1" mtu 9000
ip addr add "$ADDR0/24" dev "$VETH0"
ip addr add "$ADDR1/24" dev "$VETH1"
ip link set "$VETH0" up
ip link set "$VETH1" up

rdma link add "$RXE0" type rxe netdev "$VETH0" ||
	fail "rdma link add $RXE0"
wait_gid "$RXE0" "$ADDR0" || fail "no GID for $ADDR0 on $RXE0"

RDMA_DEV="$RXE0" RDMA_SCRATCH_NETDEV="$VETH1" "$here/dmabuf_mr_fail_nth"
exit $?
