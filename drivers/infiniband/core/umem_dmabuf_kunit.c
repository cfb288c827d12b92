// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the revocable dma-buf umems of the RDMA core: the
 * protocol between ib_umem_dmabuf_get_pinned_revocable_and_lock() (and its
 * variants), the driver's revoke callback and an exporter that revokes.
 *
 * The importer is a fake ib_device that is never registered, whose
 * dma_device is a KUnit device the DMA API can map for. The exporter is
 * dmabuf_mock, plus a small exporter of our own for what the mock cannot
 * do: fail a map, and pin the way the uverbs exporter does.
 */

#include <kunit/device.h>
#include <kunit/static_stub.h>
#include <kunit/test-bug.h>
#include <kunit/test.h>
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/iosys-map.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>

#include "../../dma-buf/dmabuf_mock.h"
#include "uverbs.h"

struct race_point;

struct umem_kunit {
	struct ib_device *ibdev;
	struct device *dma_dev;
	/* test_revoke_release_orders: what its pause points share */
	struct race_point *rp;
	/* the cases in the window between an import's attach and its pin */
	struct window *window;
	long exporters_before;
};

/* What a driver's MR would hold: the revoke callback's view of it. */
struct fake_mr {
	struct ib_mr ibmr;
	struct dma_resv *resv;
	atomic_t revokes;
	atomic_t unlocked_revokes;
	struct task_struct *revoker;
};

static void fake_revoke(void *priv)
{
	struct fake_mr *mr = priv;

	/* The callback runs with the reservation lock held, at most once. */
	if (!dma_resv_is_locked(mr->resv))
		atomic_inc(&mr->unlocked_revokes);
	mr->revoker = current;
	atomic_inc(&mr->revokes);
}

static void expect_revoked_once(struct kunit *test, struct fake_mr *mr)
{
	KUNIT_EXPECT_EQ(test, atomic_read(&mr->revokes), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&mr->unlocked_revokes), 0);
}

/* Takes the reservation lock: never with a umem still locked. */
static struct dmabuf_mock_query query(struct kunit *test,
				      struct dma_buf *dmabuf)
{
	struct dmabuf_mock_query q = {};

	KUNIT_ASSERT_EQ(test, dmabuf_mock_query(dmabuf, &q), 0);
	return q;
}

/* Import with a callback on @mr, and unlock, as a driver does. */
static struct ib_umem_dmabuf *import_mr(struct kunit *test, int fd,
					size_t size, struct fake_mr *mr)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;

	umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev, 0, size,
							    fd, 0);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(umem), "no umem: %d",
			       PTR_ERR_OR_ZERO(umem));
	mr->resv = umem->attach->dmabuf->resv;
	ib_umem_dmabuf_set_revoke_locked(umem, fake_revoke, mr);
	dma_resv_unlock(mr->resv);
	return umem;
}

static size_t sgt_dma_length(struct sg_table *sgt)
{
	struct scatterlist *sg;
	size_t len = 0;
	int i;

	for_each_sgtable_dma_sg(sgt, sg, i)
		len += sg_dma_len(sg);
	return len;
}

static void test_pinned_revocable_lock(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	long refs;
	int fd;

	fd = ib_kunit_mock_fd(test, 4 * PAGE_SIZE, 0, &dmabuf);
	refs = file_count(dmabuf->file);
	/* The middle two pages: the core trims the exporter's table. */
	umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
							    PAGE_SIZE,
							    2 * PAGE_SIZE,
							    fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	KUNIT_EXPECT_TRUE(test, dma_resv_is_locked(dmabuf->resv));
	KUNIT_EXPECT_PTR_EQ(test, umem->attach->dmabuf, dmabuf);
	KUNIT_EXPECT_PTR_EQ(test, umem->attach->dev, ctx->dma_dev);
	KUNIT_EXPECT_TRUE(test, dma_buf_attach_revocable(umem->attach));
	KUNIT_EXPECT_TRUE(test, umem->attach->peer2peer);
	KUNIT_EXPECT_TRUE(test, umem->umem.is_dmabuf);
	KUNIT_EXPECT_TRUE(test, umem->pinned);
	KUNIT_EXPECT_FALSE(test, umem->revoked);
	KUNIT_EXPECT_NOT_NULL(test, umem->sgt);
	KUNIT_EXPECT_EQ(test, sgt_dma_length(&umem->umem.sgt_append.sgt),
			2 * PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, file_count(dmabuf->file), refs + 1);

	mr.resv = dmabuf->resv;
	ib_umem_dmabuf_set_revoke_locked(umem, fake_revoke, &mr);
	dma_resv_unlock(dmabuf->resv);
	KUNIT_EXPECT_EQ(test, atomic_read(&mr.revokes), 0);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);

	/* Release without a revoke runs the callback, once. */
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, file_count(dmabuf->file), refs);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).invalidates, 0);
}

static void test_revoke_then_release(struct kunit *test)
{
	struct ib_umem_dmabuf *umem;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, 0, &dmabuf);
	umem = import_mr(test, fd, 2 * PAGE_SIZE, &mr);

	/* The mock waits for the unmap: 0 means the importer let go. */
	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	expect_revoked_once(test, &mr);
	KUNIT_EXPECT_TRUE(test, umem->revoked);
	KUNIT_EXPECT_FALSE(test, umem->pinned);
	KUNIT_EXPECT_NULL(test, umem->sgt);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).invalidates, 1);

	/* Neither a second revoke nor the release calls the driver again. */
	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

struct revoke_work {
	struct work_struct work;
	struct dma_buf *dmabuf;
	struct completion started;
	struct completion done;
	int ret;
};

