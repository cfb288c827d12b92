// SPDX-License-Identifier: GPL-2.0
/*
 * dmabuf_mock: a dma-buf exporter that revokes on demand, for tests.
 *
 * No exporter in the tree can both back an RDMA memory region and take it
 * back when asked: vfio-pci needs P2P hardware, the iommufd selftest
 * exporter cannot be mapped. This one exports system-memory pages, maps them
 * for any importer device with the DMA API, and revokes them the way
 * vfio-pci does, so that importers' revoke paths can be tested anywhere.
 *
 * User space drives it through /dev/dmabuf_mock (ABI in dmabuf_mock.h,
 * shared with tools/testing/selftests/drivers/dma-buf/); kernel tests call
 * the exported dmabuf_mock_*() functions, which the ioctls wrap.
 *
 * Locking: the buffer's state (revoked, its pages, the revoke generation)
 * is protected by the dma-buf's reservation lock, which the dma-buf core
 * holds around pin, unpin, map, unmap, vmap and vunmap, and which attach,
 * the user fault handler and the exporter's own access take themselves. The
 * counters are atomics so that REVOKE can wait for them to drop without the
 * lock. The pending pin fence (DMABUF_MOCK_PIN_FENCE) is under fence_lock:
 * the work that signals it cannot take the reservation lock, which the
 * importer waiting for the fence holds.
 */

#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/highmem.h>
#include <linux/iosys-map.h>
#include <kunit/static_stub.h>
#include <kunit/visibility.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "dmabuf_mock.h"

struct dmabuf_mock {
	struct dma_buf *dmabuf;
	struct page **pages;
	pgoff_t npages;
	/* DMABUF_MOCK_VMAP_EAGER: the mapping .vmap hands out */
	void *eager_vaddr;
	u32 flags;
	bool revoked;
	/* Bumped by every REVOKE and RESTORE: a revoke scrubs only if current */
	u64 gen;
	atomic_t attachments;
	atomic_t pins;
	atomic_t maps;
	atomic_t vmaps;
	atomic_t mmaps;
	atomic_t revokes;
	/* Revokes that found the reservation lock taken and waited for it */
	atomic_t revoke_lock_waits;
	atomic_t invalidates;
	atomic64_t cpu_begins;
	atomic64_t cpu_ends;
	/* Woken whenever maps or vmaps drop. */
	wait_queue_head_t wq;
	/* DMABUF_MOCK_PIN_FENCE: the fence the pin_work signals, if pending */
	spinlock_t fence_lock;
	struct dma_fence *pin_fence;
	/* KUnit: the pin_work waits for dmabuf_mock_hold_pin_fence(false) */
	bool pin_fence_held;
	u64 fence_context;
	u64 fence_seqno;
	struct delayed_work pin_work;
};

/* Per attachment: how many mappings it holds, to name it on a timeout. */
struct dmabuf_mock_attachment {
	int maps;
};

static atomic64_t dmabuf_mock_buffers = ATOMIC64_INIT(0);
static atomic64_t dmabuf_mock_pages = ATOMIC64_INIT(0);

/* So that a test can run out of memory whatever the machine has. */
static unsigned long max_pages;
module_param(max_pages, ulong, 0600);
MODULE_PARM_DESC(max_pages,
		 "pages CREATE may hold in all before -ENOMEM (0: the machine's)");

static void dmabuf_mock_free_pages(struct page **pages, pgoff_t npages)
{
	pgoff_t i;

	for (i = 0; i < npages; i++)
		if (pages[i])
			__free_page(pages[i]);
	kvfree(pages);
}

static struct page **dmabuf_mock_alloc_pages(pgoff_t npages)
{
	struct page **pages;
	pgoff_t i;

	pages = kvcalloc(npages, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return NULL;
	for (i = 0; i < npages; i++) {
		pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN |
				      __GFP_RETRY_MAYFAIL);
		if (!pages[i] || fatal_signal_pending(current)) {
			dmabuf_mock_free_pages(pages, npages);
			return NULL;
		}
		cond_resched();
	}
	return pages;
}

/**
 * dmabuf_mock_pause - a point where KUnit can stop the mock
 * @dmabuf: the buffer
 * @attach: the attachment the mock is working on, or NULL
 * @point: where the mock is
 *
 * Does nothing, unless a KUnit test replaced it with a static stub: the
 * stub then runs in the mock's place, in the calling thread, and can start
 * and wait for whatever must happen just there, or act as another exporter
 * would there.
 */
VISIBLE_IF_KUNIT void dmabuf_mock_pause(struct dma_buf *dmabuf,
					struct dma_buf_attachment *attach,
					enum dmabuf_mock_point point)
{
	KUNIT_STATIC_STUB_REDIRECT(dmabuf_mock_pause, dmabuf, attach, point);
}
EXPORT_SYMBOL_IF_KUNIT(dmabuf_mock_pause);

static int dmabuf_mock_attach(struct dma_buf *dmabuf,
			      struct dma_buf_attachment *attach)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	struct dmabuf_mock_attachment *ma;
	int ret = 0;

	/* As vfio-pci: only importers that honour revoke, when asked. */
	if ((mock->flags & DMABUF_MOCK_REQUIRE_REVOCABLE) &&
	    !dma_buf_attach_revocable(attach))
		return -EOPNOTSUPP;

	ma = kzalloc_obj(*ma);
	if (!ma)
		return -ENOMEM;

	dma_resv_lock(dmabuf->resv, NULL);
	if (mock->revoked)
		ret = -ENODEV;
	dma_resv_unlock(dmabuf->resv);
	if (ret) {
		kfree(ma);
		return ret;
	}
	attach->priv = ma;
	atomic_inc(&mock->attachments);
	dmabuf_mock_pause(dmabuf, attach, DMABUF_MOCK_AT_ATTACH);
	return 0;
}

