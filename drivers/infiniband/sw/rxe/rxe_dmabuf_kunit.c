// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * KUnit tests for the revoke of rxe's dma-buf MRs: rxe_dmabuf_mr_revoke(),
 * the callback the RDMA core runs with the dma-buf's reservation lock held,
 * on an MR built by hand around a vmapped dmabuf_mock buffer.
 *
 * Copies go through rxe_dmabuf_mr_copy(), the data path's own way to the
 * memory. A copy in progress holds the MR's dmabuf_sem for read, which a
 * test can do itself to hold the revoke: the revoke must then wait for it
 * (the test sees it queued on dmabuf_sem), and leave the MR without its
 * address, so that no copy reaches the memory after it.
 */

#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/fdtable.h>
#include <linux/iosys-map.h>
#include <linux/jiffies.h>
#include <linux/sched/signal.h>
#include <linux/workqueue.h>

#include "../../../dma-buf/dmabuf_mock.h"
#include "rxe.h"
#include "rxe_loc.h"

#define MR_IOVA 0x10000

struct rxe_dmabuf_kunit {
	struct dma_buf *dmabuf;
	struct rxe_dev *rxe;
	struct rxe_pool pool;
	struct dma_buf_attachment attach;
	struct ib_umem_dmabuf umem;
	struct rxe_mr mr;
	struct work_struct work;
	struct completion done;
	/* A copy into the MR from a work item of its own */
	struct work_struct copy_work;
	struct completion copied;
	int copy_err;
};

static const u8 pattern[16] = "0123456789abcdef";
static const u8 zeroes[sizeof(pattern)];

static void copy_work_fn(struct work_struct *work)
{
	struct rxe_dmabuf_kunit *ctx =
		container_of(work, struct rxe_dmabuf_kunit, copy_work);
	u8 buf[sizeof(pattern)];

	memcpy(buf, pattern, sizeof(buf));
	ctx->copy_err = rxe_dmabuf_mr_copy(&ctx->mr, MR_IOVA, buf, sizeof(buf),
					   RXE_TO_MR_OBJ);
	complete(&ctx->copied);
}

/*
 * The buffer's first bytes through a vmap of the test's own (the MR's may
 * be gone): takes the reservation lock, never with a revoke waiting.
 */
static void expect_buffer(struct kunit *test, struct rxe_dmabuf_kunit *ctx,
			  const u8 *want)
{
	struct iosys_map map;

	KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(ctx->dmabuf, &map), 0);
	KUNIT_EXPECT_MEMEQ(test, map.vaddr, want, sizeof(pattern));
	dma_buf_vunmap_unlocked(ctx->dmabuf, &map);
}

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

KUNIT_DEFINE_ACTION_WRAPPER(dealloc_ibdev, ib_dealloc_device,
			    struct ib_device *);
KUNIT_DEFINE_ACTION_WRAPPER(put_dmabuf, dma_buf_put, struct dma_buf *);

/* The revoke waits for dmabuf_sem, which the test holds for read */
static bool revoke_waits(struct rxe_dmabuf_kunit *ctx)
{
	return rwsem_is_contended(&ctx->mr.dmabuf_sem);
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
	mr->ibmr.iova = MR_IOVA;
	mr->ibmr.length = PAGE_SIZE;
	mr->state = RXE_MR_STATE_VALID;
	INIT_WORK(&ctx->work, revoke_work_fn);
	init_completion(&ctx->done);
	INIT_WORK(&ctx->copy_work, copy_work_fn);
	init_completion(&ctx->copied);
	test->priv = ctx;
	return 0;
}

