// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for mana_ib's MRs, MWs and dma-buf MRs.
 *
 * mana_ib_dmabuf_mr: mana_ib's MR, MW and dma-buf MR verbs on a device that
 * is never probed. The HW channel is mana's own, with its queues in memory
 * (as mana_hwc_create_channel() leaves them); only its doorbell,
 * mana_gd_post_and_ring(), is a static stub, where the device is. The stub
 * reads the request the channel posted and answers it through the
 * channel's response path, mana_hwc_handle_resp(), at once, later (from
 * a thread) or never; so mana_hwc_send()'s wait, its cut of the wait after
 * a timeout and its mapping of the answer's status run as they are. The
 * device answers CREATE_DMA_REGION, CREATE_MR, DESTROY_MR and
 * DESTROY_DMA_REGION, hands out keys and handles, fails what a case asks,
 * and counts every request. The PCI half of the last resort,
 * mana_ib_pci_stop_dma(), is stubbed too: the stub records whether the MR's
 * memory was still mapped when it ran.
 *
 * The scenarios every driver shares are ib_kunit_mr's, run on mana_ib
 * through the ops table below, with the stop as the last resort. mana frees
 * a key at the device with DESTROY_MR and keeps it from new MRs and MWs by
 * refusing the PD's creations instead: the PD cases here.
 */

#include <kunit/static_stub.h>
#include <kunit/test.h>
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/kthread.h>
#include <linux/slab.h>
#include <linux/swait.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_kunit_mr.h>
#include <rdma/ib_umem.h>

#include "mana_ib.h"
#include <net/mana/hw_channel.h>

/* The HW channel's depth, and how long the device set requests to take */
#define FAKE_HWC_DEPTH 4
#define FAKE_HWC_TIMEOUT_MS 1000
/*
 * A late answer comes this long after its request was seen waiting: longer
 * than the 1 ms the channel cuts its waits to after a timeout, well within
 * the time the device set
 */
#define LATE_ANSWER_MS 30
/* The status of an answer that fails a request */
#define FAKE_STATUS_FAILED 0x2

/* An answer the device posts later, from a thread */
struct late_answer {
	struct kunit *test;
	struct hw_channel_context *hwc;
	struct task_struct *task;
	struct hwc_work_request *rx;
	u32 len;
	u16 msg_id;
	bool seen_waiting;	/* the request was waiting for it */
};

/*
 * What the HW channel's device saw and is to answer. The stops of the
 * device's DMA, and whether the case's MR was mapped at the last, are the
 * fixture's last_resorts and mapped_at_last_resort.
 */
struct mana_fw {
	struct ib_kunit_mr_fixture fx;	/* first: the scenarios' */
	struct mana_ib_dev *dev;
	struct hw_channel_context *hwc;
	struct late_answer late;
	unsigned int create_regions;
	int create_region_err;
	unsigned int destroy_regions;
	unsigned int create_pds;
	unsigned int destroy_pds;
	enum gdma_mr_type mr_type;	/* of the last CREATE_MR */
	unsigned int create_mrs;
	unsigned int destroy_mrs;
	u64 destroyed[8];		/* the handles of the first DESTROY_MRs */
	/*
	 * What CREATE_DMA_REGION, CREATE_MR and DESTROY_MR are to return: 0,
	 * -EPROTO (the device answers with an error status) or -ETIMEDOUT
	 * (the device does not answer)
	 */
	int create_mr_err;
	int destroy_mr_err;
	/*
	 * The device answers DESTROY_MR LATE_ANSWER_MS after the request was
	 * seen waiting: later than the 1 ms the HW channel waits after a timeout, within
	 * the time the device set for requests, which only
	 * mana_gd_send_fence_request() still waits.
	 */
	bool slow_destroy;
	u32 next_key;
	u64 next_handle;
	/*
	 * At the next CREATE_MR, revoke this buffer from another thread, and
	 * wait until the revoke waits for reg_pd's revoke_rwsem
	 */
	struct dma_buf *revoke_in_create;
	struct mana_ib_pd *reg_pd;
	/* Keys DESTROY_MR freed, handed out again last-freed first */
	u32 free_keys[8];
	unsigned int nr_free;
	/* The key of each live MR or MW, by handle */
	struct {
		u64 handle;
		u32 key;
	} live[16];
	/*
	 * A revoked MR's key that no new MR or MW of its PD may be given
	 * before the user deregisters the revoked MR; stale_creates counts
	 * the CREATE_MRs that were.
	 */
	bool stale_armed;
	u32 stale_key;
	u64 stale_pd_handle;
	unsigned int stale_creates;
};

#define FAKE_PD_HANDLE 0x99

/* What the device answers: 0, -EPROTO, -ETIMEDOUT or LATE: see mana_fw */
#define LATE 1

