// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KUnit tests for EFA's dma-buf MRs.
 *
 * efa_dmabuf_mr: registration, the exporter's revoke and dereg of dma-buf MRs
 * on a device that is never probed. The device's half of the admin queue,
 * efa_com_exec_on_device(), is a static stub: it answers REG_MR with keys it
 * hands out itself and DEREG_MR with the completion status a case chooses,
 * or lets it time out, stopping the queue as the real wait does, and records
 * every command that reaches it. Everything above it runs: the queue's
 * state check, which fails commands locally once the queue stopped, and the
 * mapping of statuses to errnos. The device's reset, efa_reset_device(),
 * and the PCI half of the last resort, efa_pci_stop_dma(), are stubbed too
 * (there are no registers nor PCI function): the stubs record whether the
 * memory was still mapped for the device when they ran. The
 * IB_EVENT_DEVICE_FATAL events the driver raises are counted.
 *
 * The scenarios every driver shares are ib_kunit_mr's, run on EFA through
 * the ops table below, with the device's reset as the last resort. EFA
 * frees a key at the device with DEREG_MR and keeps it from new MRs by
 * refusing the PD's registrations instead: the PD cases here.
 */

#include <kunit/static_stub.h>
#include <kunit/test.h>
#include <linux/dma-buf.h>
#include <linux/ktime.h>
#include <linux/slab.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_kunit_mr.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>

#include "efa.h"
#include "efa_admin_cmds_defs.h"

/* What the stubbed admin queue saw and is to answer. */
struct efa_fw {
	struct ib_kunit_mr_fixture fx;	/* first: the scenarios' */
	struct efa_dev *dev;
	unsigned int reg_mrs;
	unsigned int dereg_mrs;
	u32 dereg_key[8];		/* the keys of the first DEREG_MRs */
	u8 reg_status;			/* REG_MR's completion status */
	u8 dereg_status;		/* DEREG_MR's completion status */
	bool dereg_times_out;		/* no completion for DEREG_MR */
	unsigned int dereg_fails;	/* if not 0: only so many fail */
	u32 next_key;
	/* Keys DEREG_MR freed, handed out again last-freed first */
	u32 free_keys[8];
	unsigned int nr_free;
	/*
	 * A revoked MR's key that no new MR of its PD may be given before the
	 * user deregisters the revoked MR; stale_regs counts the REG_MRs that
	 * were.
	 */
	bool stale_armed;
	u32 stale_key;
	u16 stale_pdn;
	unsigned int stale_regs;
	/*
	 * At the next REG_MR, revoke this buffer from another thread, and
	 * wait until the revoke waits for reg_pd's revoke_rwsem
	 */
	struct dma_buf *revoke_in_reg;
	struct efa_pd *reg_pd;
	int reset_err;			/* efa_reset_device()'s result */
	unsigned int stops;		/* efa_pci_stop_dma() calls */
	unsigned int resets_at_stop;	/* resets before the last stop */
	bool mapped_at_stop;		/* the MR's memory, at the last stop */
};

/* The device's answer: a completion with @status */
static int complete_with(struct efa_admin_acq_entry *comp, size_t comp_size,
			 u8 status)
{
	memset(comp, 0, comp_size);
	comp->acq_common_descriptor.status = status;
	return 0;
}

