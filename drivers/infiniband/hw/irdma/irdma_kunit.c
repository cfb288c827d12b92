// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * KUnit tests for irdma's dma-buf MRs.
 *
 * irdma_dmabuf_mr: registration, the exporter's revoke and dereg of dma-buf
 * MRs on a device that is never probed. The device's half of the control QP
 * is stubbed: irdma_process_cqp_cmd() takes each command in place of the
 * CQP ring and records it, and irdma_cqp_ce_handler() posts its completion
 * in place of the CCQ, with the status a case chooses, or never posts it.
 * Everything above runs as it does on hardware: irdma_handle_cqp_op(), which
 * fails every command locally once a reset was requested (rf->reset), and
 * irdma_wait_event(), which turns a completion's error into an errno and, on
 * a timeout or on the status that means the CQP is broken, requests the
 * function's reset. That request, rf->gen_ops.request_reset(), goes to
 * ice, i40e or idpf, which reset the function later from their own service
 * task; here it is a stub that records whether the MR's memory was still
 * mapped for the device when it was made. A reset never happens in the
 * suite, so requests that were never completed are released when the case
 * ends, as irdma_cleanup_pending_cqp_op() does after a reset.
 *
 * The scenarios every driver shares are ib_kunit_mr's, run on irdma through
 * the ops table below, with the reset request as the last resort.
 */

#include <kunit/static_stub.h>
#include <kunit/test.h>
#include <linux/dma-buf.h>
#include <linux/slab.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_kunit_mr.h>
#include <rdma/ib_umem.h>

#include "main.h"

/* The stag indexes the device has, as a small function might */
#define MAX_MR 64
/* The CQP timeout a function reports (virtchnl's cqp_timeout_s) */
#define CQP_TIMEOUT_S 1

/* CQP completion status: major 0xffff with these minor codes */
#define CQP_MAJ_NONCRIT 0xffff
#define CQP_MIN_INVALID_STATE 0x8002	/* -EBUSY, as any refusal */
#define CQP_MIN_RESET 0x8029		/* the driver requests a reset */
/* A completion error irdma does not special-case: -EIO */
#define CQP_MAJ_ERR 0x1

/* A CQP completion's status: no error, or the error's major and minor codes */
struct cqp_status {
	bool err;
	u16 maj;
	u16 min;
};

/*
 * What the stubbed control QP saw and is to answer. Its resets, and whether
 * the MR was mapped at the last, are the fixture's last_resorts and
 * mapped_at_last_resort.
 */
struct irdma_fw {
	struct ib_kunit_mr_fixture fx;	/* first: the scenarios' */
	struct irdma_device *iwdev;
	struct irdma_pci_f *rf;
	struct irdma_sc_cqp sc_cqp;
	struct irdma_pd pd;
	unsigned int regs;		/* MR_REG_NON_SHARED commands */
	unsigned int deallocs;		/* DEALLOC_STAG commands */
	bool reg_err;			/* answer the next registration with */
	struct cqp_status dealloc;	/* DEALLOC_STAG's completion */
	bool dealloc_lost;		/* no completion for DEALLOC_STAG */
	/* The command whose completion the CCQ is to post, and its status */
	struct irdma_cqp_request *posted;
	struct cqp_status posted_status;
	/* Commands never completed: the device's, until a reset */
	struct irdma_cqp_request *lost[4];
	unsigned int nr_lost;
};

static int fake_process_cqp_cmd(struct irdma_sc_dev *dev,
				struct cqp_cmds_info *info)
{
	struct irdma_cqp_request *req =
		container_of(info, struct irdma_cqp_request, info);
	struct kunit *test = kunit_get_current_test();
	struct irdma_fw *fw = test->priv;
	struct cqp_status status = {};

	KUNIT_EXPECT_PTR_EQ(test, dev, &fw->rf->sc_dev);
	/* Never reached once a reset was requested: irdma_handle_cqp_op() */
	KUNIT_EXPECT_FALSE(test, fw->rf->reset);
	/* One command at a time: each is waited for */
	KUNIT_EXPECT_NULL(test, fw->posted);
	dev->cqp->requested_ops++;