/*
 * The device's answer to the request @req of @req_len bytes, in @resp (as
 * long as the request says); the request's result, in mana_fw's terms
 */
static int fake_answer(struct kunit *test, u32 req_len, const void *req,
		       void *resp)
{
	const struct gdma_req_hdr *hdr = req;
	struct mana_fw *fw = test->priv;

	switch (hdr->req.msg_type) {
	case GDMA_CREATE_DMA_REGION: {
		struct gdma_create_dma_region_resp *r = resp;

		fw->create_regions++;
		if (fw->create_region_err)
			return fw->create_region_err;
		r->dma_region_handle = ++fw->next_handle;
		return 0;
	}
	case GDMA_CREATE_PD: {
		struct gdma_create_pd_resp *r = resp;

		fw->create_pds++;
		r->pd_handle = FAKE_PD_HANDLE;
		r->pd_id = 3;
		return 0;
	}
	case GDMA_DESTROY_PD:
		fw->destroy_pds++;
		return 0;
	case GDMA_DESTROY_DMA_REGION:
		fw->destroy_regions++;
		return 0;
	case GDMA_CREATE_MR: {
		const struct gdma_create_mr_request *q = req;
		struct gdma_create_mr_response *r = resp;
		unsigned int i;
		u32 key;

		KUNIT_EXPECT_EQ(test, req_len, sizeof(*q));
		KUNIT_EXPECT_EQ(test, hdr->resp.msg_size, sizeof(*r));
		fw->create_mrs++;
		fw->mr_type = q->mr_type;
		if (fw->create_mr_err)
			return fw->create_mr_err;
		if (fw->revoke_in_create) {
			struct rw_semaphore *sem = &fw->reg_pd->revoke_rwsem;
			struct dma_buf *buf = fw->revoke_in_create;

			fw->revoke_in_create = NULL;
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
		    q->pd_handle == fw->stale_pd_handle)
			fw->stale_creates++;
		r->mr_handle = ++fw->next_handle;
		r->lkey = key;
		r->rkey = key;
		for (i = 0; i < ARRAY_SIZE(fw->live); i++) {
			if (!fw->live[i].handle) {
				fw->live[i].handle = r->mr_handle;
				fw->live[i].key = key;
				break;
			}
		}
		return 0;
	}
	case GDMA_DESTROY_MR: {
		const struct gdma_destroy_mr_request *r = req;

		KUNIT_EXPECT_EQ(test, req_len, sizeof(*r));
		if (fw->destroy_mrs < ARRAY_SIZE(fw->destroyed))
			fw->destroyed[fw->destroy_mrs] = r->mr_handle;
		fw->destroy_mrs++;
		ib_kunit_mr_fence_seen(test, r->mr_handle);
		if (!fw->destroy_mr_err) {
			unsigned int i;

			/* The key is free: the device may hand it out again */
			for (i = 0; i < ARRAY_SIZE(fw->live); i++) {
				if (fw->live[i].handle != r->mr_handle)
					continue;
				fw->live[i].handle = 0;
				if (fw->nr_free < ARRAY_SIZE(fw->free_keys))
					fw->free_keys[fw->nr_free++] =
						fw->live[i].key;
				break;
			}
		}
		if (fw->slow_destroy && !fw->destroy_mr_err)
			return LATE;
		return fw->destroy_mr_err;
	}
	default:
		KUNIT_FAIL(test, "unexpected request %u", hdr->req.msg_type);
		return -EOPNOTSUPP;
	}
}

static int late_answer_thread(void *data)
{
	struct late_answer *a = data;

	struct completion *comp = &a->hwc->caller_ctx[a->msg_id].comp_event;
	unsigned long end = jiffies + msecs_to_jiffies(FAKE_HWC_TIMEOUT_MS);

	/* The test's static stubs follow this thread too */
	current->kunit_test = a->test;
	/* Late for sure: once the request waits, and past the channel's cut */
	while (!swait_active(&comp->wait) && time_before(jiffies, end))
		usleep_range(100, 200);
	a->seen_waiting = swait_active(&comp->wait);
	msleep(LATE_ANSWER_MS);
	mana_hwc_handle_resp(a->hwc, a->len, a->rx, a->msg_id);
	return 0;
}

static void late_answer_end(void *data)
{
	struct late_answer *a = data;

	/* It touches the channel, which goes with the test */
	kthread_stop_put(a->task);
}

