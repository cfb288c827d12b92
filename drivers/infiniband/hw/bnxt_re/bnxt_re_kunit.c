// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KUnit tests for bnxt_re's dma-buf MRs.
 *
 * bnxt_re_dmabuf_mr: registration, the exporter's revoke and dereg of dma-buf
 * MRs on a device that is never probed. The firmware is a static stub of
 * bnxt_qplib_rcfw_send_message(), which rcfw redirects after its channel
 * checks: a command that rcfw refuses or, on a detached device, completes
 * without posting it never reaches the stub. The stub answers ALLOCATE_MRW
 * with keys it hands out itself, keeps the state of each key (allocated,
 * registered, free), answers REGISTER_MR, DEREGISTER_MR and DEALLOCATE_KEY,
 * fails the command a case chooses (an error status, -EIO, or a timeout,
 * -ETIMEDOUT with the firmware stall rcfw then records) and records every
 * command it receives with its key. The
 * PCI half of the last resort, bnxt_re_pci_stop_dma(), is stubbed too (the
 * PCI function exists for the DMA API only): the stub records whether the
 * memory of the MR being fenced was still mapped when it ran, and whether
 * its page list (PBL) was still allocated. So is bnxt_re_can_stop_dma(),
 * whose answer (whether bnxt_en can recover a stop) a case chooses. The
 * IB_EVENT_DEVICE_FATAL events the driver raises are counted.
 *
 * The scenarios every driver shares are ib_kunit_mr's, run on bnxt_re
 * through the ops table below, with the stop as the last resort and a
 * detached rcfw as bnxt_en's recovery.
 */

#include <kunit/static_stub.h>
#include <kunit/test.h>
#include <linux/bnxt/ulp.h>
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_kunit_mr.h>
#include <rdma/ib_pack.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>

#include "roce_hsi.h"
#include "qplib_res.h"
#include "qplib_sp.h"
#include "qplib_fp.h"
#include "qplib_rcfw.h"
#include "qplib_tlv.h"
#include "bnxt_re.h"
#include "ib_verbs.h"
#include "bnxt.h"

#define OP_ALLOC	CMDQ_BASE_OPCODE_ALLOCATE_MRW
#define OP_REG		CMDQ_BASE_OPCODE_REGISTER_MR
#define OP_DEREG	CMDQ_BASE_OPCODE_DEREGISTER_MR
#define OP_DEALLOC	CMDQ_BASE_OPCODE_DEALLOCATE_KEY

#define FW_PD_ID	0x77
#define FW_KEY_BASE	0x100
#define FW_KEYS		16
#define FW_CMDS		16
#define FW_MRS		4

enum fw_key_state {
	KEY_FREE,
	KEY_ALLOCATED,
	KEY_REGISTERED,
};

struct fw_cmd {
	u8 opcode;
	u32 key;
};

/* What the stubbed firmware saw and is to answer */
struct bnxt_fw {
	struct ib_kunit_mr_fixture fx;	/* first: the scenarios' */
	struct bnxt_re_dev *rdev;
	struct bnxt_re_pd *pd;
	struct bnxt_re_mr *mrs[FW_MRS];	/* registered, not deregistered */
	unsigned int ncmds;
	struct fw_cmd cmds[FW_CMDS];	/* the first commands, in order */
	u32 next_key;
	u8 keys[FW_KEYS];		/* enum fw_key_state, from FW_KEY_BASE */
	u8 fail_op;			/* fail every command of this opcode */
	int fail_rc;			/* -EIO (error status) or -ETIMEDOUT */
	bool detach_at_fence;		/* fatal detach while DEREGISTER_MR waits */
	unsigned int stops;		/* bnxt_re_pci_stop_dma() calls */
	unsigned int mapped_stops;	/* those with the fenced MR still mapped */
	unsigned int pbl_stops;		/* those with its PBL still allocated */
	struct bnxt_re_mr *fencing;	/* the MR of the last DEREGISTER_MR */
	bool no_owner_reset;		/* bnxt_en cannot recover a stop */
};