	switch (info->cqp_cmd) {
	case IRDMA_OP_MR_REG_NON_SHARED:
		fw->regs++;
		if (fw->reg_err)
			status = (struct cqp_status){ true, CQP_MAJ_ERR, 0 };
		break;
	case IRDMA_OP_DEALLOC_STAG:
		fw->deallocs++;
		KUNIT_EXPECT_TRUE(test, info->in.u.dealloc_stag.info.mr);
		ib_kunit_mr_fence_seen(test,
				       info->in.u.dealloc_stag.info.stag_idx);
		if (fw->dealloc_lost) {
			/* Taken, never completed: the wait times out */
			KUNIT_EXPECT_LT(test, fw->nr_lost, ARRAY_SIZE(fw->lost));
			if (fw->nr_lost < ARRAY_SIZE(fw->lost))
				fw->lost[fw->nr_lost++] = req;
			return 0;
		}
		status = fw->dealloc;
		break;
	default:
		KUNIT_FAIL(test, "unexpected CQP command %u", info->cqp_cmd);
		status = (struct cqp_status){ true, CQP_MAJ_ERR, 0 };
	}

	/* irdma_cqp_ce_handler() posts it, from the waiter's poll */
	fw->posted = req;
	fw->posted_status = status.err ? status : (struct cqp_status){};
	return 0;
}

static void fake_cqp_ce_handler(struct irdma_pci_f *rf, struct irdma_sc_cq *cq)
{
	struct kunit *test = kunit_get_current_test();
	struct irdma_fw *fw = test->priv;
	struct irdma_cqp_request *req = fw->posted;

	KUNIT_EXPECT_PTR_EQ(test, rf, fw->rf);
	if (!req)
		return;
	fw->posted = NULL;
	/* What the real handler copies from the CCQE */
	req->compl_info.error = fw->posted_status.err;
	req->compl_info.maj_err_code = fw->posted_status.maj;
	req->compl_info.min_err_code = fw->posted_status.min;
	req->compl_info.op_ret_val = 0;
	atomic64_inc(&rf->sc_dev.cqp->completed_ops);
	if (req->waiting)
		complete_all(&req->comp);
	irdma_put_cqp_request(&rf->cqp, req);
}

static void fake_request_reset(struct irdma_pci_f *rf)
{
	struct kunit *test = kunit_get_current_test();
	struct irdma_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, rf, fw->rf);
	/* Whoever requests it sets rf->reset first */
	KUNIT_EXPECT_TRUE(test, rf->reset);
	ib_kunit_mr_last_resort_seen(test);
}

/* What irdma_cleanup_pending_cqp_op() does after a reset */
static void release_lost(void *data)
{
	struct irdma_fw *fw = data;

	while (fw->nr_lost)
		irdma_put_cqp_request(&fw->rf->cqp, fw->lost[--fw->nr_lost]);
}

static const struct ib_kunit_mr_ops irdma_mr_ops;