static void dmabuf_mock_detach(struct dma_buf *dmabuf,
			       struct dma_buf_attachment *attach)
{
	struct dmabuf_mock *mock = dmabuf->priv;

	kfree(attach->priv);
	atomic_dec(&mock->attachments);
}

static const char *dmabuf_mock_fence_driver_name(struct dma_fence *fence)
{
	return "dmabuf_mock";
}

static const char *dmabuf_mock_fence_timeline_name(struct dma_fence *fence)
{
	return "pin";
}

/* A fence can outlive the buffer: its lock must not be the mock's. */
struct dmabuf_mock_fence {
	struct dma_fence base;
	spinlock_t lock;	/* the fence's own: dma_fence_init() */
};

static const struct dma_fence_ops dmabuf_mock_fence_ops = {
	.get_driver_name = dmabuf_mock_fence_driver_name,
	.get_timeline_name = dmabuf_mock_fence_timeline_name,
};

/* Signal the pending pin fence, if any. */
static void dmabuf_mock_signal_pin_fence(struct dmabuf_mock *mock)
{
	struct dma_fence *fence;

	spin_lock(&mock->fence_lock);
	fence = mock->pin_fence;
	mock->pin_fence = NULL;
	spin_unlock(&mock->fence_lock);
	if (fence) {
		dma_fence_signal(fence);
		dma_fence_put(fence);
	}
}

/*
 * The "migration" a pin started: no reservation lock (the importer waiting
 * for the fence holds it); the pages cannot change under it, since a
 * revoke waits for the fence before it may scrub them.
 */
static void dmabuf_mock_pin_work(struct work_struct *work)
{
	struct dmabuf_mock *mock = container_of(to_delayed_work(work),
						struct dmabuf_mock, pin_work);
	pgoff_t i;

	for (i = 0; i < mock->npages; i++)
		memset_page(mock->pages[i], 0, DMABUF_MOCK_MIGRATED, PAGE_SIZE);
	dmabuf_mock_signal_pin_fence(mock);
}

/* DMABUF_MOCK_PIN_FENCE: fence the "migration" of the pages, as TTM does. */
static int dmabuf_mock_add_pin_fence(struct dmabuf_mock *mock)
{
	struct dma_resv *resv = mock->dmabuf->resv;
	struct dmabuf_mock_fence *fence;
	int ret;

	if (READ_ONCE(mock->pin_fence))
		return 0;
	ret = dma_resv_reserve_fences(resv, 1);
	if (ret)
		return ret;
	fence = kzalloc_obj(*fence);
	if (!fence)
		return -ENOMEM;
	spin_lock_init(&fence->lock);
	dma_fence_init(&fence->base, &dmabuf_mock_fence_ops, &fence->lock,
		       mock->fence_context, ++mock->fence_seqno);
	dma_resv_add_fence(resv, &fence->base, DMA_RESV_USAGE_KERNEL);
	spin_lock(&mock->fence_lock);
	mock->pin_fence = &fence->base;
	if (!mock->pin_fence_held)
		schedule_delayed_work(&mock->pin_work,
				      msecs_to_jiffies(DMABUF_MOCK_PIN_FENCE_MS));
	spin_unlock(&mock->fence_lock);
	return 0;
}

#if IS_ENABLED(CONFIG_KUNIT)
/**
 * dmabuf_mock_hold_pin_fence - keep the pin fence pending until released
 * @dmabuf: a buffer from dmabuf_mock_create() with DMABUF_MOCK_PIN_FENCE
 * @hold: true: a pin fence added from now on stays unsignalled; false: the
 *	pending one, if any, is signalled now (after the "migration")
 *
 * For KUnit, which must see the fence pending however slowly it runs. A
 * fence still held when the buffer is released is signalled then.
 */
VISIBLE_IF_KUNIT void dmabuf_mock_hold_pin_fence(struct dma_buf *dmabuf,
						 bool hold)
{
	struct dmabuf_mock *mock = dmabuf->priv;

	spin_lock(&mock->fence_lock);
	mock->pin_fence_held = hold;
	if (!hold && mock->pin_fence)
		mod_delayed_work(system_percpu_wq, &mock->pin_work, 0);
	spin_unlock(&mock->fence_lock);
}
EXPORT_SYMBOL_IF_KUNIT(dmabuf_mock_hold_pin_fence);
#endif

#if IS_ENABLED(CONFIG_KUNIT)
/**
 * dmabuf_mock_revoke_lock_waits - how many revokes waited for the lock
 * @dmabuf: the buffer
 *
 * Return: how many revokes of @dmabuf found its reservation lock held by
 * someone else and waited for it, so that KUnit can tell that a revoke it
 * started is blocked there.
 */
VISIBLE_IF_KUNIT unsigned int dmabuf_mock_revoke_lock_waits(struct dma_buf *dmabuf)
{
	struct dmabuf_mock *mock = dmabuf->priv;

	return atomic_read(&mock->revoke_lock_waits);
}
EXPORT_SYMBOL_IF_KUNIT(dmabuf_mock_revoke_lock_waits);
#endif

static int dmabuf_mock_pin(struct dma_buf_attachment *attach)
{
	struct dmabuf_mock *mock = attach->dmabuf->priv;
	int ret;

	dma_resv_assert_held(attach->dmabuf->resv);
	dmabuf_mock_pause(attach->dmabuf, attach, DMABUF_MOCK_AT_PIN);
	/* As the uverbs exporter: no pinned importers. */
	if (mock->flags & DMABUF_MOCK_NO_PIN)
		return -EOPNOTSUPP;
	if (mock->revoked && !(mock->flags & DMABUF_MOCK_LAX_PIN))
		return -ENODEV;
	if (mock->flags & DMABUF_MOCK_PIN_FENCE) {
		ret = dmabuf_mock_add_pin_fence(mock);
		if (ret)
			return ret;
	}
	atomic_inc(&mock->pins);
	return 0;
}