static void rxe_dmabuf_kunit_exit(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;

	flush_work(&ctx->work);
	flush_work(&ctx->copy_work);
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
 * A copy in progress: the revoke finds dmabuf_sem held and waits. Until
 * the copy is done the MR keeps its address; once it is, the revoke takes
 * the address away and vunmaps.
 */
static void test_revoke_waits_for_copy(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;
	unsigned long end = jiffies + 5 * HZ;

	down_read(&ctx->mr.dmabuf_sem);
	queue_work(system_dfl_wq, &ctx->work);
	while (!revoke_waits(ctx) && time_before(jiffies, end))
		usleep_range(10000, 20000);
	KUNIT_ASSERT_TRUE(test, revoke_waits(ctx));
	/*
	 * Queued behind the copy's read hold, the revoke cannot finish until
	 * it is dropped; the copy still has its address and the vmap. (Not
	 * mock_vmaps(): a copy must not take the reservation lock, which the
	 * revoke holds while it waits for the copy.)
	 */
	KUNIT_EXPECT_FALSE(test, completion_done(&ctx->done));
	KUNIT_EXPECT_NOT_NULL(test, ctx->mr.dmabuf_vaddr);
	KUNIT_EXPECT_TRUE(test, iosys_map_is_set(&ctx->mr.dmabuf_map));
	/*
	 * A copy that arrives while the revoke waits. A writer waiting on an
	 * rwsem does not keep new readers out until it asks for a handoff,
	 * so the copy may take dmabuf_sem before the revoke does, and then
	 * reaches the memory, which the MR still has; or it runs after the
	 * revoke, and then fails as any copy after a revoke does. Which one
	 * it was depends on the scheduler, and is only reported: either way
	 * the buffer holds what the copy's outcome says, and nothing reaches
	 * it after the revoke.
	 */
	queue_work(system_dfl_wq, &ctx->copy_work);
	up_read(&ctx->mr.dmabuf_sem);

	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&ctx->done,
							    5 * HZ));
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&ctx->copied,
							    5 * HZ));
	expect_revoked(test, ctx);
	if (!ctx->copy_err) {
		kunit_info(test, "the copy took dmabuf_sem before the revoke\n");
		expect_buffer(test, ctx, pattern);
		return;
	}
	kunit_info(test, "the copy ran after the revoke\n");
	/*
	 * The errno of a failed lkey lookup in copy_data(): the work request
	 * completes as if the revoke had come before its lookup.
	 */
	KUNIT_EXPECT_EQ(test, ctx->copy_err, -EINVAL);
	expect_buffer(test, ctx, zeroes);
}

/* No copy in progress: the revoke does not wait for one. */
static void test_revoke_idle(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;

	queue_work(system_dfl_wq, &ctx->work);
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&ctx->done,
							    5 * HZ));
	expect_revoked(test, ctx);
}

/* Before the revoke the data path's copies reach the memory, both ways. */
static void test_copy(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;
	u8 buf[sizeof(pattern)] = {};

	queue_work(system_dfl_wq, &ctx->copy_work);
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&ctx->copied,
							    5 * HZ));
	KUNIT_EXPECT_EQ(test, ctx->copy_err, 0);
	KUNIT_EXPECT_EQ(test, rxe_dmabuf_mr_copy(&ctx->mr, MR_IOVA, buf,
						 sizeof(buf),
						 RXE_FROM_MR_OBJ), 0);
	KUNIT_EXPECT_MEMEQ(test, buf, pattern, sizeof(buf));
	expect_buffer(test, ctx, pattern);
}

/* After the revoke no copy reaches the memory, either way. */
static void test_copy_after_revoke(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;
	u8 buf[sizeof(pattern)];

	KUNIT_ASSERT_EQ(test, rxe_dmabuf_mr_copy(&ctx->mr, MR_IOVA,
						 (void *)pattern,
						 sizeof(pattern),
						 RXE_TO_MR_OBJ), 0);
	queue_work(system_dfl_wq, &ctx->work);
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&ctx->done,
							    5 * HZ));
	expect_revoked(test, ctx);

	memset(buf, 0x5a, sizeof(buf));
	KUNIT_EXPECT_EQ(test, rxe_dmabuf_mr_copy(&ctx->mr, MR_IOVA, buf,
						 sizeof(buf), RXE_FROM_MR_OBJ),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, buf[0], 0x5a);
	KUNIT_EXPECT_EQ(test, rxe_dmabuf_mr_copy(&ctx->mr, MR_IOVA, buf,
						 sizeof(buf), RXE_TO_MR_OBJ),
			-EINVAL);
	expect_buffer(test, ctx, pattern);
}