static int irdma_fw_init(struct kunit *test)
{
	struct irdma_device *iwdev;
	struct irdma_pci_f *rf;
	struct irdma_fw *fw;
	u32 mrdrvbits;

	fw = kunit_kzalloc(test, sizeof(*fw), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw);
	test->priv = fw;

	/* Never registered: what irdma_probe() and its helpers set up */
	iwdev = container_of(ib_kunit_alloc_device(test, sizeof(*iwdev),
						   "irdma_kunit"),
			     struct irdma_device, ibdev);
	rf = kunit_kzalloc(test, sizeof(*rf), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, rf);
	iwdev->rf = rf;
	rf->iwdev = iwdev;
	rf->rdma_ver = IRDMA_GEN_2;
	rf->sc_dev.hw_attrs.uk_attrs.hw_rev = IRDMA_GEN_2;
	rf->sc_dev.hw_attrs.max_mr_size = SZ_1G;
	rf->sc_dev.hw_attrs.page_size_cap = SZ_4K | SZ_2M | SZ_1G;
	rf->sc_dev.hw_attrs.max_cqp_compl_wait_time_ms = CQP_COMPL_WAIT_TIME_MS;
	rf->sc_dev.vc_caps.cqp_timeout_s = CQP_TIMEOUT_S;
	rf->sc_dev.vc_caps.cqp_def_timeout_s = CQP_TIMEOUT_S;
	rf->sc_dev.cqp = &fw->sc_cqp;
	fw->sc_cqp.dev = &rf->sc_dev;
	atomic64_set(&fw->sc_cqp.completed_ops, 0);
	/* irdma_initialize_hw_rsrc() */
	spin_lock_init(&rf->rsrc_lock);
	rf->max_mr = MAX_MR;
	rf->allocated_mrs = kunit_kcalloc(test, BITS_TO_LONGS(MAX_MR),
					  sizeof(long), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, rf->allocated_mrs);
	mrdrvbits = 24 - max(get_count_order(rf->max_mr), 14);
	rf->mr_stagmask = ~(((1 << mrdrvbits) - 1) << (32 - mrdrvbits));
	/* irdma_create_cqp(), with no preallocated requests */
	spin_lock_init(&rf->cqp.req_lock);
	spin_lock_init(&rf->cqp.compl_lock);
	INIT_LIST_HEAD(&rf->cqp.cqp_avail_reqs);
	init_waitqueue_head(&rf->cqp.remove_wq);
	rf->gen_ops.request_reset = fake_request_reset;
	fw->iwdev = iwdev;
	fw->rf = rf;

	/* What irdma_alloc_pd() sets up, besides the PD's number */
	fw->pd.ibpd.device = &iwdev->ibdev;
	fw->pd.sc_pd.pd_id = 1;

	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, release_lost,
							fw), 0);
	ib_kunit_mr_init(test, &fw->fx, &irdma_mr_ops, &iwdev->ibdev);
	kunit_activate_static_stub(test, irdma_process_cqp_cmd,
				   fake_process_cqp_cmd);
	kunit_activate_static_stub(test, irdma_cqp_ce_handler,
				   fake_cqp_ce_handler);
	return 0;
}

#define MR_IOVA 0x10000
/* One page: a PBLE level 0 MR, which needs no PBLE pool (no HMC) */
#define MR_BYTES PAGE_SIZE
#define MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | \
		   IB_ACCESS_REMOTE_WRITE)

static struct ib_mr *try_reg(struct kunit *test, int fd)
{
	struct irdma_fw *fw = test->priv;

	return irdma_reg_user_mr_dmabuf(&fw->pd.ibpd, 0, MR_BYTES, MR_IOVA, fd,
					MR_ACCESS, NULL, NULL);
}

static struct ib_umem *mr_umem(struct ib_mr *ibmr)
{
	return to_iwmr(ibmr)->region;
}

/* DEALLOC_STAG names the stag's index */
static u64 mr_fence_key(struct ib_mr *ibmr)
{
	return ibmr->rkey >> IRDMA_CQPSQ_STAG_IDX_S;
}

static void answer_dealloc(struct irdma_fw *fw, bool err, u16 maj, u16 min)
{
	fw->dealloc = (struct cqp_status){ err, maj, min };
	fw->dealloc_lost = false;
}

/*
 * DEALLOC_STAG completes, completes with Invalid State (the CQP runs on)
 * or is never completed
 */
static void answer_fence(struct kunit *test, enum ib_kunit_fence answer)
{
	struct irdma_fw *fw = test->priv;

	answer_dealloc(fw, answer == IB_KUNIT_FENCE_REFUSED, CQP_MAJ_NONCRIT,
		       CQP_MIN_INVALID_STATE);
	fw->dealloc_lost = answer == IB_KUNIT_FENCE_GONE;
}

static void fail_reg(struct kunit *test)
{
	struct irdma_fw *fw = test->priv;

	fw->reg_err = true;
}

/* The stag's index, as irdma_free_stag() takes it from the stag */
static u32 stag_index(struct irdma_fw *fw, u32 stag)
{
	return (stag & fw->rf->mr_stagmask) >> IRDMA_CQPSQ_STAG_IDX_S;
}

/* The stag's index is allocated: no new MR can be given it */
static bool key_in_use(struct kunit *test, u64 key)
{
	struct irdma_fw *fw = test->priv;

	return test_bit(stag_index(fw, key << IRDMA_CQPSQ_STAG_IDX_S),
			fw->rf->allocated_mrs);
}

static const struct ib_kunit_mr_ops irdma_mr_ops = {
	.mr_bytes = MR_BYTES,
	.try_reg = try_reg,
	.dereg = irdma_dereg_mr,
	.umem = mr_umem,
	.fence_key = mr_fence_key,
	.answer_fence = answer_fence,
	.fail_reg = fail_reg,
	.key_in_use = key_in_use,
	.reg_fails_errno = -EIO,
	.dereg_refused_errno = -EBUSY,
	.fatal_from_owner = true,
};

