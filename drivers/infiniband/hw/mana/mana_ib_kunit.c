// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for mana_ib's quarantine of revoked dma-buf MR keys: the device
 * frees a key with the MR, so the driver refuses a revoked MR's keys to new
 * MRs and MWs until the MR is deregistered. The lookups run on fake devices:
 * two ib_devices on one PCI function (gdma_context), as mana_ib_probe()
 * creates for its "rdma" and "eth" auxiliary devices, and one on another.
 */

#include <kunit/test.h>
#include <linux/slab.h>

#include "mana_ib.h"

struct quarantine_kunit {
	struct mana_ib_dev *rdma;
	struct mana_ib_dev *eth;
	struct mana_ib_dev *other;
};

static struct mana_ib_dev *fake_ib_dev(struct kunit *test,
				       struct gdma_context *gc)
{
	struct mana_ib_dev *dev;
	struct gdma_dev *gd;

	dev = kunit_kzalloc(test, sizeof(*dev), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, dev);
	gd = kunit_kzalloc(test, sizeof(*gd), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, gd);
	gd->gdma_context = gc;
	dev->gdma_dev = gd;
	return dev;
}

static int quarantine_kunit_init(struct kunit *test)
{
	struct quarantine_kunit *q;
	struct gdma_context *gc, *other_gc;

	q = kunit_kzalloc(test, sizeof(*q), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, q);
	gc = kunit_kzalloc(test, sizeof(*gc), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, gc);
	other_gc = kunit_kzalloc(test, sizeof(*other_gc), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, other_gc);

	q->rdma = fake_ib_dev(test, gc);
	q->eth = fake_ib_dev(test, gc);
	q->other = fake_ib_dev(test, other_gc);
	test->priv = q;
	return 0;
}

/* Off the module-wide list at the end of the test, even if it failed */
static void quarantine_kunit_del(void *mr)
{
	mana_ib_quarantine_del(mr);
}

static struct mana_ib_mr *quarantine_mr(struct kunit *test,
					struct mana_ib_dev *dev, u32 lkey,
					u32 rkey, bool remote)
{
	struct mana_ib_mr *mr;

	mr = kunit_kzalloc(test, sizeof(*mr), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, mr);
	mr->ibmr.lkey = lkey;
	mr->ibmr.rkey = rkey;
	mr->remote = remote;
	mana_ib_quarantine_add(dev, mr);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, quarantine_kunit_del,
						  mr));
	return mr;
}

/* Keys come from the function: both of its ib_devices must refuse them. */
static void quarantine_shared_by_function(struct kunit *test)
{
	struct quarantine_kunit *q = test->priv;

	quarantine_mr(test, q->rdma, 0x1001, 0x2002, true);

	KUNIT_EXPECT_TRUE(test, mana_ib_key_quarantined(q->rdma, 0x1001));
	KUNIT_EXPECT_TRUE(test, mana_ib_key_quarantined(q->rdma, 0x2002));
	KUNIT_EXPECT_TRUE(test, mana_ib_key_quarantined(q->eth, 0x1001));
	KUNIT_EXPECT_TRUE(test, mana_ib_key_quarantined(q->eth, 0x2002));
	KUNIT_EXPECT_FALSE(test, mana_ib_key_quarantined(q->eth, 0x3003));
	/* Another function has keys of its own */
	KUNIT_EXPECT_FALSE(test, mana_ib_key_quarantined(q->other, 0x1001));
	KUNIT_EXPECT_FALSE(test, mana_ib_key_quarantined(q->other, 0x2002));
}