static void revoke_work_fn(struct work_struct *work)
{
	struct revoke_work *rw = container_of(work, struct revoke_work, work);

	complete(&rw->started);
	rw->ret = ib_kunit_mock_revoke(rw->dmabuf);
	complete(&rw->done);
}

static void revoke_work_start(struct revoke_work *rw, struct dma_buf *dmabuf)
{
	INIT_WORK_ONSTACK(&rw->work, revoke_work_fn);
	init_completion(&rw->started);
	init_completion(&rw->done);
	rw->dmabuf = dmabuf;
	rw->ret = -EINPROGRESS;
	queue_work(system_dfl_wq, &rw->work);
	wait_for_completion(&rw->started);
}

static void revoke_work_finish(struct revoke_work *rw)
{
	flush_work(&rw->work);
	destroy_work_on_stack(&rw->work);
}

/*
 * Wait until a revoke of @dmabuf started after @before waits for the
 * reservation lock: it is then certainly behind whoever holds it.
 */
static bool revoke_waits_for_lock(struct dma_buf *dmabuf, unsigned int before)
{
	unsigned long end = jiffies + 10 * HZ;

	while (dmabuf_mock_revoke_lock_waits(dmabuf) == before) {
		if (time_after(jiffies, end))
			return false;
		usleep_range(100, 200);
	}
	return true;
}

/* A release of the umem, in a work item: it may wait for the lock. */
struct release_work {
	struct work_struct work;
	struct ib_umem_dmabuf *umem;
	struct task_struct *task;
	struct completion started;
};

static void release_work_fn(struct work_struct *work)
{
	struct release_work *rw = container_of(work, struct release_work, work);

	rw->task = current;
	complete(&rw->started);
	ib_umem_release(&rw->umem->umem);
}

/*
 * Wait until @task sleeps. Used on a release that can only sleep waiting
 * for the reservation lock: nothing before it in ib_umem_release() sleeps.
 */
static bool task_sleeps(struct task_struct *task)
{
	unsigned long end = jiffies + 10 * HZ;

	while (task_is_running(task)) {
		if (time_after(jiffies, end))
			return false;
		usleep_range(100, 200);
	}
	return true;
}

/* Where the stubs below stop, and what they saw there. */
struct race_point {
	struct fake_mr *mr;
	union {
		struct revoke_work revoke;	/* release first */
		struct release_work release;	/* revoke first */
	};
	int revokes_there;
	bool reached;
};

static struct race_point *race_point(struct kunit *test)
{
	struct race_point *rp = kunit_kzalloc(test, sizeof(*rp), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, rp);
	((struct umem_kunit *)test->priv)->rp = rp;
	return rp;
}

/*
 * Release first: ib_umem_release() has run the callback and is in the
 * exporter's unpin, holding the reservation lock. A revoke starts and is
 * let go only once it waits for that lock. Whether it then finds the
 * attachment still listed (revoked) or already detached depends on who
 * takes the lock next; test_driver_revoke_then_exporter makes the first.
 */
static void pause_release_first(struct dma_buf *dmabuf,
				struct dma_buf_attachment *attach,
				enum dmabuf_mock_point point)
{
	struct umem_kunit *ctx = kunit_get_current_test()->priv;
	struct race_point *rp = ctx->rp;
	unsigned int before = dmabuf_mock_revoke_lock_waits(dmabuf);

	if (point != DMABUF_MOCK_AT_UNPIN || rp->reached)
		return;
	rp->revokes_there = atomic_read(&rp->mr->revokes);
	revoke_work_start(&rp->revoke, dmabuf);
	rp->reached = revoke_waits_for_lock(dmabuf, before);
}

/*
 * Revoke first: the exporter's revoke has run the callback and still holds
 * the reservation lock. A release starts, and the revoke goes on only once
 * the release waits for the lock.
 */
static void pause_revoke_first(struct dma_buf *dmabuf,
			       struct dma_buf_attachment *attach,
			       enum dmabuf_mock_point point)
{
	struct umem_kunit *ctx = kunit_get_current_test()->priv;
	struct race_point *rp = ctx->rp;

	if (point != DMABUF_MOCK_AT_REVOKE_LOCKED || rp->reached)
		return;
	rp->revokes_there = atomic_read(&rp->mr->revokes);
	queue_work(system_dfl_wq, &rp->release.work);
	wait_for_completion(&rp->release.started);
	rp->reached = task_sleeps(rp->release.task);
}

/*
 * A revoke and a release of the same umem, in each order the reservation
 * lock allows, each forced with a pause point in the exporter: whoever
 * takes the lock first runs the callback, the other finds it done, and the
 * callback runs once, with the lock held. Nothing stays attached, pinned or
 * mapped, and the revoke returns 0 (the importer let go).
 */
