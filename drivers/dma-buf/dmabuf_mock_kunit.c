// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the dmabuf_mock exporter, with fake in-kernel importers:
 * a revocable pinned importer (invalidate_mappings unmaps and unpins, as the
 * RDMA core's revocable umem does), a lazy one that unmaps only when told,
 * a static importer that never lets go, and CPU importers that vmap.
 */

#include <kunit/device.h>
#include <kunit/test.h>
#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/iosys-map.h>
#include <linux/jiffies.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "dmabuf_mock.h"

struct dmabuf_mock_kunit {
	struct device *dev;
	struct dmabuf_mock_stats before;
};

struct fake_importer {
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	bool pinned;
	int invalidated;
};

/* Called with the reservation lock held, at most once per revoke. */
static void fake_invalidate(struct dma_buf_attachment *attach)
{
	struct fake_importer *imp = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	imp->invalidated++;
	if (imp->sgt) {
		dma_buf_unmap_attachment(attach, imp->sgt, DMA_BIDIRECTIONAL);
		imp->sgt = NULL;
	}
	if (imp->pinned) {
		dma_buf_unpin(attach);
		imp->pinned = false;
	}
}

static const struct dma_buf_attach_ops fake_revocable_ops = {
	.allow_peer2peer = true,
	.invalidate_mappings = fake_invalidate,
};

/* Unmaps only when the test calls release_importer(). */
static void fake_lazy_invalidate(struct dma_buf_attachment *attach)
{
	struct fake_importer *imp = attach->importer_priv;

	imp->invalidated++;
}

static const struct dma_buf_attach_ops fake_lazy_ops = {
	.allow_peer2peer = true,
	.invalidate_mappings = fake_lazy_invalidate,
};

static struct dma_buf *create(struct kunit *test, u64 length, u32 flags)
{
	struct dma_buf *dmabuf = dmabuf_mock_create(length, flags);

	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(dmabuf), "no mock buffer: %d",
			       PTR_ERR_OR_ZERO(dmabuf));
	return dmabuf;
}

static struct dmabuf_mock_query query(struct kunit *test,
				      struct dma_buf *dmabuf)
{
	struct dmabuf_mock_query q = {};

	KUNIT_ASSERT_EQ(test, dmabuf_mock_query(dmabuf, &q), 0);
	return q;
}

static int attach_importer(struct kunit *test, struct dma_buf *dmabuf,
			   struct fake_importer *imp, bool map,
			   const struct dma_buf_attach_ops *ops)
{
	struct dmabuf_mock_kunit *ctx = test->priv;
	struct sg_table *sgt;
	int ret;

	imp->attach = dma_buf_dynamic_attach(dmabuf, ctx->dev, ops, imp);
	if (IS_ERR(imp->attach))
		return PTR_ERR(imp->attach);
	if (!map)
		return 0;
	dma_resv_lock(dmabuf->resv, NULL);
	ret = dma_buf_pin(imp->attach);
	if (!ret) {
		imp->pinned = true;
		sgt = dma_buf_map_attachment(imp->attach, DMA_BIDIRECTIONAL);
		if (IS_ERR(sgt)) {
			ret = PTR_ERR(sgt);
			dma_buf_unpin(imp->attach);
			imp->pinned = false;
		} else {
			imp->sgt = sgt;
		}
	}
	dma_resv_unlock(dmabuf->resv);
	return ret;
}

/* Attach as a revocable importer; pin and map when asked. */
static int attach_revocable(struct kunit *test, struct dma_buf *dmabuf,
			    struct fake_importer *imp, bool map)
{
	return attach_importer(test, dmabuf, imp, map, &fake_revocable_ops);
}

static void release_importer(struct fake_importer *imp)
{
	struct dma_buf *dmabuf = imp->attach->dmabuf;

	dma_resv_lock(dmabuf->resv, NULL);
	if (imp->sgt)
		dma_buf_unmap_attachment(imp->attach, imp->sgt,
					 DMA_BIDIRECTIONAL);
	if (imp->pinned)
		dma_buf_unpin(imp->attach);
	imp->sgt = NULL;
	imp->pinned = false;
	dma_resv_unlock(dmabuf->resv);
	dma_buf_detach(dmabuf, imp->attach);
}

