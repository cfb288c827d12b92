#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Sourced by the rxe_dmabuf_mr*.sh wrappers: a veth pair, an rxe device on
# one or both ends, the checks and the cleanup they share.
#
# rxe_dmabuf_init PROG OCTET   names of this run's links, devices and
#                              addresses (192.168.OCTET.x, and OCTET+1 for
#                              the scratch end); skips unless
#                              PROG was built and the tools and modules
#                              are there
# rxe_dmabuf_pair              the peer end in a network namespace of its
#                              own with an rxe device there too: RXE0, RXE1
# rxe_dmabuf_scratch           rxe only on the first end; the second end,
#                              VETH1, left for the test to use
#
# What rxe does with a dma-buf, for the tests to assert rather than probe:
# it pins, and it vmaps (never maps for DMA).
export DMABUF_MR_EXPECT=pin,vmap

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"

here=$(cd "$(dirname "$0")" && pwd)
loaded=()
NS=

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

rxe_dmabuf_cleanup()
{
	local m

	rdma link del "$RXE0" 2>/dev/null
	if [ -n "$NS" ]; then
		ip netns exec "$NS" rdma link del "$RXE1" 2>/dev/null
		ip netns del "$NS" 2>/dev/null
	fi
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

rxe_dmabuf_init()
{
	local prog=$1 cmd m

	OCTET=$2
	PROG=$here/$prog
	VETH0="vdm${OCTET}_$$a"
	VETH1="vdm${OCTET}_$$b"
	RXE0="rxe_dm${OCTET}_$$a"
	RXE1="rxe_dm${OCTET}_$$b"
	ADDR0=192.168.$OCTET.1
	ADDR1=192.168.$OCTET.2

	[ "$(id -u)" -eq 0 ] || skip "must be run as root"
	[ -x "$PROG" ] || skip "$prog was not built (no libibverbs)"
	for cmd in ip rdma modprobe; do
		command -v "$cmd" >/dev/null 2>&1 || skip "no $cmd"
	done
	trap rxe_dmabuf_cleanup EXIT
	for m in rdma_rxe dmabuf_mock; do
		[ -d "/sys/module/$m" ] && continue
		modprobe "$m" 2>/dev/null || skip "no module $m"
		loaded+=("$m")
	done
	[ -c /dev/dmabuf_mock ] || skip "no /dev/dmabuf_mock"
	ip link add "$VETH0" type veth peer name "$VETH1" ||
		fail "no veth pair"
	# A 4096-byte RoCE MTU: a quarter of the packets, and TCG is slow.
	ip link set "$VETH0" mtu 9000
	ip link set "$VETH1" mtu 9000
	ip addr add "$ADDR0/24" dev "$VETH0"
	ip link set "$VETH0" up
}

rxe_dmabuf_pair()
{
	# One process opens both devices: the shared RDMA netns mode.
	if rdma system show 2>/dev/null | grep -q 'netns exclusive'; then
		skip "RDMA devices are netns-exclusive"
	fi
	NS="rxe_dm_$$"
	ip netns add "$NS" || fail "ip netns add $NS"
	ip link set "$VETH1" netns "$NS" || fail "cannot move $VETH1 to $NS"
	ip netns exec "$NS" ip addr add "$ADDR1/24" dev "$VETH1"
	ip netns exec "$NS" ip link set "$VETH1" up
	ip netns exec "$NS" ip link set lo up
	rdma link add "$RXE0" type rxe netdev "$VETH0" ||
		fail "rdma link add $RXE0"
	ip netns exec "$NS" rdma link add "$RXE1" type rxe netdev "$VETH1" ||
		fail "rdma link add $RXE1 in $NS"
	wait_gid "$RXE0" "$ADDR0" || fail "no GID for $ADDR0 on $RXE0"
	wait_gid "$RXE1" "$ADDR1" || fail "no GID for $ADDR1 on $RXE1"
	# Where the peer's traffic leaves: a test may throttle it with tc.
	export DMABUF_MR_PEER_NETNS=$NS DMABUF_MR_PEER_NETDEV=$VETH1
}

rxe_dmabuf_scratch()
{
	# Its own subnet: both ends are in this namespace.
	ADDR1=192.168.$((OCTET + 1)).1
	ip addr add "$ADDR1/24" dev "$VETH1"
	ip link set "$VETH1" up
	rdma link add "$RXE0" type rxe netdev "$VETH0" ||
		fail "rdma link add $RXE0"
	wait_gid "$RXE0" "$ADDR0" || fail "no GID for $ADDR0 on $RXE0"
}
