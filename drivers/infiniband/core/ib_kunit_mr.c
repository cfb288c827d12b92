// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The dma-buf MR scenarios of the drivers' KUnit suites, written once. Each
 * scenario runs on the driver's own verbs through its ops table, on a device
 * whose firmware the driver's suite stubs; what it asserts is the contract,
 * not a driver's commands: one fence per MR, the key kept from new MRs
 * until the dereg, no last resort while the device answers, the last resort
 * before the memory is unmapped when it does not, and the exporter's
 * attachment, pin and mapping gone when the MR is.
 */

#include <kunit/test-bug.h>
#include <kunit/test.h>
#include <linux/dma-buf.h>
#include <linux/module.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_kunit_mr.h>
#include <rdma/ib_umem.h>

static struct ib_kunit_mr_fixture *fixture(struct kunit *test)
{
	return test->priv;
}

/**
 * ib_kunit_mr_init() - Set up the scenarios' counts for a case
 * @test: the case
 * @fx: the first member of the driver's test->priv, zeroed
 * @ops: the driver's ops table
 * @ibdev: the device whose async events are counted
 *
 * Also checks, when the case ends, that no buffer of the exporter is left.
 */
void ib_kunit_mr_init(struct kunit *test, struct ib_kunit_mr_fixture *fx,
		      const struct ib_kunit_mr_ops *ops,
		      struct ib_device *ibdev)
{
	KUNIT_ASSERT_PTR_EQ(test, (void *)fx, test->priv);
	fx->ops = ops;
	fx->events = ib_kunit_watch_events(test, ibdev);
	ib_kunit_expect_no_mock_leaks(test);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_init);

/* The case ends with the MR still registered: its dereg must succeed now */
static void end_dereg(void *data)
{
	struct kunit *test = kunit_get_current_test();
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct ib_mr *mr = data;

	KUNIT_EXPECT_EQ_MSG(test, fx->ops->dereg(mr, NULL), 0,
			    "dereg at the end of the case");
	if (fx->mr == mr)
		fx->mr = NULL;
}

/**
 * ib_kunit_mr_track() - An MR the case registered
 * @test: the case
 * @mr: the MR, registered with the driver's own verb
 *
 * @mr becomes the fixture's MR, the one the last resort's stub looks at,
 * and is deregistered (with the ops table's dereg, expected to succeed)
 * when the case ends unless ib_kunit_mr_dereg() did.
 */
void ib_kunit_mr_track(struct kunit *test, struct ib_mr *mr)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);

	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, end_dereg, mr),
			0);
	fx->mr = mr;
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_track);

/**
 * ib_kunit_mr_dereg() - Deregister an MR ib_kunit_mr_track() tracks
 * @test: the case
 * @mr: the MR
 *
 * Return: what the driver's dereg returned. On 0 the MR is gone and no
 * longer tracked; otherwise it stays, for a later dereg or the case's end.
 */
int ib_kunit_mr_dereg(struct kunit *test, struct ib_mr *mr)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	int ret = fx->ops->dereg(mr, NULL);

	if (ret)
		return ret;
	kunit_remove_action(test, end_dereg, mr);
	if (fx->mr == mr)
		fx->mr = NULL;
	return 0;
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_dereg);

/**
 * ib_kunit_mr_expect_reg_error() - A registration was to fail
 * @test: the case
 * @mr: what the driver's registration verb returned
 * @err: the errno it was to fail with
 *
 * An MR that was registered all the same is tracked, so that the case's
 * end deregisters it.
 */
void ib_kunit_mr_expect_reg_error(struct kunit *test, struct ib_mr *mr,
				  int err)
{
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), err);
	if (!IS_ERR(mr))
		ib_kunit_mr_track(test, mr);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_expect_reg_error);

/**
 * ib_kunit_mr_fence_seen() - A fence command reached the stubbed device
 * @test: the case
 * @key: the key it names
 *
 * Called from the driver's stub for each fence command the device receives,
 * in the thread that sent it; starts the revoke a scenario asked for.
 */