static void test_revocable_pinned(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, 4 * PAGE_SIZE, 0);
	struct fake_importer imp = {};
	struct dmabuf_mock_query q;

	KUNIT_ASSERT_EQ(test, attach_revocable(test, dmabuf, &imp, true), 0);
	q = query(test, dmabuf);
	KUNIT_EXPECT_EQ(test, q.attachments, 1);
	KUNIT_EXPECT_EQ(test, q.pins, 1);
	KUNIT_EXPECT_EQ(test, q.maps, 1);

	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 1000, NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, imp.invalidated, 1);
	q = query(test, dmabuf);
	KUNIT_EXPECT_EQ(test, q.state, DMABUF_MOCK_STATE_REVOKED);
	KUNIT_EXPECT_EQ(test, q.pins, 0);
	KUNIT_EXPECT_EQ(test, q.maps, 0);
	KUNIT_EXPECT_EQ(test, q.revokes, 1);
	KUNIT_EXPECT_EQ(test, q.invalidates, 1);

	/* A second revoke calls the importer again; it has nothing left. */
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 1000, NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, imp.invalidated, 2);

	release_importer(&imp);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).attachments, 0);
	dma_buf_put(dmabuf);
}

static void test_require_revocable(struct kunit *test)
{
	struct dmabuf_mock_kunit *ctx = test->priv;
	struct dma_buf *dmabuf = create(test, PAGE_SIZE,
					DMABUF_MOCK_REQUIRE_REVOCABLE);
	struct dma_buf_attachment *attach;
	struct fake_importer imp = {};

	attach = dma_buf_attach(dmabuf, ctx->dev);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(attach), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).attachments, 0);

	KUNIT_ASSERT_EQ(test, attach_revocable(test, dmabuf, &imp, true), 0);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 1000, NULL, 0), 0);
	release_importer(&imp);
	dma_buf_put(dmabuf);
}

static void test_static_importer_times_out(struct kunit *test)
{
	struct dmabuf_mock_kunit *ctx = test->priv;
	struct dma_buf *dmabuf = create(test, 3 * PAGE_SIZE, 0);
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	char holder[32] = "";

	attach = dma_buf_attach(dmabuf, ctx->dev);
	KUNIT_ASSERT_FALSE(test, IS_ERR(attach));
	sgt = dma_buf_map_attachment_unlocked(attach, DMA_TO_DEVICE);
	KUNIT_ASSERT_FALSE(test, IS_ERR(sgt));
	/* A static importer is pinned for as long as it is mapped. */
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).pins, 1);

	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 50, holder,
						 sizeof(holder)), -ETIMEDOUT);
	/* The name, as much of it as fits. */
	KUNIT_EXPECT_EQ(test, strlen(holder),
			min(strlen(dev_name(ctx->dev)), sizeof(holder) - 1));
	KUNIT_EXPECT_EQ(test, strncmp(holder, dev_name(ctx->dev), strlen(holder)),
			0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).invalidates, 0);

	dma_buf_unmap_attachment_unlocked(attach, sgt, DMA_TO_DEVICE);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 50, NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).pins, 0);
	dma_buf_detach(dmabuf, attach);
	dma_buf_put(dmabuf);
}

static void test_attach_after_revoke(struct kunit *test)
{
	struct dmabuf_mock_kunit *ctx = test->priv;
	struct dma_buf *dmabuf = create(test, PAGE_SIZE, 0);
	struct fake_importer early = {}, late = {};
	struct dma_buf_attachment *attach;

	/* Attached before the revoke, mapping only after it: refused. */
	KUNIT_ASSERT_EQ(test, attach_revocable(test, dmabuf, &early, false), 0);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 1000, NULL, 0), 0);
	dma_resv_lock(dmabuf->resv, NULL);
	KUNIT_EXPECT_EQ(test, dma_buf_pin(early.attach), -ENODEV);
	KUNIT_EXPECT_EQ(test,
			PTR_ERR_OR_ZERO(dma_buf_map_attachment(early.attach,
							       DMA_BIDIRECTIONAL)),
			-ENODEV);
	dma_resv_unlock(dmabuf->resv);

	attach = dma_buf_attach(dmabuf, ctx->dev);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(attach), -ENODEV);
	KUNIT_EXPECT_EQ(test, attach_revocable(test, dmabuf, &late, true),
			-ENODEV);

	KUNIT_ASSERT_EQ(test, dmabuf_mock_restore(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).state, 0);
	KUNIT_ASSERT_EQ(test, attach_revocable(test, dmabuf, &late, true), 0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).maps, 1);
	release_importer(&late);
	release_importer(&early);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).attachments, 0);
	dma_buf_put(dmabuf);
}

