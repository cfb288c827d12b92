/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Test-only ABI of the dmabuf_mock exporter (CONFIG_DMABUF_MOCK_EXPORTER).
 *
 * Like iommufd's iommufd_test.h, this header lives next to the driver and
 * the selftests include it by relative path: it is a test interface, not
 * uapi, and may change with the tests that use it.
 *
 * All commands are ioctls on /dev/dmabuf_mock. As in iommufd, every command
 * struct starts with its size in bytes, which the caller sets to sizeof()
 * the struct it was built with, and the ioctl number does not encode it: a
 * struct may grow at its end without breaking anything built before. The
 * module takes a struct shorter than its own (never shorter than the struct
 * was when its command was added, else -EINVAL): what the caller left out
 * reads as zero, and only as many bytes as the caller passed are written
 * back. It takes a longer one when the bytes it does not know are all zero
 * (-E2BIG otherwise). Unknown flags and non-zero reserved fields are refused
 * with -EINVAL, an fd that is not a dma-buf of this exporter with -EINVAL
 * (-EBADF when it is no open file), an unknown command with -ENOTTY.
 */
#ifndef _DMABUF_MOCK_H
#define _DMABUF_MOCK_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define DMABUF_MOCK_DEVICE "dmabuf_mock"

/* Largest buffer CREATE accepts, before looking at the memory there is. */
#define DMABUF_MOCK_MAX_SIZE (16ULL << 30)

/**
 * enum dmabuf_mock_create_flags - emulate other exporters
 * @DMABUF_MOCK_NO_PIN: .pin fails with -EOPNOTSUPP, as the uverbs exporter
 *	does for pinned importers
 * @DMABUF_MOCK_REQUIRE_REVOCABLE: attach fails with -EOPNOTSUPP unless
 *	dma_buf_attach_revocable() holds, as vfio-pci requires
 * @DMABUF_MOCK_NO_VMAP: no .vmap at all, so dma_buf_vmap() fails with
 *	-EINVAL, as for most exporters of device memory
 * @DMABUF_MOCK_VMAP_IOMEM: .vmap returns the mapping marked is_iomem, as an
 *	MMIO exporter would
 * @DMABUF_MOCK_VMAP_EAGER: the pages are vmapped at creation (and again
 *	after a swapping revoke) and .vmap hands out that mapping, as an
 *	exporter that keeps its buffers mapped does: .vmap then allocates
 *	nothing and costs next to nothing
 * @DMABUF_MOCK_PIN_FENCE: a pin adds an unsignalled fence to the
 *	reservation object with DMA_RESV_USAGE_KERNEL (unless one is still
 *	pending), as TTM exporters fence the migration they start at pin;
 *	DMABUF_MOCK_PIN_FENCE_MS later a work fills the whole buffer with
 *	DMABUF_MOCK_MIGRATED bytes, then signals the fence. An importer that
 *	waits for the kernel fences after its pin finds the pattern there.
 * @DMABUF_MOCK_LAX_PIN: .pin succeeds while the buffer is revoked, as
 *	for an exporter without .pin (dma_buf_pin() then returns 0): only a
 *	refused map or vmap stops an importer of the revoked buffer then
 * @DMABUF_MOCK_VMAP_INVALIDATE: .vmap invalidates the attachments' mappings
 *	before it maps, as an exporter that moves the buffer inside its own
 *	vmap would: a pinned importer takes that invalidate for a revoke
 * @DMABUF_MOCK_NO_CPU_ACCESS: no .begin_cpu_access and .end_cpu_access, as
 *	for the DRM PRIME helpers' exporters, whose memory the CPU sees
 *	with no work: an importer cannot tell the mock from an exporter
 *	whose CPU access needs syncing by those ops
 * @DMABUF_MOCK_CPU_END_EINTR: .end_cpu_access fails with -EINTR, without
 *	ending the access, while a fatal signal is pending, as an exporter
 *	whose end waits interruptibly for a contended lock does (udmabuf's
 *	reservation lock, i915's object lock) when a killed process closes
 *	the last file that held the buffer
 */