static void answer_late(struct kunit *test, struct hwc_work_request *rx,
			u32 len, u16 msg_id)
{
	struct mana_fw *fw = test->priv;
	struct late_answer *a = &fw->late;
	struct task_struct *task;

	KUNIT_ASSERT_NULL_MSG(test, a->task, "one late answer per case");
	*a = (struct late_answer){ .test = test, .hwc = fw->hwc, .rx = rx,
				   .len = len, .msg_id = msg_id };
	task = kthread_create(late_answer_thread, a, "mana_kunit_late");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	get_task_struct(task);
	a->task = task;
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, late_answer_end,
							a), 0);
	wake_up_process(task);
}

/*
 * The HW channel's doorbell: a receive buffer given back to the device is
 * taken as is; a request the channel sent is answered in the receive
 * buffer of its message id, as the request's header says, at once, later
 * or never.
 */
static int fake_post_and_ring(struct gdma_queue *queue,
			      const struct gdma_wqe_request *wqe_req,
			      struct gdma_posted_wqe_info *wqe_info)
{
	struct kunit *test = kunit_get_current_test();
	struct mana_fw *fw = test->priv;
	struct hw_channel_context *hwc = fw->hwc;
	const struct hwc_work_request *tx;
	const struct gdma_req_hdr *req;
	struct hwc_work_request *rx;
	struct gdma_resp_hdr *resp;
	u32 len;
	int ret;

	if (queue == hwc->rxq->gdma_wq)
		return 0;
	KUNIT_ASSERT_PTR_EQ(test, queue, hwc->txq->gdma_wq);
	tx = container_of(wqe_req, struct hwc_work_request, wqe_req);
	req = tx->buf_va;
	KUNIT_ASSERT_LT(test, req->req.hwc_msg_id, FAKE_HWC_DEPTH);
	rx = &hwc->rxq->msg_buf->reqs[req->req.hwc_msg_id];
	len = req->resp.msg_size;
	KUNIT_ASSERT_GE(test, len, sizeof(*resp));
	KUNIT_ASSERT_LE(test, len, rx->buf_len);
	resp = rx->buf_va;
	memset(resp, 0, len);
	ret = fake_answer(test, tx->msg_size, req, resp);
	resp->response.msg_type = req->req.msg_type;
	resp->response.hwc_msg_id = req->req.hwc_msg_id;
	resp->response.msg_size = len;
	if (ret == -ETIMEDOUT)
		return 0;
	if (ret == LATE) {
		answer_late(test, rx, len, req->req.hwc_msg_id);
		return 0;
	}
	KUNIT_EXPECT_TRUE(test, !ret || ret == -EPROTO);
	resp->status = ret ? FAKE_STATUS_FAILED : 0;
	mana_hwc_handle_resp(hwc, len, rx, req->req.hwc_msg_id);
	return 0;
}

static void fake_pci_stop_dma(struct mana_ib_dev *dev)
{
	struct kunit *test = kunit_get_current_test();
	struct mana_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, dev, fw->dev);
	ib_kunit_mr_last_resort_seen(test);
}

/* The IB_EVENT_DEVICE_FATAL events the device raised so far */
static int fatal_events(struct mana_fw *fw)
{
	return ib_kunit_events_seen(fw->fx.events, IB_EVENT_DEVICE_FATAL);
}

static const struct ib_kunit_mr_ops mana_mr_ops;

/* One of the HW channel's work queues, each message's buffer in memory */
static struct hwc_wq *fake_hwc_wq(struct kunit *test,
				  struct hw_channel_context *hwc,
				  struct hwc_cq *cq, u32 id)
{
	struct hwc_wq *wq = kunit_kzalloc(test, sizeof(*wq), GFP_KERNEL);
	struct hwc_dma_buf *buf;
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, wq);
	wq->gdma_wq = kunit_kzalloc(test, sizeof(*wq->gdma_wq), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, wq->gdma_wq);
	wq->gdma_wq->id = id;
	buf = kunit_kzalloc(test, struct_size(buf, reqs, FAKE_HWC_DEPTH),
			    GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	buf->num_reqs = FAKE_HWC_DEPTH;
	for (i = 0; i < FAKE_HWC_DEPTH; i++) {
		buf->reqs[i].buf_va = kunit_kzalloc(test, SZ_4K, GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, buf->reqs[i].buf_va);
		buf->reqs[i].buf_len = SZ_4K;
	}
	wq->msg_buf = buf;
	wq->queue_depth = FAKE_HWC_DEPTH;
	wq->hwc = hwc;
	wq->hwc_cq = cq;
	return wq;
}

/* The HW channel as mana_hwc_create_channel() leaves it, in memory */
static struct hw_channel_context *fake_hwc(struct kunit *test,
					   struct gdma_dev *gd)
{
	struct hw_channel_context *hwc;
	struct gdma_resource *r;
	struct hwc_cq *cq;
	unsigned int i;