static void test_vmap(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, 2 * PAGE_SIZE, 0);
	struct iosys_map map;
	char holder[32] = "";
	u8 byte;

	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &map), 0);
	KUNIT_EXPECT_FALSE(test, map.is_iomem);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 1);
	memset(map.vaddr + PAGE_SIZE, 0x5a, 1);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 false), 0);
	KUNIT_EXPECT_EQ(test, byte, 0x5a);

	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 20, holder,
						 sizeof(holder)), -ETIMEDOUT);
	KUNIT_EXPECT_STREQ(test, holder, "vmap");
	dma_buf_vunmap_unlocked(dmabuf, &map);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 20, NULL, 0), 0);
	/* The exporter refuses a vmap of a revoked buffer, quietly. */
	KUNIT_EXPECT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &map), -ENODEV);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 0);
	dma_buf_put(dmabuf);
}

/*
 * dma-buf shares one kernel mapping between its users: while one holds it,
 * dma_buf_vmap() hands it to the next without asking the exporter, so the
 * revoked check in .vmap is bypassed until the last vunmap. This is what
 * an importer that vmaps a revoked buffer without pinning it first gets.
 */
static void test_vmap_cached_after_revoke(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, PAGE_SIZE, 0);
	struct iosys_map first, second;
	u64 gen;
	int ret;

	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &first), 0);
	gen = dmabuf_mock_revoke_mark(dmabuf);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).state,
			DMABUF_MOCK_STATE_REVOKED);

	dma_resv_lock(dmabuf->resv, NULL);
	ret = dma_buf_vmap(dmabuf, &second);
	dma_resv_unlock(dmabuf->resv);
	KUNIT_EXPECT_EQ(test, ret, 0);
	KUNIT_EXPECT_PTR_EQ(test, second.vaddr, first.vaddr);
	/* The exporter was not asked: still one vmap of its own. */
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 1);
	if (!ret)
		dma_buf_vunmap_unlocked(dmabuf, &second);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 1);
	dma_buf_vunmap_unlocked(dmabuf, &first);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 0);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke_wait(dmabuf, 1000, NULL, 0), 0);
	KUNIT_EXPECT_TRUE(test, dmabuf_mock_revoke_scrub(dmabuf, gen, 0));

	/* With no mapping left to share, the exporter is asked and refuses. */
	KUNIT_EXPECT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &second), -ENODEV);
	dma_buf_put(dmabuf);
}

static void test_vmap_flags(struct kunit *test)
{
	struct dma_buf *novmap = create(test, PAGE_SIZE, DMABUF_MOCK_NO_VMAP);
	struct dma_buf *iomem = create(test, PAGE_SIZE, DMABUF_MOCK_VMAP_IOMEM);
	struct iosys_map map;

	KUNIT_EXPECT_EQ(test, dma_buf_vmap_unlocked(novmap, &map), -EINVAL);
	KUNIT_EXPECT_EQ(test, query(test, novmap).vmaps, 0);

	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(iomem, &map), 0);
	KUNIT_EXPECT_TRUE(test, map.is_iomem);
	dma_buf_vunmap_unlocked(iomem, &map);
	KUNIT_EXPECT_EQ(test, query(test, iomem).vmaps, 0);
	dma_buf_put(novmap);
	dma_buf_put(iomem);
}

/* VMAP_EAGER: .vmap hands out the mapping made at creation, and a swap. */
static void test_vmap_eager(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, 2 * PAGE_SIZE,
					DMABUF_MOCK_VMAP_EAGER);
	struct iosys_map map, again;
	u8 byte;

	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &map), 0);
	dma_buf_vunmap_unlocked(dmabuf, &map);
	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &again), 0);
	KUNIT_EXPECT_PTR_EQ(test, again.vaddr, map.vaddr);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 1);
	dma_buf_vunmap_unlocked(dmabuf, &again);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 0);

	/* A swapping revoke maps the new pages: writes reach them. */
	KUNIT_ASSERT_EQ(test, dmabuf_mock_revoke(dmabuf, DMABUF_MOCK_REVOKE_SWAP,
						 20, NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_restore(dmabuf), 0);
	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &map), 0);
	memset(map.vaddr + PAGE_SIZE, 0xa5, 1);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 false), 0);
	KUNIT_EXPECT_EQ(test, byte, 0xa5);
	dma_buf_vunmap_unlocked(dmabuf, &map);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 0);
	dma_buf_put(dmabuf);
}