static int fake_exec_on_device(struct efa_com_admin_queue *aq, u8 opcode,
			       u8 flags, void *payload, size_t payload_size,
			       struct efa_admin_acq_entry *comp,
			       size_t comp_size)
{
	struct kunit *test = kunit_get_current_test();
	struct efa_fw *fw = test->priv;

	/* Never reached on a stopped queue: efa_com_cmd_exec() checks */
	KUNIT_EXPECT_TRUE(test, test_bit(EFA_AQ_STATE_RUNNING_BIT, &aq->state));
	switch (opcode) {
	case EFA_ADMIN_REG_MR: {
		struct efa_admin_reg_mr_resp *resp = (void *)comp;
		struct efa_admin_reg_mr_cmd *cmd = payload;
		u32 key;

		KUNIT_EXPECT_EQ(test, payload_size, sizeof(*cmd));
		KUNIT_EXPECT_EQ(test, comp_size, sizeof(*resp));
		fw->reg_mrs++;
		if (fw->reg_status)
			return complete_with(comp, comp_size, fw->reg_status);
		if (fw->revoke_in_reg) {
			struct rw_semaphore *sem = &fw->reg_pd->revoke_rwsem;
			struct dma_buf *buf = fw->revoke_in_reg;

			fw->revoke_in_reg = NULL;
			/* Returns when the revoke waits for the PD's rwsem */
			fw->fx.revoker =
				ib_kunit_revoke_blocked_on(test, buf, sem);
		}
		/* As an allocator may: the key freed last goes out first */
		if (fw->nr_free)
			key = fw->free_keys[--fw->nr_free];
		else
			key = fw->next_key++;
		if (fw->stale_armed && key == fw->stale_key &&
		    cmd->pd == fw->stale_pdn)
			fw->stale_regs++;
		complete_with(comp, comp_size, EFA_ADMIN_SUCCESS);
		resp->l_key = key;
		resp->r_key = key;
		return 0;
	}
	case EFA_ADMIN_DEREG_MR: {
		struct efa_admin_dereg_mr_cmd *cmd = payload;

		KUNIT_EXPECT_EQ(test, payload_size, sizeof(*cmd));
		if (fw->dereg_mrs < ARRAY_SIZE(fw->dereg_key))
			fw->dereg_key[fw->dereg_mrs] = cmd->l_key;
		fw->dereg_mrs++;
		ib_kunit_mr_fence_seen(test, cmd->l_key);
		if ((!fw->dereg_status && !fw->dereg_times_out) ||
		    (fw->dereg_fails && fw->dereg_mrs > fw->dereg_fails)) {
			/* The key is free: the device may hand it out again */
			if (fw->nr_free < ARRAY_SIZE(fw->free_keys))
				fw->free_keys[fw->nr_free++] = cmd->l_key;
			return complete_with(comp, comp_size,
					     EFA_ADMIN_SUCCESS);
		}
		if (fw->dereg_times_out) {
			/* As the wait for a completion that did not come */
			clear_bit(EFA_AQ_STATE_RUNNING_BIT, &aq->state);
			return -ETIME;
		}
		return complete_with(comp, comp_size, fw->dereg_status);
	}
	default:
		KUNIT_FAIL(test, "unexpected admin command %u", opcode);
		return -EOPNOTSUPP;
	}
}

/* The fixture's MR, still mapped for the device */
static bool mr_mapped(struct efa_fw *fw)
{
	struct efa_mr *mr;

	if (!fw->fx.mr)
		return false;
	mr = container_of(fw->fx.mr, struct efa_mr, ibmr);
	return mr->umem && to_ib_umem_dmabuf(mr->umem)->sgt;
}

static int fake_reset_device(struct efa_dev *dev, int reason)
{
	struct kunit *test = kunit_get_current_test();
	struct efa_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, dev, fw->dev);
	/* No command reaches the device while it resets */
	KUNIT_EXPECT_FALSE(test, test_bit(EFA_AQ_STATE_RUNNING_BIT,
					  &dev->edev.aq.state));
	ib_kunit_mr_last_resort_seen(test);
	return fw->reset_err;
}

static void fake_pci_stop_dma(struct efa_dev *dev)
{
	struct kunit *test = kunit_get_current_test();
	struct efa_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, dev, fw->dev);
	fw->stops++;
	fw->resets_at_stop = fw->fx.last_resorts;
	/* The core unmaps after the callback returns, dereg after this. */
	fw->mapped_at_stop = mr_mapped(fw);
}

/* The IB_EVENT_DEVICE_FATAL events the device raised so far */
static int fatal_events(struct efa_fw *fw)
{
	return ib_kunit_events_seen(fw->fx.events, IB_EVENT_DEVICE_FATAL);
}

/* The admin queue's completion timeout, as a device may set it */
#define CMD_TIMEOUT_MS 50

static const struct ib_kunit_mr_ops efa_mr_ops;

