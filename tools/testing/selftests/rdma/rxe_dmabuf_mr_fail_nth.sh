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

source "$(dirname "$0")/rxe_dmabuf_lib.sh"

rxe_dmabuf_init dmabuf_mr_fail_nth 217
rxe_dmabuf_scratch
RDMA_DEV="$RXE0" RDMA_SCRATCH_NETDEV="$VETH1" "$PROG" "$@"