	hwc = kunit_kzalloc(test, sizeof(*hwc), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, hwc);
	hwc->gdma_dev = gd;
	hwc->dev = gd->gdma_context->dev;
	hwc->num_inflight_msg = FAKE_HWC_DEPTH;
	hwc->max_req_msg_size = SZ_4K;
	hwc->hwc_timeout = FAKE_HWC_TIMEOUT_MS;
	hwc->hwc_timeout_set = FAKE_HWC_TIMEOUT_MS;
	sema_init(&hwc->sema, FAKE_HWC_DEPTH);
	r = &hwc->inflight_msg_res;
	spin_lock_init(&r->lock);
	r->size = FAKE_HWC_DEPTH;
	r->map = kunit_kcalloc(test, BITS_TO_LONGS(FAKE_HWC_DEPTH),
			       sizeof(long), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r->map);
	hwc->caller_ctx = kunit_kcalloc(test, FAKE_HWC_DEPTH,
					sizeof(*hwc->caller_ctx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, hwc->caller_ctx);
	for (i = 0; i < FAKE_HWC_DEPTH; i++)
		init_completion(&hwc->caller_ctx[i].comp_event);
	cq = kunit_kzalloc(test, sizeof(*cq), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, cq);
	cq->gdma_cq = kunit_kzalloc(test, sizeof(*cq->gdma_cq), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, cq->gdma_cq);
	cq->gdma_cq->id = 3;
	cq->hwc = hwc;
	hwc->cq = cq;
	hwc->txq = fake_hwc_wq(test, hwc, cq, 1);
	hwc->rxq = fake_hwc_wq(test, hwc, cq, 2);
	return hwc;
}

static int mana_fw_init(struct kunit *test)
{
	struct hw_channel_context *hwc;
	struct gdma_context *gc;
	struct mana_ib_dev *dev;
	struct gdma_dev *gd;
	struct mana_fw *fw;

	fw = kunit_kzalloc(test, sizeof(*fw), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw);
	fw->next_key = 0x100;
	test->priv = fw;

	/* Never probed: what mana_ib_probe() sets up for MRs and MWs */
	dev = container_of(ib_kunit_alloc_device(test, sizeof(*dev),
						 "mana_kunit"),
			   struct mana_ib_dev, ib_dev);
	gc = kunit_kzalloc(test, sizeof(*gc), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, gc);
	gd = kunit_kzalloc(test, sizeof(*gd), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, gd);
	gc->dev = dev->ib_dev.dma_device;
	gd->gdma_context = gc;
	hwc = fake_hwc(test, gd);
	gc->hwc.driver_data = hwc;
	dev->gdma_dev = gd;
	dev->adapter_caps.page_size_cap = PAGE_SIZE;
	fw->dev = dev;
	fw->hwc = hwc;
	ib_kunit_mr_init(test, &fw->fx, &mana_mr_ops, &dev->ib_dev);

	kunit_activate_static_stub(test, mana_gd_post_and_ring,
				   fake_post_and_ring);
	kunit_activate_static_stub(test, mana_ib_pci_stop_dma,
				   fake_pci_stop_dma);
	return 0;
}

static struct ib_pd *fake_pd_handle(struct kunit *test, struct mana_fw *fw,
				    mana_handle_t pd_handle)
{
	struct mana_ib_pd *pd = kunit_kzalloc(test, sizeof(*pd), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, pd);
	pd->ibpd.device = &fw->dev->ib_dev;
	pd->pd_handle = pd_handle;
	/* What mana_ib_alloc_pd() does besides CREATE_PD */
	init_rwsem(&pd->revoke_rwsem);
	return &pd->ibpd;
}

static struct ib_pd *fake_pd(struct kunit *test, struct mana_fw *fw)
{
	return fake_pd_handle(test, fw, 0x77);
}

static struct mana_ib_pd *mana_pd_of(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct mana_ib_pd, ibpd);
}

#define MR_IOVA 0x10000
#define MR_BYTES (4 * PAGE_SIZE)
#define MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | \
		   IB_ACCESS_REMOTE_WRITE)

/* A dma-buf MR in @pd, or the registration's error */
static struct ib_mr *reg_in(struct kunit *test, struct ib_pd *pd, int fd)
{
	struct uverbs_attr_bundle *attrs;
	struct ib_mr *ibmr;

	attrs = kunit_kzalloc(test, sizeof(*attrs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, attrs);
	ibmr = mana_ib_reg_user_mr_dmabuf(pd, 0, MR_BYTES, MR_IOVA, fd,
					  MR_ACCESS, NULL, attrs);
	if (IS_ERR(ibmr))
		return ibmr;
	ibmr->pd = pd;
	return ibmr;
}

/* Registered, and deregistered at the end of the case unless it was */
static struct mana_ib_mr *reg_dmabuf_mr(struct kunit *test, struct ib_pd *pd,
					int fd)
{
	struct ib_mr *ibmr = reg_in(test, pd, fd);

	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(ibmr), "reg: %pe", ibmr);
	ib_kunit_mr_track(test, ibmr);
	return container_of(ibmr, struct mana_ib_mr, ibmr);
}

