#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Run by Kbuild with the kernel source (headers) directory: print
# -DDMABUF_MOCK_HAVE_<X> for each interface dmabuf_mock_compat.h provides
# that these headers already have.
# usage: dmabuf_mock_probe.sh SRCTREE
set -eu
inc=$1/include/linux
have() {
	# have FILE STRING NAME
	[ -f "$inc/$1" ] || { echo "dmabuf_mock_probe.sh: no $inc/$1" >&2; exit 1; }
	if grep -qF -- "$2" "$inc/$1"; then
		printf ' -DDMABUF_MOCK_HAVE_%s' "$3"
	fi
}
have module.h 'MODULE_INFO(import_ns, ns)' STRING_NS
have export.h '_EXPORT_SYMBOL(sym, "GPL")' EXPORT_LICENSE
have dma-buf.h 'dma_buf_invalidate_mappings(' INVALIDATE_MAPPINGS
have dma-buf.h 'dma_buf_attach_revocable(' ATTACH_REVOCABLE
have dma-buf.h 'dma_buf_fd_install(' FD_INSTALL
have dma-fence.h 'inline_lock' FENCE_INLINE_LOCK
have mm.h 'void vm_flags_set(' VM_FLAGS_SET
echo