static void test_no_pin(struct kunit *test)
{
	struct dmabuf_mock_kunit *ctx = test->priv;
	struct dma_buf *dmabuf = create(test, PAGE_SIZE, DMABUF_MOCK_NO_PIN);
	struct dma_buf_attachment *attach;
	struct fake_importer imp = {};
	struct dmabuf_mock_query q;

	KUNIT_EXPECT_EQ(test, attach_revocable(test, dmabuf, &imp, true),
			-EOPNOTSUPP);
	/* A static importer pins on map: the map fails and undoes itself. */
	attach = dma_buf_attach(dmabuf, ctx->dev);
	KUNIT_ASSERT_FALSE(test, IS_ERR(attach));
	KUNIT_EXPECT_EQ(test,
			PTR_ERR_OR_ZERO(dma_buf_map_attachment_unlocked(attach,
									DMA_TO_DEVICE)),
			-EOPNOTSUPP);
	q = query(test, dmabuf);
	KUNIT_EXPECT_EQ(test, q.pins, 0);
	KUNIT_EXPECT_EQ(test, q.maps, 0);
	KUNIT_EXPECT_EQ(test, q.attachments, 2);
	dma_buf_detach(dmabuf, attach);
	release_importer(&imp);
	dma_buf_put(dmabuf);
}

static void test_scrub(struct kunit *test)
{
	struct dma_buf *poison = create(test, 2 * PAGE_SIZE, 0);
	struct dma_buf *swapped = create(test, 2 * PAGE_SIZE, 0);
	struct fake_importer imp = {};
	u8 *buf;
	size_t i;

	buf = kunit_kzalloc(test, 2 * PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	memset(buf, 0x11, 2 * PAGE_SIZE);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(poison, 0, buf, 2 * PAGE_SIZE,
						 true), 0);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(swapped, 0, buf,
						 2 * PAGE_SIZE, true), 0);

	KUNIT_ASSERT_EQ(test, attach_revocable(test, poison, &imp, true), 0);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(poison, DMABUF_MOCK_REVOKE_POISON,
						 1000, NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(poison, 0, buf,
						 2 * PAGE_SIZE, false), 0);
	for (i = 0; i < 2 * PAGE_SIZE; i++)
		if (buf[i] != DMABUF_MOCK_POISON)
			break;
	KUNIT_EXPECT_EQ(test, i, 2 * PAGE_SIZE);
	release_importer(&imp);

	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(swapped, DMABUF_MOCK_REVOKE_SWAP,
						 1000, NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(swapped, 0, buf,
						 2 * PAGE_SIZE, false), 0);
	for (i = 0; i < 2 * PAGE_SIZE; i++)
		if (buf[i])
			break;
	KUNIT_EXPECT_EQ(test, i, 2 * PAGE_SIZE);

	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(swapped, DMABUF_MOCK_REVOKE_SWAP |
						 DMABUF_MOCK_REVOKE_POISON,
						 1000, NULL, 0), -EINVAL);
	dma_buf_put(poison);
	dma_buf_put(swapped);
}

/*
 * A revoke waits for the importers with the reservation lock dropped, and
 * a RESTORE, new mappings and another revoke can come in that time: the
 * first revoke must not scrub memory that is mapped again, nor memory the
 * second revoke has not finished taking back (its user mappings are zapped
 * only after it unlocks). Only the latest revoke scrubs. The steps of two
 * revokes are interleaved by hand to stand in that window.
 */