/*
 * A user MR of @dmabuf, registered by rxe_dmabuf_mr_init_user() as
 * rxe_reg_user_mr_dmabuf() does: its result, the MR in @mrp.
 */
static int reg_mr(struct kunit *test, struct rxe_dmabuf_kunit *ctx,
		  struct dma_buf *dmabuf, struct rxe_mr **mrp)
{
	struct rxe_dev *rxe;
	struct rxe_mr *mr;
	int fd, err;

	rxe = ib_alloc_device(rxe_dev, ib_dev);
	KUNIT_ASSERT_NOT_NULL(test, rxe);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, dealloc_ibdev,
							&rxe->ib_dev), 0);
	KUNIT_ASSERT_EQ(test, dev_set_name(&rxe->ib_dev.dev, "rxe_kunit"), 0);
	mr = kunit_kzalloc(test, sizeof(*mr), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, mr);
	mr->elem.pool = &ctx->pool;
	mr->ibmr.device = &rxe->ib_dev;

	get_dma_buf(dmabuf);
	fd = dma_buf_fd(dmabuf, O_CLOEXEC);
	if (fd < 0)
		dma_buf_put(dmabuf);
	KUNIT_ASSERT_GE(test, fd, 0);
	err = rxe_dmabuf_mr_init_user(rxe, 0, PAGE_SIZE, MR_IOVA, fd,
				      IB_ACCESS_LOCAL_WRITE, mr);
	close_fd(fd);
	*mrp = mr;
	return err;
}

/*
 * Deregistration of an MR that a task still holds a reference to, as when
 * rxe_cleanup() gives up waiting for one: nothing is kept. The import is
 * revoked, unmapped, unpinned and detached, the CPU access is ended, and
 * a copy by the holder afterwards is refused.
 */
static void test_release_while_referenced(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;
	struct dmabuf_mock_query q = {};
	u8 buf[sizeof(pattern)] = {};
	struct rxe_mr *mr;

	KUNIT_ASSERT_EQ(test, reg_mr(test, ctx, ctx->dmabuf, &mr), 0);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_query(ctx->dmabuf, &q), 0);
	KUNIT_EXPECT_EQ(test, q.attachments, 1);
	KUNIT_EXPECT_EQ(test, q.pins, 1);
	/* The fixture's own vmap, and the MR's: one of the exporter's */
	KUNIT_EXPECT_EQ(test, ctx->dmabuf->vmapping_counter, 2);

	kref_init(&mr->elem.ref_cnt);
	rxe_dmabuf_mr_release(mr);
	KUNIT_EXPECT_NULL(test, mr->umem);
	KUNIT_EXPECT_NULL(test, mr->dmabuf_vaddr);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_query(ctx->dmabuf, &q), 0);
	KUNIT_EXPECT_EQ(test, q.attachments, 0);
	KUNIT_EXPECT_EQ(test, q.pins, 0);
	KUNIT_EXPECT_EQ(test, ctx->dmabuf->vmapping_counter, 1);
	KUNIT_EXPECT_EQ(test, q.cpu_begins, 1);
	KUNIT_EXPECT_EQ(test, q.cpu_ends, 1);
	KUNIT_EXPECT_EQ(test, rxe_dmabuf_mr_copy(mr, MR_IOVA, buf, sizeof(buf),
						 RXE_TO_MR_OBJ), -EINVAL);
}

/*
 * Deregistration by a process that is being killed, of a buffer whose
 * exporter waits interruptibly in end_cpu_access: the end fails with
 * -EINTR there, and the CPU access registration began must still be
 * ended, from a context without the signal, once. The rest of the release
 * does not wait for that.
 */