enum dmabuf_mock_create_flags {
	DMABUF_MOCK_NO_PIN = 1 << 0,
	DMABUF_MOCK_REQUIRE_REVOCABLE = 1 << 1,
	DMABUF_MOCK_NO_VMAP = 1 << 2,
	DMABUF_MOCK_VMAP_IOMEM = 1 << 3,
	DMABUF_MOCK_VMAP_EAGER = 1 << 4,
	DMABUF_MOCK_PIN_FENCE = 1 << 5,
	DMABUF_MOCK_LAX_PIN = 1 << 6,
	DMABUF_MOCK_VMAP_INVALIDATE = 1 << 7,
	DMABUF_MOCK_NO_CPU_ACCESS = 1 << 8,
	DMABUF_MOCK_CPU_END_EINTR = 1 << 9,
};

#define DMABUF_MOCK_PIN_FENCE_MS 500
#define DMABUF_MOCK_MIGRATED 0x3c

/**
 * struct dmabuf_mock_create - DMABUF_MOCK_CREATE
 * @size: sizeof(struct dmabuf_mock_create)
 * @flags: enum dmabuf_mock_create_flags
 * @length: buffer size in bytes, a non-zero multiple of the page size
 * @fd: out: the new dma-buf, O_CLOEXEC | O_RDWR
 * @__reserved: must be 0
 */
struct dmabuf_mock_create {
	__u32 size;
	__u32 flags;
	__u64 length;
	__s32 fd;
	__u32 __reserved;
};

/**
 * enum dmabuf_mock_revoke_flags - what REVOKE does to the old memory once no
 * importer can reach it any more
 * @DMABUF_MOCK_REVOKE_POISON: fill it with DMABUF_MOCK_POISON, so that a
 *	late write shows up in a later READ
 * @DMABUF_MOCK_REVOKE_SWAP: free it and back the buffer with new zeroed
 *	pages, so that a late access is a use after free (KASAN)
 */
enum dmabuf_mock_revoke_flags {
	DMABUF_MOCK_REVOKE_POISON = 1 << 0,
	DMABUF_MOCK_REVOKE_SWAP = 1 << 1,
};

#define DMABUF_MOCK_POISON 0x6b

/**
 * struct dmabuf_mock_revoke - DMABUF_MOCK_REVOKE
 * @size: sizeof(struct dmabuf_mock_revoke)
 * @flags: enum dmabuf_mock_revoke_flags
 * @fd: a dma-buf of this exporter
 * @timeout_ms: how long to wait for importers to unmap and vunmap
 * @out_flags: must be 0; out: enum dmabuf_mock_revoke_out_flags
 * @__reserved: must be 0
 * @holder: out: on -ETIMEDOUT, dev_name() of an importer still mapped
 *	(or "vmap" when only a vmap is left), truncated to fit
 *
 * Does what vfio-pci does: under the reservation lock, mark the buffer
 * revoked (new attach, pin, map, vmap and user faults fail) and call
 * dma_buf_invalidate_mappings(), then wait for fences; unlock; zap user
 * mappings; then wait, killably, for every importer to unmap and vunmap.
 * Revoking a revoked buffer waits again. A fatal signal ends the wait with
 * -EINTR, the buffer staying revoked.
 *
 * dma-buf hands out one kernel mapping to all importers: while any importer
 * still holds it, dma_buf_vmap() returns that mapping to a new caller without
 * asking the exporter, even once the buffer is revoked. Importers must not
 * vmap a buffer they cannot pin (the RDMA core pins first, and a revoked
 * buffer refuses the pin).
 */
