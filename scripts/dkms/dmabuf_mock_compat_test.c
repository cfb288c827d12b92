// SPDX-License-Identifier: GPL-2.0
/*
 * Not part of the DKMS package: scripts/dkms-check.sh builds this with the
 * package's flags against each kernel's headers, so that every helper of
 * dmabuf_mock_compat.h compiles there, including those the mock does not
 * use yet, and loads it in that kernel's guest, where module init runs the
 * helpers that can run without an importer. Loading fails if one does not
 * do what the v7.3 interface does.
 */
#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>

struct compat_test_obj {
	u64 a;
	u32 b;
};

static const char *compat_test_name(struct dma_fence *fence)
{
	return "dmabuf_mock_compat_test";
}

static const struct dma_fence_ops compat_test_fence_ops = {
	.get_driver_name = compat_test_name,
	.get_timeline_name = compat_test_name,
};

int dmabuf_mock_compat_test_export(void);
int dmabuf_mock_compat_test_export(void)
{
	return 0;
}
EXPORT_SYMBOL_NS_GPL(dmabuf_mock_compat_test_export, "DMABUF_MOCK_COMPAT_TEST");

/* Only compiled: these need an importer, a user fd or a VMA. */
static void __maybe_unused compat_test_build_only(struct dma_buf *dmabuf,
						  struct dma_buf_attachment *attach,
						  struct vm_area_struct *vma,
						  int fd)
{
	if (dma_buf_attach_revocable(attach) &&
	    attach->importer_ops->invalidate_mappings)
		dma_buf_invalidate_mappings(dmabuf);
	dma_buf_fd_install(dmabuf, fd);
	vm_flags_set(vma, VM_DONTEXPAND);
	vm_flags_clear(vma, VM_DONTEXPAND);
}

static int compat_test_allocs(void)
{
	struct compat_test_obj *one, *zero, *many, *zmany;
	int ret = 0;

	one = kmalloc_obj(*one);
	zero = kzalloc_obj(*zero, GFP_KERNEL);
	many = kmalloc_objs(*many, 3);
	zmany = kzalloc_objs(*zmany, 3, GFP_KERNEL);
	if (!one || !zero || !many || !zmany)
		ret = -ENOMEM;
	else if (zero->a || zero->b || zmany[2].a || zmany[2].b ||
		 ksize(many) < 3 * sizeof(*many))
		ret = -EINVAL;
	kfree(zmany);
	kfree(many);
	kfree(zero);
	kfree(one);
	return ret;
}

/* v7.3 lets a fence have no lock of its own: it must still signal. */
static int compat_test_fence(void)
{
	struct dma_fence *fence;
	unsigned long flags;
	int ret = 0;

	fence = kzalloc_obj(*fence);
	if (!fence)
		return -ENOMEM;
	dma_fence_init(fence, &compat_test_fence_ops, NULL,
		       dma_fence_context_alloc(1), 1);
	dma_fence_lock_irqsave(fence, flags);
	dma_fence_unlock_irqrestore(fence, flags);
	if (dma_fence_is_signaled(fence))
		ret = -EINVAL;
	dma_fence_signal(fence);
	if (!dma_fence_is_signaled(fence))
		ret = -EINVAL;
	dma_fence_put(fence);
	return ret;
}

static int __init compat_test_init(void)
{
	int ret;

	ret = compat_test_allocs();
	if (ret) {
		pr_err("dmabuf_mock_compat_test: allocation helpers: %d\n", ret);
		return ret;
	}
	ret = compat_test_fence();
	if (ret) {
		pr_err("dmabuf_mock_compat_test: fence without a lock: %d\n", ret);
		return ret;
	}
	pr_info("dmabuf_mock_compat_test: ok\n");
	return 0;
}

static void __exit compat_test_exit(void)
{
}

module_init(compat_test_init);
module_exit(compat_test_exit);
MODULE_DESCRIPTION("Build and load test of dmabuf_mock_compat.h");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS("DMA_BUF");