static void test_revoke_release_orders(struct kunit *test)
{
	bool revoke_first = *(const bool *)test->param_value;
	struct ib_umem_dmabuf *umem;
	struct dma_buf *dmabuf;
	struct race_point *rp;
	struct fake_mr mr = {};
	int fd, ret = 0;

	fd = ib_kunit_mock_fd(test, 8 * PAGE_SIZE, 0, &dmabuf);
	umem = import_mr(test, fd, 8 * PAGE_SIZE, &mr);
	rp = race_point(test);
	rp->mr = &mr;
	if (revoke_first) {
		INIT_WORK_ONSTACK(&rp->release.work, release_work_fn);
		init_completion(&rp->release.started);
		rp->release.umem = umem;
		kunit_activate_static_stub(test, dmabuf_mock_pause,
					   pause_revoke_first);
		ret = ib_kunit_mock_revoke(dmabuf);
		flush_work(&rp->release.work);
		destroy_work_on_stack(&rp->release.work);
	} else {
		kunit_activate_static_stub(test, dmabuf_mock_pause,
					   pause_release_first);
		ib_umem_release(&umem->umem);
		revoke_work_finish(&rp->revoke);
		ret = rp->revoke.ret;
	}
	kunit_deactivate_static_stub(test, dmabuf_mock_pause);

	KUNIT_EXPECT_TRUE_MSG(test, rp->reached, "%s never waited for the lock",
			      revoke_first ? "the release" : "the revoke");
	/* The first one ran the callback before the second could start. */
	KUNIT_EXPECT_EQ(test, rp->revokes_there, 1);
	KUNIT_EXPECT_EQ(test, ret, 0);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

static const bool revoke_first_params[] = { false, true };

static void revoke_first_desc(const bool *p, char *desc)
{
	strscpy(desc, *p ? "revoke first" : "release first",
		KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(revoke_first, revoke_first_params, revoke_first_desc);

/*
 * The driver revoked the umem itself, as a dereg does before it frees the
 * key, and has not released it yet: the exporter's revoke finds the
 * attachment there, revoked, and must not call the driver again.
 */
static void test_driver_revoke_then_exporter(struct kunit *test)
{
	struct ib_umem_dmabuf *umem;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, 0, &dmabuf);
	umem = import_mr(test, fd, 2 * PAGE_SIZE, &mr);
	ib_umem_dmabuf_revoke(umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).invalidates, 1);
	expect_revoked_once(test, &mr);
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * The umem comes back locked so that the driver can install its callback
 * before any revoke sees the umem: an exporter that revokes meanwhile
 * waits, then runs the callback set before the unlock.
 */
static void test_revoke_waits_for_unlock(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;
	struct revoke_work rw;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	unsigned int before;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, 0, &dmabuf);
	umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev, 0,
							    2 * PAGE_SIZE,
							    fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));

	before = dmabuf_mock_revoke_lock_waits(dmabuf);
	revoke_work_start(&rw, dmabuf);
	KUNIT_ASSERT_TRUE_MSG(test, revoke_waits_for_lock(dmabuf, before),
			      "the revoke never waited for the lock");
	KUNIT_EXPECT_FALSE(test, completion_done(&rw.done));
	KUNIT_EXPECT_FALSE(test, umem->revoked);
	mr.resv = dmabuf->resv;
	ib_umem_dmabuf_set_revoke_locked(umem, fake_revoke, &mr);
	KUNIT_EXPECT_EQ(test, atomic_read(&mr.revokes), 0);
	dma_resv_unlock(dmabuf->resv);
	revoke_work_finish(&rw);

	KUNIT_EXPECT_EQ(test, rw.ret, 0);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/* A driver that never set a callback: the revoke still lets go. */
static void test_revoke_without_callback(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, PAGE_SIZE, 0, &dmabuf);
	umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev, 0,
							    PAGE_SIZE, fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	dma_resv_unlock(dmabuf->resv);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);

	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_TRUE(test, umem->revoked);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	ib_umem_release(&umem->umem);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * A failed import leaves nothing behind: no attachment, pin or mapping,
 * no reference to the buffer, and no lock held.
 */
static void expect_import_fails(struct kunit *test, struct dma_buf *dmabuf,
				struct ib_umem_dmabuf *umem, int err)
{
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(umem), err);
	if (!IS_ERR(umem)) {
		if (dma_resv_is_locked(dmabuf->resv))
			dma_resv_unlock(dmabuf->resv);
		ib_umem_release(&umem->umem);
	}
	KUNIT_EXPECT_FALSE(test, dma_resv_is_locked(dmabuf->resv));
}

static void test_no_pin(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct dma_buf *dmabuf;
	long refs;
	int fd;

	fd = ib_kunit_mock_fd(test, PAGE_SIZE, DMABUF_MOCK_NO_PIN, &dmabuf);
	refs = file_count(dmabuf->file);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
									 0, PAGE_SIZE,
									 fd, 0),
			    -EOPNOTSUPP);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev,
								  NULL, 0,
								  PAGE_SIZE,
								  fd, 0),
			    -EOPNOTSUPP);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned(ctx->ibdev, 0, PAGE_SIZE,
						      fd, 0),
			    -EOPNOTSUPP);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, file_count(dmabuf->file), refs);
}

static void test_bad_range(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct dma_buf *dmabuf;
	long refs;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, 0, &dmabuf);
	refs = file_count(dmabuf->file);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
									 PAGE_SIZE,
									 2 * PAGE_SIZE,
									 fd, 0),
			    -EINVAL);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
									 0, 0, fd, 0),
			    -EINVAL);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
									 ULONG_MAX,
									 PAGE_SIZE,
									 fd, 0),
			    -EINVAL);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, file_count(dmabuf->file), refs);
	/* A dma-buf must be had before anything else. */
	KUNIT_EXPECT_EQ(test,
			PTR_ERR_OR_ZERO(ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
										     0, PAGE_SIZE,
										     -1, 0)),
			-EBADF);
}

/*
 * The CPU variant attaches for the ib_device itself and never maps: rxe
 * reaches the memory with dma_buf_vmap() instead.
 */
