#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Stress for dma-buf MRs that honour revoke, on soft-RoCE: the setup of
# rxe_dmabuf_mr.sh (a veth pair with one end in a network namespace of its
# own, an rxe device on each end), then dmabuf_mr_stress between the two
# devices for DMABUF_MR_STRESS_SECS seconds (default 20; the full run is
# 600). Skips without rdma_rxe, dmabuf_mock (CONFIG_DMABUF_MOCK_EXPORTER),
# ip or rdma, or when dmabuf_mr_stress was not built (no libibverbs at
# build time).

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"

here=$(cd "$(dirname "$0")" && pwd)
NS="rxe_dmabuf_stress_$$"
VETH0="vdms$$a"
VETH1="vdms$$b"
RXE0="rxe_dmabuf_st_$$a"
RXE1="rxe_dmabuf_st_$$b"
ADDR0=192.168.216.1
ADDR1=192.168.216.2
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
	ip netns exec "$NS" rdma link del "$RXE1" 2>/dev/null
	ip link del "$VETH0" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
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
[ -x "$here/dmabuf_mr_stress" ] ||
	skip "dmabuf_mr_stress was not built (no libibverbs)"
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

# One process opens both devices: that needs the shared RDMA netns mode.
if rdma system show 2>/dev/null | grep -q 'netns exclusive'; then
	skip "RDMA devices are netns-exclusive"
fi

ip netns add "$NS" || fail "ip netns add $NS"
ip link add "$VETH0" type veth peer name "$VETH1" || fail "no veth pair"
ip link set "$VETH1" netns "$NS" || fail "cannot move $VETH1 to $NS"
# A 4096-byte RoCE MTU: a quarter of the packets, and TCG is slow.
ip link set "$VETH0" mtu 9000
ip netns exec "$NS" ip link set "$VETH1" mtu 9000
ip addr add "$ADDR0/24" dev "$VETH0"
ip link set "$VETH0" up
ip netns exec "$NS" ip addr add "$ADDR1/24" dev "$VETH1"
ip netns exec "$NS" ip link set "$VETH1" up
ip netns exec "$NS" ip link set lo up

rdma link add "$RXE0" type rxe netdev "$VETH0" ||
	fail "rdma link add $RXE0"
ip netns exec "$NS" rdma link add "$RXE1" type rxe netdev "$VETH1" ||
	fail "rdma link add $RXE1 in $NS"
wait_gid "$RXE0" "$ADDR0" || fail "no GID for $ADDR0 on $RXE0"
wait_gid "$RXE1" "$ADDR1" || fail "no GID for $ADDR1 on $RXE1"

RDMA_DEV="$RXE0" RDMA_PEER_DEV="$RXE1" "$here/dmabuf_mr_stress"
exit $?