static struct irdma_mr *reg_dmabuf_mr(struct kunit *test,
				      struct dma_buf **dmabuf)
{
	struct ib_mr *ibmr;

	ibmr = try_reg(test, ib_kunit_mock_fd(test, MR_BYTES, 0, dmabuf));
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(ibmr), "reg: %pe", ibmr);
	ib_kunit_mr_track(test, ibmr);
	return to_iwmr(ibmr);
}

/*
 * A user's dereg whose DEALLOC_STAG completes with an error irdma does not
 * special-case (-EIO), the CQP running on: the dereg fails, nothing is
 * reset, and the MR stays registered, mapped and revocable with its stag.
 */
static void test_dereg_refused_eio_keeps_mr(struct kunit *test)
{
	struct irdma_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct irdma_mr *mr;
	u32 idx;

	mr = reg_dmabuf_mr(test, &dmabuf);
	idx = stag_index(fw, mr->ibmr.rkey);
	answer_dealloc(fw, true, CQP_MAJ_ERR, 0);
	/* A dereg that went on freed the MR: nothing more to look at */
	KUNIT_ASSERT_EQ(test, ib_kunit_mr_dereg(test, &mr->ibmr), -EIO);
	KUNIT_EXPECT_EQ(test, fw->deallocs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	KUNIT_EXPECT_FALSE(test, fw->rf->reset);
	KUNIT_EXPECT_TRUE(test, test_bit(idx, fw->rf->allocated_mrs));
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);

	/* The exporter's revoke still reaches it, and fences it */
	answer_dealloc(fw, false, 0, 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->deallocs, 2);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, &mr->ibmr), 0);
	KUNIT_EXPECT_EQ(test, fw->deallocs, 2);
	KUNIT_EXPECT_FALSE(test, test_bit(idx, fw->rf->allocated_mrs));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * DEALLOC_STAG completes with the status on which irdma_wait_event()
 * requests the function's reset itself (0xffff/0x8029): the CQP is not to
 * be trusted, so the dereg goes on as for a timeout. The reset is requested
 * once, while the memory is still mapped; no second command reaches the
 * device, and the MR, its stag and its attachment go.
 */
static void test_dereg_reset_status(struct kunit *test)
{
	struct irdma_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct irdma_mr *mr;
	u32 idx;

	mr = reg_dmabuf_mr(test, &dmabuf);
	idx = stag_index(fw, mr->ibmr.rkey);
	answer_dealloc(fw, true, CQP_MAJ_NONCRIT, CQP_MIN_RESET);
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, &mr->ibmr), 0);
	KUNIT_EXPECT_EQ(test, fw->deallocs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
	KUNIT_EXPECT_TRUE(test, fw->fx.mapped_at_last_resort);
	KUNIT_EXPECT_TRUE(test, fw->rf->reset);
	KUNIT_EXPECT_FALSE(test, test_bit(idx, fw->rf->allocated_mrs));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->deallocs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
}

static struct kunit_case irdma_dmabuf_mr_cases[] = {
	IB_KUNIT_MR_CASE(revoke_then_dereg),
	IB_KUNIT_MR_CASE(dereg_disarms),
	IB_KUNIT_MR_CASE_UNFENCED(revoke_fence_fails),
	IB_KUNIT_MR_CASE(dereg_fence_fails),
	IB_KUNIT_MR_CASE(dereg_refused_keeps_mr),
	KUNIT_CASE(test_dereg_refused_eio_keeps_mr),
	KUNIT_CASE(test_dereg_reset_status),
	IB_KUNIT_MR_CASE(reg_fails),
	IB_KUNIT_MR_CASE(dereg_races_revoke),
	{}
};

static struct kunit_suite irdma_dmabuf_mr_suite = {
	.name = "irdma_dmabuf_mr",
	.init = irdma_fw_init,
	.test_cases = irdma_dmabuf_mr_cases,
};

kunit_test_suite(irdma_dmabuf_mr_suite);

MODULE_DESCRIPTION("KUnit tests for irdma's dma-buf MRs");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("DMA_BUF");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