struct dmabuf_mock_revoke {
	__u32 size;
	__u32 flags;
	__s32 fd;
	__u32 timeout_ms;
	__u32 out_flags;
	__u32 __reserved;
	char holder[32];
};

/**
 * enum dmabuf_mock_revoke_out_flags - what a REVOKE that returned 0 did
 * @DMABUF_MOCK_REVOKE_SUPERSEDED: a RESTORE or another REVOKE came before
 *	the importers let go: the memory may be in use again, or is not yet
 *	unmapped from user space, so the scrub asked for in @flags was not
 *	done; the last REVOKE scrubs with its own flags
 */
enum dmabuf_mock_revoke_out_flags {
	DMABUF_MOCK_REVOKE_SUPERSEDED = 1 << 0,
};

/**
 * struct dmabuf_mock_restore - DMABUF_MOCK_RESTORE
 * @size: sizeof(struct dmabuf_mock_restore)
 * @flags: must be 0
 * @fd: a dma-buf of this exporter
 * @__reserved: must be 0
 *
 * Makes a revoked buffer usable for new attachments. Importers that were
 * revoked stay revoked: that is theirs to decide.
 */
struct dmabuf_mock_restore {
	__u32 size;
	__u32 flags;
	__s32 fd;
	__u32 __reserved;
};

/**
 * enum dmabuf_mock_state - bits of &dmabuf_mock_query.state
 * @DMABUF_MOCK_STATE_REVOKED: the buffer is revoked
 */
enum dmabuf_mock_state {
	DMABUF_MOCK_STATE_REVOKED = 1 << 0,
};

/**
 * struct dmabuf_mock_query - DMABUF_MOCK_QUERY
 * @size: sizeof(struct dmabuf_mock_query)
 * @flags: must be 0
 * @fd: a dma-buf of this exporter
 * @state: out: enum dmabuf_mock_state
 * @attachments: out: attachments now
 * @pins: out: pins now
 * @maps: out: DMA mappings now
 * @vmaps: out: kernel vmaps now (the dma-buf core shares one between users)
 * @mmaps: out: user mappings (VMAs) now
 * @revokes: out: REVOKE calls so far
 * @invalidates: out: importer invalidate_mappings callbacks run so far
 * @fences: out: DMABUF_MOCK_PIN_FENCE fences not yet signalled
 * @length: out: buffer size in bytes
 * @cpu_begins: out: begin_cpu_access calls that succeeded so far
 * @cpu_ends: out: end_cpu_access calls so far
 */
struct dmabuf_mock_query {
	__u32 size;
	__u32 flags;
	__s32 fd;
	__u32 state;
	__u32 attachments;
	__u32 pins;
	__u32 maps;
	__u32 vmaps;
	__u32 mmaps;
	__u32 revokes;
	__u32 invalidates;
	__u32 fences;
	__u64 length;
	__u64 cpu_begins;
	__u64 cpu_ends;
};

/**
 * enum dmabuf_mock_rw_flags - direction of DMABUF_MOCK_RW
 * @DMABUF_MOCK_RW_WRITE: copy from user memory into the buffer (else read)
 */
enum dmabuf_mock_rw_flags {
	DMABUF_MOCK_RW_WRITE = 1 << 0,
};

/**
 * struct dmabuf_mock_rw - DMABUF_MOCK_RW
 * @size: sizeof(struct dmabuf_mock_rw)
 * @flags: enum dmabuf_mock_rw_flags
 * @fd: a dma-buf of this exporter
 * @__reserved: must be 0
 * @offset: byte offset into the buffer
 * @length: bytes to copy; offset + length must not pass the end
 * @uptr: user buffer
 *
 * The exporter's own access: works whether or not the buffer is revoked,
 * so that a test can look at the memory after REVOKE.
 */
struct dmabuf_mock_rw {
	__u32 size;
	__u32 flags;
	__s32 fd;
	__u32 __reserved;
	__u64 offset;
	__u64 length;
	__u64 uptr;
};