static void test_scrub_superseded(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, 2 * PAGE_SIZE, 0);
	struct fake_importer lazy = {};
	u64 gen_a, gen_b;
	u8 byte = 0x11;

	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 true), 0);
	gen_a = dmabuf_mock_revoke_mark(dmabuf);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_revoke_wait(dmabuf, 1000, NULL, 0), 0);

	/* Before revoke A scrubs: RESTORE, a new mapping, revoke B. */
	KUNIT_ASSERT_EQ(test, dmabuf_mock_restore(dmabuf), 0);
	KUNIT_ASSERT_EQ(test, attach_importer(test, dmabuf, &lazy, true,
					      &fake_lazy_ops), 0);
	gen_b = dmabuf_mock_revoke_mark(dmabuf);
	KUNIT_EXPECT_EQ(test, lazy.invalidated, 1);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).maps, 1);

	/* A is no longer the latest: the mapped pages stay. */
	KUNIT_EXPECT_FALSE(test, dmabuf_mock_revoke_scrub(dmabuf, gen_a,
							  DMABUF_MOCK_REVOKE_SWAP));
	byte = 0;
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 false), 0);
	KUNIT_EXPECT_EQ(test, byte, 0x11);

	/* B scrubs once the importer has let go. */
	release_importer(&lazy);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke_wait(dmabuf, 1000, NULL, 0), 0);
	KUNIT_EXPECT_TRUE(test, dmabuf_mock_revoke_scrub(dmabuf, gen_b,
							 DMABUF_MOCK_REVOKE_SWAP));
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 false), 0);
	KUNIT_EXPECT_EQ(test, byte, 0);
	dma_buf_put(dmabuf);
}

/*
 * A revoke that waits for an importer that never lets go ends on a fatal
 * signal: what SIGKILL does to each thread of a process is to make SIGKILL
 * pending for it, which is done here by hand for the test's own thread (a
 * kernel thread ignores signals sent to it).
 */
static void test_revoke_killable(struct kunit *test)
{
	struct dmabuf_mock_kunit *ctx = test->priv;
	struct dma_buf *dmabuf = create(test, PAGE_SIZE, 0);
	struct dma_buf_attachment *attach;
	struct sighand_struct *sighand;
	struct sg_table *sgt;
	unsigned long start;
	int ret;

	attach = dma_buf_attach(dmabuf, ctx->dev);
	KUNIT_ASSERT_FALSE(test, IS_ERR(attach));
	sgt = dma_buf_map_attachment_unlocked(attach, DMA_TO_DEVICE);
	KUNIT_ASSERT_FALSE(test, IS_ERR(sgt));

	/* Only an exec replaces a task's sighand, and this one runs none. */
	sighand = rcu_dereference_raw(current->sighand);
	spin_lock_irq(&sighand->siglock);
	sigaddset(&current->pending.signal, SIGKILL);
	set_tsk_thread_flag(current, TIF_SIGPENDING);
	spin_unlock_irq(&sighand->siglock);
	start = jiffies;
	ret = dmabuf_mock_revoke(dmabuf, 0, 10000, NULL, 0);
	flush_signals(current);
	KUNIT_EXPECT_EQ(test, ret, -EINTR);
	/* Not after the 10 s it was allowed to wait. */
	KUNIT_EXPECT_LT(test, jiffies_to_msecs(jiffies - start), 5000);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).state,
			DMABUF_MOCK_STATE_REVOKED);

	dma_buf_unmap_attachment_unlocked(attach, sgt, DMA_TO_DEVICE);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 1000, NULL, 0), 0);
	dma_buf_detach(dmabuf, attach);
	dma_buf_put(dmabuf);
}

/* PIN_FENCE: a pin fences a "migration" that writes the pattern. */
static void test_pin_fence(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, 2 * PAGE_SIZE,
					DMABUF_MOCK_PIN_FENCE);
	struct fake_importer imp = {};
	long left;
	u8 byte;

	/* Pending until the test says so, however slow the machine. */
	dmabuf_mock_hold_pin_fence(dmabuf, true);
	KUNIT_ASSERT_EQ(test, attach_revocable(test, dmabuf, &imp, true), 0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).fences, 1);
	KUNIT_EXPECT_FALSE(test, dma_resv_test_signaled(dmabuf->resv,
							DMA_RESV_USAGE_KERNEL));
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 false), 0);
	KUNIT_EXPECT_EQ(test, byte, 0);

	dmabuf_mock_hold_pin_fence(dmabuf, false);
	left = dma_resv_wait_timeout(dmabuf->resv, DMA_RESV_USAGE_KERNEL, false,
				     msecs_to_jiffies(20 * DMABUF_MOCK_PIN_FENCE_MS));
	KUNIT_EXPECT_GT(test, left, 0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).fences, 0);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 false), 0);
	KUNIT_EXPECT_EQ(test, byte, DMABUF_MOCK_MIGRATED);
	release_importer(&imp);
	dma_buf_put(dmabuf);
}