void ib_kunit_mr_fence_seen(struct kunit *test, u64 key)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);

	if (fx->fences < ARRAY_SIZE(fx->fence_keys))
		fx->fence_keys[fx->fences] = key;
	fx->fences++;
	/* Once: the revoke's own fence, if any, starts nothing */
	if (fx->race_revoke) {
		struct dma_buf *dmabuf = fx->race_revoke;

		fx->race_revoke = NULL;
		fx->revoker = ib_kunit_revoke_behind(test, dmabuf);
	}
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_fence_seen);

/**
 * ib_kunit_mr_last_resort_seen() - The driver reset or stopped the device
 * @test: the case
 *
 * Called from the driver's stub of its last resort; records whether the
 * scenario's MR was still mapped for the device, as it must be: the core
 * unmaps only after the revoke callback returns.
 */
void ib_kunit_mr_last_resort_seen(struct kunit *test)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct ib_umem *umem = fx->mr ? fx->ops->umem(fx->mr) : NULL;

	fx->last_resorts++;
	fx->mapped_at_last_resort = umem && to_ib_umem_dmabuf(umem)->sgt;
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_last_resort_seen);

struct unfenced {
	enum ib_kunit_fence answer;
	const char *name;
};

static const struct unfenced unfenced_answers[] = {
	{ IB_KUNIT_FENCE_REFUSED, "refused" },
	{ IB_KUNIT_FENCE_GONE, "gone" },
};

KUNIT_ARRAY_PARAM_DESC(unfenced, unfenced_answers, name);

/**
 * ib_kunit_mr_unfenced_params() - The answers that are not a fence
 * @test: the case
 * @prev: the previous answer, NULL for the first
 * @desc: its name, filled in
 *
 * Return: the next, a struct whose first member is an enum ib_kunit_fence.
 */
const void *ib_kunit_mr_unfenced_params(struct kunit *test, const void *prev,
					char *desc)
{
	return unfenced_gen_params(test, prev, desc);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_unfenced_params);

static int fatal_events(struct ib_kunit_mr_fixture *fx)
{
	return ib_kunit_events_seen(fx->events, IB_EVENT_DEVICE_FATAL);
}

/* The IB_EVENT_DEVICE_FATAL events a last resort raises */
static int fatal_after_last_resort(struct ib_kunit_mr_fixture *fx)
{
	return fx->ops->stop_keeps_device || fx->ops->fatal_from_owner ? 0 : 1;
}

/* After the last resort, nothing more reaches a stopped device */
static void expect_no_fence_since(struct kunit *test, unsigned int fences)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);

	if (!fx->ops->stop_keeps_device)
		KUNIT_EXPECT_EQ(test, fx->fences, fences);
}

/* An MR on a new buffer of the exporter, registered with one command */
static struct ib_mr *reg(struct kunit *test, struct dma_buf **dmabuf)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct ib_mr *mr;
	int fd;

	fd = ib_kunit_mock_fd(test, fx->ops->mr_bytes, 0, dmabuf);
	mr = fx->ops->try_reg(test, fd);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(mr), "registration: %pe", mr);
	ib_kunit_mr_track(test, mr);
	KUNIT_EXPECT_EQ(test, fx->fences, 0);
	ib_kunit_expect_mock(test, *dmabuf, 1, 1, 1);
	return mr;
}

static void expect_key(struct kunit *test, u64 key, bool in_use)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);

	if (fx->ops->key_in_use)
		KUNIT_EXPECT_EQ_MSG(test, fx->ops->key_in_use(test, key),
				    in_use, "key %#llx", key);
}

/*
 * The exporter's revoke sends one fence, for the MR's key, and keeps the key
 * from new MRs; the dereg after it sends none and lets the key go.
 */