static struct dma_resv *mr_resv(struct bnxt_re_mr *mr)
{
	return to_ib_umem_dmabuf(mr->ib_umem)->attach->dmabuf->resv;
}

static struct bnxt_re_mr *fw_find_mr(struct bnxt_fw *fw, u32 lkey)
{
	int i;

	for (i = 0; i < FW_MRS; i++)
		if (fw->mrs[i] && fw->mrs[i]->qplib_mr.lkey == lkey)
			return fw->mrs[i];
	return NULL;
}

static u8 *fw_key(struct kunit *test, struct bnxt_fw *fw, u32 key)
{
	if (key < FW_KEY_BASE || key >= FW_KEY_BASE + FW_KEYS) {
		KUNIT_FAIL(test, "key %#x was never handed out", key);
		return NULL;
	}
	return &fw->keys[key - FW_KEY_BASE];
}

/* What bnxt_re_stop_irq() does after bnxt_en reset the firmware */
static void detach_after_reset(struct bnxt_fw *fw)
{
	set_bit(ERR_DEVICE_DETACHED, &fw->rdev->rcfw.cmdq.flags);
	set_bit(BNXT_RE_FLAG_ERR_DEVICE_DETACHED, &fw->rdev->flags);
}

/* What bnxt_re_suspend() does when bnxt_en reports a fatal firmware state */
static void detach_fatal(struct bnxt_fw *fw)
{
	set_bit(BNXT_STATE_FW_FATAL_COND, &fw->rdev->en_dev->en_state);
	detach_after_reset(fw);
}

/* A DEREGISTER_MR goes out: the fence of the MR with this key */
static void fw_fence_starts(struct kunit *test, struct bnxt_fw *fw,
			    struct bnxt_qplib_cmdqmsg *msg, u32 key)
{
	struct bnxt_re_mr *mr = fw_find_mr(fw, key);

	/* block=true would spin for seconds under the reservation lock */
	KUNIT_EXPECT_FALSE(test, msg->block);
	KUNIT_EXPECT_NOT_NULL_MSG(test, mr, "DEREGISTER_MR of key %#x", key);
	if (mr) {
		fw->fencing = mr;
		KUNIT_EXPECT_TRUE_MSG(test, dma_resv_is_locked(mr_resv(mr)),
				      "fence without the reservation lock");
	}
	ib_kunit_mr_fence_seen(test, key);
}

/* The firmware's answer to a command it received and did not fail */
static int fw_answer(struct kunit *test, struct bnxt_fw *fw, u8 opcode,
		     u32 key, struct bnxt_qplib_cmdqmsg *msg)
{
	u8 *state = fw_key(test, fw, key);

	if (!state)
		return -EINVAL;
	switch (opcode) {
	case OP_ALLOC: {
		struct creq_allocate_mrw_resp *resp = (void *)msg->resp;

		KUNIT_EXPECT_EQ(test, msg->res_sz, sizeof(*resp));
		KUNIT_EXPECT_EQ(test, *state, KEY_FREE);
		*state = KEY_ALLOCATED;
		fw->next_key++;
		resp->xid = cpu_to_le32(key);
		return 0;
	}
	case OP_REG:
		KUNIT_EXPECT_EQ_MSG(test, *state, KEY_ALLOCATED,
				    "REGISTER_MR of key %#x", key);
		*state = KEY_REGISTERED;
		return 0;
	case OP_DEREG:
		KUNIT_EXPECT_EQ_MSG(test, *state, KEY_REGISTERED,
				    "DEREGISTER_MR of key %#x", key);
		/* The key stays allocated: only DEALLOCATE_KEY frees it */
		*state = KEY_ALLOCATED;
		return 0;
	default:
		/* Deregistered or not: this driver frees registered keys too */
		KUNIT_EXPECT_NE_MSG(test, *state, KEY_FREE,
				    "DEALLOCATE_KEY of key %#x", key);
		*state = KEY_FREE;
		return 0;
	}
}

static int fake_send_message(struct bnxt_qplib_rcfw *rcfw,
			     struct bnxt_qplib_cmdqmsg *msg)
{
	struct kunit *test = kunit_get_current_test();
	struct bnxt_fw *fw = test->priv;
	u8 opcode = __get_cmdq_base_opcode(msg->req, msg->req_sz);
	void *req = msg->req;
	u32 key;