static int efa_fw_init(struct kunit *test)
{
	struct efa_fw *fw;
	struct efa_dev *dev;

	fw = kunit_kzalloc(test, sizeof(*fw), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw);
	fw->next_key = 0x100;
	test->priv = fw;

	/* Never registered: what efa_probe_device() sets up for MRs */
	dev = container_of(ib_kunit_alloc_device(test, sizeof(*dev),
						 "efa_kunit"),
			   struct efa_dev, ibdev);
	dev->edev.efa_dev = &dev->ibdev;
	dev->edev.aq.efa_dev = &dev->ibdev;
	set_bit(EFA_AQ_STATE_RUNNING_BIT, &dev->edev.aq.state);
	dev->edev.aq.completion_timeout = CMD_TIMEOUT_MS * USEC_PER_MSEC;
	/* A version 1 admin queue, as efa_com_admin_init_sq() sets it up */
	spin_lock_init(&dev->edev.aq.sq.lock);
	dev->edev.aq.sq.max_payload_size =
		sizeof(struct efa_admin_aq_entry) -
		offsetof(struct efa_admin_aq_entry, request_payload);
	mutex_init(&dev->fail_lock);
	dev->dev_attr.page_size_cap = PAGE_SIZE;
	dev->dev_attr.device_caps = EFA_ADMIN_FEATURE_DEVICE_ATTR_DESC_RDMA_READ_MASK |
				    EFA_ADMIN_FEATURE_DEVICE_ATTR_DESC_RDMA_WRITE_MASK;
	fw->dev = dev;
	ib_kunit_mr_init(test, &fw->fx, &efa_mr_ops, &dev->ibdev);

	kunit_activate_static_stub(test, efa_com_exec_on_device,
				   fake_exec_on_device);
	kunit_activate_static_stub(test, efa_reset_device, fake_reset_device);
	kunit_activate_static_stub(test, efa_pci_stop_dma, fake_pci_stop_dma);
	return 0;
}

static struct efa_pd *efa_pd_of(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct efa_pd, ibpd);
}

static struct ib_pd *fake_pd(struct kunit *test, struct efa_dev *dev, u16 pdn)
{
	struct efa_pd *pd = kunit_kzalloc(test, sizeof(*pd), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, pd);
	pd->ibpd.device = &dev->ibdev;
	pd->pdn = pdn;
	/* What efa_alloc_pd() does besides ALLOC_PD */
	init_rwsem(&pd->revoke_rwsem);
	return &pd->ibpd;
}

#define MR_IOVA 0x10000
/* Four pages: an inline PBL, which needs no PCI function to map */
#define MR_BYTES (4 * PAGE_SIZE)
#define MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | \
		   IB_ACCESS_REMOTE_WRITE)

/*
 * A dma-buf MR of a 4-page mock buffer in @pd (an inline PBL: no PCI
 * needed), or the registration's error
 */
static struct ib_mr *reg_in(struct kunit *test, struct ib_pd *pd, int fd)
{
	struct uverbs_attr_bundle *attrs;
	struct ib_mr *ibmr;

	attrs = kunit_kzalloc(test, sizeof(*attrs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, attrs);
	ibmr = efa_reg_user_mr_dmabuf(pd, 0, MR_BYTES, MR_IOVA, fd,
				      MR_ACCESS, NULL, attrs);
	if (IS_ERR(ibmr))
		return ibmr;
	ibmr->device = pd->device;
	ibmr->pd = pd;
	return ibmr;
}

/* Registered, and deregistered at the end of the case unless it was */
static struct efa_mr *reg_dmabuf_mr(struct kunit *test, struct ib_pd *pd,
				    int fd)
{
	struct ib_mr *ibmr = reg_in(test, pd, fd);

	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(ibmr), "reg: %pe", ibmr);
	ib_kunit_mr_track(test, ibmr);
	return container_of(ibmr, struct efa_mr, ibmr);
}

static void dereg(struct kunit *test, struct efa_mr *mr)
{
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, &mr->ibmr), 0);
}

static struct ib_mr *try_reg(struct kunit *test, int fd)
{
	struct efa_fw *fw = test->priv;

	return reg_in(test, fake_pd(test, fw->dev, 1), fd);
}

static struct ib_umem *mr_umem(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct efa_mr, ibmr)->umem;
}

