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

source "$(dirname "$0")/rxe_dmabuf_lib.sh"

rxe_dmabuf_init dmabuf_mr_stress 216
rxe_dmabuf_pair
RDMA_DEV="$RXE0" RDMA_PEER_DEV="$RXE1" "$PROG" "$@"