/* Released with its fence pending: the fence is signalled, nothing leaks. */
static void test_pin_fence_release(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, PAGE_SIZE, DMABUF_MOCK_PIN_FENCE);
	struct fake_importer imp = {};
	struct dma_fence *fence;

	KUNIT_ASSERT_EQ(test, attach_revocable(test, dmabuf, &imp, true), 0);
	KUNIT_ASSERT_EQ(test, dma_resv_get_singleton(dmabuf->resv,
						     DMA_RESV_USAGE_KERNEL,
						     &fence), 0);
	KUNIT_ASSERT_NOT_NULL(test, fence);
	release_importer(&imp);
	dma_buf_put(dmabuf);
	flush_delayed_fput();
	KUNIT_EXPECT_TRUE(test, dma_fence_is_signaled(fence));
	dma_fence_put(fence);
}

/* begin/end_cpu_access are counted; a revoked buffer refuses CPU access. */
static void test_cpu_access(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, PAGE_SIZE, 0);
	struct dmabuf_mock_query q;

	KUNIT_EXPECT_EQ(test, dma_buf_begin_cpu_access(dmabuf, DMA_FROM_DEVICE),
			0);
	KUNIT_EXPECT_EQ(test, dma_buf_end_cpu_access(dmabuf, DMA_FROM_DEVICE),
			0);
	q = query(test, dmabuf);
	KUNIT_EXPECT_EQ(test, q.cpu_begins, 1);
	KUNIT_EXPECT_EQ(test, q.cpu_ends, 1);

	KUNIT_ASSERT_EQ(test, dmabuf_mock_revoke(dmabuf, 0, 1000, NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, dma_buf_begin_cpu_access(dmabuf, DMA_TO_DEVICE),
			-ENODEV);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).cpu_begins, 1);
	dma_buf_put(dmabuf);
}

/*
 * NO_CPU_ACCESS: no CPU access ops, so dma-buf's begin and end do not
 * reach the mock; with NO_VMAP as well, still the mock's buffer.
 */
static void test_no_cpu_access(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, PAGE_SIZE,
					DMABUF_MOCK_NO_CPU_ACCESS);
	struct dma_buf *both = create(test, PAGE_SIZE,
				      DMABUF_MOCK_NO_CPU_ACCESS |
				      DMABUF_MOCK_NO_VMAP);
	struct dmabuf_mock_query q;
	struct iosys_map map;

	KUNIT_EXPECT_NULL(test, dmabuf->ops->begin_cpu_access);
	KUNIT_EXPECT_NULL(test, dmabuf->ops->end_cpu_access);
	KUNIT_EXPECT_EQ(test, dma_buf_begin_cpu_access(dmabuf, DMA_FROM_DEVICE),
			0);
	KUNIT_EXPECT_EQ(test, dma_buf_end_cpu_access(dmabuf, DMA_FROM_DEVICE),
			0);
	q = query(test, dmabuf);
	KUNIT_EXPECT_EQ(test, q.cpu_begins, 0);
	KUNIT_EXPECT_EQ(test, q.cpu_ends, 0);
	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &map), 0);
	dma_buf_vunmap_unlocked(dmabuf, &map);

	KUNIT_EXPECT_NULL(test, both->ops->begin_cpu_access);
	KUNIT_EXPECT_EQ(test, dma_buf_vmap_unlocked(both, &map), -EINVAL);
	KUNIT_EXPECT_EQ(test, query(test, both).vmaps, 0);
	dma_buf_put(dmabuf);
	dma_buf_put(both);
}

/* CPU_END_EINTR: end fails with -EINTR only while a fatal signal is pending. */
static void test_cpu_end_eintr(struct kunit *test)
{
	struct dma_buf *dmabuf = create(test, PAGE_SIZE,
					DMABUF_MOCK_CPU_END_EINTR);

	KUNIT_ASSERT_EQ(test, dma_buf_begin_cpu_access(dmabuf, DMA_TO_DEVICE),
			0);
	allow_signal(SIGKILL);
	send_sig(SIGKILL, current, 1);
	KUNIT_EXPECT_EQ(test, dma_buf_end_cpu_access(dmabuf, DMA_TO_DEVICE),
			-EINTR);
	flush_signals(current);
	disallow_signal(SIGKILL);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).cpu_ends, 0);
	KUNIT_EXPECT_EQ(test, dma_buf_end_cpu_access(dmabuf, DMA_TO_DEVICE),
			0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).cpu_ends, 1);
	dma_buf_put(dmabuf);
}