	KUNIT_EXPECT_PTR_EQ(test, rcfw, &fw->rdev->rcfw);
	if (HAS_TLV_HEADER(req) && msg->req_sz > TLV_BYTES)
		req = GET_TLV_DATA(req);

	switch (opcode) {
	case OP_ALLOC: {
		struct cmdq_allocate_mrw *r = req;

		KUNIT_EXPECT_EQ(test, le32_to_cpu(r->pd_id), FW_PD_ID);
		KUNIT_EXPECT_EQ(test, r->mrw_flags,
				CMDQ_ALLOCATE_MRW_MRW_FLAGS_MR);
		/* The key it hands out, none if it fails */
		key = fw->fail_op == OP_ALLOC ? 0 : fw->next_key;
		break;
	}
	case OP_REG: {
		struct cmdq_register_mr *r = req;

		key = le32_to_cpu(r->key);
		/* See bnxt_re_reg_user_mr_dmabuf(): ALLOCATE_MRW made the key */
		KUNIT_EXPECT_FALSE(test, le16_to_cpu(r->flags) &
				   CMDQ_REGISTER_MR_FLAGS_ALLOC_MR);
		break;
	}
	case OP_DEREG:
		key = le32_to_cpu(((struct cmdq_deregister_mr *)req)->lkey);
		fw_fence_starts(test, fw, msg, key);
		break;
	case OP_DEALLOC:
		key = le32_to_cpu(((struct cmdq_deallocate_key *)req)->key);
		break;
	default:
		KUNIT_FAIL(test, "unexpected command %#x", opcode);
		return -EOPNOTSUPP;
	}

	if (fw->ncmds < FW_CMDS) {
		fw->cmds[fw->ncmds].opcode = opcode;
		fw->cmds[fw->ncmds].key = key;
	}
	fw->ncmds++;

	if (opcode == fw->fail_op) {
		if (fw->fail_rc == -EIO)
			((struct creq_qp_event *)msg->resp)->status = 1;
		/*
		 * rcfw's wait ends only in bnxt_re_is_fw_stalled(): the stall
		 * fails every later command before it is posted.
		 */
		if (fw->fail_rc == -ETIMEDOUT)
			set_bit(FIRMWARE_STALL_DETECTED, &rcfw->cmdq.flags);
		return fw->fail_rc;
	}
	if (opcode == OP_DEREG && fw->detach_at_fence) {
		/* rcfw's wait ends with success when the device detaches */
		detach_fatal(fw);
		return 0;
	}
	return fw_answer(test, fw, opcode, key, msg);
}

static void fake_pci_stop_dma(struct bnxt_re_dev *rdev)
{
	struct kunit *test = kunit_get_current_test();
	struct bnxt_fw *fw = test->priv;
	struct bnxt_re_mr *mr = fw->fencing;

	KUNIT_EXPECT_PTR_EQ(test, rdev, fw->rdev);
	fw->stops++;
	ib_kunit_mr_last_resort_seen(test);
	/* The core unmaps after the callback returns */
	if (mr && mr->ib_umem && to_ib_umem_dmabuf(mr->ib_umem)->sgt)
		fw->mapped_stops++;
	if (mr && mr->qplib_mr.hwq.max_elements)
		fw->pbl_stops++;
}

/* Whether bnxt_en has a firmware reset to undo a stop */
static bool fake_can_stop_dma(struct bnxt_re_dev *rdev)
{
	struct bnxt_fw *fw = kunit_get_current_test()->priv;

	return !fw->no_owner_reset;
}

/* The IB_EVENT_DEVICE_FATAL events the device raised so far */
static int fatal_events(struct bnxt_fw *fw)
{
	return ib_kunit_events_seen(fw->fx.events, IB_EVENT_DEVICE_FATAL);
}

