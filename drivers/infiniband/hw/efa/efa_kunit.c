// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KUnit tests for EFA's quarantine of revoked dma-buf MR keys: DEREG_MR frees
 * a key, so the driver refuses a revoked MR's keys to new MRs until the MR is
 * deregistered. The lookups run on fake devices that are never probed.
 */

#include <kunit/test.h>
#include <linux/slab.h>

#include "efa.h"

static struct efa_dev *fake_efa_dev(struct kunit *test)
{
	struct efa_dev *dev;

	dev = kunit_kzalloc(test, sizeof(*dev), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, dev);
	/* What efa_probe_device() does for the quarantine */
	spin_lock_init(&dev->mr_quarantine_lock);
	INIT_LIST_HEAD(&dev->mr_quarantine);
	return dev;
}

static struct efa_mr *quarantine_mr(struct kunit *test, struct efa_dev *dev,
				    u32 lkey, u32 rkey, bool remote)
{
	struct efa_mr *mr;

	mr = kunit_kzalloc(test, sizeof(*mr), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, mr);
	mr->ibmr.lkey = lkey;
	mr->ibmr.rkey = rkey;
	mr->remote = remote;
	efa_quarantine_add(dev, mr);
	return mr;
}

/* Both keys of a revoked MR are refused, on its device only. */
static void quarantine_keys_of_device(struct kunit *test)
{
	struct efa_dev *dev = fake_efa_dev(test);
	struct efa_dev *other = fake_efa_dev(test);

	quarantine_mr(test, dev, 0x1001, 0x2002, true);

	KUNIT_EXPECT_TRUE(test, efa_key_quarantined(dev, 0x1001));
	KUNIT_EXPECT_TRUE(test, efa_key_quarantined(dev, 0x2002));
	KUNIT_EXPECT_FALSE(test, efa_key_quarantined(dev, 0x3003));
	KUNIT_EXPECT_FALSE(test, efa_key_quarantined(other, 0x1001));
	KUNIT_EXPECT_FALSE(test, efa_key_quarantined(other, 0x2002));
}

/* Dereg lets go of the keys: the device may hand them out again. */
static void quarantine_del_releases_keys(struct kunit *test)
{
	struct efa_dev *dev = fake_efa_dev(test);
	struct efa_mr *a, *b;

	a = quarantine_mr(test, dev, 0x1001, 0x1001, true);
	b = quarantine_mr(test, dev, 0x4004, 0x4004, true);
	efa_quarantine_del(dev, a);

	KUNIT_EXPECT_FALSE(test, efa_key_quarantined(dev, 0x1001));
	KUNIT_EXPECT_TRUE(test, efa_key_quarantined(dev, 0x4004));

	efa_quarantine_del(dev, b);
	KUNIT_EXPECT_FALSE(test, efa_key_quarantined(dev, 0x4004));
	KUNIT_EXPECT_TRUE(test, list_empty(&dev->mr_quarantine));
}

/*
 * The rkey of an MR without remote access gives no access, whatever its
 * value: matching it would refuse, say, every later rkey of 0.
 */
static void quarantine_local_mr_rkey(struct kunit *test)
{
	struct efa_dev *dev = fake_efa_dev(test);

	quarantine_mr(test, dev, 0x1001, 0, false);

	KUNIT_EXPECT_TRUE(test, efa_key_quarantined(dev, 0x1001));
	KUNIT_EXPECT_FALSE(test, efa_key_quarantined(dev, 0));
}

static struct kunit_case efa_quarantine_cases[] = {
	KUNIT_CASE(quarantine_keys_of_device),
	KUNIT_CASE(quarantine_del_releases_keys),
	KUNIT_CASE(quarantine_local_mr_rkey),
	{}
};

static struct kunit_suite efa_quarantine_suite = {
	.name = "efa_mr_quarantine",
	.test_cases = efa_quarantine_cases,
};

kunit_test_suite(efa_quarantine_suite);

MODULE_DESCRIPTION("KUnit tests for EFA's dma-buf MR key quarantine");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
