// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for ionic's dma-buf MRs.
 *
 * ionic_dmabuf_mr: registration, the exporter's revoke and dereg of dma-buf
 * MRs on a device that is never probed. Its RDMA admin queue is a static
 * stub of ionic_admin_post(): it answers CREATE_MR and DESTROY_MR with the
 * result a case chooses and records every command; once the queue is
 * killed it completes commands locally as killed, as
 * ionic_admin_poll_locked() does. The RDMA LIF reset that the driver's own
 * ionic_kill_rdma_admin() sends is a static stub of
 * ionic_rdma_reset_devcmd(), which records whether the MR's memory was still
 * mapped for the device at that moment; the rest of ionic_kill_rdma_admin()
 * runs as it is, on one admin queue and no QPs or CQs. The
 * IB_EVENT_DEVICE_FATAL events the device raises are counted.
 */

#include <kunit/static_stub.h>
#include <kunit/test.h>
#include <linux/dma-buf.h>
#include <linux/slab.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>

#include "ionic_fw.h"
#include "ionic_ibdev.h"

/* What the stubbed admin queue saw and is to answer */
struct ionic_fw {
	struct ionic_ibdev *dev;
	struct ionic_aq aq;		/* the device's one admin queue */
	struct ionic_aq *aq_vec[1];
	struct ionic_mr *mr;		/* the case's MR, for the reset stub */
	unsigned int create_mrs;
	unsigned int destroy_mrs;	/* sent to the device */
	unsigned int killed_cmds;	/* completed locally, queue killed */
	u32 created[4];			/* the mrids of the first CREATE_MRs */
	u32 destroyed[4];		/* and of the first DESTROY_MRs */
	bool create_mr_err;		/* answer with an error CQE */
	bool destroy_mr_err;
	unsigned int resets;		/* ionic_rdma_reset_devcmd() calls */
	bool mapped_at_reset;
	int dereg_ret;
	/* At the next DESTROY_MR, revoke this buffer from another thread */
	struct dma_buf *race_revoke;
	struct ib_kunit_revoker *revoker;
	struct ib_kunit_revoke_watch watch;	/* the MR's revoke callback */
	struct ib_kunit_events *events;
};

static bool mr_mapped(struct ionic_fw *fw)
{
	return fw->mr && fw->mr->umem && to_ib_umem_dmabuf(fw->mr->umem)->sgt;
}

static void fake_admin_post(struct ionic_ibdev *dev, struct ionic_admin_wr *wr)
{
	struct kunit *test = kunit_get_current_test();
	struct ionic_fw *fw = test->priv;
	bool err = false;

	KUNIT_EXPECT_PTR_EQ(test, dev, fw->dev);
	INIT_LIST_HEAD(&wr->aq_ent);
	/* A killed queue completes what is posted locally, as killed */
	if (atomic_read(&fw->aq.admin_state) == IONIC_ADMIN_KILLED) {
		fw->killed_cmds++;
		wr->status = IONIC_ADMIN_KILLED;
		complete_all(&wr->work);
		return;
	}

	switch (wr->wqe.op) {
	case IONIC_V1_ADMIN_CREATE_MR:
		if (fw->create_mrs < ARRAY_SIZE(fw->created))
			fw->created[fw->create_mrs] =
				le32_to_cpu(wr->wqe.cmd.create_mr.id_ver);
		fw->create_mrs++;
		err = fw->create_mr_err;
		break;
	case IONIC_V1_ADMIN_DESTROY_MR:
		if (fw->destroy_mrs < ARRAY_SIZE(fw->destroyed))
			fw->destroyed[fw->destroy_mrs] =
				le32_to_cpu(wr->wqe.cmd.destroy_mr.mr_id);
		fw->destroy_mrs++;
		/* Once: the revoke's own DESTROY_MR, if any, starts nothing */
		if (fw->race_revoke) {
			struct dma_buf *dmabuf = fw->race_revoke;

			fw->race_revoke = NULL;
			fw->revoker = ib_kunit_revoke_behind(test, dmabuf);
		}
		err = fw->destroy_mr_err;
		break;
	default:
		KUNIT_FAIL(test, "unexpected admin command %u", wr->wqe.op);
		err = true;
	}

	/* What ionic_admin_poll_locked() fills in from the device's CQE */
	memset(&wr->cqe, 0, sizeof(wr->cqe));
	if (err)
		wr->cqe.qid_type_flags = cpu_to_be32(IONIC_V1_CQE_ERROR);
	wr->status = atomic_read(&fw->aq.admin_state);
	complete_all(&wr->work);
}