static void dmabuf_mock_unpin(struct dma_buf_attachment *attach)
{
	struct dmabuf_mock *mock = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	dmabuf_mock_pause(attach->dmabuf, attach, DMABUF_MOCK_AT_UNPIN);
	atomic_dec(&mock->pins);
}

static struct sg_table *dmabuf_mock_map(struct dma_buf_attachment *attach,
					enum dma_data_direction dir)
{
	struct dmabuf_mock *mock = attach->dmabuf->priv;
	struct dmabuf_mock_attachment *ma = attach->priv;
	struct sg_table *sgt;
	int ret;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (mock->revoked)
		return ERR_PTR(-ENODEV);

	sgt = kzalloc_obj(*sgt);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table_from_pages(sgt, mock->pages, mock->npages, 0,
					mock->dmabuf->size, GFP_KERNEL);
	if (ret)
		goto err_free;
	ret = dma_map_sgtable(attach->dev, sgt, dir, 0);
	if (ret)
		goto err_table;

	ma->maps++;
	atomic_inc(&mock->maps);
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void dmabuf_mock_unmap(struct dma_buf_attachment *attach,
			      struct sg_table *sgt,
			      enum dma_data_direction dir)
{
	struct dmabuf_mock *mock = attach->dmabuf->priv;
	struct dmabuf_mock_attachment *ma = attach->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
	ma->maps--;
	atomic_dec(&mock->maps);
	wake_up_all(&mock->wq);
}

/* Invalidate every importer's mappings, counting the revocable ones. */
static void dmabuf_mock_invalidate(struct dma_buf *dmabuf)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	struct dma_buf_attachment *attach;

	dma_resv_assert_held(dmabuf->resv);
	list_for_each_entry(attach, &dmabuf->attachments, node)
		if (dma_buf_attach_revocable(attach))
			atomic_inc(&mock->invalidates);
	dma_buf_invalidate_mappings(dmabuf);
}

static int dmabuf_mock_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	void *vaddr;

	dma_resv_assert_held(dmabuf->resv);
	/*
	 * A revoking exporter refuses a vmap while revoked; an importer that
	 * took the revoke for a move (before its pin) learns of it here.
	 */
	if (mock->revoked)
		return -ENODEV;
	if (mock->flags & DMABUF_MOCK_VMAP_INVALIDATE)
		dmabuf_mock_invalidate(dmabuf);

	vaddr = mock->eager_vaddr;
	if (!vaddr)
		vaddr = vmap(mock->pages, mock->npages, VM_MAP, PAGE_KERNEL);
	if (!vaddr)
		return -ENOMEM;
	/* An MMIO exporter hands out __iomem: importers must refuse it. */
	if (mock->flags & DMABUF_MOCK_VMAP_IOMEM)
		iosys_map_set_vaddr_iomem(map, (void __iomem __force *)vaddr);
	else
		iosys_map_set_vaddr(map, vaddr);
	atomic_inc(&mock->vmaps);
	return 0;
}

static void dmabuf_mock_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	void *vaddr = map->is_iomem ? (void __force *)map->vaddr_iomem :
				      map->vaddr;

	dma_resv_assert_held(dmabuf->resv);
	if (vaddr != mock->eager_vaddr)
		vunmap(vaddr);
	atomic_dec(&mock->vmaps);
	wake_up_all(&mock->wq);
}

static vm_fault_t dmabuf_mock_fault(struct vm_fault *vmf)
{
	struct dmabuf_mock *mock = vmf->vma->vm_private_data;
	vm_fault_t ret = VM_FAULT_SIGBUS;

	/* mmap_lock -> resv is the order dma-resv's lockdep priming allows. */
	dma_resv_lock(mock->dmabuf->resv, NULL);
	if (!mock->revoked && vmf->pgoff < mock->npages)
		ret = vmf_insert_pfn(vmf->vma, vmf->address,
				     page_to_pfn(mock->pages[vmf->pgoff]));
	dma_resv_unlock(mock->dmabuf->resv);
	return ret;
}

static void dmabuf_mock_vm_open(struct vm_area_struct *vma)
{
	struct dmabuf_mock *mock = vma->vm_private_data;

	atomic_inc(&mock->mmaps);
}

static void dmabuf_mock_vm_close(struct vm_area_struct *vma)
{
	struct dmabuf_mock *mock = vma->vm_private_data;

	atomic_dec(&mock->mmaps);
}

static const struct vm_operations_struct dmabuf_mock_vm_ops = {
	.open = dmabuf_mock_vm_open,
	.close = dmabuf_mock_vm_close,
	.fault = dmabuf_mock_fault,
};

static int dmabuf_mock_mmap(struct dma_buf *dmabuf, struct vm_area_struct *vma)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	int ret = 0;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	dma_resv_lock(dmabuf->resv, NULL);
	if (mock->revoked)
		ret = -ENODEV;
	dma_resv_unlock(dmabuf->resv);
	if (ret)
		return ret;

	/*
	 * PFN mappings, filled on fault: revoke can zap them, and nothing
	 * (get_user_pages() in particular) can take a page reference that
	 * outlives the revoke.
	 */
	vm_flags_set(vma, VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &dmabuf_mock_vm_ops;
	vma->vm_private_data = mock;
	dmabuf_mock_vm_open(vma);
	return 0;
}

static int dmabuf_mock_begin_cpu_access(struct dma_buf *dmabuf,
					enum dma_data_direction dir)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	int ret;

	ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
	if (ret)
		return ret;
	if (mock->revoked)
		ret = -ENODEV;
	dma_resv_unlock(dmabuf->resv);
	if (!ret)
		atomic64_inc(&mock->cpu_begins);
	return ret;
}

static int dmabuf_mock_end_cpu_access(struct dma_buf *dmabuf,
				      enum dma_data_direction dir)
{
	struct dmabuf_mock *mock = dmabuf->priv;

