/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dmabuf_mock (written for v7.3) on older kernels: the DKMS package's Kbuild
 * force-includes this before drivers/dma-buf/dmabuf_mock.c, which stays as
 * it is in the tree. dmabuf_mock_probe.sh defines DMABUF_MOCK_HAVE_<X> for
 * each interface it finds in the headers of the kernel being built for: a
 * stable kernel can have a backport whatever its version, so nothing here
 * looks at LINUX_VERSION_CODE. Each block names the version that brought
 * the interface. On a kernel that has them all this header adds nothing
 * but MODULE_VERSION().
 */
#ifndef _DMABUF_MOCK_COMPAT_H
#define _DMABUF_MOCK_COMPAT_H

#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/export.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#ifdef DMABUF_MOCK_DKMS_VERSION
MODULE_VERSION(DMABUF_MOCK_DKMS_VERSION);
#endif

/*
 * v6.13: symbol namespaces are string literals ("DMA_BUF"); before, they
 * were identifiers that the macros stringified. Take the strings the source
 * uses as they are. The license argument of __EXPORT_SYMBOL() was "_gpl"
 * before v6.5 and "GPL" since.
 */
#ifndef DMABUF_MOCK_HAVE_STRING_NS
#undef MODULE_IMPORT_NS
#define MODULE_IMPORT_NS(ns) MODULE_INFO(import_ns, ns)
#undef EXPORT_SYMBOL_NS_GPL
#ifdef DMABUF_MOCK_HAVE_EXPORT_LICENSE
#define EXPORT_SYMBOL_NS_GPL(sym, ns) __EXPORT_SYMBOL(sym, "GPL", ns)
#else
#define EXPORT_SYMBOL_NS_GPL(sym, ns) __EXPORT_SYMBOL(sym, "_gpl", ns)
#endif
#endif

/*
 * v7.1: dma_buf_move_notify() became dma_buf_invalidate_mappings(), and the
 * importer's &dma_buf_attach_ops.move_notify became .invalidate_mappings.
 * Same call, same locking (the reservation lock held), same importers.
 */
#ifndef DMABUF_MOCK_HAVE_INVALIDATE_MAPPINGS
#define dma_buf_invalidate_mappings(dmabuf) dma_buf_move_notify(dmabuf)
#define invalidate_mappings move_notify
#endif

/*
 * v7.1: dma_buf_attach_revocable(), true for an importer that, once told
 * through .invalidate_mappings, unmaps within bounded time, pinned or not.
 * Older kernels have no such promise. The closest they have: a dynamic
 * importer (one with .move_notify) is told, and must map again before its
 * device touches the memory; a static importer is never told. So there
 * DMABUF_MOCK_REQUIRE_REVOCABLE refuses static importers, and a pinned
 * dynamic importer that ignores .move_notify (as the RDMA core's pinned
 * import does) attaches, but then makes REVOKE time out and is named in
 * its holder field, as an importer that cannot be revoked is on v7.1
 * without the flag. The invalidates counter counts dynamic importers told.
 */
#ifndef DMABUF_MOCK_HAVE_ATTACH_REVOCABLE
static inline bool dma_buf_attach_revocable(struct dma_buf_attachment *attach)
{
	return attach->importer_ops && attach->importer_ops->move_notify;
}
#endif

/* v7.x: publish an fd reserved with get_unused_fd_flags(). */
#ifndef DMABUF_MOCK_HAVE_FD_INSTALL
static inline void dma_buf_fd_install(struct dma_buf *dmabuf, int fd)
{
	fd_install(fd, dmabuf->file);
}
#endif

/*
 * v7.x: a fence may be initialised without a lock and then uses one of its
 * own; older kernels dereference the lock they are given. Give those one
 * lock for all the fences of this module that have none (fences of one
 * module already depend on it staying loaded, through their ops).
 */
#ifndef DMABUF_MOCK_HAVE_FENCE_INLINE_LOCK
static inline void dmabuf_mock_compat_fence_init(struct dma_fence *fence,
						 const struct dma_fence_ops *ops,
						 spinlock_t *lock, u64 context,
						 u64 seqno)
{
	static DEFINE_SPINLOCK(dmabuf_mock_compat_fence_lock);

	dma_fence_init(fence, ops, lock ?: &dmabuf_mock_compat_fence_lock,
		       context, seqno);
}

#define dma_fence_init dmabuf_mock_compat_fence_init
#ifndef dma_fence_lock_irqsave
#define dma_fence_lock_irqsave(fence, flags) \
	spin_lock_irqsave((fence)->lock, flags)
#define dma_fence_unlock_irqrestore(fence, flags) \
	spin_unlock_irqrestore((fence)->lock, flags)
#endif
#endif

/* v6.3: VMA flags change through helpers (vm_flags became read-only). */
#ifndef DMABUF_MOCK_HAVE_VM_FLAGS_SET
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void vm_flags_clear(struct vm_area_struct *vma,
				  vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

/*
 * v7.x (and some stable kernels): typed allocation helpers, GFP_KERNEL
 * unless flags are given; they return a pointer of the object's type.
 */
#define __dmabuf_mock_gfp(a, gfp, ...) gfp
#define dmabuf_mock_gfp(...) __dmabuf_mock_gfp(a, ##__VA_ARGS__, GFP_KERNEL)
#define __dmabuf_mock_alloc(P, alloc)	\
	({				\
		typeof(P) *__p = alloc;	\
		__p;			\
	})
#ifndef kmalloc_obj
#define kmalloc_obj(P, ...) \
	__dmabuf_mock_alloc(P, kmalloc(sizeof(P), dmabuf_mock_gfp(__VA_ARGS__)))
#endif
#ifndef kzalloc_obj
#define kzalloc_obj(P, ...) \
	__dmabuf_mock_alloc(P, kzalloc(sizeof(P), dmabuf_mock_gfp(__VA_ARGS__)))
#endif
#ifndef kmalloc_objs
#define kmalloc_objs(P, COUNT, ...) \
	__dmabuf_mock_alloc(P, kmalloc_array(COUNT, sizeof(P), \
					     dmabuf_mock_gfp(__VA_ARGS__)))
#endif
#ifndef kzalloc_objs
#define kzalloc_objs(P, COUNT, ...) \
	__dmabuf_mock_alloc(P, kcalloc(COUNT, sizeof(P), \
				       dmabuf_mock_gfp(__VA_ARGS__)))
#endif

#endif /* _DMABUF_MOCK_COMPAT_H */