static int fake_reset_devcmd(struct ionic_ibdev *dev)
{
	struct kunit *test = kunit_get_current_test();
	struct ionic_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, dev, fw->dev);
	fw->resets++;
	/* The core unmaps after the revoke callback returns */
	fw->mapped_at_reset = mr_mapped(fw);
	return 0;
}

static int fatal_events(struct ionic_fw *fw)
{
	return ib_kunit_events_seen(fw->events, IB_EVENT_DEVICE_FATAL);
}

static void destroy_mrids(void *data)
{
	struct ionic_ibdev *dev = data;

	ionic_resid_destroy(&dev->inuse_mrid);
}

/* Whether the index of @mrid is allocated: new MRs and MWs cannot get it */
static bool mrid_in_use(struct ionic_ibdev *dev, u32 mrid)
{
	u32 index = ionic_mrid_index(mrid);
	int rc;

	rc = ida_alloc_range(&dev->inuse_mrid.inuse, index, index, GFP_KERNEL);
	if (rc < 0)
		return true;
	ida_free(&dev->inuse_mrid.inuse, rc);
	return false;
}

static int ionic_fw_init(struct kunit *test)
{
	struct ionic_ibdev *dev;
	struct ionic_fw *fw;

	fw = kunit_kzalloc(test, sizeof(*fw), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw);
	test->priv = fw;
	ib_kunit_expect_no_mock_leaks(test);

	/* Never probed: what ionic_create_ibdev() sets up for MRs */
	dev = container_of(ib_kunit_alloc_device(test, sizeof(*dev),
						 "ionic_kunit"),
			   struct ionic_ibdev, ibdev);
	dev->lif_cfg.hwdev = dev->ibdev.dma_device;
	dev->lif_cfg.admin_opcodes = max(IONIC_V1_ADMIN_CREATE_MR,
					 IONIC_V1_ADMIN_DESTROY_MR) + 1;
	dev->lif_cfg.page_size_supported = PAGE_SIZE;
	ionic_resid_init(&dev->inuse_mrid, 64);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, destroy_mrids,
							dev), 0);
	xa_init_flags(&dev->qp_tbl, GFP_ATOMIC);
	xa_init_flags(&dev->cq_tbl, GFP_ATOMIC);
	atomic_set(&dev->admin_state, IONIC_ADMIN_ACTIVE);

	/* One admin queue, for ionic_kill_rdma_admin() to pause and kill */
	fw->aq.dev = dev;
	spin_lock_init(&fw->aq.lock);
	INIT_LIST_HEAD(&fw->aq.wr_prod);
	INIT_LIST_HEAD(&fw->aq.wr_post);
	atomic_set(&fw->aq.admin_state, IONIC_ADMIN_ACTIVE);
	fw->aq_vec[0] = &fw->aq;
	dev->aq_vec = fw->aq_vec;
	dev->lif_cfg.aq_count = 1;

	fw->dev = dev;
	fw->events = ib_kunit_watch_events(test, &dev->ibdev);
	kunit_activate_static_stub(test, ionic_admin_post, fake_admin_post);
	kunit_activate_static_stub(test, ionic_rdma_reset_devcmd,
				   fake_reset_devcmd);
	return 0;
}

static struct ib_pd *fake_pd(struct kunit *test, struct ionic_fw *fw)
{
	struct ionic_pd *pd = kunit_kzalloc(test, sizeof(*pd), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, pd);
	pd->ibpd.device = &fw->dev->ibdev;
	pd->pdid = 7;
	return &pd->ibpd;
}

#define MR_IOVA 0x10000
#define MR_BYTES (4 * PAGE_SIZE)
#define MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | \
		   IB_ACCESS_REMOTE_WRITE)

/* Deregister at the end of a case that did not */
static void dereg_action(void *data)
{
	struct ionic_mr *mr = data;
	struct kunit *test = kunit_get_current_test();
	struct ionic_fw *fw = test->priv;

	fw->dereg_ret = ionic_dereg_mr(&mr->ibmr, NULL);
}

