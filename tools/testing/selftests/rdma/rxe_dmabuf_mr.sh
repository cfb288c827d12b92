#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# dma-buf MRs that honour revoke, on soft-RoCE: a veth pair with one end in
# a network namespace of its own, an rxe device on each end, and dmabuf_mr
# run against them (RDMA_DEV for the loopback tests, RDMA_PEER_DEV for the
# ones between the two). Skips without rdma_rxe, dmabuf_mock
# (CONFIG_DMABUF_MOCK_EXPORTER), ip or rdma, or when dmabuf_mr was not built
# (no libibverbs at build time).

source "$(dirname "$0")/rxe_dmabuf_lib.sh"

rxe_dmabuf_init dmabuf_mr 215
rxe_dmabuf_pair
RDMA_DEV="$RXE0" RDMA_PEER_DEV="$RXE1" "$PROG" "$@"