/**
 * struct dmabuf_mock_stats - DMABUF_MOCK_STATS: the whole module
 * @size: sizeof(struct dmabuf_mock_stats)
 * @flags: must be 0
 * @buffers: out: buffers alive (exported and not yet released)
 * @pages: out: pages held by those buffers
 */
struct dmabuf_mock_stats {
	__u32 size;
	__u32 flags;
	__u64 buffers;
	__u64 pages;
};

#define DMABUF_MOCK_TYPE 'M'
#define DMABUF_MOCK_CREATE _IO(DMABUF_MOCK_TYPE, 0xa0)
#define DMABUF_MOCK_REVOKE _IO(DMABUF_MOCK_TYPE, 0xa1)
#define DMABUF_MOCK_RESTORE _IO(DMABUF_MOCK_TYPE, 0xa2)
#define DMABUF_MOCK_QUERY _IO(DMABUF_MOCK_TYPE, 0xa3)
#define DMABUF_MOCK_RW _IO(DMABUF_MOCK_TYPE, 0xa4)
#define DMABUF_MOCK_STATS _IO(DMABUF_MOCK_TYPE, 0xa5)

#ifdef __KERNEL__
/* The same operations for kernel tests (KUnit), namespace "DMABUF_MOCK". */
struct dma_buf;

struct dma_buf *dmabuf_mock_create(u64 length, u32 flags);
int dmabuf_mock_revoke(struct dma_buf *dmabuf, u32 flags,
		       unsigned int timeout_ms, char *holder,
		       size_t holder_len);
int dmabuf_mock_restore(struct dma_buf *dmabuf);
int dmabuf_mock_query(struct dma_buf *dmabuf, struct dmabuf_mock_query *q);
int dmabuf_mock_access(struct dma_buf *dmabuf, u64 offset, void *buf,
		       u64 length, bool write);
void dmabuf_mock_stats(struct dmabuf_mock_stats *s);

/**
 * enum dmabuf_mock_point - where KUnit can stop the mock, with a static stub
 *	of dmabuf_mock_pause() (kunit_activate_static_stub())
 * @DMABUF_MOCK_AT_ATTACH: in .attach, the attachment accepted but not yet
 *	listed nor returned to its importer, the reservation lock not held
 * @DMABUF_MOCK_AT_PIN: in .pin, before the mock decides, the reservation
 *	lock held
 * @DMABUF_MOCK_AT_UNPIN: in .unpin, the reservation lock held
 * @DMABUF_MOCK_AT_REVOKE_LOCKED: in a revoke, the importers told, the
 *	reservation lock still held
 */
enum dmabuf_mock_point {
	DMABUF_MOCK_AT_ATTACH,
	DMABUF_MOCK_AT_PIN,
	DMABUF_MOCK_AT_UNPIN,
	DMABUF_MOCK_AT_REVOKE_LOCKED,
};

#if IS_ENABLED(CONFIG_KUNIT)
/* The steps of dmabuf_mock_revoke(), for KUnit to interleave. */
u64 dmabuf_mock_revoke_mark(struct dma_buf *dmabuf);
u64 dmabuf_mock_revoke_mark_locked(struct dma_buf *dmabuf);
int dmabuf_mock_revoke_wait(struct dma_buf *dmabuf, unsigned int timeout_ms,
			    char *holder, size_t holder_len);
bool dmabuf_mock_revoke_scrub(struct dma_buf *dmabuf, u64 gen, u32 flags);
void dmabuf_mock_pause(struct dma_buf *dmabuf,
		       struct dma_buf_attachment *attach,
		       enum dmabuf_mock_point point);
unsigned int dmabuf_mock_revoke_lock_waits(struct dma_buf *dmabuf);
void dmabuf_mock_hold_pin_fence(struct dma_buf *dmabuf, bool hold);
#endif
#endif

#endif /* _DMABUF_MOCK_H */