	if ((mock->flags & DMABUF_MOCK_CPU_END_EINTR) &&
	    fatal_signal_pending(current))
		return -EINTR;
	atomic64_inc(&mock->cpu_ends);
	return 0;
}

static void dmabuf_mock_release(struct dma_buf *dmabuf)
{
	struct dmabuf_mock *mock = dmabuf->priv;

	/* Nobody waits for it any more, but the fence must not dangle. */
	cancel_delayed_work_sync(&mock->pin_work);
	dmabuf_mock_signal_pin_fence(mock);
	atomic64_sub(mock->npages, &dmabuf_mock_pages);
	atomic64_dec(&dmabuf_mock_buffers);
	if (mock->eager_vaddr)
		vunmap(mock->eager_vaddr);
	dmabuf_mock_free_pages(mock->pages, mock->npages);
	kfree(mock);
}

#define DMABUF_MOCK_OPS						\
	.attach = dmabuf_mock_attach,					\
	.detach = dmabuf_mock_detach,					\
	.pin = dmabuf_mock_pin,						\
	.unpin = dmabuf_mock_unpin,					\
	.map_dma_buf = dmabuf_mock_map,					\
	.unmap_dma_buf = dmabuf_mock_unmap,				\
	.mmap = dmabuf_mock_mmap,					\
	.release = dmabuf_mock_release

#define DMABUF_MOCK_VMAP_OPS						\
	.vmap = dmabuf_mock_vmap,					\
	.vunmap = dmabuf_mock_vunmap

#define DMABUF_MOCK_CPU_OPS						\
	.begin_cpu_access = dmabuf_mock_begin_cpu_access,		\
	.end_cpu_access = dmabuf_mock_end_cpu_access

/*
 * Indexed by dmabuf_mock_ops_index(): DMABUF_MOCK_NO_VMAP is an exporter
 * without vmap, as most P2P ones are; DMABUF_MOCK_NO_CPU_ACCESS one
 * without CPU access ops.
 */
static const struct dma_buf_ops dmabuf_mock_ops[4] = {
	[0] = { DMABUF_MOCK_OPS, DMABUF_MOCK_VMAP_OPS, DMABUF_MOCK_CPU_OPS },
	[1] = { DMABUF_MOCK_OPS, DMABUF_MOCK_CPU_OPS },
	[2] = { DMABUF_MOCK_OPS, DMABUF_MOCK_VMAP_OPS },
	[3] = { DMABUF_MOCK_OPS },
};

static unsigned int dmabuf_mock_ops_index(u32 flags)
{
	return (flags & DMABUF_MOCK_NO_VMAP ? 1 : 0) |
	       (flags & DMABUF_MOCK_NO_CPU_ACCESS ? 2 : 0);
}

/**
 * dmabuf_mock_create - export a new buffer of zeroed system-memory pages
 * @length: size in bytes, a non-zero multiple of PAGE_SIZE
 * @flags: enum dmabuf_mock_create_flags
 *
 * Return: the dma-buf, holding one reference for the caller (dma_buf_put()
 * or dma_buf_fd() it), or an ERR_PTR: -EINVAL for bad flags or length,
 * -ENOMEM when the pages cannot be had.
 */
struct dma_buf *dmabuf_mock_create(u64 length, u32 flags)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	const u32 valid = DMABUF_MOCK_NO_PIN | DMABUF_MOCK_REQUIRE_REVOCABLE |
			  DMABUF_MOCK_NO_VMAP | DMABUF_MOCK_VMAP_IOMEM |
			  DMABUF_MOCK_VMAP_EAGER | DMABUF_MOCK_PIN_FENCE |
			  DMABUF_MOCK_LAX_PIN | DMABUF_MOCK_VMAP_INVALIDATE |
			  DMABUF_MOCK_NO_CPU_ACCESS | DMABUF_MOCK_CPU_END_EINTR;
	struct dmabuf_mock *mock;
	struct dma_buf *dmabuf;

	if (flags & ~valid)
		return ERR_PTR(-EINVAL);
	if (!length || !PAGE_ALIGNED(length) || length > DMABUF_MOCK_MAX_SIZE)
		return ERR_PTR(-EINVAL);
	if ((length >> PAGE_SHIFT) > totalram_pages() ||
	    (max_pages && atomic64_read(&dmabuf_mock_pages) +
			  (length >> PAGE_SHIFT) > max_pages))
		return ERR_PTR(-ENOMEM);

	mock = kzalloc_obj(*mock);
	if (!mock)
		return ERR_PTR(-ENOMEM);
	mock->flags = flags;
	mock->npages = length >> PAGE_SHIFT;
	init_waitqueue_head(&mock->wq);
	spin_lock_init(&mock->fence_lock);
	mock->fence_context = dma_fence_context_alloc(1);
	INIT_DELAYED_WORK(&mock->pin_work, dmabuf_mock_pin_work);
	mock->pages = dmabuf_mock_alloc_pages(mock->npages);
	if (!mock->pages) {
		kfree(mock);
		return ERR_PTR(-ENOMEM);
	}
	if (flags & DMABUF_MOCK_VMAP_EAGER) {
		mock->eager_vaddr = vmap(mock->pages, mock->npages, VM_MAP,
					 PAGE_KERNEL);
		if (!mock->eager_vaddr) {
			dmabuf_mock_free_pages(mock->pages, mock->npages);
			kfree(mock);
			return ERR_PTR(-ENOMEM);
		}
	}

	exp_info.ops = &dmabuf_mock_ops[dmabuf_mock_ops_index(flags)];
	exp_info.size = length;
	exp_info.flags = O_RDWR | O_CLOEXEC;
	exp_info.priv = mock;
	dmabuf = dma_buf_export(&exp_info);
	if (IS_ERR(dmabuf)) {
		if (mock->eager_vaddr)
			vunmap(mock->eager_vaddr);
		dmabuf_mock_free_pages(mock->pages, mock->npages);
		kfree(mock);
		return dmabuf;
	}
	mock->dmabuf = dmabuf;
	atomic64_inc(&dmabuf_mock_buffers);
	atomic64_add(mock->npages, &dmabuf_mock_pages);
	return dmabuf;
}
EXPORT_SYMBOL_NS_GPL(dmabuf_mock_create, "DMABUF_MOCK");