static void test_bad_input(struct kunit *test)
{
	u8 byte;
	struct dma_buf *dmabuf = create(test, PAGE_SIZE, 0);

	KUNIT_EXPECT_EQ(test, PTR_ERR(dmabuf_mock_create(0, 0)), -EINVAL);
	KUNIT_EXPECT_EQ(test, PTR_ERR(dmabuf_mock_create(PAGE_SIZE + 1, 0)),
			-EINVAL);
	KUNIT_EXPECT_EQ(test,
			PTR_ERR(dmabuf_mock_create(DMABUF_MOCK_MAX_SIZE + PAGE_SIZE, 0)),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, PTR_ERR(dmabuf_mock_create(PAGE_SIZE, 1U << 31)),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_revoke(dmabuf, 1U << 31, 0, NULL, 0),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 false), -EINVAL);
	KUNIT_EXPECT_EQ(test, dmabuf_mock_access(dmabuf, 1, &byte,
						 U64_MAX, false), -EINVAL);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).revokes, 0);
	dma_buf_put(dmabuf);
}

static int dmabuf_mock_kunit_init(struct kunit *test)
{
	struct dmabuf_mock_kunit *ctx;

	ctx = kunit_kzalloc(test, sizeof(*ctx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctx);
	ctx->dev = kunit_device_register(test, "dmabuf_mock_kunit");
	KUNIT_ASSERT_FALSE(test, IS_ERR(ctx->dev));
	/* A device the DMA API can map for (dma-direct on a test machine). */
	ctx->dev->dma_mask = &ctx->dev->coherent_dma_mask;
	KUNIT_ASSERT_EQ(test, dma_set_mask_and_coherent(ctx->dev,
							DMA_BIT_MASK(64)), 0);
	dmabuf_mock_stats(&ctx->before);
	test->priv = ctx;
	return 0;
}

static void dmabuf_mock_kunit_exit(struct kunit *test)
{
	struct dmabuf_mock_kunit *ctx = test->priv;
	struct dmabuf_mock_stats after;

	/* dma_buf_put() from a kthread defers the final fput. */
	flush_delayed_fput();
	dmabuf_mock_stats(&after);
	KUNIT_EXPECT_EQ_MSG(test, after.buffers, ctx->before.buffers,
			    "buffers leaked");
	KUNIT_EXPECT_EQ_MSG(test, after.pages, ctx->before.pages,
			    "pages leaked");
}

static struct kunit_case dmabuf_mock_cases[] = {
	KUNIT_CASE(test_revocable_pinned),
	KUNIT_CASE(test_require_revocable),
	KUNIT_CASE(test_static_importer_times_out),
	KUNIT_CASE(test_attach_after_revoke),
	KUNIT_CASE(test_vmap),
	KUNIT_CASE(test_vmap_cached_after_revoke),
	KUNIT_CASE(test_vmap_flags),
	KUNIT_CASE(test_vmap_eager),
	KUNIT_CASE(test_no_pin),
	KUNIT_CASE(test_scrub),
	KUNIT_CASE(test_scrub_superseded),
	KUNIT_CASE(test_revoke_killable),
	KUNIT_CASE(test_pin_fence),
	KUNIT_CASE(test_pin_fence_release),
	KUNIT_CASE(test_cpu_access),
	KUNIT_CASE(test_no_cpu_access),
	KUNIT_CASE(test_cpu_end_eintr),
	KUNIT_CASE(test_bad_input),
	{}
};

static struct kunit_suite dmabuf_mock_suite = {
	.name = "dmabuf_mock",
	.init = dmabuf_mock_kunit_init,
	.exit = dmabuf_mock_kunit_exit,
	.test_cases = dmabuf_mock_cases,
};

kunit_test_suite(dmabuf_mock_suite);

MODULE_IMPORT_NS("DMA_BUF");
MODULE_IMPORT_NS("DMABUF_MOCK");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