/* mana_ib_dereg_mr(), which must succeed */
static void dereg(struct kunit *test, struct mana_ib_mr *mr)
{
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, &mr->ibmr), 0);
}

static struct ib_mr *try_reg(struct kunit *test, int fd)
{
	return reg_in(test, fake_pd(test, test->priv), fd);
}

/* A dma-buf MR registration that is expected to fail with @err */
static void reg_dmabuf_mr_fails(struct kunit *test, struct ib_pd *pd,
				int fd, int err)
{
	ib_kunit_mr_expect_reg_error(test, reg_in(test, pd, fd), err);
}

static struct ib_umem *mr_umem(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct mana_ib_mr, ibmr)->umem;
}

static u64 mr_fence_key(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct mana_ib_mr, ibmr)->mr_handle;
}

/* DESTROY_MR answered, failed with -EPROTO, or timed out */
static void answer_fence(struct kunit *test, enum ib_kunit_fence answer)
{
	struct mana_fw *fw = test->priv;

	fw->destroy_mr_err = answer == IB_KUNIT_FENCE_DONE ? 0 :
			     answer == IB_KUNIT_FENCE_REFUSED ? -EPROTO :
			     -ETIMEDOUT;
}

static void fail_reg(struct kunit *test)
{
	struct mana_fw *fw = test->priv;

	fw->create_mr_err = -EPROTO;
}

static const struct ib_kunit_mr_ops mana_mr_ops = {
	.mr_bytes = MR_BYTES,
	.try_reg = try_reg,
	.dereg = mana_ib_dereg_mr,
	.umem = mr_umem,
	.fence_key = mr_fence_key,
	.answer_fence = answer_fence,
	.fail_reg = fail_reg,
	.reg_fails_errno = -EPROTO,
	.dereg_refused_errno = -EPROTO,
};

/*
 * A request the device does not answer times out after the time the device
 * set for requests, and the HW channel then waits 1 ms for the next ones. A
 * device that answers the revoke's DESTROY_MR later than that, within the
 * time it set, has fenced the MR: the fence request waits for the answer,
 * nothing stops, no event. Forced: the answer comes LATE_ANSWER_MS after
 * the request was seen waiting for it.
 */