static struct dmabuf_mock *to_mock(struct dma_buf *dmabuf)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(dmabuf_mock_ops); i++)
		if (dmabuf->ops == &dmabuf_mock_ops[i])
			return dmabuf->priv;
	return NULL;
}

/* After a completed revoke: make a late access to the old memory visible. */
static void dmabuf_mock_scrub(struct dmabuf_mock *mock, u32 flags)
{
	struct page **fresh;
	void *vaddr = NULL;
	pgoff_t i;

	if (flags & DMABUF_MOCK_REVOKE_POISON) {
		for (i = 0; i < mock->npages; i++)
			memset_page(mock->pages[i], 0, DMABUF_MOCK_POISON,
				    PAGE_SIZE);
		return;
	}
	if (!(flags & DMABUF_MOCK_REVOKE_SWAP))
		return;
	/* Best effort: without memory for new pages, keep the old ones. */
	fresh = dmabuf_mock_alloc_pages(mock->npages);
	if (!fresh)
		return;
	if (mock->eager_vaddr) {
		vaddr = vmap(fresh, mock->npages, VM_MAP, PAGE_KERNEL);
		if (!vaddr) {
			dmabuf_mock_free_pages(fresh, mock->npages);
			return;
		}
		/* No importer has it vmapped: the revoke waited for that. */
		vunmap(mock->eager_vaddr);
		mock->eager_vaddr = vaddr;
	}
	swap(mock->pages, fresh);
	dmabuf_mock_free_pages(fresh, mock->npages);
}

/*
 * Mark the buffer revoked and tell the importers, under the reservation
 * lock. Returns the generation that identifies this revoke. KUnit calls it
 * alone where the lock is already held (in the mock's .pin, under its
 * importer's lock).
 */
VISIBLE_IF_KUNIT u64 dmabuf_mock_revoke_mark_locked(struct dma_buf *dmabuf)
{
	struct dmabuf_mock *mock = dmabuf->priv;

	dma_resv_assert_held(dmabuf->resv);
	mock->revoked = true;
	++mock->gen;
	dmabuf_mock_invalidate(dmabuf);
	return mock->gen;
}
EXPORT_SYMBOL_IF_KUNIT(dmabuf_mock_revoke_mark_locked);

/*
 * The first step of a revoke, under the reservation lock: mark the buffer
 * revoked, tell the importers, wait for fences; then zap user mappings.
 * Returns the generation that identifies this revoke.
 */
VISIBLE_IF_KUNIT u64 dmabuf_mock_revoke_mark(struct dma_buf *dmabuf)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	u64 gen;

	if (!dma_resv_trylock(dmabuf->resv)) {
		atomic_inc(&mock->revoke_lock_waits);
		dma_resv_lock(dmabuf->resv, NULL);
	}
	gen = dmabuf_mock_revoke_mark_locked(dmabuf);
	dma_resv_wait_timeout(dmabuf->resv, DMA_RESV_USAGE_BOOKKEEP, false,
			      MAX_SCHEDULE_TIMEOUT);
	dmabuf_mock_pause(dmabuf, NULL, DMABUF_MOCK_AT_REVOKE_LOCKED);
	dma_resv_unlock(dmabuf->resv);
	atomic_inc(&mock->revokes);

	/* New faults see revoked and fail; drop the PTEs already there. */
	unmap_mapping_range(dmabuf->file->f_mapping, 0, 0, 1);
	return gen;
}
EXPORT_SYMBOL_IF_KUNIT(dmabuf_mock_revoke_mark);

/*
 * The second step: wait until no importer has the memory mapped or
 * vmapped. Killable: the caller may have asked for a wait of 2^32 ms.
 */
VISIBLE_IF_KUNIT int dmabuf_mock_revoke_wait(struct dma_buf *dmabuf,
					     unsigned int timeout_ms,
					     char *holder, size_t holder_len)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	struct dma_buf_attachment *attach;
	const char *who = "vmap";
	long left;

	left = wait_event_killable_timeout(mock->wq,
					   !atomic_read(&mock->maps) &&
					   !atomic_read(&mock->vmaps),
					   msecs_to_jiffies(timeout_ms));
	if (left < 0)
		return -EINTR;
	if (left)
		return 0;

	dma_resv_lock(dmabuf->resv, NULL);
	if (!atomic_read(&mock->maps) && !atomic_read(&mock->vmaps)) {
		dma_resv_unlock(dmabuf->resv);
		return 0;
	}
	list_for_each_entry(attach, &dmabuf->attachments, node) {
		struct dmabuf_mock_attachment *ma = attach->priv;

		if (ma->maps) {
			who = dev_name(attach->dev);
			break;
		}
	}
	if (holder)
		strscpy(holder, who, holder_len);
	dma_resv_unlock(dmabuf->resv);
	pr_warn("dmabuf_mock: revoke timed out after %u ms: %s still maps the buffer\n",
		timeout_ms, who);
	return -ETIMEDOUT;
}
EXPORT_SYMBOL_IF_KUNIT(dmabuf_mock_revoke_wait);

/*
 * The last step, under the reservation lock: scrub the old memory with
 * @flags, but only if the revoke of @gen is still the latest and nothing
 * maps the memory. A RESTORE since may have let an importer map it or a
 * user fault it in again, and a REVOKE since may not have zapped those
 * user mappings yet: that later REVOKE scrubs, once they are gone.
 * Returns whether the revoke was still current.
 */