/* The firmware received command @i (from 0) of this opcode and key */
static void expect_cmd(struct kunit *test, unsigned int i, u8 opcode, u32 key)
{
	struct bnxt_fw *fw = test->priv;

	KUNIT_ASSERT_LT_MSG(test, i, min(fw->ncmds, FW_CMDS),
			    "command %u never came", i);
	KUNIT_EXPECT_EQ_MSG(test, fw->cmds[i].opcode, opcode, "command %u", i);
	KUNIT_EXPECT_EQ_MSG(test, fw->cmds[i].key, key, "key of command %u", i);
}

/* The firmware's state of a key */
static int key_state(struct kunit *test, u32 key)
{
	u8 *state = fw_key(test, test->priv, key);

	return state ? *state : -1;
}

static const struct ib_kunit_mr_ops bnxt_mr_ops;

static int bnxt_fw_init(struct kunit *test)
{
	struct bnxt_en_dev *en_dev;
	struct bnxt_re_dev *rdev;
	struct pci_dev *pdev;
	struct bnxt_fw *fw;

	fw = kunit_kzalloc(test, sizeof(*fw), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw);
	fw->next_key = FW_KEY_BASE;
	test->priv = fw;

	/*
	 * Never probed: what bnxt_re_probe() and the rcfw channel set up for
	 * MRs. The PCI function is there for the DMA API: an MR of more than
	 * one page has a level-1 PBL in coherent memory.
	 */
	rdev = container_of(ib_kunit_alloc_device(test, sizeof(*rdev),
						  "bnxt_re_kunit"),
			    struct bnxt_re_dev, ibdev);
	pdev = ib_kunit_pci_dev(test, "bnxt_re_kunit_pf");
	en_dev = kunit_kzalloc(test, sizeof(*en_dev), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, en_dev);
	rdev->dev_attr = kunit_kzalloc(test, sizeof(*rdev->dev_attr),
				       GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, rdev->dev_attr);
	en_dev->pdev = pdev;
	rdev->en_dev = en_dev;
	rdev->rcfw.pdev = pdev;
	rdev->rcfw.res = &rdev->qplib_res;
	sema_init(&rdev->rcfw.rcfw_inflight, RCFW_CMD_NON_BLOCKING_SHADOW_QD);
	set_bit(FIRMWARE_INITIALIZED_FLAG, &rdev->rcfw.cmdq.flags);
	rdev->qplib_res.pdev = pdev;
	rdev->qplib_res.rcfw = &rdev->rcfw;
	fw->rdev = rdev;

	fw->pd = kunit_kzalloc(test, sizeof(*fw->pd), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw->pd);
	fw->pd->ib_pd.device = &rdev->ibdev;
	fw->pd->rdev = rdev;
	fw->pd->qplib_pd.id = FW_PD_ID;
	ib_kunit_mr_init(test, &fw->fx, &bnxt_mr_ops, &rdev->ibdev);

	kunit_activate_static_stub(test, bnxt_qplib_rcfw_send_message,
				   fake_send_message);
	kunit_activate_static_stub(test, bnxt_re_pci_stop_dma,
				   fake_pci_stop_dma);
	kunit_activate_static_stub(test, bnxt_re_can_stop_dma,
				   fake_can_stop_dma);
	return 0;
}

#define MR_IOVA 0x10000
/* One page: a level-0 PBL, which needs no PCI function */
#define MR_BYTES PAGE_SIZE
#define MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | \
		   IB_ACCESS_REMOTE_WRITE)

/* A deregistered MR is gone: the stubs must not look at it */
static void forget_mr(struct bnxt_fw *fw, struct bnxt_re_mr *mr)
{
	int i;

	for (i = 0; i < FW_MRS; i++)
		if (fw->mrs[i] == mr)
			fw->mrs[i] = NULL;
	if (fw->fencing == mr)
		fw->fencing = NULL;
}

/* Deregister at the end of a case that did not, also if it failed */
/* bnxt_re_dereg_mr(); the stubs forget an MR it freed */
static int ops_dereg(struct ib_mr *ib_mr, struct ib_udata *udata)
{
	struct bnxt_fw *fw = kunit_get_current_test()->priv;
	struct bnxt_re_mr *mr = container_of(ib_mr, struct bnxt_re_mr, ib_mr);
	int rc = bnxt_re_dereg_mr(ib_mr, udata);

	if (!rc)
		forget_mr(fw, mr);
	return rc;
}