static void test_slow_fence_after_timeout(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mana_ib_mr *mr;
	int fd;

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	fw->create_mr_err = -ETIMEDOUT;
	reg_dmabuf_mr_fails(test, fake_pd(test, fw), fd, -ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, fw->hwc->hwc_timeout, 1);
	fw->create_mr_err = 0;
	mr = reg_dmabuf_mr(test, fake_pd(test, fw), fd);
	fw->slow_destroy = true;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_TRUE_MSG(test, fw->late.seen_waiting,
			      "the answer came before the request waited");
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * mana's reset cycle as far as mana_ib sees it: mana_schedule_serv_work()
 * marks the function in service, then mana_serv_reset() silences the HW
 * channel (timeout 0) before its suspend removes mana_ib.
 */
static void enter_reset_cycle(struct mana_fw *fw, bool silenced, bool hung)
{
	struct gdma_context *gc = mdev_to_gc(fw->dev);
	struct hw_channel_context *hwc = gc->hwc.driver_data;

	/* As mana_gf_stats_work_handler() marks a cycle for a hung channel */
	if (hung)
		set_bit(GC_HWC_HUNG, &gc->flags);
	set_bit(GC_IN_SERVICE, &gc->flags);
	if (silenced)
		hwc->hwc_timeout = 0;
}

/*
 * The reset cycle's suspend deregisters every MR with the channel silenced:
 * DESTROY_MR times out at once. mana frees the buffers it gave the device
 * on the premise that the device no longer accesses memory then, and
 * counts the MR as fenced on the same one: nothing stops, no event, the
 * memory goes back to the exporter.
 */
static void test_reset_cycle_dereg(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mana_ib_mr *mr;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	enter_reset_cycle(fw, true, false);
	fw->destroy_mr_err = -ETIMEDOUT;
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * An exporter's revoke inside the reset cycle: fenced the same way; the MR
 * is counted revoked in its PD, and the dereg after it sends nothing.
 */
static void test_reset_cycle_revoke(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ib_pd *pd = fake_pd(test, fw);
	struct mana_ib_mr *mr;

	mr = reg_dmabuf_mr(test, pd,
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	enter_reset_cycle(fw, true, false);
	fw->destroy_mr_err = -ETIMEDOUT;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	KUNIT_EXPECT_EQ(test, mana_pd_of(pd)->revoked_mrs, 1);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 0);
	KUNIT_EXPECT_EQ(test, mana_pd_of(pd)->revoked_mrs, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * A failed fence in a reset cycle that does not account for it; outside any
 * cycle, the revoke_fence_fails scenario
 */
struct unfenced_case {
	const char *name;
	bool in_service;	/* GC_IN_SERVICE set */
	bool silenced;		/* the HW channel's timeout 0 */
	bool hung;		/* the cycle is for a hung HW channel */
	int err;		/* DESTROY_MR's */
};

static const struct unfenced_case unfenced_cases[] = {
	/* mana_serv_fpga(), or a reset cycle before it silences the channel */
	{ "in_service_timeout", true, false, false, -ETIMEDOUT },
	/* The device answered, with an error: it is not quiet */
	{ "reset_cycle_error", true, true, false, -EPROTO },
	/* A cycle mana started because the channel stopped answering */
	{ "hung_reset_cycle", true, true, true, -ETIMEDOUT },
};

KUNIT_ARRAY_PARAM_DESC(unfenced, unfenced_cases, name);

/*
 * Each of those, on an exporter's revoke, stops DMA while the memory is
 * still mapped: the exporter takes the memory back whatever the answer.
 */
static void test_unfenced_stops(struct kunit *test)
{
	const struct unfenced_case *c = test->param_value;
	struct mana_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mana_ib_mr *mr;

	mr = reg_dmabuf_mr(test, fake_pd(test, fw),
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	if (c->in_service)
		enter_reset_cycle(fw, c->silenced, c->hung);
	fw->destroy_mr_err = c->err;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 1);
	KUNIT_EXPECT_TRUE(test, fw->fx.mapped_at_last_resort);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
	dereg(test, mr);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * Two fences fail: each clears bus mastering before its memory is unmapped
 * (a rescan may have set it again in between), one IB_EVENT_DEVICE_FATAL.
 */
static void test_stop_each_event_once(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct ib_pd *pd = fake_pd(test, fw);

	reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf));
	fw->destroy_mr_err = -ETIMEDOUT;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(b_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 2);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 2);
	KUNIT_EXPECT_TRUE(test, fw->fx.mapped_at_last_resort);
	KUNIT_EXPECT_EQ(test, fatal_events(fw), 1);
}

/* CREATE_MR fails: the error comes back, the DMA region goes, nothing stays */
static void test_reg_fails(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	int fd;

	fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf);
	fw->create_mr_err = -EPROTO;
	reg_dmabuf_mr_fails(test, fake_pd(test, fw), fd, -EPROTO);
	KUNIT_EXPECT_EQ(test, fw->create_regions, 1);
	KUNIT_EXPECT_EQ(test, fw->destroy_regions, 1);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 0);
}

/* An MW of @pd and @type, or NULL with the error in @err */
static struct mana_ib_mw *alloc_mw_type(struct kunit *test, struct ib_pd *pd,
					enum ib_mw_type type, int *err)
{
	struct mana_ib_mw *mw = kunit_kzalloc(test, sizeof(*mw), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, mw);
	mw->ibmw.device = pd->device;
	mw->ibmw.pd = pd;
	mw->ibmw.type = type;
	*err = mana_ib_alloc_mw(&mw->ibmw, NULL);
	return *err ? NULL : mw;
}

static struct mana_ib_mw *alloc_mw(struct kunit *test, struct ib_pd *pd,
				   int *err)
{
	return alloc_mw_type(test, pd, IB_MW_TYPE_2, err);
}

/*
 * Until the user deregisters a revoked MR, its PD takes no new MR or MW: the
 * creation fails with -EBUSY before any request to the device, leaving
 * nothing attached. Other PDs create as before, and so does the PD after the
 * dereg.
 */
static void test_reg_refused_on_revoked_pd(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct ib_pd *pd, *other;
	struct mana_ib_mr *a, *b;
	struct mana_ib_mw *mw;
	int b_fd, err;

	pd = fake_pd_handle(test, fw, 0x77);
	other = fake_pd_handle(test, fw, 0x78);
	a = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->create_regions, 1);

	b_fd = ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf);
	reg_dmabuf_mr_fails(test, pd, b_fd, -EBUSY);
	mw = alloc_mw(test, pd, &err);
	KUNIT_EXPECT_EQ(test, err, -EBUSY);
	if (mw)
		KUNIT_EXPECT_EQ(test, mana_ib_dealloc_mw(&mw->ibmw), 0);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->create_regions, 1);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);

	b = reg_dmabuf_mr(test, other, b_fd);
	mw = alloc_mw(test, other, &err);
	KUNIT_EXPECT_EQ(test, err, 0);
	if (mw)
		KUNIT_EXPECT_EQ(test, mana_ib_dealloc_mw(&mw->ibmw), 0);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 3);
	dereg(test, b);

	dereg(test, a);
	b = reg_dmabuf_mr(test, pd, b_fd);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 4);
	dereg(test, b);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);
	ib_kunit_expect_mock(test, a_buf, 0, 0, 0);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