static void test_cpu_revocable(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, 0, &dmabuf);
	umem = ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev, NULL, 0,
						     2 * PAGE_SIZE, fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	KUNIT_EXPECT_TRUE(test, dma_resv_is_locked(dmabuf->resv));
	KUNIT_EXPECT_PTR_EQ(test, umem->attach->dev, &ctx->ibdev->dev);
	KUNIT_EXPECT_TRUE(test, dma_buf_attach_revocable(umem->attach));
	KUNIT_EXPECT_FALSE(test, umem->attach->peer2peer);
	KUNIT_EXPECT_TRUE(test, umem->umem.is_dmabuf);
	KUNIT_EXPECT_TRUE(test, umem->pinned);
	KUNIT_EXPECT_NULL(test, umem->sgt);
	mr.resv = dmabuf->resv;
	ib_umem_dmabuf_set_revoke_locked(umem, fake_revoke, &mr);
	dma_resv_unlock(dmabuf->resv);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 0);

	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	expect_revoked_once(test, &mr);
	KUNIT_EXPECT_TRUE(test, umem->revoked);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/* The revocable imports, DMA-mapped and CPU, for the cases of both. */
static const bool import_cpu[] = { false, true };

static void import_cpu_desc(const bool *cpu, char *desc)
{
	strscpy(desc, *cpu ? "cpu" : "dma", KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(import_kind, import_cpu, import_cpu_desc);

/*
 * The window between an import's attach and its pin, reached through the
 * exporter with the mock's pause points: in its .attach, when the attachment
 * is about to be listed but dma_buf_dynamic_attach() has not returned it to
 * the importer, and in its .pin, the attachment listed, the reservation lock
 * held, nothing pinned yet. There the stub does what another exporter does:
 * invalidate the mappings (a move), or revoke the buffer for good.
 */
struct window {
	enum dmabuf_mock_point point;
	bool revoke;
	int reached;
};

static void pause_in_window(struct dma_buf *dmabuf,
			    struct dma_buf_attachment *attach,
			    enum dmabuf_mock_point point)
{
	struct umem_kunit *ctx = kunit_get_current_test()->priv;
	struct window *w = ctx->window;

	if (point != w->point)
		return;
	w->reached++;
	if (point == DMABUF_MOCK_AT_ATTACH) {
		/* What the exporter's invalidate does once it is listed */
		dma_resv_lock(dmabuf->resv, NULL);
		attach->importer_ops->invalidate_mappings(attach);
		dma_resv_unlock(dmabuf->resv);
	} else if (w->revoke) {
		dmabuf_mock_revoke_mark_locked(dmabuf);
	} else {
		dma_buf_invalidate_mappings(dmabuf);
	}
}

/* The whole import, DMA or CPU, with the exporter acting in the window. */
static struct ib_umem_dmabuf *import_through(struct kunit *test, int fd,
					     size_t size, bool cpu,
					     struct window *w)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;

	ctx->window = w;
	kunit_activate_static_stub(test, dmabuf_mock_pause, pause_in_window);
	umem = ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev,
						     cpu ? NULL :
						     ctx->ibdev->dma_device,
						     0, size, fd, 0);
	kunit_deactivate_static_stub(test, dmabuf_mock_pause);
	KUNIT_EXPECT_EQ_MSG(test, w->reached, 1, "the window was not reached");
	return umem;
}

/*
 * Finish an import that survived its window as a driver would, check that it
 * is mapped (DMA) or can be vmapped (CPU), and that the exporter's revoke
 * still reaches the driver, once, and release it.
 */
static void finish_and_revoke(struct kunit *test, struct ib_umem_dmabuf *umem,
			      struct dma_buf *dmabuf, bool cpu)
{
	struct fake_mr mr = { .resv = dmabuf->resv };
	struct iosys_map map;

	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(umem), "no umem: %d",
			       PTR_ERR_OR_ZERO(umem));
	KUNIT_EXPECT_TRUE(test, umem->pinned);
	KUNIT_EXPECT_FALSE(test, umem->revoked);
	if (cpu) {
		KUNIT_EXPECT_NULL(test, umem->sgt);
		KUNIT_EXPECT_EQ(test, dma_buf_vmap(dmabuf, &map), 0);
		dma_buf_vunmap(dmabuf, &map);
	} else {
		KUNIT_EXPECT_NOT_NULL(test, umem->sgt);
	}
	ib_umem_dmabuf_set_revoke_locked(umem, fake_revoke, &mr);
	dma_resv_unlock(dmabuf->resv);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, cpu ? 0 : 1);

	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	expect_revoked_once(test, &mr);
	KUNIT_EXPECT_TRUE(test, umem->revoked);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * An invalidate between the import's attach and its pin is a move, as for
 * any attachment that is not pinned (amdgpu and xe send one on every move of
 * a buffer): the import goes on, and the MR is revocable as any other.
 */
static void test_invalidate_before_pin_is_move(struct kunit *test)
{
	struct window w = { .point = DMABUF_MOCK_AT_PIN };
	const bool *cpu = test->param_value;
	struct ib_umem_dmabuf *umem;
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, 0, &dmabuf);
	umem = import_through(test, fd, 2 * PAGE_SIZE, *cpu, &w);
	finish_and_revoke(test, umem, dmabuf, *cpu);
}

/*
 * dma_buf_dynamic_attach() lists the attachment before it returns: the
 * exporter can invalidate it before the importer has stored the pointer in
 * umem_dmabuf->attach, which must not be looked at then.
 */
static void test_invalidate_before_attach_stored(struct kunit *test)
{
	struct window w = { .point = DMABUF_MOCK_AT_ATTACH };
	const bool *cpu = test->param_value;
	struct ib_umem_dmabuf *umem;
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, 0, &dmabuf);
	umem = import_through(test, fd, 2 * PAGE_SIZE, *cpu, &w);
	finish_and_revoke(test, umem, dmabuf, *cpu);
}

/*
 * The exporter revokes for good between the import's attach and its pin:
 * the exporter refuses the pin, and the import fails with nothing left
 * attached, pinned or mapped.
 */