static void test_release_end_interrupted(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;
	struct dmabuf_mock_query q = {};
	struct dma_buf *dmabuf;
	unsigned long timeout;
	struct rxe_mr *mr;

	dmabuf = dmabuf_mock_create(PAGE_SIZE, DMABUF_MOCK_CPU_END_EINTR);
	KUNIT_ASSERT_FALSE(test, IS_ERR(dmabuf));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, put_dmabuf,
							dmabuf), 0);
	KUNIT_ASSERT_EQ(test, reg_mr(test, ctx, dmabuf, &mr), 0);
	kref_init(&mr->elem.ref_cnt);

	/* This task, killed: the exporter's end fails with -EINTR */
	allow_signal(SIGKILL);
	send_sig(SIGKILL, current, 1);
	KUNIT_ASSERT_TRUE(test, fatal_signal_pending(current));
	KUNIT_EXPECT_EQ(test, dma_buf_end_cpu_access(dmabuf, DMA_BIDIRECTIONAL),
			-EINTR);
	rxe_dmabuf_mr_release(mr);
	flush_signals(current);
	disallow_signal(SIGKILL);

	KUNIT_ASSERT_EQ(test, dmabuf_mock_query(dmabuf, &q), 0);
	KUNIT_EXPECT_EQ(test, q.attachments, 0);
	KUNIT_EXPECT_EQ(test, q.pins, 0);
	KUNIT_EXPECT_EQ(test, q.cpu_begins, 1);
	/* Ended later, by a worker: wait for that, generously */
	timeout = jiffies + 10 * HZ;
	while (!q.cpu_ends && time_before(jiffies, timeout)) {
		msleep(20);
		KUNIT_ASSERT_EQ(test, dmabuf_mock_query(dmabuf, &q), 0);
	}
	KUNIT_EXPECT_EQ(test, q.cpu_ends, 1);
}

/*
 * An exporter that invalidates inside its own vmap: the invalidate comes
 * after the pin and before rxe has installed its revoke callback, so the
 * core revokes and unpins the import without telling rxe. The
 * registration must fail instead of publishing an address of memory the
 * exporter no longer keeps for it, and leave nothing behind.
 */
static void test_reg_revoked_in_vmap(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;
	struct dmabuf_mock_query q = {};
	struct dma_buf *dmabuf;
	struct rxe_mr *mr;
	int err;

	dmabuf = dmabuf_mock_create(PAGE_SIZE, DMABUF_MOCK_VMAP_INVALIDATE);
	KUNIT_ASSERT_FALSE(test, IS_ERR(dmabuf));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, put_dmabuf,
							dmabuf), 0);
	err = reg_mr(test, ctx, dmabuf, &mr);
	KUNIT_EXPECT_EQ(test, err, -ENODEV);
	if (!err)
		rxe_dmabuf_mr_release(mr);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_query(dmabuf, &q), 0);
	/* The window was reached: the exporter invalidated in its vmap */
	KUNIT_EXPECT_EQ(test, q.invalidates, 1);
	KUNIT_EXPECT_EQ(test, q.attachments, 0);
	KUNIT_EXPECT_EQ(test, q.pins, 0);
	KUNIT_EXPECT_EQ(test, q.vmaps, 0);
	KUNIT_EXPECT_EQ(test, dmabuf->vmapping_counter, 0);
}

/*
 * FLUSH cannot reach a dma-buf MR (REG_DMABUF_MR passes no FLUSH access
 * flag); should a caller get past that, the flush is refused rather than
 * walking page tables the MR does not have.
 */
static void test_flush_refused(struct kunit *test)
{
	struct rxe_dmabuf_kunit *ctx = test->priv;

	KUNIT_EXPECT_EQ(test, rxe_flush_pmem_iova(&ctx->mr, MR_IOVA, 8),
			-EFAULT);
}

static struct kunit_case rxe_dmabuf_cases[] = {
	KUNIT_CASE(test_revoke_waits_for_copy),
	KUNIT_CASE(test_revoke_idle),
	KUNIT_CASE(test_copy),
	KUNIT_CASE(test_copy_after_revoke),
	KUNIT_CASE(test_release_while_referenced),
	KUNIT_CASE(test_release_end_interrupted),
	KUNIT_CASE(test_reg_revoked_in_vmap),
	KUNIT_CASE(test_flush_refused),
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