/*
 * The device hands the key DESTROY_MR freed to the next CREATE_MR (the stub
 * does, as a last-freed-first allocator may). After the exporter's revoke,
 * no MR or MW of the revoked MR's PD is ever given its key while the user has
 * not deregistered it, not even for a moment. Another PD's may be: the PD
 * check on every access keeps the key's old holders out.
 */
static void test_no_stale_key_in_pd(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct ib_pd *pd, *other;
	struct mana_ib_mr *a;
	struct mana_ib_mw *mw;
	int err;

	pd = fake_pd_handle(test, fw, 0x77);
	other = fake_pd_handle(test, fw, 0x78);
	a = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	fw->stale_key = a->ibmr.lkey;
	fw->stale_pd_handle = 0x77;
	fw->stale_armed = true;

	mw = alloc_mw(test, pd, &err);
	KUNIT_EXPECT_EQ(test, err, -EBUSY);
	if (mw)
		KUNIT_EXPECT_EQ(test, mana_ib_dealloc_mw(&mw->ibmw), 0);
	reg_dmabuf_mr_fails(test, pd,
			    ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf),
			    -EBUSY);
	KUNIT_EXPECT_EQ(test, fw->stale_creates, 0);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);

	/* Another PD: the device hands its MW A's key, which is fine there */
	mw = alloc_mw(test, other, &err);
	KUNIT_ASSERT_EQ(test, err, 0);
	KUNIT_EXPECT_EQ(test, mw->ibmw.rkey, fw->stale_key);
	KUNIT_EXPECT_EQ(test, fw->stale_creates, 0);
	KUNIT_EXPECT_EQ(test, mana_ib_dealloc_mw(&mw->ibmw), 0);

	fw->stale_armed = false;
	dereg(test, a);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

/*
 * The exporter revokes MR A while a CREATE_MR of the same PD is in flight
 * (forced: the CREATE_MR starts the revoke and sees it wait for the PD's
 * lock). A's DESTROY_MR goes out only after that creation has completed, so
 * the device cannot hand it A's key, freed by that DESTROY_MR; then the PD
 * refuses MRs.
 */
static void test_revoke_waits_for_create(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf, *c_buf;
	struct mana_ib_mr *a, *b;
	struct ib_pd *pd;

	pd = fake_pd(test, fw);
	a = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	fw->stale_key = a->ibmr.lkey;
	fw->stale_pd_handle = mana_pd_of(pd)->pd_handle;
	fw->stale_armed = true;
	fw->reg_pd = mana_pd_of(pd);
	fw->revoke_in_create = a_buf;
	b = reg_dmabuf_mr(test, pd, ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf));
	KUNIT_EXPECT_NE(test, b->ibmr.lkey, fw->stale_key);
	KUNIT_EXPECT_EQ(test, fw->stale_creates, 0);
	/* It waited for the CREATE_MR, the window was reached */
	KUNIT_EXPECT_EQ(test, ib_kunit_revoker_wait(test, fw->fx.revoker), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->destroyed[0], a->mr_handle);
	KUNIT_EXPECT_EQ(test, fw->fx.last_resorts, 0);

	reg_dmabuf_mr_fails(test, pd,
			    ib_kunit_mock_fd(test, MR_BYTES, 0, &c_buf),
			    -EBUSY);
	KUNIT_EXPECT_EQ(test, fw->stale_creates, 0);

	fw->stale_armed = false;
	dereg(test, b);
	dereg(test, a);
	KUNIT_EXPECT_EQ(test, mana_pd_of(pd)->revoked_mrs, 0);
	ib_kunit_expect_mock(test, a_buf, 0, 0, 0);
	ib_kunit_expect_mock(test, b_buf, 0, 0, 0);
}

/* A DMA MR (no umem) is created and destroyed as before: no DMA region */
static void test_dma_mr(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct ib_mr *ibmr;

	ibmr = mana_ib_get_dma_mr(fake_pd(test, fw), IB_ACCESS_LOCAL_WRITE);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(ibmr), "get_dma_mr: %pe", ibmr);
	ibmr->device = &fw->dev->ib_dev;
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 1);
	KUNIT_EXPECT_EQ(test, fw->create_regions, 0);
	KUNIT_EXPECT_EQ(test, mana_ib_dereg_mr(ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_mrs, 1);
}