static struct ionic_mr *reg_dmabuf_mr(struct kunit *test, struct ib_pd *pd,
				      int fd)
{
	struct ionic_fw *fw = test->priv;
	struct uverbs_attr_bundle *attrs;
	struct ionic_mr *mr;
	struct ib_mr *ibmr;

	attrs = kunit_kzalloc(test, sizeof(*attrs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, attrs);
	ibmr = ionic_reg_user_mr_dmabuf(pd, 0, MR_BYTES, MR_IOVA, fd,
					MR_ACCESS, NULL, attrs);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(ibmr), "reg: %pe", ibmr);
	ibmr->pd = pd;
	mr = container_of(ibmr, struct ionic_mr, ibmr);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, dereg_action,
							mr), 0);
	fw->mr = mr;
	return mr;
}

/* Runs ionic_dereg_mr(); its result is in fw->dereg_ret */
static void dereg(struct kunit *test, struct ionic_mr *mr)
{
	struct ionic_fw *fw = test->priv;

	fw->dereg_ret = -EINPROGRESS;
	kunit_release_action(test, dereg_action, mr);
	if (fw->mr == mr)
		fw->mr = NULL;
}

/*
 * The exporter's revoke sends one DESTROY_MR, for the MR's mrid, and keeps
 * the mrid allocated; the dereg after it sends none and frees the mrid.
 */
static void test_revoke_then_dereg(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ionic_mr *mr;
	u32 mrid;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	mrid = mr->mrid;
	KUNIT_EXPECT_EQ(test, mr->ibmr.lkey, mrid);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->created[0], mrid);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);

	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->destroyed[0], mrid);
	KUNIT_EXPECT_EQ(test, fw->resets, 0);
	KUNIT_EXPECT_TRUE(test, mrid_in_use(fw->dev, mrid));
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->dereg_ret, 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_FALSE(test, mrid_in_use(fw->dev, mrid));
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/* A dereg sends one DESTROY_MR and leaves no callback armed. */
static void test_dereg_disarms(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ionic_mr *mr;
	u32 mrid;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	mrid = mr->mrid;
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->dereg_ret, 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->destroyed[0], mrid);
	KUNIT_EXPECT_FALSE(test, mrid_in_use(fw->dev, mrid));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->resets, 0);
}

/*
 * The revoke's DESTROY_MR fails: the RDMA LIF is reset before the core
 * unmaps, the admin queue is killed, IB_EVENT_DEVICE_FATAL raised; the
 * dereg's DESTROY_MR then completes locally, and the dereg succeeds.
 */
static void test_revoke_fence_fails(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ionic_mr *mr;
	u32 mrid;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	mrid = mr->mrid;
	fw->destroy_mr_err = true;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->resets, 1);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_reset);
	KUNIT_EXPECT_EQ(test, atomic_read(&fw->aq.admin_state),
			IONIC_ADMIN_KILLED);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	KUNIT_EXPECT_TRUE(test, mrid_in_use(fw->dev, mrid));
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->dereg_ret, 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->killed_cmds, 1);
	KUNIT_EXPECT_EQ(test, fw->resets, 1);
	KUNIT_EXPECT_FALSE(test, mrid_in_use(fw->dev, mrid));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * The device answers a user's DESTROY_MR with an error: the dereg fails
 * with -EINVAL, as for any MR, resets nothing and raises nothing; the MR
 * stays mapped, its mrid in use, and the dereg that follows completes it.
 */