static struct ib_mr *try_reg_bytes(struct kunit *test, int fd, u64 bytes)
{
	struct bnxt_fw *fw = test->priv;
	struct uverbs_attr_bundle *attrs;

	attrs = kunit_kzalloc(test, sizeof(*attrs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, attrs);
	return bnxt_re_reg_user_mr_dmabuf(&fw->pd->ib_pd, 0, bytes, MR_IOVA,
					  fd, MR_ACCESS, NULL, attrs);
}

static struct ib_mr *try_reg(struct kunit *test, int fd)
{
	return try_reg_bytes(test, fd, MR_BYTES);
}

/* A registered MR, which the stubs are to know */
static struct bnxt_re_mr *know_mr(struct kunit *test, struct ib_mr *ib_mr)
{
	struct bnxt_fw *fw = test->priv;
	struct bnxt_re_mr *mr;
	int i;

	ib_mr->device = &fw->rdev->ibdev;
	ib_mr->pd = &fw->pd->ib_pd;
	mr = container_of(ib_mr, struct bnxt_re_mr, ib_mr);
	for (i = 0; i < FW_MRS && fw->mrs[i]; i++)
		;
	KUNIT_ASSERT_LT(test, i, FW_MRS);
	fw->mrs[i] = mr;
	/* Until a DEREGISTER_MR says which, a stop is for the last MR */
	fw->fencing = mr;
	return mr;
}

static struct bnxt_re_mr *reg_dmabuf_mr_bytes(struct kunit *test, int fd,
					      u64 bytes)
{
	struct bnxt_fw *fw = test->priv;
	struct bnxt_re_mr *mr;
	struct ib_mr *ib_mr;

	ib_mr = try_reg_bytes(test, fd, bytes);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(ib_mr), "reg: %pe", ib_mr);
	mr = know_mr(test, ib_mr);
	/* The case's end deregisters it unless the case did */
	ib_kunit_mr_track(test, ib_mr);

	/* A key from ALLOCATE_MRW, registered with REGISTER_MR, both ways */
	KUNIT_ASSERT_GE(test, fw->ncmds, 2);
	expect_cmd(test, fw->ncmds - 2, OP_ALLOC, mr->ib_mr.lkey);
	expect_cmd(test, fw->ncmds - 1, OP_REG, mr->ib_mr.lkey);
	KUNIT_EXPECT_EQ(test, mr->ib_mr.rkey, mr->ib_mr.lkey);
	KUNIT_EXPECT_EQ(test, key_state(test, mr->ib_mr.lkey), KEY_REGISTERED);
	return mr;
}

static struct bnxt_re_mr *reg_dmabuf_mr(struct kunit *test, int fd)
{
	return reg_dmabuf_mr_bytes(test, fd, MR_BYTES);
}

/* bnxt_re_dereg_mr(), which may fail: the MR then stays for dereg() */
static int try_dereg(struct kunit *test, struct bnxt_re_mr *mr)
{
	return ib_kunit_mr_dereg(test, &mr->ib_mr);
}

/* bnxt_re_dereg_mr(), which must succeed */
static void dereg(struct kunit *test, struct bnxt_re_mr *mr)
{
	KUNIT_EXPECT_EQ(test, try_dereg(test, mr), 0);
}

/* The stubs know it; the scenarios track it */
static struct ib_mr *ops_try_reg(struct kunit *test, int fd)
{
	struct ib_mr *ib_mr = try_reg(test, fd);

	if (!IS_ERR(ib_mr))
		know_mr(test, ib_mr);
	return ib_mr;
}

static struct ib_umem *mr_umem(struct ib_mr *ib_mr)
{
	return container_of(ib_mr, struct bnxt_re_mr, ib_mr)->ib_umem;
}

static u64 mr_fence_key(struct ib_mr *ib_mr)
{
	return ib_mr->lkey;
}