/* Dereg lets go of the keys: the device may hand them out again. */
static void quarantine_del_releases_keys(struct kunit *test)
{
	struct quarantine_kunit *q = test->priv;
	struct mana_ib_mr *a, *b;

	a = quarantine_mr(test, q->eth, 0x1001, 0x2002, true);
	b = quarantine_mr(test, q->eth, 0x4004, 0x5005, true);
	kunit_release_action(test, quarantine_kunit_del, a);

	KUNIT_EXPECT_FALSE(test, mana_ib_key_quarantined(q->rdma, 0x1001));
	KUNIT_EXPECT_FALSE(test, mana_ib_key_quarantined(q->rdma, 0x2002));
	KUNIT_EXPECT_TRUE(test, mana_ib_key_quarantined(q->rdma, 0x4004));
	KUNIT_EXPECT_TRUE(test, mana_ib_key_quarantined(q->rdma, 0x5005));

	kunit_release_action(test, quarantine_kunit_del, b);
	KUNIT_EXPECT_FALSE(test, mana_ib_key_quarantined(q->rdma, 0x4004));
}

/*
 * The rkey of an MR without remote access gives no access, whatever its
 * value: matching it would refuse, say, every later rkey of 0.
 */
static void quarantine_local_mr_rkey(struct kunit *test)
{
	struct quarantine_kunit *q = test->priv;

	quarantine_mr(test, q->rdma, 0x1001, 0, false);

	KUNIT_EXPECT_TRUE(test, mana_ib_key_quarantined(q->eth, 0x1001));
	KUNIT_EXPECT_FALSE(test, mana_ib_key_quarantined(q->eth, 0));
}

static void mr_params_remote(struct kunit *test)
{
	struct gdma_create_mr_params p = {};

	p.mr_type = GDMA_MR_TYPE_GVA;
	p.gva.access_flags = GDMA_ACCESS_FLAG_LOCAL_READ |
			     GDMA_ACCESS_FLAG_LOCAL_WRITE;
	KUNIT_EXPECT_FALSE(test, mana_ib_mr_params_remote(&p));
	p.gva.access_flags |= GDMA_ACCESS_FLAG_REMOTE_WRITE;
	KUNIT_EXPECT_TRUE(test, mana_ib_mr_params_remote(&p));

	memset(&p, 0, sizeof(p));
	p.mr_type = GDMA_MR_TYPE_ZBVA;
	p.zbva.access_flags = GDMA_ACCESS_FLAG_REMOTE_READ;
	KUNIT_EXPECT_TRUE(test, mana_ib_mr_params_remote(&p));

	memset(&p, 0, sizeof(p));
	p.mr_type = GDMA_MR_TYPE_DM;
	p.da.access_flags = GDMA_ACCESS_FLAG_REMOTE_ATOMIC;
	KUNIT_EXPECT_TRUE(test, mana_ib_mr_params_remote(&p));
	p.da.access_flags = GDMA_ACCESS_FLAG_BIND_MW;
	KUNIT_EXPECT_FALSE(test, mana_ib_mr_params_remote(&p));

	memset(&p, 0, sizeof(p));
	p.mr_type = GDMA_MR_TYPE_GPA;
	KUNIT_EXPECT_FALSE(test, mana_ib_mr_params_remote(&p));

	/* A window has only an rkey, which is what it is for */
	p.mr_type = GDMA_MR_TYPE_MW1;
	KUNIT_EXPECT_TRUE(test, mana_ib_mr_params_remote(&p));
	p.mr_type = GDMA_MR_TYPE_MW2;
	KUNIT_EXPECT_TRUE(test, mana_ib_mr_params_remote(&p));
}

static struct kunit_case mana_ib_quarantine_cases[] = {
	KUNIT_CASE(quarantine_shared_by_function),
	KUNIT_CASE(quarantine_del_releases_keys),
	KUNIT_CASE(quarantine_local_mr_rkey),
	KUNIT_CASE(mr_params_remote),
	{}
};

static struct kunit_suite mana_ib_quarantine_suite = {
	.name = "mana_ib_mr_quarantine",
	.init = quarantine_kunit_init,
	.test_cases = mana_ib_quarantine_cases,
};

kunit_test_suite(mana_ib_quarantine_suite);

MODULE_DESCRIPTION("KUnit tests for mana_ib's dma-buf MR key quarantine");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