void ib_kunit_mr_revoke_then_dereg(struct kunit *test)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct dma_buf *dmabuf;
	struct ib_mr *mr;
	u64 key;

	mr = reg(test, &dmabuf);
	key = fx->ops->fence_key(mr);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fx->fences, 1);
	KUNIT_EXPECT_EQ(test, fx->fence_keys[0], key);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 0);
	expect_key(test, key, true);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, mr), 0);
	KUNIT_EXPECT_EQ(test, fx->fences, 1);
	expect_key(test, key, false);
	KUNIT_EXPECT_EQ(test, fatal_events(fx), 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_revoke_then_dereg);

/*
 * A dereg with no revoke sends one fence and leaves no callback armed: a
 * revoke of the buffer afterwards reaches no MR.
 */
void ib_kunit_mr_dereg_disarms(struct kunit *test)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct dma_buf *dmabuf;
	struct ib_mr *mr;
	u64 key;

	mr = reg(test, &dmabuf);
	key = fx->ops->fence_key(mr);
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, mr), 0);
	KUNIT_EXPECT_EQ(test, fx->fences, 1);
	KUNIT_EXPECT_EQ(test, fx->fence_keys[0], key);
	expect_key(test, key, false);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);

	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fx->fences, 1);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fx), 0);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_dereg_disarms);

/*
 * The device refuses the revoke's fence, or never answers it: the exporter
 * takes the memory back all the same, so the driver's last resort runs
 * once, before the core unmaps, and IB_EVENT_DEVICE_FATAL is raised once.
 * Nothing more reaches the device: after the owner's recovery, if the
 * driver waits for one, the dereg sends no fence and completes the MR.
 */
void ib_kunit_mr_revoke_fence_fails(struct kunit *test)
{
	const struct unfenced *param = test->param_value;
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct dma_buf *dmabuf;
	unsigned int fences;
	struct ib_mr *mr;

	KUNIT_ASSERT_NOT_NULL(test, param);
	mr = reg(test, &dmabuf);
	fx->ops->answer_fence(test, param->answer);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_GE(test, fx->fences, 1);
	KUNIT_EXPECT_EQ(test, fx->fence_keys[0], fx->ops->fence_key(mr));
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 1);
	KUNIT_EXPECT_TRUE(test, fx->mapped_at_last_resort);
	KUNIT_EXPECT_EQ(test, fatal_events(fx), fatal_after_last_resort(fx));
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	fences = fx->fences;
	if (fx->ops->recover)
		fx->ops->recover(test);
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, mr), 0);
	expect_no_fence_since(test, fences);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 1);
	KUNIT_EXPECT_EQ(test, fatal_events(fx), fatal_after_last_resort(fx));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_revoke_fence_fails);

/*
 * The device never answers the dereg's fence, so it is gone or may still
 * use the MR: the last resort runs once while the memory is still mapped,
 * and IB_EVENT_DEVICE_FATAL is raised once. The MR goes, its callback with
 * it, or, where the driver cannot free the key before the owner's
 * recovery, stays unmapped until the dereg after that recovery, which
 * sends no second fence.
 */
void ib_kunit_mr_dereg_fence_fails(struct kunit *test)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct dma_buf *dmabuf;
	unsigned int fences;
	struct ib_mr *mr;
	int ret;

	mr = reg(test, &dmabuf);
	fx->ops->answer_fence(test, IB_KUNIT_FENCE_GONE);
	ret = ib_kunit_mr_dereg(test, mr);
	KUNIT_EXPECT_EQ(test, ret, fx->ops->dereg_gone_errno);
	KUNIT_EXPECT_GE(test, fx->fences, 1);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 1);
	KUNIT_EXPECT_TRUE(test, fx->mapped_at_last_resort);
	KUNIT_EXPECT_EQ(test, fatal_events(fx), fatal_after_last_resort(fx));
	fences = fx->fences;
	if (ret) {
		ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
		KUNIT_ASSERT_NOT_NULL(test, fx->ops->recover);
		fx->ops->recover(test);
		KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, mr), 0);
		expect_no_fence_since(test, fences);
		fences = fx->fences;
	}
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);

	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fx->fences, fences);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 1);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_dereg_fence_fails);