static u64 mr_fence_key(struct ib_mr *ibmr)
{
	return ibmr->lkey;
}

/* DEREG_MR completes, fails with ILLEGAL_PARAMETER or times out */
static void answer_fence(struct kunit *test, enum ib_kunit_fence answer)
{
	struct efa_fw *fw = test->priv;

	fw->dereg_status = answer == IB_KUNIT_FENCE_REFUSED ?
			   EFA_ADMIN_ILLEGAL_PARAMETER : EFA_ADMIN_SUCCESS;
	fw->dereg_times_out = answer == IB_KUNIT_FENCE_GONE;
}

static void fail_reg(struct kunit *test)
{
	struct efa_fw *fw = test->priv;

	fw->reg_status = EFA_ADMIN_RESOURCE_ALLOCATION_FAILURE;
}

static const struct ib_kunit_mr_ops efa_mr_ops = {
	.mr_bytes = MR_BYTES,
	.try_reg = try_reg,
	.dereg = efa_dereg_mr,
	.umem = mr_umem,
	.fence_key = mr_fence_key,
	.answer_fence = answer_fence,
	.fail_reg = fail_reg,
	.reg_fails_errno = -ENOMEM,
	.dereg_refused_errno = -EINVAL,
};

static bool admin_running(struct efa_fw *fw)
{
	return test_bit(EFA_AQ_STATE_RUNNING_BIT, &fw->dev->edev.aq.state);
}

/*
 * The reset fails: only then is bus mastering turned off, after the reset
 * (whose register reads need it) and before the memory is unmapped.
 */
static void test_reset_fails_stops_dma(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct efa_mr *mr;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw->dev, 1),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	fw->dereg_times_out = true;
	fw->reset_err = -ETIME;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_EQ(test, fw->resets_at_stop, 1);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_stop);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
}

/*
 * DEREG_MR refused for want of resources (-ENOMEM: the device's
 * RESOURCE_ALLOCATION_FAILURE) has not taken the MR off its memory, and the
 * device is fine: the driver tries again, as long as a command may take to
 * complete, and does not stop the device when a retry succeeds. Four
 * refusals in a row: more than a handful of immediate retries would ride
 * out.
 */
static void test_fence_enomem_retried(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct efa_mr *mr;
	u32 lkey;
	int fd;

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	mr = reg_dmabuf_mr(test, fake_pd(test, fw->dev, 1), fd);
	lkey = mr->ibmr.lkey;
	fw->dereg_status = EFA_ADMIN_RESOURCE_ALLOCATION_FAILURE;
	fw->dereg_fails = 4;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->dereg_mrs, 5);
	KUNIT_EXPECT_EQ(test, fw->dereg_key[4], lkey);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->dereg_mrs, 5);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/* RESOURCE_BUSY is retried the same way, without a reset */
static void test_fence_busy_retried(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct efa_mr *mr;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw->dev, 1),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	fw->dereg_status = EFA_ADMIN_RESOURCE_BUSY;
	fw->dereg_fails = 2;
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->dereg_mrs, 3);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * A DEREG_MR that keeps failing with -ENOMEM is a fence that did not happen
 * within the time a command may take: the driver tries again for at least
 * the admin queue's completion timeout, not in a busy loop (at most one
 * attempt a millisecond), and then resets the device, before the memory is
 * unmapped.
 */
