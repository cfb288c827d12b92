#!/bin/bash
# Runs rxe_cq_overflow on a fresh rxe device over a veth pair, in a guest
# (scripts/vm.sh -k stock: Debian's trixie-backports 7.3 kernel and rdma-core,
# nothing of ours): make repro-cq-overflow. Prints the time ibv_dereg_mr() took
# and exits with the program's status.
set -u
bin=${1:?usage: rxe_cq_overflow.sh BINARY}
modprobe rdma_rxe || exit 2
ip link add rco0 type veth peer name rco1 || exit 2
ip addr add 192.168.77.1/24 dev rco0
ip link set rco0 up
ip link set rco1 up
rdma link add rxe_rco type rxe netdev rco0 || exit 2
want=0000:0000:0000:0000:0000:ffff:c0a8:4d01
idx=
for _ in $(seq 300); do
	f=$(grep -lsx "$want" /sys/class/infiniband/rxe_rco/ports/1/gids/*)
	[ -n "$f" ] && { idx=${f##*/}; break; }
	sleep 0.1
done
[ -n "$idx" ] || { echo "no GID for 192.168.77.1"; exit 2; }
uname -r
"$bin" rxe_rco "$idx"
rc=$?
rdma link del rxe_rco
ip link del rco0
exit "$rc"