/*
 * A PD from mana_ib_alloc_pd() (CREATE_PD answered by the stub) comes with
 * its refusal set up: an MW of type 1 is created in it as before; after the
 * exporter revokes a dma-buf MR of the PD, a type 1 MW is refused with
 * -EBUSY before any request, and after the dereg it is created again.
 * Dealloc sends DESTROY_PD.
 */
static void test_alloc_pd_mw1(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mana_ib_mw *mw;
	struct mana_ib_mr *mr;
	struct mana_ib_pd *pd;
	int err;

	pd = kunit_kzalloc(test, sizeof(*pd), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, pd);
	pd->ibpd.device = &fw->dev->ib_dev;
	KUNIT_ASSERT_EQ(test, mana_ib_alloc_pd(&pd->ibpd, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->create_pds, 1);
	KUNIT_EXPECT_EQ(test, pd->pd_handle, FAKE_PD_HANDLE);

	mw = alloc_mw_type(test, &pd->ibpd, IB_MW_TYPE_1, &err);
	KUNIT_EXPECT_EQ(test, err, 0);
	KUNIT_EXPECT_EQ(test, fw->mr_type, GDMA_MR_TYPE_MW1);
	if (mw)
		KUNIT_EXPECT_EQ(test, mana_ib_dealloc_mw(&mw->ibmw), 0);

	mr = reg_dmabuf_mr(test, &pd->ibpd,
			   ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 2);
	mw = alloc_mw_type(test, &pd->ibpd, IB_MW_TYPE_1, &err);
	KUNIT_EXPECT_EQ(test, err, -EBUSY);
	if (mw)
		KUNIT_EXPECT_EQ(test, mana_ib_dealloc_mw(&mw->ibmw), 0);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 2);

	dereg(test, mr);
	mw = alloc_mw_type(test, &pd->ibpd, IB_MW_TYPE_1, &err);
	KUNIT_EXPECT_EQ(test, err, 0);
	if (mw)
		KUNIT_EXPECT_EQ(test, mana_ib_dealloc_mw(&mw->ibmw), 0);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 3);

	KUNIT_EXPECT_EQ(test, mana_ib_dealloc_pd(&pd->ibpd, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_pds, 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * CREATE_DMA_REGION fails: the registration fails with its error before any
 * CREATE_MR, and nothing stays attached.
 */
static void test_reg_region_fails(struct kunit *test)
{
	struct mana_fw *fw = test->priv;
	struct dma_buf *dmabuf;

	fw->create_region_err = -EPROTO;
	reg_dmabuf_mr_fails(test, fake_pd(test, fw),
			    ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf),
			    -EPROTO);
	KUNIT_EXPECT_EQ(test, fw->create_regions, 1);
	KUNIT_EXPECT_EQ(test, fw->create_mrs, 0);
	KUNIT_EXPECT_EQ(test, fw->destroy_regions, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

static struct kunit_case mana_ib_dmabuf_mr_cases[] = {
	IB_KUNIT_MR_CASE(dereg_races_revoke),
	IB_KUNIT_MR_CASE(revoke_then_dereg),
	IB_KUNIT_MR_CASE(dereg_disarms),
	IB_KUNIT_MR_CASE_UNFENCED(revoke_fence_fails),
	IB_KUNIT_MR_CASE(dereg_fence_fails),
	IB_KUNIT_MR_CASE(dereg_refused_keeps_mr),
	KUNIT_CASE(test_stop_each_event_once),
	KUNIT_CASE(test_slow_fence_after_timeout),
	KUNIT_CASE(test_reset_cycle_dereg),
	KUNIT_CASE(test_reset_cycle_revoke),
	KUNIT_CASE_PARAM(test_unfenced_stops, unfenced_gen_params),
	KUNIT_CASE(test_reg_fails),
	KUNIT_CASE(test_reg_region_fails),
	KUNIT_CASE(test_alloc_pd_mw1),
	KUNIT_CASE(test_dma_mr),
	KUNIT_CASE(test_reg_refused_on_revoked_pd),
	KUNIT_CASE(test_no_stale_key_in_pd),
	KUNIT_CASE(test_revoke_waits_for_create),
	{}
};

static struct kunit_suite mana_ib_dmabuf_mr_suite = {
	.name = "mana_ib_dmabuf_mr",
	.init = mana_fw_init,
	.test_cases = mana_ib_dmabuf_mr_cases,
};

kunit_test_suite(mana_ib_dmabuf_mr_suite);

MODULE_DESCRIPTION("KUnit tests for mana_ib's MRs and dma-buf MRs");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
MODULE_IMPORT_NS("NET_MANA");
