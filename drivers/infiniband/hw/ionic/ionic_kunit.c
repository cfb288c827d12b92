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
 *
 * The scenarios every driver shares are ib_kunit_mr's, run on ionic through
 * the ops table below; the RDMA LIF reset is what they count as the last
 * resort. The stubbed queue has no timeout: a device that does not answer
 * is an error CQE at the revoke.
 */

#include <kunit/static_stub.h>
#include <kunit/test.h>
#include <linux/dma-buf.h>
#include <linux/slab.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_kunit_mr.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>

#include "ionic_fw.h"
#include "ionic_ibdev.h"

/* What the stubbed admin queue saw and is to answer */
struct ionic_fw {
	struct ib_kunit_mr_fixture fx;	/* first: the scenarios' */
	struct ionic_ibdev *dev;
	struct ionic_aq aq;		/* the device's one admin queue */
	struct ionic_aq *aq_vec[1];
	unsigned int create_mrs;
	unsigned int destroy_mrs;	/* sent to the device */
	unsigned int killed_cmds;	/* completed locally, queue killed */
	u32 created[4];			/* the mrids of the first CREATE_MRs */
	u32 destroyed[4];		/* and of the first DESTROY_MRs */
	bool create_mr_err;		/* answer with an error CQE */
	bool destroy_mr_err;
};

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
		ib_kunit_mr_fence_seen(test,
				       le32_to_cpu(wr->wqe.cmd.destroy_mr.mr_id));
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
	/* The core unmaps after the revoke callback returns */
	ib_kunit_mr_last_resort_seen(test);
	return 0;
}

static int fatal_events(struct ionic_fw *fw)
{
	return ib_kunit_events_seen(fw->fx.events, IB_EVENT_DEVICE_FATAL);
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

static const struct ib_kunit_mr_ops ionic_mr_ops;

static int ionic_fw_init(struct kunit *test)
{
	struct ionic_ibdev *dev;
	struct ionic_fw *fw;

	fw = kunit_kzalloc(test, sizeof(*fw), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw);
	test->priv = fw;

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
	ib_kunit_mr_init(test, &fw->fx, &ionic_mr_ops, &dev->ibdev);
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

static struct ib_mr *try_reg(struct kunit *test, int fd)
{
	struct ionic_fw *fw = test->priv;
	struct uverbs_attr_bundle *attrs;
	struct ib_pd *pd = fake_pd(test, fw);
	struct ib_mr *ibmr;

	attrs = kunit_kzalloc(test, sizeof(*attrs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, attrs);
	ibmr = ionic_reg_user_mr_dmabuf(pd, 0, MR_BYTES, MR_IOVA, fd,
					MR_ACCESS, NULL, attrs);
	if (IS_ERR(ibmr))
		return ibmr;
	ibmr->pd = pd;
	return ibmr;
}

/* Registered, and deregistered at the end of the case unless it was */
static struct ionic_mr *reg_dmabuf_mr(struct kunit *test, int fd)
{
	struct ib_mr *ibmr = try_reg(test, fd);

	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(ibmr), "reg: %pe", ibmr);
	ib_kunit_mr_track(test, ibmr);
	return container_of(ibmr, struct ionic_mr, ibmr);
}

/* ionic_dereg_mr(), which must succeed */
static void dereg(struct kunit *test, struct ionic_mr *mr)
{
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, &mr->ibmr), 0);
}

static struct ib_umem *mr_umem(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct ionic_mr, ibmr)->umem;
}

static u64 mr_fence_key(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct ionic_mr, ibmr)->mrid;
}

/* A CQE error for DESTROY_MR: refused, or at the revoke, never done */
static void answer_fence(struct kunit *test, enum ib_kunit_fence answer)
{
	struct ionic_fw *fw = test->priv;

	fw->destroy_mr_err = answer != IB_KUNIT_FENCE_DONE;
}

static void fail_reg(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;

	fw->create_mr_err = true;
}

static bool key_in_use(struct kunit *test, u64 key)
{
	struct ionic_fw *fw = test->priv;

	return mrid_in_use(fw->dev, key);
}

static const struct ib_kunit_mr_ops ionic_mr_ops = {
	.mr_bytes = MR_BYTES,
	.try_reg = try_reg,
	.dereg = ionic_dereg_mr,
	.umem = mr_umem,
	.fence_key = mr_fence_key,
	.answer_fence = answer_fence,
	.fail_reg = fail_reg,
	.key_in_use = key_in_use,
	.reg_fails_errno = -EINVAL,
	.dereg_refused_errno = -EINVAL,
};

/*
 * A device whose admin queue has no DESTROY_MR could not fence an MR: the
 * registration is refused up front, before any command, with nothing left
 * attached.
 */
static void test_reg_refused_without_destroy(struct kunit *test)
{
	struct ionic_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	fw->dev->lif_cfg.admin_opcodes = IONIC_V1_ADMIN_DESTROY_MR;
	ib_kunit_mr_expect_reg_error(test, try_reg(test, fd), -EOPNOTSUPP);
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

	mr = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	ionic_kill_rdma_admin(fw->dev, false);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 0);
	KUNIT_EXPECT_EQ(test, fw->killed_cmds, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->killed_cmds, 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

static struct kunit_case ionic_dmabuf_mr_cases[] = {
	IB_KUNIT_MR_CASE(dereg_races_revoke),
	IB_KUNIT_MR_CASE(revoke_then_dereg),
	IB_KUNIT_MR_CASE(dereg_disarms),
	IB_KUNIT_MR_CASE_UNFENCED(revoke_fence_fails),
	IB_KUNIT_MR_CASE(dereg_refused_keeps_mr),
	KUNIT_CASE(test_reg_refused_without_destroy),
	KUNIT_CASE(test_revoke_after_reset),
	IB_KUNIT_MR_CASE(reg_fails),
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