static void test_revoked_before_pin(struct kunit *test)
{
	struct window w = { .point = DMABUF_MOCK_AT_PIN, .revoke = true };
	const bool *cpu = test->param_value;
	struct ib_umem_dmabuf *umem;
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, 0, &dmabuf);
	umem = import_through(test, fd, 2 * PAGE_SIZE, *cpu, &w);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(umem), -ENODEV);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).state,
			(u32)DMABUF_MOCK_STATE_REVOKED);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * A CPU import of a buffer revoked between its attach and its pin, while
 * someone else holds a vmap of the buffer. The invalidate comes before the
 * pin, so the import takes it for a move, and dma_buf_vmap() hands out the
 * holder's cached mapping without asking the exporter: the exporter's
 * refused pin is what stops the import (dma_buf_pin()'s contract for a
 * revoking exporter). Without a holder, a pin that does not refuse is
 * caught by the refused vmap. With neither refusal there is nothing left
 * to catch it, and this shows what happens then: the import succeeds, the
 * vmap is the holder's mapping of the revoked buffer, and the next revoke
 * that reaches the import is the exporter's next one. The importer cannot
 * tell this invalidate from a move's (amdgpu moves a buffer, invalidating
 * it, from inside its own pin), which is why dma-buf's documentation puts
 * the refusal on the exporter.
 */
struct revoked_vmapped {
	u32 flags;		/* the mock's */
	bool holder;		/* someone else keeps a vmap */
	int pin_err;		/* what the import's pin gives */
	int vmap_err;		/* then the importer's vmap */
	const char *desc;
};

static const struct revoked_vmapped revoked_vmapped_params[] = {
	{ 0, true, -ENODEV, 0, "pin refused, vmap held" },
	{ DMABUF_MOCK_LAX_PIN, false, 0, -ENODEV, "lax pin, vmap refused" },
	{ DMABUF_MOCK_LAX_PIN, true, 0, 0, "lax pin, vmap held: imported" },
};

static void revoked_vmapped_desc(const struct revoked_vmapped *p, char *desc)
{
	strscpy(desc, p->desc, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(revoked_vmapped, revoked_vmapped_params,
		  revoked_vmapped_desc);

static void test_revoked_before_pin_vmapped(struct kunit *test)
{
	struct window w = { .point = DMABUF_MOCK_AT_PIN, .revoke = true };
	const struct revoked_vmapped *p = test->param_value;
	struct iosys_map held = {}, map = {};
	struct ib_umem_dmabuf *umem;
	struct dma_buf *dmabuf;
	int fd, err;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, p->flags, &dmabuf);
	if (p->holder)
		KUNIT_ASSERT_EQ(test, dma_buf_vmap_unlocked(dmabuf, &held), 0);
	umem = import_through(test, fd, 2 * PAGE_SIZE, true, &w);
	err = PTR_ERR_OR_ZERO(umem);
	KUNIT_EXPECT_EQ(test, err, p->pin_err);
	if (err)
		goto out;
	/* The invalidate came before the pin: taken for a move. */
	KUNIT_EXPECT_FALSE(test, umem->revoked);
	/* As rxe does, once pinned. */
	err = dma_buf_vmap(dmabuf, &map);
	KUNIT_EXPECT_EQ(test, err, p->vmap_err);
	if (!err) {
		KUNIT_EXPECT_PTR_EQ(test, map.vaddr, held.vaddr);
		KUNIT_EXPECT_FALSE(test, umem->revoked);
		dma_buf_vunmap(dmabuf, &map);
	}
	dma_resv_unlock(dmabuf->resv);
	ib_umem_release(&umem->umem);
out:
	/* Not under the reservation lock, which a query takes */
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).state,
			(u32)DMABUF_MOCK_STATE_REVOKED);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	if (p->holder)
		dma_buf_vunmap_unlocked(dmabuf, &held);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).vmaps, 0);
}

/*
 * An exporter that migrates the buffer at pin (TTM) fences the copy with
 * DMA_RESV_USAGE_KERNEL: the import returns only once the copy is done, so
 * the driver never reaches the stale pages.
 */
static void test_import_waits_for_migration(struct kunit *test)
{
	const bool *cpu = test->param_value;
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	u8 byte = 0;
	int fd;

	fd = ib_kunit_mock_fd(test, 2 * PAGE_SIZE, DMABUF_MOCK_PIN_FENCE,
			      &dmabuf);
	if (*cpu)
		umem = ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev, NULL,
							     0, 2 * PAGE_SIZE,
							     fd, 0);
	else
		umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
								    0,
								    2 * PAGE_SIZE,
								    fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	KUNIT_EXPECT_TRUE(test, dma_resv_test_signaled(dmabuf->resv,
						       DMA_RESV_USAGE_KERNEL));
	mr.resv = dmabuf->resv;
	ib_umem_dmabuf_set_revoke_locked(umem, fake_revoke, &mr);
	dma_resv_unlock(dmabuf->resv);
	KUNIT_EXPECT_EQ(test, query(test, dmabuf).fences, 0);
	KUNIT_ASSERT_EQ(test, dmabuf_mock_access(dmabuf, PAGE_SIZE, &byte, 1,
						 false), 0);
	KUNIT_EXPECT_EQ(test, byte, DMABUF_MOCK_MIGRATED);
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/* As vfio-pci: only the revocable imports may attach. */
static void test_require_revocable(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;
	struct dma_buf *dmabuf;
	long refs;
	int fd;

	fd = ib_kunit_mock_fd(test, PAGE_SIZE, DMABUF_MOCK_REQUIRE_REVOCABLE,
			      &dmabuf);
	refs = file_count(dmabuf->file);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned(ctx->ibdev, 0, PAGE_SIZE,
						      fd, 0),
			    -EOPNOTSUPP);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, file_count(dmabuf->file), refs);

	umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev, 0,
							    PAGE_SIZE, fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	dma_resv_unlock(dmabuf->resv);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);
	ib_umem_release(&umem->umem);

	umem = ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev, ctx->dma_dev,
						     0, PAGE_SIZE, fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	dma_resv_unlock(dmabuf->resv);
	ib_umem_release(&umem->umem);

	umem = ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev, NULL, 0,
						     PAGE_SIZE, fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	dma_resv_unlock(dmabuf->resv);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 0);
	ib_umem_release(&umem->umem);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, file_count(dmabuf->file), refs);
}

