#!/bin/bash
# Runs in the guest (make demo): two soft-RoCE devices in two network
# namespaces joined by a veth pair, RDMA traffic between them through the
# modules this project builds, then the revoke demo: a dma-buf registered
# with plain ibv_reg_dmabuf_mr, data moved, the exporter revokes, the peer's
# next access fails and the exporter's counters are back at zero.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/vm/rxe-pair.sh"

say() { printf '\n== %s\n' "$*"; }

say "kernel $(uname -r); RDMA modules loaded from:"
modprobe -a rdma_rxe ib_uverbs rdma_ucm dmabuf_mock
for m in ib_core ib_uverbs rdma_ucm rdma_rxe dmabuf_mock; do
	printf '  %-10s %s\n' "$m" "$(modinfo -n "$m")"
done

say "two namespaces, a veth pair, an rxe device on each end"
rxe_pair_up
rdma link show
ibv_devices

say "revoke demo: dma-buf MR on rxa, traffic from rxb, the exporter revokes"
"$top/build/userspace/revoke_demo" rxa rxb

say "ibv_rc_pingpong rxa <-> rxb, RC SEND/RECV, contents checked (-c)"
ip netns exec ra ibv_rc_pingpong -d rxa -g 1 -n 100 -s 4096 -c > /tmp/server.log 2>&1 &
srv=$!
sleep 2
ip netns exec rb ibv_rc_pingpong -d rxb -g 1 -n 100 -s 4096 -c 198.18.0.1
wait $srv
cat /tmp/server.log

say "rping: RDMA READ and WRITE through rdma_cm, payload shown"
ip netns exec ra rping -s -a 198.18.0.1 -C 3 > /dev/null 2>&1 &
srv=$!
sleep 2
ip netns exec rb rping -c -a 198.18.0.1 -C 3 -v -S 40
wait $srv

say "counters on rxb: $(ip netns exec rb rdma statistic show link rxb/1 | grep -oE 'sent_pkts [0-9]+|rcvd_pkts [0-9]+' | paste -sd' ')"
rxe_pair_down
say "demo done"