static void test_fence_enomem_bounded(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct efa_mr *mr;
	unsigned int fences;
	ktime_t start;
	s64 waited_ms;
	int fd;

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	mr = reg_dmabuf_mr(test, fake_pd(test, fw->dev, 1), fd);
	fw->dereg_status = EFA_ADMIN_RESOURCE_ALLOCATION_FAILURE;
	start = ktime_get();
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	waited_ms = ktime_ms_delta(ktime_get(), start);
	KUNIT_EXPECT_GE(test, waited_ms, CMD_TIMEOUT_MS);
	fences = fw->dereg_mrs;
	KUNIT_EXPECT_GE(test, fences, 2);
	KUNIT_EXPECT_LE(test, (s64)fences, waited_ms + 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	KUNIT_EXPECT_TRUE(test, fw->fx.mapped_at_last_resort);
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->dereg_mrs, fences);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * Two revokes whose DEREG_MR would time out: the first times out and resets
 * the device; the second finds the admin queue stopped and fails locally,
 * without reaching the device, and does not reset it again. One
 * IB_EVENT_DEVICE_FATAL.
 */
static void test_reset_once(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct efa_mr *a, *b;
	struct ib_pd *pd;

	pd = fake_pd(test, fw->dev, 1);
	a = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	b = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf));
	fw->dereg_times_out = true;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(b_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->dereg_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	KUNIT_EXPECT_FALSE(test, admin_running(fw));
	dereg(test, a);
	dereg(test, b);
	KUNIT_EXPECT_EQ(test, fw->dereg_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
}

/* A dma-buf MR registration that is expected to fail with @err */
static void reg_dmabuf_mr_fails(struct kunit *test, struct ib_pd *pd,
				int fd, int err)
{
	ib_kunit_mr_expect_reg_error(test, reg_in(test, pd, fd), err);
}

/*
 * Until the user deregisters a revoked MR, its PD takes no new MR: the
 * registration fails with -EBUSY before any REG_MR, leaving nothing
 * attached. Other PDs register as before, and so does the PD after the
 * dereg.
 */
static void test_reg_refused_on_revoked_pd(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct ib_pd *pd, *other;
	struct efa_mr *a, *b;
	int b_fd;

	pd = fake_pd(test, fw->dev, 1);
	other = fake_pd(test, fw->dev, 2);
	a = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->reg_mrs, 1);

	b_fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf);
	reg_dmabuf_mr_fails(test, pd, b_fd, -EBUSY);
	KUNIT_EXPECT_EQ(test, fw->reg_mrs, 1);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);

	b = reg_dmabuf_mr(test, other, b_fd);
	KUNIT_EXPECT_EQ(test, fw->reg_mrs, 2);
	dereg(test, b);

	dereg(test, a);
	b = reg_dmabuf_mr(test, pd, b_fd);
	KUNIT_EXPECT_EQ(test, fw->reg_mrs, 3);
	dereg(test, b);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	ib_kunit_expect_mock(test, a_buf, 0, 0, 0);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

/*
 * The device hands the key DEREG_MR freed to the next REG_MR (the stub does,
 * as a last-freed-first allocator may). After the exporter's revoke, no
 * REG_MR of the revoked MR's PD is ever given its key while the user has not
 * deregistered it, not even for a moment: the old holders of the key (the
 * user's QPs, and the peers the user gave the rkey to) would reach the new
 * memory through that PD's QPs. Another PD may be given it: the PD check on
 * every access keeps the old holders out.
 */
static void test_no_stale_key_in_pd(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf, *c_buf;
	struct ib_pd *pd, *other;
	struct efa_mr *a, *b, *c;
	int b_fd;

	pd = fake_pd(test, fw->dev, 1);
	other = fake_pd(test, fw->dev, 2);
	a = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	fw->stale_key = a->ibmr.lkey;
	fw->stale_pdn = 1;
	fw->stale_armed = true;

	b_fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf);
	reg_dmabuf_mr_fails(test, pd, b_fd, -EBUSY);
	KUNIT_EXPECT_EQ(test, fw->stale_regs, 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);

	/* Another PD: the device hands it A's key, which is fine there */
	c = reg_dmabuf_mr(test, other,
			  ib_kunit_mock_fd(test, MR_BYTES, 0, &c_buf));
	KUNIT_EXPECT_EQ(test, c->ibmr.lkey, fw->stale_key);
	KUNIT_EXPECT_EQ(test, fw->stale_regs, 0);
	dereg(test, c);

	fw->stale_armed = false;
	dereg(test, a);
	b = reg_dmabuf_mr(test, pd, b_fd);
	dereg(test, b);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

/*
 * The exporter revokes MR A while a REG_MR of the same PD is in flight
 * (forced: the REG_MR starts the revoke and sees it wait for the PD's lock).
 * A's DEREG_MR goes out only after that REG_MR has completed, so the device
 * cannot hand it A's key, freed by that DEREG_MR; then the PD refuses MRs.
 */
