# shellcheck shell=bash
# Sourced by guest scripts (demo.sh, bench.sh): two soft-RoCE devices, rxa
# and rxb, in two network namespaces (ra, rb) joined by a veth pair. The
# guest has no network device to the outside (QEMU -nodefaults, no
# -netdev): these addresses never leave it.

rxe_pair_up() {
	modprobe -a rdma_rxe ib_uverbs rdma_ucm dmabuf_mock
	ip netns add ra
	ip netns add rb
	ip link add rva type veth peer name rvb
	ip link set rva netns ra
	ip link set rvb netns rb
	ip -n ra addr add 198.18.0.1/24 dev rva
	ip -n rb addr add 198.18.0.2/24 dev rvb
	ip -n ra link set rva up
	ip -n rb link set rvb up
	ip -n ra link set lo up
	ip -n rb link set lo up
	ip netns exec ra rdma link add rxa type rxe netdev rva
	ip netns exec rb rdma link add rxb type rxe netdev rvb
}

rxe_pair_down() {
	ip netns exec ra rdma link del rxa
	ip netns exec rb rdma link del rxb
}