VISIBLE_IF_KUNIT bool dmabuf_mock_revoke_scrub(struct dma_buf *dmabuf, u64 gen,
					       u32 flags)
{
	struct dmabuf_mock *mock = dmabuf->priv;
	bool current_revoke;

	dma_resv_lock(dmabuf->resv, NULL);
	current_revoke = mock->revoked && mock->gen == gen &&
			 !atomic_read(&mock->maps) && !atomic_read(&mock->vmaps);
	if (current_revoke)
		dmabuf_mock_scrub(mock, flags);
	dma_resv_unlock(dmabuf->resv);
	return current_revoke;
}
EXPORT_SYMBOL_IF_KUNIT(dmabuf_mock_revoke_scrub);

static int __dmabuf_mock_revoke(struct dma_buf *dmabuf, u32 flags,
				unsigned int timeout_ms, char *holder,
				size_t holder_len, u32 *out_flags)
{
	struct dmabuf_mock *mock = to_mock(dmabuf);
	u64 gen;
	int ret;

	if (!mock || (flags & ~(DMABUF_MOCK_REVOKE_POISON |
				DMABUF_MOCK_REVOKE_SWAP)))
		return -EINVAL;
	if ((flags & DMABUF_MOCK_REVOKE_POISON) &&
	    (flags & DMABUF_MOCK_REVOKE_SWAP))
		return -EINVAL;

	gen = dmabuf_mock_revoke_mark(dmabuf);
	ret = dmabuf_mock_revoke_wait(dmabuf, timeout_ms, holder, holder_len);
	if (ret)
		return ret;
	if (!dmabuf_mock_revoke_scrub(dmabuf, gen, flags) && out_flags)
		*out_flags |= DMABUF_MOCK_REVOKE_SUPERSEDED;
	return 0;
}

/**
 * dmabuf_mock_revoke - take the memory back from every importer
 * @dmabuf: a buffer from dmabuf_mock_create()
 * @flags: enum dmabuf_mock_revoke_flags
 * @timeout_ms: how long to wait for importers to unmap and vunmap
 * @holder: on -ETIMEDOUT, filled with the name of an importer still mapped
 * @holder_len: size of @holder
 *
 * The vfio-pci sequence: with the reservation lock held, mark the buffer
 * revoked and call dma_buf_invalidate_mappings(), wait for all fences, then
 * unlock; zap user mappings; wait until no importer has the memory mapped
 * or vmapped. Only then is the memory the exporter's again, and only then
 * does @flags scrub it, unless a RESTORE or another revoke came in between
 * (see DMABUF_MOCK_REVOKE_SUPERSEDED). Must be called without the
 * reservation lock held.
 *
 * Return: 0 when every importer has let go, -ETIMEDOUT when one has not
 * within @timeout_ms (the buffer stays revoked; call again to wait again),
 * -EINTR on a fatal signal during that wait, -EINVAL for bad flags or a
 * buffer that is not the mock's.
 */
int dmabuf_mock_revoke(struct dma_buf *dmabuf, u32 flags,
		       unsigned int timeout_ms, char *holder,
		       size_t holder_len)
{
	return __dmabuf_mock_revoke(dmabuf, flags, timeout_ms, holder,
				    holder_len, NULL);
}
EXPORT_SYMBOL_NS_GPL(dmabuf_mock_revoke, "DMABUF_MOCK");

/**
 * dmabuf_mock_restore - let new importers use a revoked buffer again
 * @dmabuf: a buffer from dmabuf_mock_create()
 *
 * Return: 0, or -EINVAL for a buffer that is not the mock's.
 */
int dmabuf_mock_restore(struct dma_buf *dmabuf)
{
	struct dmabuf_mock *mock = to_mock(dmabuf);

	if (!mock)
		return -EINVAL;
	dma_resv_lock(dmabuf->resv, NULL);
	mock->revoked = false;
	mock->gen++;
	dma_resv_unlock(dmabuf->resv);
	return 0;
}
EXPORT_SYMBOL_NS_GPL(dmabuf_mock_restore, "DMABUF_MOCK");

/**
 * dmabuf_mock_query - state and counters of a buffer
 * @dmabuf: a buffer from dmabuf_mock_create()
 * @q: filled in (all but @q->size, @q->flags and @q->fd)
 *
 * Return: 0, or -EINVAL for a buffer that is not the mock's.
 */
int dmabuf_mock_query(struct dma_buf *dmabuf, struct dmabuf_mock_query *q)
{
	struct dmabuf_mock *mock = to_mock(dmabuf);

	if (!mock)
		return -EINVAL;
	dma_resv_lock(dmabuf->resv, NULL);
	q->state = mock->revoked ? DMABUF_MOCK_STATE_REVOKED : 0;
	dma_resv_unlock(dmabuf->resv);
	q->attachments = atomic_read(&mock->attachments);
	q->pins = atomic_read(&mock->pins);
	q->maps = atomic_read(&mock->maps);
	q->vmaps = atomic_read(&mock->vmaps);
	q->mmaps = atomic_read(&mock->mmaps);
	q->revokes = atomic_read(&mock->revokes);
	q->invalidates = atomic_read(&mock->invalidates);
	q->length = dmabuf->size;
	q->fences = READ_ONCE(mock->pin_fence) ? 1 : 0;
	q->cpu_begins = atomic64_read(&mock->cpu_begins);
	q->cpu_ends = atomic64_read(&mock->cpu_ends);
	return 0;
}
EXPORT_SYMBOL_NS_GPL(dmabuf_mock_query, "DMABUF_MOCK");

/**
 * dmabuf_mock_access - the exporter's own access to the buffer contents
 * @dmabuf: a buffer from dmabuf_mock_create()
 * @offset: byte offset
 * @buf: kernel buffer
 * @length: bytes to copy
 * @write: copy @buf into the buffer rather than out of it
 *
 * Works whether or not the buffer is revoked. Takes the reservation lock,
 * so @buf must not be memory whose access can fault.
 *
 * Return: 0, -EINVAL for a range past the end or a buffer that is not the
 * mock's, -EINTR on a signal.
 */