/* DEREGISTER_MR completes, fails with an error status, or times out */
static void answer_fence(struct kunit *test, enum ib_kunit_fence answer)
{
	struct bnxt_fw *fw = test->priv;

	fw->fail_op = answer == IB_KUNIT_FENCE_DONE ? 0 : OP_DEREG;
	fw->fail_rc = answer == IB_KUNIT_FENCE_GONE ? -ETIMEDOUT : -EIO;
}

static void fail_reg(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;

	fw->fail_op = OP_REG;
	fw->fail_rc = -EIO;
}

static bool key_in_use(struct kunit *test, u64 key)
{
	return key_state(test, key) != KEY_FREE;
}

/* bnxt_en reset the firmware: rcfw detached completes commands unsent */
static void recover(struct kunit *test)
{
	detach_after_reset(test->priv);
}

static const struct ib_kunit_mr_ops bnxt_mr_ops = {
	.mr_bytes = MR_BYTES,
	.try_reg = ops_try_reg,
	.dereg = ops_dereg,
	.umem = mr_umem,
	.fence_key = mr_fence_key,
	.answer_fence = answer_fence,
	.fail_reg = fail_reg,
	.key_in_use = key_in_use,
	.recover = recover,
	.reg_fails_errno = -EIO,
	.dereg_refused_errno = -EIO,
	.dereg_gone_errno = -ETIMEDOUT,
};

/*
 * Two fences fail: each clears bus mastering before its memory is unmapped
 * (bnxt_en's firmware reset may have set it again in between), and
 * IB_EVENT_DEVICE_FATAL is raised once.
 */
static void test_stop_each_event_once(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct bnxt_re_mr *a, *b;

	a = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	b = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf));
	KUNIT_EXPECT_NE(test, a->ib_mr.lkey, b->ib_mr.lkey);
	fw->fail_op = OP_DEREG;
	fw->fail_rc = -EIO;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(b_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 6);
	expect_cmd(test, 4, OP_DEREG, a->ib_mr.lkey);
	expect_cmd(test, 5, OP_DEREG, b->ib_mr.lkey);
	KUNIT_EXPECT_EQ(test, fw->stops, 2);
	KUNIT_EXPECT_EQ(test, fw->mapped_stops, 2);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);

	dereg(test, a);
	dereg(test, b);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 8);
	KUNIT_EXPECT_EQ(test, fw->stops, 2);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	ib_kunit_expect_mock(test, a_buf, 0, 0, 0);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

/*
 * The revoke's DEREGISTER_MR times out, and rcfw records a firmware stall:
 * DMA is stopped before the memory is unmapped, IB_EVENT_DEVICE_FATAL raised.
 * The next revoke's DEREGISTER_MR is failed at once, unsent, and that MR's
 * memory is stopped before it is unmapped too, with no second event. A dereg
 * cannot free the key while the firmware is stalled and fails, keeping the
 * MR; once bnxt_en has reset the firmware (rcfw detached), it succeeds.
 */
static void test_revoke_fence_times_out(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct bnxt_re_mr *a, *b;

	a = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	b = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf));
	fw->fail_op = OP_DEREG;
	fw->fail_rc = -ETIMEDOUT;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 5);
	expect_cmd(test, 4, OP_DEREG, a->ib_mr.lkey);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_EQ(test, fw->mapped_stops, 1);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	ib_kunit_expect_mock(test, a_buf, 1, 0, 0);

	/* rcfw fails B's DEREGISTER_MR before the stub could see it */
	fw->fencing = b;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(b_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 5);
	KUNIT_EXPECT_EQ(test, fw->stops, 2);
	KUNIT_EXPECT_EQ(test, fw->mapped_stops, 2);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	ib_kunit_expect_mock(test, b_buf, 1, 0, 0);

	KUNIT_EXPECT_EQ(test, try_dereg(test, a), -ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 5);
	detach_after_reset(fw);
	dereg(test, a);
	dereg(test, b);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 5);
	KUNIT_EXPECT_EQ(test, fw->stops, 2);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	ib_kunit_expect_mock(test, a_buf, 0, 0, 0);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