/* mlx5 data-direct: the table is mapped for another device than the HCA. */
static void test_dma_device(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	struct device *other;
	int fd;

	other = ib_kunit_dma_device(test, "ib_umem_dmabuf_kunit_dd");
	fd = ib_kunit_mock_fd(test, 3 * PAGE_SIZE, 0, &dmabuf);
	umem = ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev, other, 0,
						     3 * PAGE_SIZE, fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	KUNIT_EXPECT_TRUE(test, dma_resv_is_locked(dmabuf->resv));
	KUNIT_EXPECT_PTR_EQ(test, umem->attach->dev, other);
	KUNIT_EXPECT_PTR_EQ(test, umem->umem.ibdev, ctx->ibdev);
	KUNIT_EXPECT_TRUE(test, dma_buf_attach_revocable(umem->attach));
	KUNIT_EXPECT_EQ(test, sgt_dma_length(&umem->umem.sgt_append.sgt),
			3 * PAGE_SIZE);
	mr.resv = dmabuf->resv;
	ib_umem_dmabuf_set_revoke_locked(umem, fake_revoke, &mr);
	dma_resv_unlock(dmabuf->resv);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);

	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/* Import as import_mr() does, then tell the core the MR, as a driver does. */
static struct ib_umem_dmabuf *import_linked_mr(struct kunit *test, int fd,
					       struct fake_mr *mr)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem = import_mr(test, fd, PAGE_SIZE, mr);

	mr->ibmr.device = ctx->ibdev;
	dma_resv_lock(mr->resv, NULL);
	ib_umem_dmabuf_set_mr_locked(umem, &mr->ibmr);
	dma_resv_unlock(mr->resv);
	return umem;
}

static void test_set_mr_revoke(struct kunit *test)
{
	struct ib_umem_dmabuf *umem;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, PAGE_SIZE, 0, &dmabuf);
	umem = import_linked_mr(test, fd, &mr);
	KUNIT_EXPECT_PTR_EQ(test, umem->mr, &mr.ibmr);
	KUNIT_EXPECT_PTR_EQ(test, mr.ibmr.umem_dmabuf, umem);
	KUNIT_EXPECT_FALSE(test, test_bit(IB_MR_DMABUF_REVOKED,
					  &umem->mr_flags));

	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_TRUE(test, test_bit(IB_MR_DMABUF_REVOKED,
					 &umem->mr_flags));
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
}

/*
 * A driver that returns another MR than the one it built on the umem (mlx5
 * data-direct) moves the umem to it: the MR it leaves no longer reaches the
 * umem, and the one it goes to reports the revoke.
 */
static void test_set_mr_move(struct kunit *test)
{
	struct fake_mr mr = {}, other = {};
	struct ib_umem_dmabuf *umem;
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, PAGE_SIZE, 0, &dmabuf);
	umem = import_linked_mr(test, fd, &mr);
	dma_resv_lock(dmabuf->resv, NULL);
	ib_umem_dmabuf_set_mr_locked(umem, &other.ibmr);
	dma_resv_unlock(dmabuf->resv);
	KUNIT_EXPECT_PTR_EQ(test, umem->mr, &other.ibmr);
	KUNIT_EXPECT_NULL(test, mr.ibmr.umem_dmabuf);
	KUNIT_EXPECT_PTR_EQ(test, other.ibmr.umem_dmabuf, umem);

	KUNIT_EXPECT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_TRUE(test, test_bit(IB_MR_DMABUF_REVOKED,
					 &umem->mr_flags));
	ib_umem_release(&umem->umem);
	KUNIT_EXPECT_NULL(test, other.ibmr.umem_dmabuf);
	expect_revoked_once(test, &mr);
}

static void test_set_mr_release(struct kunit *test)
{
	struct ib_umem_dmabuf *umem;
	struct fake_mr mr = {};
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, PAGE_SIZE, 0, &dmabuf);
	umem = import_linked_mr(test, fd, &mr);
	KUNIT_EXPECT_PTR_EQ(test, mr.ibmr.umem_dmabuf, umem);
	ib_umem_release(&umem->umem);
	/* The MR may outlive its umem: it must not point at the freed one. */
	KUNIT_EXPECT_NULL(test, mr.ibmr.umem_dmabuf);
	expect_revoked_once(test, &mr);
}

/*
 * A small exporter of our own: system pages mapped for the importer, a map
 * that can be made to fail, and optionally the uverbs exporter's .pin.
 */
struct test_exporter {
	/* First: uverbs_dmabuf_pin() reads the priv as the uverbs exporter's */
	struct ib_uverbs_dmabuf_file uverbs;
	struct page *pages[2];
	int map_err;
	atomic_t attachments;
	atomic_t pins;
	atomic_t unpins;
	atomic_t maps;
};

static atomic_long_t test_exporters = ATOMIC_LONG_INIT(0);

static int test_exp_attach(struct dma_buf *dmabuf,
			   struct dma_buf_attachment *attach)
{
	struct test_exporter *exp = dmabuf->priv;

	atomic_inc(&exp->attachments);
	return 0;
}