int dmabuf_mock_access(struct dma_buf *dmabuf, u64 offset, void *buf,
		       u64 length, bool write)
{
	struct dmabuf_mock *mock = to_mock(dmabuf);
	int ret;

	if (!mock || offset > dmabuf->size || length > dmabuf->size - offset)
		return -EINVAL;
	ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
	if (ret)
		return ret;
	while (length) {
		struct page *page = mock->pages[offset >> PAGE_SHIFT];
		size_t n = min_t(u64, length, PAGE_SIZE - offset_in_page(offset));

		if (write)
			memcpy_to_page(page, offset_in_page(offset), buf, n);
		else
			memcpy_from_page(buf, page, offset_in_page(offset), n);
		buf += n;
		offset += n;
		length -= n;
	}
	dma_resv_unlock(dmabuf->resv);
	return 0;
}
EXPORT_SYMBOL_NS_GPL(dmabuf_mock_access, "DMABUF_MOCK");

/**
 * dmabuf_mock_stats - buffers and pages alive in the whole module
 * @s: filled in (all but @s->size and @s->flags)
 */
void dmabuf_mock_stats(struct dmabuf_mock_stats *s)
{
	s->buffers = atomic64_read(&dmabuf_mock_buffers);
	s->pages = atomic64_read(&dmabuf_mock_pages);
}
EXPORT_SYMBOL_NS_GPL(dmabuf_mock_stats, "DMABUF_MOCK");

/* A dma-buf of ours from a user fd: -EBADF, or -EINVAL if not ours. */
static struct dma_buf *dmabuf_mock_get(int fd)
{
	struct dma_buf *dmabuf = dma_buf_get(fd);

	if (IS_ERR(dmabuf))
		return dmabuf;
	if (!to_mock(dmabuf)) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-EINVAL);
	}
	return dmabuf;
}

/*
 * A command on its way through dmabuf_mock_ioctl(), as iommufd's struct
 * iommufd_ucmd: @cmd holds the struct copied in, @user_size what the caller
 * said its struct is.
 */
struct dmabuf_mock_ucmd {
	void __user *ubuffer;
	u32 user_size;
	void *cmd;
};

/* Write a command back, no more of it than the caller passed. */
static int dmabuf_mock_copy_out(struct dmabuf_mock_ucmd *ucmd, size_t ksize)
{
	if (copy_to_user(ucmd->ubuffer, ucmd->cmd,
			 min_t(size_t, ucmd->user_size, ksize)))
		return -EFAULT;
	return 0;
}

static int dmabuf_mock_ioctl_create(struct dmabuf_mock_ucmd *ucmd)
{
	struct dmabuf_mock_create *cmd = ucmd->cmd;
	struct dma_buf *dmabuf;
	int fd, ret;

	if (cmd->__reserved)
		return -EINVAL;
	dmabuf = dmabuf_mock_create(cmd->length, cmd->flags);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		dma_buf_put(dmabuf);
		return fd;
	}
	cmd->fd = fd;
	ret = dmabuf_mock_copy_out(ucmd, sizeof(*cmd));
	if (ret) {
		put_unused_fd(fd);
		dma_buf_put(dmabuf);
		return ret;
	}
	dma_buf_fd_install(dmabuf, fd);
	return 0;
}