/*
 * REGISTER_MR fails with an error status: the registration fails with -EIO,
 * the key it allocated is freed with DEALLOCATE_KEY, and nothing stays
 * attached to the buffer.
 */
static void test_reg_fails(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ib_mr *ib_mr;
	int fd;

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	fw->fail_op = OP_REG;
	fw->fail_rc = -EIO;
	ib_mr = try_reg(test, fd);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(ib_mr), -EIO);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 3);
	expect_cmd(test, 0, OP_ALLOC, FW_KEY_BASE);
	expect_cmd(test, 1, OP_REG, FW_KEY_BASE);
	expect_cmd(test, 2, OP_DEALLOC, FW_KEY_BASE);
	KUNIT_EXPECT_EQ(test, key_state(test, FW_KEY_BASE), KEY_FREE);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);

	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 3);
}

/*
 * bnxt_en has no firmware reset that would undo a stop (no error recovery
 * from the firmware): a revocable registration is refused with -EOPNOTSUPP
 * before anything is attached or sent, rather than a failed fence later
 * stopping the function for good.
 */
static void test_reg_refused_without_owner_reset(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ib_mr *ib_mr;
	int fd;

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	fw->no_owner_reset = true;
	ib_mr = try_reg(test, fd);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(ib_mr), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
}

/* ALLOCATE_MRW fails: -EIO, nothing else sent, nothing attached. */
static void test_alloc_fails(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ib_mr *ib_mr;
	int fd;

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	fw->fail_op = OP_ALLOC;
	fw->fail_rc = -EIO;
	ib_mr = try_reg(test, fd);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(ib_mr), -EIO);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 1);
	expect_cmd(test, 0, OP_ALLOC, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * On firmware that can allocate the key in REGISTER_MR
 * (MR_REGISTER_ALLOC), a dma-buf MR still takes it from ALLOCATE_MRW, so
 * that DEREGISTER_MR is known to leave it allocated.
 */
static void test_reg_on_alloc_mr_firmware(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct bnxt_re_mr *mr;

	fw->rdev->dev_attr->dev_cap_flags |=
		CREQ_QUERY_FUNC_RESP_SB_MR_REGISTER_ALLOC;
	/* reg_dmabuf_mr() checks ALLOCATE_MRW, and the stub REGISTER_MR */
	mr = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	KUNIT_EXPECT_EQ(test, fw->ncmds, 2);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 3);
	expect_cmd(test, 2, OP_DEREG, mr->ib_mr.lkey);
	KUNIT_EXPECT_EQ(test, key_state(test, mr->ib_mr.lkey), KEY_ALLOCATED);
}

/*
 * DEALLOCATE_KEY fails: the dereg, which revoked first, returns the error
 * and keeps the MR; a retry sends DEALLOCATE_KEY again and no second
 * DEREGISTER_MR.
 */
static void test_dereg_retry(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct bnxt_re_mr *mr;
	u32 key;

	mr = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	key = mr->ib_mr.lkey;
	fw->fail_op = OP_DEALLOC;
	fw->fail_rc = -EIO;
	KUNIT_EXPECT_EQ(test, try_dereg(test, mr), -EIO);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 4);
	expect_cmd(test, 2, OP_DEREG, key);
	expect_cmd(test, 3, OP_DEALLOC, key);
	KUNIT_EXPECT_EQ(test, key_state(test, key), KEY_ALLOCATED);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	fw->fail_op = 0;
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 5);
	expect_cmd(test, 4, OP_DEALLOC, key);
	KUNIT_EXPECT_EQ(test, key_state(test, key), KEY_FREE);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * bnxt_en found the firmware in a fatal state and bnxt_re detached rcfw,
 * which completes DEREGISTER_MR without sending it, while the device's DMA
 * has not been stopped: the revoke sends nothing and stops DMA while the
 * memory is still mapped, with one IB_EVENT_DEVICE_FATAL. The PBL stays
 * until the dereg, whose DEALLOCATE_KEY rcfw completes unsent too.
 */