static void test_exp_detach(struct dma_buf *dmabuf,
			    struct dma_buf_attachment *attach)
{
	struct test_exporter *exp = dmabuf->priv;

	atomic_dec(&exp->attachments);
}

static int test_exp_pin(struct dma_buf_attachment *attach)
{
	struct test_exporter *exp = attach->dmabuf->priv;

	atomic_inc(&exp->pins);
	return 0;
}

static void test_exp_unpin(struct dma_buf_attachment *attach)
{
	struct test_exporter *exp = attach->dmabuf->priv;

	atomic_inc(&exp->unpins);
}

static struct sg_table *test_exp_map(struct dma_buf_attachment *attach,
				     enum dma_data_direction dir)
{
	struct test_exporter *exp = attach->dmabuf->priv;
	struct sg_table *sgt;
	int ret;

	if (exp->map_err)
		return ERR_PTR(exp->map_err);
	sgt = kzalloc_obj(*sgt);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table_from_pages(sgt, exp->pages,
					ARRAY_SIZE(exp->pages), 0,
					attach->dmabuf->size, GFP_KERNEL);
	if (ret)
		goto err_free;
	ret = dma_map_sgtable(attach->dev, sgt, dir, 0);
	if (ret)
		goto err_table;
	atomic_inc(&exp->maps);
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void test_exp_unmap(struct dma_buf_attachment *attach,
			   struct sg_table *sgt, enum dma_data_direction dir)
{
	struct test_exporter *exp = attach->dmabuf->priv;

	dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
	atomic_dec(&exp->maps);
}

static void test_exp_release(struct dma_buf *dmabuf)
{
	struct test_exporter *exp = dmabuf->priv;
	int i;

	for (i = 0; i < ARRAY_SIZE(exp->pages); i++)
		__free_page(exp->pages[i]);
	kfree(exp);
	atomic_long_dec(&test_exporters);
}

#define TEST_EXP_OPS					\
	.attach = test_exp_attach,			\
	.detach = test_exp_detach,			\
	.unpin = test_exp_unpin,			\
	.map_dma_buf = test_exp_map,			\
	.unmap_dma_buf = test_exp_unmap,		\
	.release = test_exp_release

static const struct dma_buf_ops test_exp_ops = {
	TEST_EXP_OPS,
	.pin = test_exp_pin,
};

static const struct dma_buf_ops test_exp_uverbs_ops = {
	TEST_EXP_OPS,
	.pin = uverbs_dmabuf_pin,
};

static int test_exp_fd(struct kunit *test, const struct dma_buf_ops *ops,
		       struct test_exporter **out, struct dma_buf **dmabufp)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct test_exporter *exp;
	struct dma_buf *dmabuf;
	int i;

	exp = kzalloc_obj(*exp);
	KUNIT_ASSERT_NOT_NULL(test, exp);
	for (i = 0; i < ARRAY_SIZE(exp->pages); i++) {
		exp->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!exp->pages[i])
			break;
	}
	if (i < ARRAY_SIZE(exp->pages)) {
		while (i--)
			__free_page(exp->pages[i]);
		kfree(exp);
		KUNIT_FAIL_AND_ABORT(test, "no pages");
	}
	exp_info.ops = ops;
	exp_info.size = ARRAY_SIZE(exp->pages) * PAGE_SIZE;
	exp_info.flags = O_RDWR | O_CLOEXEC;
	exp_info.priv = exp;
	dmabuf = dma_buf_export(&exp_info);
	if (IS_ERR(dmabuf)) {
		for (i = 0; i < ARRAY_SIZE(exp->pages); i++)
			__free_page(exp->pages[i]);
		kfree(exp);
		KUNIT_FAIL_AND_ABORT(test, "export failed: %ld",
				     PTR_ERR(dmabuf));
	}
	atomic_long_inc(&test_exporters);
	*out = exp;
	*dmabufp = dmabuf;
	return ib_kunit_install_fd(test, dmabuf);
}

static void test_map_failure(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct test_exporter *exp;
	struct dma_buf *dmabuf;
	long refs;
	int fd;

	fd = test_exp_fd(test, &test_exp_ops, &exp, &dmabuf);
	exp->map_err = -ENOSPC;
	refs = file_count(dmabuf->file);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
									 0, PAGE_SIZE,
									 fd, 0),
			    -ENOSPC);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned(ctx->ibdev, 0, PAGE_SIZE,
						      fd, 0),
			    -ENOSPC);
	/* Pinned before the map failed, and unpinned by the error path. */
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->pins), 2);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->unpins), 2);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->maps), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->attachments), 0);
	KUNIT_EXPECT_EQ(test, file_count(dmabuf->file), refs);
}

/*
 * The uverbs exporter's pin policy, on attachments of a buffer that pins
 * like it: revocable importers only, and none while the buffer is revoked.
 */