static int dmabuf_mock_ioctl_revoke(struct dmabuf_mock_ucmd *ucmd)
{
	struct dmabuf_mock_revoke *cmd = ucmd->cmd;
	struct dma_buf *dmabuf;
	int ret;

	if (cmd->out_flags || cmd->__reserved)
		return -EINVAL;
	dmabuf = dmabuf_mock_get(cmd->fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	memset(cmd->holder, 0, sizeof(cmd->holder));
	ret = __dmabuf_mock_revoke(dmabuf, cmd->flags, cmd->timeout_ms,
				   cmd->holder, sizeof(cmd->holder),
				   &cmd->out_flags);
	dma_buf_put(dmabuf);
	if (ret && ret != -ETIMEDOUT)
		return ret;
	return dmabuf_mock_copy_out(ucmd, sizeof(*cmd)) ?: ret;
}

static int dmabuf_mock_ioctl_restore(struct dmabuf_mock_ucmd *ucmd)
{
	struct dmabuf_mock_restore *cmd = ucmd->cmd;
	struct dma_buf *dmabuf;
	int ret;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;
	dmabuf = dmabuf_mock_get(cmd->fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret = dmabuf_mock_restore(dmabuf);
	dma_buf_put(dmabuf);
	return ret;
}

static int dmabuf_mock_ioctl_query(struct dmabuf_mock_ucmd *ucmd)
{
	struct dmabuf_mock_query *cmd = ucmd->cmd;
	struct dma_buf *dmabuf;
	int ret;

	if (cmd->flags)
		return -EINVAL;
	dmabuf = dmabuf_mock_get(cmd->fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret = dmabuf_mock_query(dmabuf, cmd);
	dma_buf_put(dmabuf);
	if (!ret)
		ret = dmabuf_mock_copy_out(ucmd, sizeof(*cmd));
	return ret;
}

/*
 * User copies fault, and faults take mmap_lock, which nests outside the
 * reservation lock: bounce through a kernel page, copying to and from user
 * memory without the lock.
 */
static int dmabuf_mock_rw(struct dma_buf *dmabuf, struct dmabuf_mock_rw *cmd)
{
	bool write = cmd->flags & DMABUF_MOCK_RW_WRITE;
	void __user *ubuf = u64_to_user_ptr(cmd->uptr);
	u64 offset = cmd->offset, length = cmd->length;
	void *bounce;
	int ret = 0;

	if (offset > dmabuf->size || length > dmabuf->size - offset)
		return -EINVAL;
	bounce = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;
	while (length) {
		size_t n = min_t(u64, length, PAGE_SIZE);

		if (write && copy_from_user(bounce, ubuf, n)) {
			ret = -EFAULT;
			break;
		}
		ret = dmabuf_mock_access(dmabuf, offset, bounce, n, write);
		if (ret)
			break;
		if (!write && copy_to_user(ubuf, bounce, n)) {
			ret = -EFAULT;
			break;
		}
		ubuf += n;
		offset += n;
		length -= n;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		cond_resched();
	}
	kfree(bounce);
	return ret;
}

static int dmabuf_mock_ioctl_rw(struct dmabuf_mock_ucmd *ucmd)
{
	struct dmabuf_mock_rw *cmd = ucmd->cmd;
	struct dma_buf *dmabuf;
	int ret;

	if ((cmd->flags & ~DMABUF_MOCK_RW_WRITE) || cmd->__reserved)
		return -EINVAL;
	dmabuf = dmabuf_mock_get(cmd->fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret = dmabuf_mock_rw(dmabuf, cmd);
	dma_buf_put(dmabuf);
	return ret;
}

static int dmabuf_mock_ioctl_stats(struct dmabuf_mock_ucmd *ucmd)
{
	struct dmabuf_mock_stats *cmd = ucmd->cmd;

	if (cmd->flags)
		return -EINVAL;
	dmabuf_mock_stats(cmd);
	return dmabuf_mock_copy_out(ucmd, sizeof(*cmd));
}

union dmabuf_mock_cmd_buffer {
	struct dmabuf_mock_create create;
	struct dmabuf_mock_revoke revoke;
	struct dmabuf_mock_restore restore;
	struct dmabuf_mock_query query;
	struct dmabuf_mock_rw rw;
	struct dmabuf_mock_stats stats;
};

/*
 * @size: the command's struct as the module knows it; @min_size: the struct
 * as it was when the command was added, up to and including the member
 * DMABUF_MOCK_OP() names last
 */
struct dmabuf_mock_ioctl_op {
	unsigned int size;
	unsigned int min_size;
	unsigned int ioctl_num;
	int (*execute)(struct dmabuf_mock_ucmd *ucmd);
};

#define DMABUF_MOCK_OP(_ioctl, _fn, _struct, _last)                         \
	{                                                                   \
		.size = sizeof(_struct) +                                   \
			BUILD_BUG_ON_ZERO(sizeof(union dmabuf_mock_cmd_buffer) < \
					  sizeof(_struct)),                 \
		.min_size = offsetofend(_struct, _last),                    \
		.ioctl_num = _ioctl,                                        \
		.execute = _fn,                                             \
	}

/* In the order of their numbers, from DMABUF_MOCK_CMD_BASE */
#define DMABUF_MOCK_CMD_BASE _IOC_NR(DMABUF_MOCK_CREATE)
static const struct dmabuf_mock_ioctl_op dmabuf_mock_ioctl_ops[] = {
	DMABUF_MOCK_OP(DMABUF_MOCK_CREATE, dmabuf_mock_ioctl_create,
		       struct dmabuf_mock_create, __reserved),
	DMABUF_MOCK_OP(DMABUF_MOCK_REVOKE, dmabuf_mock_ioctl_revoke,
		       struct dmabuf_mock_revoke, holder),
	DMABUF_MOCK_OP(DMABUF_MOCK_RESTORE, dmabuf_mock_ioctl_restore,
		       struct dmabuf_mock_restore, __reserved),
	DMABUF_MOCK_OP(DMABUF_MOCK_QUERY, dmabuf_mock_ioctl_query,
		       struct dmabuf_mock_query, cpu_ends),
	DMABUF_MOCK_OP(DMABUF_MOCK_RW, dmabuf_mock_ioctl_rw,
		       struct dmabuf_mock_rw, uptr),
	DMABUF_MOCK_OP(DMABUF_MOCK_STATS, dmabuf_mock_ioctl_stats,
		       struct dmabuf_mock_stats, pages),
};

/*
 * Every command starts with its size (dmabuf_mock.h): copy in at least the
 * command's first version, zero what the caller left out and refuse what it
 * passed beyond the module's struct unless zero, then run the command.
 */
static long dmabuf_mock_ioctl(struct file *file, unsigned int cmd,
			      unsigned long arg)
{
	union dmabuf_mock_cmd_buffer buf;
	struct dmabuf_mock_ucmd ucmd = {
		.ubuffer = (void __user *)arg,
		.cmd = &buf,
	};
	const struct dmabuf_mock_ioctl_op *op;
	unsigned int nr = _IOC_NR(cmd);
	int ret;

	if (nr < DMABUF_MOCK_CMD_BASE ||
	    nr - DMABUF_MOCK_CMD_BASE >= ARRAY_SIZE(dmabuf_mock_ioctl_ops))
		return -ENOTTY;
	op = &dmabuf_mock_ioctl_ops[nr - DMABUF_MOCK_CMD_BASE];
	if (op->ioctl_num != cmd)
		return -ENOTTY;
	if (get_user(ucmd.user_size, (const u32 __user *)ucmd.ubuffer))
		return -EFAULT;
	if (ucmd.user_size < op->min_size)
		return -EINVAL;
	ret = copy_struct_from_user(ucmd.cmd, op->size, ucmd.ubuffer,
				    ucmd.user_size);
	if (ret)
		return ret;
	return op->execute(&ucmd);
}

static const struct file_operations dmabuf_mock_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = dmabuf_mock_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice dmabuf_mock_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = DMABUF_MOCK_DEVICE,
	.fops = &dmabuf_mock_fops,
	.mode = 0600,
};

module_misc_device(dmabuf_mock_misc);

MODULE_DESCRIPTION("Revoking dma-buf exporter for tests");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS("DMA_BUF");
