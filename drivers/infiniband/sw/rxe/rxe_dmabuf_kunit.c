// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * KUnit tests for the revoke of rxe's dma-buf MRs: rxe_dmabuf_mr_revoke(),
 * the callback the RDMA core runs with the dma-buf's reservation lock held,
 * on an MR built by hand around a vmapped dmabuf_mock buffer.
 *
 * A copy in progress holds the MR's dmabuf_sem for read, which a test can
 * do itself: the revoke must then wait for it, count it in the device's
 * hw counter dmabuf_revoke_waited, and leave the MR without its address.
 */

#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/iosys-map.h>
#include <linux/jiffies.h>
#include <linux/workqueue.h>

#include "../../../dma-buf/dmabuf_mock.h"
#include "rxe.h"
#include "rxe_loc.h"

struct rxe_dmabuf_kunit {
	struct dma_buf *dmabuf;
	struct rxe_dev *rxe;
	struct rxe_pool pool;
	struct dma_buf_attachment attach;
	struct ib_umem_dmabuf umem;
	struct rxe_mr mr;
	struct work_struct work;
	struct completion done;
};

/* What the core does: the callback, with the reservation lock held. */
static void revoke_work_fn(struct work_struct *work)
{
	struct rxe_dmabuf_kunit *ctx =
		container_of(work, struct rxe_dmabuf_kunit, work);

	dma_resv_lock(ctx->dmabuf->resv, NULL);
	rxe_dmabuf_mr_revoke(&ctx->mr);
	dma_resv_unlock(ctx->dmabuf->resv);
	complete(&ctx->done);
}

static s64 revokes_waited(struct rxe_dmabuf_kunit *ctx)
{
	return atomic64_read(&ctx->rxe->stats_counters[RXE_CNT_DMABUF_REVOKE_WAITED]);
}

static u32 mock_vmaps(struct kunit *test, struct dma_buf *dmabuf)
{
	struct dmabuf_mock_query q = {};

	KUNIT_EXPECT_EQ(test, dmabuf_mock_query(dmabuf, &q), 0);
	return q.vmaps;
}

static int rxe_dmabuf_kunit_init(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx;
	struct rxe_mr *mr;

	ctx = kunit_kzalloc(test, sizeof(*ctx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctx);
	ctx->rxe = kunit_kzalloc(test, sizeof(*ctx->rxe), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctx->rxe);
	ctx->dmabuf = dmabuf_mock_create(PAGE_SIZE, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(ctx->dmabuf));

	/* Only what the callback looks at: the dma-buf, the counter. */
	mr = &ctx->mr;
	ctx->pool.rxe = ctx->rxe;
	mr->elem.pool = &ctx->pool;
	ctx->attach.dmabuf = ctx->dmabuf;
	ctx->umem.attach = &ctx->attach;
	ctx->umem.umem.is_dmabuf = 1;
	mr->umem = &ctx->umem.umem;
	init_rwsem(&mr->dmabuf_sem);
	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(ctx->dmabuf,
						    &mr->dmabuf_map), 0);
	mr->dmabuf_vaddr = mr->dmabuf_map.vaddr;
	mr->state = RXE_MR_STATE_VALID;
	INIT_WORK(&ctx->work, revoke_work_fn);
	init_completion(&ctx->done);
	test->priv = ctx;
	return 0;
}

static void rxe_dmabuf_kunit_exit(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;

	flush_work(&ctx->work);
	if (ctx->mr.dmabuf_vaddr)
		dma_buf_vunmap_unlocked(ctx->dmabuf, &ctx->mr.dmabuf_map);
	dma_buf_put(ctx->dmabuf);
}

/* The MR after its revoke: no address, invalid, nothing vmapped. */
static void expect_revoked(struct kunit *test, struct rxe_dmabuf_kunit *ctx)
{
	KUNIT_EXPECT_NULL(test, ctx->mr.dmabuf_vaddr);
	KUNIT_EXPECT_EQ(test, ctx->mr.state, RXE_MR_STATE_INVALID);
	KUNIT_EXPECT_EQ(test, mock_vmaps(test, ctx->dmabuf), 0);
}

/*
 * A copy in progress: the revoke finds dmabuf_sem held, counts that, and
 * waits. Until the copy is done the MR keeps its address; once it is, the
 * revoke takes the address away and vunmaps.
 */
static void test_revoke_waits_for_copy(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;
	unsigned long end = jiffies + 5 * HZ;

	down_read(&ctx->mr.dmabuf_sem);
	queue_work(system_dfl_wq, &ctx->work);
	while (!revokes_waited(ctx) && time_before(jiffies, end))
		usleep_range(10000, 20000);
	KUNIT_EXPECT_EQ(test, revokes_waited(ctx), 1);
	msleep(100);
	/*
	 * Still waiting for the copy, which still has its address and the
	 * vmap. (Not mock_vmaps(): a copy must not take the reservation lock,
	 * which the revoke holds while it waits for the copy.)
	 */
	KUNIT_EXPECT_FALSE(test, completion_done(&ctx->done));
	KUNIT_EXPECT_NOT_NULL(test, ctx->mr.dmabuf_vaddr);
	KUNIT_EXPECT_TRUE(test, iosys_map_is_set(&ctx->mr.dmabuf_map));
	up_read(&ctx->mr.dmabuf_sem);

	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&ctx->done,
							    5 * HZ));
	expect_revoked(test, ctx);
	KUNIT_EXPECT_EQ(test, revokes_waited(ctx), 1);
}

/* No copy in progress: the revoke does not wait, and counts nothing. */
static void test_revoke_idle(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;

	queue_work(system_dfl_wq, &ctx->work);
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&ctx->done,
							    5 * HZ));
	expect_revoked(test, ctx);
	KUNIT_EXPECT_EQ(test, revokes_waited(ctx), 0);
}

static struct kunit_case rxe_dmabuf_cases[] = {
	KUNIT_CASE(test_revoke_waits_for_copy),
	KUNIT_CASE(test_revoke_idle),
	{}
};

static struct kunit_suite rxe_dmabuf_suite = {
	.name = "rxe_dmabuf",
	.init = rxe_dmabuf_kunit_init,
	.exit = rxe_dmabuf_kunit_exit,
	.test_cases = rxe_dmabuf_cases,
};

kunit_test_suite(rxe_dmabuf_suite);

MODULE_DESCRIPTION("KUnit tests for the revoke of rxe's dma-buf MRs");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("DMA_BUF");
MODULE_IMPORT_NS("DMABUF_MOCK");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