static void test_revoke_waits_for_reg(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf, *c_buf;
	struct efa_mr *a, *b;
	struct ib_pd *pd;
	int fd;

	pd = fake_pd(test, fw->dev, 1);
	a = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	fw->stale_key = a->ibmr.lkey;
	fw->stale_pdn = 1;
	fw->stale_armed = true;
	fw->reg_pd = efa_pd_of(pd);
	fw->revoke_in_reg = a_buf;
	b = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf));
	KUNIT_EXPECT_NE(test, b->ibmr.lkey, fw->stale_key);
	KUNIT_EXPECT_EQ(test, fw->stale_regs, 0);
	/* It waited for the REG_MR, the window was reached */
	KUNIT_EXPECT_EQ(test, ib_kunit_revoker_wait(test, fw->fx.revoker), 0);
	KUNIT_EXPECT_EQ(test, fw->dereg_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->dereg_key[0], fw->stale_key);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &c_buf);
	reg_dmabuf_mr_fails(test, pd, fd, -EBUSY);
	KUNIT_EXPECT_EQ(test, fw->stale_regs, 0);

	fw->stale_armed = false;
	dereg(test, b);
	dereg(test, a);
	KUNIT_EXPECT_EQ(test, efa_pd_of(pd)->revoked_mrs, 0);
	ib_kunit_expect_mock(test, a_buf, 0, 0, 0);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

/*
 * A dereg is the owner's doing, also when an exporter revoke waits for the
 * reservation lock meanwhile and takes it as soon as the dereg's fence
 * drops it (forced, see ib_kunit_revoke_behind()): one DEREG_MR goes out,
 * the dereg's, and the callback runs once, in whichever of the two revokes
 * comes first, and finds the MR fenced: the PD is not held as revoked.
 */
static void test_dereg_runs_callback(struct kunit *test)
{
	struct efa_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct efa_mr *mr;
	struct ib_pd *pd;

	pd = fake_pd(test, fw->dev, 1);
	mr = reg_dmabuf_mr(test, pd,
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	ib_kunit_watch_revoke(test, mr->umem, &fw->fx.watch);
	fw->fx.race_revoke = dmabuf;
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, ib_kunit_revoker_wait(test, fw->fx.revoker), 0);
	KUNIT_EXPECT_EQ(test, fw->fx.watch.calls +
			fw->fx.watch.calls_elsewhere, 1);
	KUNIT_EXPECT_EQ(test, fw->dereg_mrs, 1);
	KUNIT_EXPECT_EQ(test, efa_pd_of(pd)->revoked_mrs, 0);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

static struct kunit_case efa_dmabuf_mr_cases[] = {
	IB_KUNIT_MR_CASE(dereg_races_revoke),
	KUNIT_CASE(test_dereg_runs_callback),
	IB_KUNIT_MR_CASE(revoke_then_dereg),
	IB_KUNIT_MR_CASE(dereg_disarms),
	IB_KUNIT_MR_CASE_UNFENCED(revoke_fence_fails),
	IB_KUNIT_MR_CASE(dereg_fence_fails),
	IB_KUNIT_MR_CASE(dereg_refused_keeps_mr),
	KUNIT_CASE(test_reset_fails_stops_dma),
	KUNIT_CASE(test_fence_enomem_retried),
	KUNIT_CASE(test_fence_busy_retried),
	KUNIT_CASE(test_fence_enomem_bounded),
	KUNIT_CASE(test_reset_once),
	IB_KUNIT_MR_CASE(reg_fails),
	KUNIT_CASE(test_reg_refused_on_revoked_pd),
	KUNIT_CASE(test_no_stale_key_in_pd),
	KUNIT_CASE(test_revoke_waits_for_reg),
	{}
};

static struct kunit_suite efa_dmabuf_mr_suite = {
	.name = "efa_dmabuf_mr",
	.init = efa_fw_init,
	.test_cases = efa_dmabuf_mr_cases,
};

kunit_test_suite(efa_dmabuf_mr_suite);

MODULE_DESCRIPTION("KUnit tests for EFA's dma-buf MRs");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("DMA_BUF");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