static void test_revoke_detached_fatal(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct bnxt_re_mr *mr;

	mr = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	detach_fatal(fw);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 2);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_EQ(test, fw->mapped_stops, 1);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	KUNIT_EXPECT_NE(test, mr->qplib_mr.hwq.max_elements, 0);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 2);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * The device detaches in a fatal firmware state while DEREGISTER_MR waits:
 * rcfw then completes it with success, which says nothing about the
 * device's DMA. DMA is stopped before the memory is unmapped, with one
 * IB_EVENT_DEVICE_FATAL.
 */
/*
 * An MR of four pages has a PBL in coherent memory, which the device walks.
 * A revoke that fences frees it; one whose DEREGISTER_MR rcfw completed
 * because the device detached in a fatal state keeps it while DMA is
 * stopped, and the dereg frees it after.
 */
static void test_pbl_freed_after_stop(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct bnxt_re_mr *a, *b;

	a = reg_dmabuf_mr_bytes(test, ib_kunit_mock_fd(test, 4 * PAGE_SIZE, 0,
						       &a_buf),
				4 * PAGE_SIZE);
	KUNIT_EXPECT_NE(test, a->qplib_mr.hwq.max_elements, 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	KUNIT_EXPECT_EQ(test, a->qplib_mr.hwq.max_elements, 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);

	b = reg_dmabuf_mr_bytes(test, ib_kunit_mock_fd(test, 4 * PAGE_SIZE, 0,
						       &b_buf),
				4 * PAGE_SIZE);
	fw->detach_at_fence = true;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(b_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_EQ(test, fw->pbl_stops, 1);
	KUNIT_EXPECT_NE(test, b->qplib_mr.hwq.max_elements, 0);
	dereg(test, b);
	dereg(test, a);
	ib_kunit_expect_mock(test, a_buf, 0, 0, 0);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

static void test_revoke_detached_during_fence(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct bnxt_re_mr *mr;

	mr = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	fw->detach_at_fence = true;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 3);
	expect_cmd(test, 2, OP_DEREG, mr->ib_mr.lkey);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_EQ(test, fw->mapped_stops, 1);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 3);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * After a firmware reset that already happened (bnxt_re_stop_irq() with
 * reset) rcfw is detached too, but the function's RoCE resources went with
 * the reset: the revoke completes unsent and nothing is stopped.
 */
static void test_revoke_after_fw_reset(struct kunit *test)
{
	struct bnxt_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct bnxt_re_mr *mr;

	mr = reg_dmabuf_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	detach_after_reset(fw);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 2);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->ncmds, 2);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

static struct kunit_case bnxt_re_dmabuf_mr_cases[] = {
	IB_KUNIT_MR_CASE(dereg_races_revoke),
	IB_KUNIT_MR_CASE(revoke_then_dereg),
	IB_KUNIT_MR_CASE(dereg_disarms),
	IB_KUNIT_MR_CASE_UNFENCED(revoke_fence_fails),
	IB_KUNIT_MR_CASE(dereg_refused_keeps_mr),
	KUNIT_CASE(test_stop_each_event_once),
	KUNIT_CASE(test_revoke_fence_times_out),
	IB_KUNIT_MR_CASE(dereg_fence_fails),
	KUNIT_CASE(test_reg_fails),
	KUNIT_CASE(test_alloc_fails),
	KUNIT_CASE(test_reg_refused_without_owner_reset),
	KUNIT_CASE(test_reg_on_alloc_mr_firmware),
	KUNIT_CASE(test_dereg_retry),
	KUNIT_CASE(test_revoke_detached_fatal),
	KUNIT_CASE(test_revoke_detached_during_fence),
	KUNIT_CASE(test_pbl_freed_after_stop),
	KUNIT_CASE(test_revoke_after_fw_reset),
	{}
};

static struct kunit_suite bnxt_re_dmabuf_mr_suite = {
	.name = "bnxt_re_dmabuf_mr",
	.init = bnxt_fw_init,
	.test_cases = bnxt_re_dmabuf_mr_cases,
};

kunit_test_suite(bnxt_re_dmabuf_mr_suite);

MODULE_DESCRIPTION("KUnit tests for bnxt_re's dma-buf MRs");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