static void test_dereg_refused_keeps_mr(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ionic_mr *mr;
	u32 mrid;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	mrid = mr->mrid;
	fw->destroy_mr_err = true;
	KUNIT_EXPECT_EQ(test, ionic_dereg_mr(&mr->ibmr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->resets, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	KUNIT_EXPECT_TRUE(test, mrid_in_use(fw->dev, mrid));
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);

	fw->destroy_mr_err = false;
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->dereg_ret, 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 2);
	KUNIT_EXPECT_EQ(test, fw->resets, 0);
	KUNIT_EXPECT_FALSE(test, mrid_in_use(fw->dev, mrid));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * A device whose admin queue has no DESTROY_MR could not fence an MR: the
 * registration is refused up front, before any command, with nothing left
 * attached.
 */
static void test_reg_refused_without_destroy(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct uverbs_attr_bundle *attrs;
	struct dma_buf *dmabuf;
	struct ib_mr *ibmr;
	int fd;

	attrs = kunit_kzalloc(test, sizeof(*attrs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, attrs);
	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	fw->dev->lif_cfg.admin_opcodes = IONIC_V1_ADMIN_DESTROY_MR;
	ibmr = ionic_reg_user_mr_dmabuf(fake_pd(test, fw), 0, MR_BYTES,
					MR_IOVA, fd, MR_ACCESS, NULL, attrs);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(ibmr), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * After a reset (here the one removal sends) a revoke's DESTROY_MR completes
 * locally, as killed, which is a fence: the LIF no longer uses the MR. No
 * second reset, and the dereg sends nothing more.
 */
static void test_revoke_after_reset(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ionic_mr *mr;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	ionic_kill_rdma_admin(fw->dev, false);
	KUNIT_EXPECT_EQ(test, fw->resets, 1);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 0);
	KUNIT_EXPECT_EQ(test, fw->killed_cmds, 1);
	KUNIT_EXPECT_EQ(test, fw->resets, 1);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->dereg_ret, 0);
	KUNIT_EXPECT_EQ(test, fw->killed_cmds, 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/* CREATE_MR fails: the error comes back, the mrid is freed, nothing stays */
static void test_reg_fails(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct uverbs_attr_bundle *attrs;
	struct dma_buf *dmabuf;
	struct ib_mr *ibmr;
	int fd;

	attrs = kunit_kzalloc(test, sizeof(*attrs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, attrs);
	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	fw->create_mr_err = true;
	ibmr = ionic_reg_user_mr_dmabuf(fake_pd(test, fw), 0, MR_BYTES,
					MR_IOVA, fd, MR_ACCESS, NULL, attrs);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(ibmr), -EINVAL);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 1);
	KUNIT_EXPECT_FALSE(test, mrid_in_use(fw->dev, fw->created[0]));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 0);
	KUNIT_EXPECT_EQ(test, fw->resets, 0);
}

/*
 * The exporter revokes while dereg's DESTROY_MR is in flight (forced: the
 * revoke starts from the DESTROY_MR and is seen waiting for the reservation
 * lock dereg holds, then takes it as soon as dereg drops it). One
 * DESTROY_MR goes out, no reset, and the dereg ran the revoke callback
 * itself, not the exporter's revoke.
 */
static void test_dereg_races_revoke(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ionic_mr *mr;
	u32 mrid;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	mrid = mr->mrid;
	ib_kunit_watch_revoke(test, mr->umem, &fw->watch);
	fw->race_revoke = dmabuf;
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, ib_kunit_revoker_wait(test, fw->revoker), 0);
	KUNIT_EXPECT_EQ(test, fw->dereg_ret, 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->destroyed[0], mrid);
	KUNIT_EXPECT_EQ(test, fw->resets, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	KUNIT_EXPECT_EQ(test, fw->watch.calls + fw->watch.calls_elsewhere, 1);
	KUNIT_EXPECT_FALSE(test, mrid_in_use(fw->dev, mrid));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

static struct kunit_case ionic_dmabuf_mr_cases[] = {
	KUNIT_CASE(test_dereg_races_revoke),
	KUNIT_CASE(test_revoke_then_dereg),
	KUNIT_CASE(test_dereg_disarms),
	KUNIT_CASE(test_revoke_fence_fails),
	KUNIT_CASE(test_dereg_refused_keeps_mr),
	KUNIT_CASE(test_reg_refused_without_destroy),
	KUNIT_CASE(test_revoke_after_reset),
	KUNIT_CASE(test_reg_fails),
	{}
};

static struct kunit_suite ionic_dmabuf_mr_suite = {
	.name = "ionic_dmabuf_mr",
	.init = ionic_fw_init,
	.test_cases = ionic_dmabuf_mr_cases,
};

kunit_test_suite(ionic_dmabuf_mr_suite);

MODULE_DESCRIPTION("KUnit tests for ionic's dma-buf MRs");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