static void test_uverbs_pin_policy(struct kunit *test)
{
	static const struct dma_buf_attach_ops no_invalidate = {
		.allow_peer2peer = true,
	};
	struct umem_kunit *ctx = test->priv;
	struct dma_buf_attachment *attach;
	struct ib_umem_dmabuf *umem;
	struct test_exporter *exp;
	struct dma_buf *dmabuf;
	int fd;

	fd = test_exp_fd(test, &test_exp_uverbs_ops, &exp, &dmabuf);
	/* The core's revocable import: what the uverbs exporter accepts. */
	umem = ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev, NULL, 0,
						     PAGE_SIZE, fd, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(umem));
	KUNIT_EXPECT_EQ(test, uverbs_dmabuf_pin(umem->attach), 0);
	dma_resv_unlock(dmabuf->resv);
	ib_umem_release(&umem->umem);

	/* Dynamic, but nothing to call on revoke. */
	attach = dma_buf_dynamic_attach(dmabuf, ctx->dma_dev, &no_invalidate,
					NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(attach));
	KUNIT_EXPECT_EQ(test, uverbs_dmabuf_pin(attach), -EOPNOTSUPP);
	dma_buf_detach(dmabuf, attach);

	/* Static. */
	attach = dma_buf_attach(dmabuf, ctx->dma_dev);
	KUNIT_ASSERT_FALSE(test, IS_ERR(attach));
	KUNIT_EXPECT_EQ(test, uverbs_dmabuf_pin(attach), -EOPNOTSUPP);
	dma_buf_detach(dmabuf, attach);

	/* Revoked, as ib_uverbs_dmabuf_revoke() leaves it: no pin, either way */
	dma_resv_lock(dmabuf->resv, NULL);
	exp->uverbs.revoked = 1;
	dma_resv_unlock(dmabuf->resv);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_revocable_and_lock(ctx->ibdev,
								  NULL, 0,
								  PAGE_SIZE,
								  fd, 0),
			    -ENODEV);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned_revocable_and_lock(ctx->ibdev,
									 0, PAGE_SIZE,
									 fd, 0),
			    -ENODEV);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->maps), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->attachments), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->unpins), 1);
}

/* An exporter that pins like ib_uverbs: MRs import, queue buffers do not. */
static void test_uverbs_pin_exporter(struct kunit *test)
{
	struct umem_kunit *ctx = test->priv;
	struct ib_umem_dmabuf *umem;
	struct test_exporter *exp;
	struct dma_buf *dmabuf;
	struct fake_mr mr = {};
	long refs;
	int fd;

	fd = test_exp_fd(test, &test_exp_uverbs_ops, &exp, &dmabuf);
	refs = file_count(dmabuf->file);
	expect_import_fails(test, dmabuf,
			    ib_umem_dmabuf_get_pinned(ctx->ibdev, 0, PAGE_SIZE,
						      fd, 0),
			    -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->attachments), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->unpins), 0);
	KUNIT_EXPECT_EQ(test, file_count(dmabuf->file), refs);

	umem = import_mr(test, fd, 2 * PAGE_SIZE, &mr);
	KUNIT_EXPECT_TRUE(test, umem->pinned);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->maps), 1);
	KUNIT_EXPECT_EQ(test, sgt_dma_length(&umem->umem.sgt_append.sgt),
			2 * PAGE_SIZE);
	ib_umem_release(&umem->umem);
	expect_revoked_once(test, &mr);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->unpins), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->maps), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&exp->attachments), 0);
}

/*
 * Runs after everything a case registered: its fds and references are gone
 * by then, so every buffer it created must be released.
 */
static void umem_kunit_leaks(void *data)
{
	struct kunit *test = data;
	struct umem_kunit *ctx = test->priv;

	/* fput() from a kernel thread defers the final release. */
	flush_delayed_fput();
	KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&test_exporters),
			    ctx->exporters_before, "test buffers leaked");
}

static int umem_kunit_init(struct kunit *test)
{
	struct umem_kunit *ctx;

	ctx = kunit_kzalloc(test, sizeof(*ctx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctx);
	test->priv = ctx;
	ib_kunit_expect_no_mock_leaks(test);
	ctx->exporters_before = atomic_long_read(&test_exporters);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, umem_kunit_leaks,
							test), 0);

	/* Never registered: the umem code needs no more than this. */
	ctx->ibdev = ib_kunit_alloc_device(test, sizeof(*ctx->ibdev),
					   "kunit_ib");
	ctx->dma_dev = ctx->ibdev->dma_device;
	return 0;
}

static struct kunit_case umem_dmabuf_cases[] = {
	KUNIT_CASE(test_pinned_revocable_lock),
	KUNIT_CASE(test_revoke_then_release),
	KUNIT_CASE_PARAM(test_revoke_release_orders, revoke_first_gen_params),
	KUNIT_CASE(test_driver_revoke_then_exporter),
	KUNIT_CASE(test_revoke_waits_for_unlock),
	KUNIT_CASE(test_revoke_without_callback),
	KUNIT_CASE(test_no_pin),
	KUNIT_CASE(test_bad_range),
	KUNIT_CASE(test_map_failure),
	KUNIT_CASE(test_cpu_revocable),
	KUNIT_CASE_PARAM(test_invalidate_before_pin_is_move,
			 import_kind_gen_params),
	KUNIT_CASE_PARAM(test_invalidate_before_attach_stored,
			 import_kind_gen_params),
	KUNIT_CASE_PARAM(test_revoked_before_pin, import_kind_gen_params),
	KUNIT_CASE_PARAM(test_revoked_before_pin_vmapped,
			 revoked_vmapped_gen_params),
	KUNIT_CASE_PARAM(test_import_waits_for_migration,
			 import_kind_gen_params),
	KUNIT_CASE(test_require_revocable),
	KUNIT_CASE(test_dma_device),
	KUNIT_CASE(test_set_mr_revoke),
	KUNIT_CASE(test_set_mr_move),
	KUNIT_CASE(test_set_mr_release),
	KUNIT_CASE(test_uverbs_pin_policy),
	KUNIT_CASE(test_uverbs_pin_exporter),
	{}
};

static struct kunit_suite umem_dmabuf_suite = {
	.name = "ib_umem_dmabuf",
	.init = umem_kunit_init,
	.test_cases = umem_dmabuf_cases,
};

kunit_test_suite(umem_dmabuf_suite);

MODULE_DESCRIPTION("KUnit tests for revocable dma-buf umems");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS("DMA_BUF");
MODULE_IMPORT_NS("DMABUF_MOCK");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