/*
 * The device refuses a user's fence and runs on: the dereg fails with the
 * driver's errno for that status, as for any MR of the driver, stops and
 * resets nothing and raises nothing; the MR stays registered, mapped and
 * revocable, its key in use, and the dereg that follows completes it.
 */
void ib_kunit_mr_dereg_refused_keeps_mr(struct kunit *test)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct dma_buf *dmabuf;
	struct ib_mr *mr;
	u64 key;

	mr = reg(test, &dmabuf);
	key = fx->ops->fence_key(mr);
	fx->ops->answer_fence(test, IB_KUNIT_FENCE_REFUSED);
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, mr),
			fx->ops->dereg_refused_errno);
	KUNIT_ASSERT_PTR_EQ(test, fx->mr, mr);
	KUNIT_EXPECT_EQ(test, fx->fences, 1);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fx), 0);
	expect_key(test, key, true);
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);

	fx->ops->answer_fence(test, IB_KUNIT_FENCE_DONE);
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, mr), 0);
	KUNIT_EXPECT_EQ(test, fx->fences, 2);
	KUNIT_EXPECT_EQ(test, fx->fence_keys[1], key);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 0);
	expect_key(test, key, false);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_dereg_refused_keeps_mr);

/*
 * The device fails the registration: its errno comes back, nothing stays
 * attached, and a revoke of the buffer reaches nothing (a registration's
 * error path may fence what it had set up; mlx5's does).
 */
void ib_kunit_mr_reg_fails(struct kunit *test)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct dma_buf *dmabuf;
	unsigned int fences;
	struct ib_mr *mr;
	int fd;

	fd = ib_kunit_mock_fd(test, fx->ops->mr_bytes, 0, &dmabuf);
	fx->ops->fail_reg(test);
	mr = fx->ops->try_reg(test, fd);
	ib_kunit_mr_expect_reg_error(test, mr, fx->ops->reg_fails_errno);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	fences = fx->fences;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fx->fences, fences);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fx), 0);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_reg_fails);

/*
 * The exporter revokes while the dereg's fence is in flight (forced: the
 * revoke starts from the fence command and is seen waiting for the
 * reservation lock the dereg holds, then takes it as soon as the dereg drops
 * it). One fence reaches the device, nothing is reset or stopped, the
 * callback runs once in all (the dereg's, or the exporter's if it took the
 * lock between the dereg's fence and its release), and the MR is gone.
 */
void ib_kunit_mr_dereg_races_revoke(struct kunit *test)
{
	struct ib_kunit_mr_fixture *fx = fixture(test);
	struct dma_buf *dmabuf;
	struct ib_mr *mr;
	u64 key;

	mr = reg(test, &dmabuf);
	key = fx->ops->fence_key(mr);
	ib_kunit_watch_revoke(test, fx->ops->umem(mr), &fx->watch);
	fx->race_revoke = dmabuf;
	KUNIT_EXPECT_EQ(test, ib_kunit_mr_dereg(test, mr), 0);
	KUNIT_EXPECT_EQ(test, ib_kunit_revoker_wait(test, fx->revoker), 0);
	KUNIT_EXPECT_EQ(test, fx->fences, 1);
	KUNIT_EXPECT_EQ(test, fx->fence_keys[0], key);
	KUNIT_EXPECT_EQ(test, fx->last_resorts, 0);
	KUNIT_EXPECT_EQ(test, fatal_events(fx), 0);
	KUNIT_EXPECT_EQ(test, fx->watch.calls + fx->watch.calls_elsewhere, 1);
	expect_key(test, key, false);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}
EXPORT_SYMBOL_GPL(ib_kunit_mr_dereg_races_revoke);

MODULE_DESCRIPTION("dma-buf MR scenarios for the RDMA drivers' KUnit tests");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
