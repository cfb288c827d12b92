// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * KUnit tests for mlx5 data-direct dma-buf MRs.
 *
 * mlx5_dd_dmabuf_mr: registration, the exporter's revoke, the unbind of the
 * data-direct function and dereg of data-direct dma-buf MRs, on a device that
 * is never probed. The revoke UMR is a static stub of mlx5r_umr_revoke_mr():
 * it records the keys it fences and whether the memory was still mapped at
 * the first, fails the UMRs a case chooses, and leaves the UMR QP recovered
 * (ACTIVE) or dead (ERR) behind a failure, as mlx5r_umr_post_send_wait()
 * does. Like the real one it posts nothing and returns 0 once the device is
 * in internal error. The UMR that loads the KSM translation, CREATE_MKEY (the
 * crossing mkey) and DESTROY_MKEY are stubs too, and so are the PCI halves
 * of the last resort, mlx5_data_direct_pci_stop(), whose stub records whether
 * the memory of the case's MR was still mapped when it ran, and of its undoing,
 * mlx5_data_direct_pci_resume(). A case may have the
 * first revoke UMR start an exporter's revoke that waits for the reservation
 * lock the UMR is posted under (ib_kunit_revoke_behind()).
 *
 * The device's mkey pool is the core's FRMR pools, whose create and destroy
 * operations the test provides; its capabilities are zero but crossing mkeys.
 * Registrations go through reg_user_mr_dmabuf_by_data_direct() and dereg
 * through mlx5_ib_dereg_mr(). Some cases build the MRs as registration leaves
 * them (dd_mr(), dd_mr_pair()) to reach one decision directly.
 *
 * The scenarios every driver shares are ib_kunit_mr's, run on real
 * data-direct registrations through the ops table below: the revoke UMR of
 * the crossed mkey is the fence, the data-direct stop the last resort.
 */

#include <kunit/static_stub.h>
#include <kunit/test.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <rdma/frmr_pools.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_kunit_mr.h>
#include <rdma/ib_umem.h>

#include "mlx5_ib.h"
#include "umr.h"
#include "data_direct.h"

#define MR_BYTES (4 * PAGE_SIZE)
#define MR_KEY 0x1200
#define FW_UMRS 8
#define FW_DESTROYS 4
#define CROSSING_KEY 0x5500
/* The mkey pool key of the data-direct mkeys (any one will do) */
#define DD_POOL_KEY 1

/* What the stubbed UMR QP and PCI function saw and are to do. */
struct mlx5_fw {
	struct ib_kunit_mr_fixture fx;	/* first: the scenarios' */
	struct mlx5_ib_dev *dev;
	struct mlx5_data_direct_dev *dd;
	unsigned int umrs;		/* revoke UMRs posted */
	bool mapped_at_umr;		/* the memory, at the first one */
	unsigned int destroys_at_umr;	/* DESTROY_MKEYs before it */
	u32 umr_key[FW_UMRS];
	int umr_err;			/* the result of a failing UMR */
	unsigned int umr_fails;		/* if not 0: only so many fail */
	int umr_state_after;		/* the UMR QP's state after a failure */
	bool error_in_umr;		/* the device enters internal error */
	unsigned int stops;		/* mlx5_data_direct_pci_stop() calls */
	unsigned int resumes;		/* mlx5_data_direct_pci_resume() calls */
	bool mapped_at_destroy;		/* the case's MR's memory, at one */
	bool mapped_at_stop;		/* the fenced MR's memory, at the stop */
	struct mlx5_ib_mr *mr;		/* the case's last MR */
	unsigned int destroys;		/* DESTROY_MKEYs */
	u32 destroy_key[FW_DESTROYS];
	int destroy_err;		/* their result */
	u32 next_key;			/* the mkey pool's next new mkey */
	unsigned int pool_creates;	/* mkeys the pool created */
	struct ib_frmr_key pool_key;	/* the key of the last one */
	unsigned int creates;		/* CREATE_MKEYs (the crossing mkey) */
	int create_err;			/* their result */
	unsigned int ksm_loads;		/* KSM translation UMRs */
	u32 ksm_key;			/* the mkey of the last one */
	int ksm_err;			/* their result */
};

static int fake_umr_revoke_mr(struct mlx5_ib_mr *mr)
{
	struct kunit *test = kunit_get_current_test();
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_dev *dev = fw->dev;

	KUNIT_EXPECT_PTR_EQ(test, mr_to_mdev(mr), dev);
	/* As mlx5r_umr_revoke_mr(): no UMR on a device in internal error */
	if (dev->mdev->state == MLX5_DEVICE_STATE_INTERNAL_ERROR)
		return 0;
	if (!fw->umrs) {
		fw->mapped_at_umr = mr->umem &&
				    to_ib_umem_dmabuf(mr->umem)->sgt;
		fw->destroys_at_umr = fw->destroys;
	}
	/* Starts a revoke a case asked for: it waits for the UMR's lock */
	ib_kunit_mr_fence_seen(test, mr->mmkey.key);
	if (fw->umrs < FW_UMRS)
		fw->umr_key[fw->umrs] = mr->mmkey.key;
	fw->umrs++;
	if (fw->error_in_umr) {
		/* The health poller got there while the UMR was out */
		dev->mdev->state = MLX5_DEVICE_STATE_INTERNAL_ERROR;
		return 0;
	}
	if (!fw->umr_err || (fw->umr_fails && fw->umrs > fw->umr_fails))
		return 0;
	mutex_lock(&dev->umrc.lock);
	dev->umrc.state = fw->umr_state_after;
	mutex_unlock(&dev->umrc.lock);
	return fw->umr_err;
}

static int fake_create_mkey(struct mlx5_ib_dev *dev, struct mlx5_ib_mkey *mkey,
			    u32 *in, int inlen)
{
	struct kunit *test = kunit_get_current_test();
	struct mlx5_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, dev, fw->dev);
	fw->creates++;
	if (fw->create_err)
		return fw->create_err;
	mkey->key = CROSSING_KEY;
	init_waitqueue_head(&mkey->wait);
	return 0;
}

static int fake_ksm_load(struct mlx5_ib_mr *mr, unsigned int flags)
{
	struct kunit *test = kunit_get_current_test();
	struct mlx5_fw *fw = test->priv;
	struct dma_resv *resv;

	/* The registration loads the translation under the import's lock */
	resv = to_ib_umem_dmabuf(mr->umem)->attach->dmabuf->resv;
	KUNIT_EXPECT_TRUE(test, ww_mutex_is_locked(&resv->lock));
	KUNIT_EXPECT_TRUE(test, flags & MLX5_IB_UPD_XLT_ENABLE);
	fw->ksm_loads++;
	fw->ksm_key = mr->mmkey.key;
	return fw->ksm_err;
}

static int fake_destroy_mkey(struct mlx5_ib_dev *dev, struct mlx5_ib_mr *mr)
{
	struct kunit *test = kunit_get_current_test();
	struct mlx5_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, dev, fw->dev);
	if (fw->destroys < FW_DESTROYS)
		fw->destroy_key[fw->destroys] = mr->mmkey.key;
	if (fw->mr == mr)
		fw->mapped_at_destroy = to_ib_umem_dmabuf(mr->umem)->sgt;
	fw->destroys++;
	return fw->destroy_err;
}

/* The mkey pool's firmware half: new mkeys, numbered */
static int fake_create_frmrs(struct ib_device *device, struct ib_frmr_key *key,
			     u32 *handles, u32 count)
{
	struct mlx5_fw *fw = kunit_get_current_test()->priv;
	u32 i;

	for (i = 0; i < count; i++)
		handles[i] = fw->next_key++;
	fw->pool_creates += count;
	fw->pool_key = *key;
	return 0;
}

static void fake_destroy_frmrs(struct ib_device *device, u32 *handles,
			       u32 count)
{
}

static const struct ib_frmr_pool_ops fake_pool_ops = {
	.create_frmrs = fake_create_frmrs,
	.destroy_frmrs = fake_destroy_frmrs,
};

static void pools_cleanup(void *ibdev)
{
	ib_frmr_pools_cleanup(ibdev);
}

static void fake_pci_stop(struct mlx5_data_direct_dev *dd)
{
	struct kunit *test = kunit_get_current_test();
	struct mlx5_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, dd, fw->dd);
	fw->stops++;
	ib_kunit_mr_last_resort_seen(test);
	/* The core unmaps the memory after the callback returns */
	fw->mapped_at_stop = fw->mr && to_ib_umem_dmabuf(fw->mr->umem)->sgt;
}

static void fake_pci_resume(struct mlx5_data_direct_dev *dd)
{
	struct kunit *test = kunit_get_current_test();
	struct mlx5_fw *fw = test->priv;

	KUNIT_EXPECT_PTR_EQ(test, dd, fw->dd);
	fw->resumes++;
}

static const struct ib_kunit_mr_ops mlx5_mr_ops;

static int mlx5_fw_init(struct kunit *test)
{
	struct mlx5_ib_dev *dev;
	struct mlx5_fw *fw;

	fw = kunit_kzalloc(test, sizeof(*fw), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw);
	fw->umr_state_after = MLX5_UMR_STATE_ACTIVE;
	fw->next_key = MR_KEY;
	test->priv = fw;

	/* Never probed: what mlx5_ib_stage_init_init() sets up for MRs */
	dev = container_of(ib_kunit_alloc_device(test, sizeof(*dev),
						 "mlx5_kunit"),
			   struct mlx5_ib_dev, ib_dev);
	dev->mdev = kunit_kzalloc(test, sizeof(*dev->mdev), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, dev->mdev);
	dev->mdev->state = MLX5_DEVICE_STATE_UP;
	/* Capabilities: all zero but crossing mkeys */
	dev->mdev->caps.hca[MLX5_CAP_GENERAL] =
		kunit_kzalloc(test, sizeof(struct mlx5_hca_cap), GFP_KERNEL);
	dev->mdev->caps.hca[MLX5_CAP_GENERAL_2] =
		kunit_kzalloc(test, sizeof(struct mlx5_hca_cap), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, dev->mdev->caps.hca[MLX5_CAP_GENERAL]);
	KUNIT_ASSERT_NOT_NULL(test, dev->mdev->caps.hca[MLX5_CAP_GENERAL_2]);
	MLX5_SET(cmd_hca_cap, dev->mdev->caps.hca[MLX5_CAP_GENERAL]->cur,
		 crossing_vhca_mkey, 1);
	mutex_init(&dev->slow_path_mutex);
	mutex_init(&dev->umrc.lock);
	dev->umrc.state = MLX5_UMR_STATE_ACTIVE;
	/* The UMR QP exists: mlx5r_umr_resource_init() has nothing to do */
	dev->umrc.qp = kunit_kzalloc(test, sizeof(*dev->umrc.qp), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, dev->umrc.qp);
	mutex_init(&dev->data_direct_lock);
	INIT_LIST_HEAD(&dev->data_direct_mr_list);
	fw->dev = dev;
	ib_kunit_mr_init(test, &fw->fx, &mlx5_mr_ops, &dev->ib_dev);

	/* The data-direct function, bound: what mlx5_data_direct_probe() sets */
	fw->dd = kunit_kzalloc(test, sizeof(*fw->dd), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fw->dd);
	/* The DMA API maps for it; nothing reaches its PCI side (stubbed) */
	fw->dd->pdev = ib_kunit_pci_dev(test, "mlx5_kunit_dd");
	fw->dd->device = &fw->dd->pdev->dev;
	mutex_init(&fw->dd->dma_lock);
	dev_set_drvdata(fw->dd->device, fw->dd);
	dev->data_direct_dev = fw->dd;

	/* The mkey pool, as mlx5r_frmr_pools_init() sets it up */
	KUNIT_ASSERT_EQ(test, ib_frmr_pools_init(&dev->ib_dev, &fake_pool_ops),
			0);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, pools_cleanup,
							&dev->ib_dev), 0);

	kunit_activate_static_stub(test, destroy_mkey, fake_destroy_mkey);
	kunit_activate_static_stub(test, mlx5_ib_create_mkey, fake_create_mkey);
	kunit_activate_static_stub(test, mlx5r_umr_update_data_direct_ksm_pas,
				   fake_ksm_load);
	kunit_activate_static_stub(test, mlx5r_umr_revoke_mr,
				   fake_umr_revoke_mr);
	kunit_activate_static_stub(test, mlx5_data_direct_pci_stop,
				   fake_pci_stop);
	kunit_activate_static_stub(test, mlx5_data_direct_pci_resume,
				   fake_pci_resume);
	return 0;
}

static void release_umem(void *umem)
{
	ib_umem_release(umem);
}

/*
 * The import of a data-direct registration, as reg_user_mr_dmabuf() does it:
 * pinned and revocable, mapped for the data-direct function, the revoke
 * callback set under the lock the import returns with.
 */
static void dd_import(struct kunit *test, struct mlx5_ib_mr *mr, int fd)
{
	struct mlx5_fw *fw = test->priv;
	struct ib_umem_dmabuf *umem_dmabuf;

	KUNIT_ASSERT_GE(test, fd, 0);
	umem_dmabuf =
		ib_umem_dmabuf_get_revocable_and_lock(&fw->dev->ib_dev,
						      fw->dd->device, 0,
						      MR_BYTES, fd,
						      IB_ACCESS_LOCAL_WRITE);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(umem_dmabuf), "import: %pe",
			       umem_dmabuf);
	mr->umem = &umem_dmabuf->umem;
	umem_dmabuf->private = mr;
	ib_umem_dmabuf_set_revoke_locked(umem_dmabuf, mlx5_ib_dmabuf_revoke_cb,
					 mr);
	dma_resv_unlock(umem_dmabuf->attach->dmabuf->resv);
}

/*
 * A data-direct MR's umem as reg_user_mr_dmabuf() sets it up: mapped for
 * the data-direct function, the revoke callback installed under the lock the
 * import returns with. Released when the test ends, as dereg would.
 */
static struct mlx5_ib_mr *dd_mr(struct kunit *test, int fd, u32 key)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_mr *mr;

	mr = kunit_kzalloc(test, sizeof(*mr), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, mr);
	mr->ibmr.device = &fw->dev->ib_dev;
	mr->mmkey.key = key;
	mr->data_direct = true;
	dd_import(test, mr, fd);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, release_umem,
							mr->umem), 0);
	fw->mr = mr;
	return mr;
}

/* What dereg does first for a data-direct MR (mlx5_ib_dereg_mr()) */
static void dereg_revoke(struct mlx5_ib_mr *mr)
{
	ib_umem_dmabuf_revoke(to_ib_umem_dmabuf(mr->umem));
}

/* A user's data-direct registration (mlx5dv_reg_dmabuf_mr()) */
static struct ib_mr *try_reg(struct kunit *test, int fd)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_pd *pd;

	pd = kunit_kzalloc(test, sizeof(*pd), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, pd);
	pd->ibpd.device = &fw->dev->ib_dev;
	pd->pdn = 7;
	return reg_user_mr_dmabuf_by_data_direct(&pd->ibpd, 0, MR_BYTES, 0, fd,
						 IB_ACCESS_LOCAL_WRITE);
}

static struct ib_mr *ops_try_reg(struct kunit *test, int fd)
{
	struct mlx5_fw *fw = test->priv;
	struct ib_mr *ibmr = try_reg(test, fd);

	/* The stubs look at the crossed MR, which holds the memory */
	if (!IS_ERR(ibmr))
		fw->mr = to_mmr(ibmr)->dd_crossed_mr;
	return ibmr;
}

/* mlx5_ib_dereg_mr(); the stubs forget the crossed MR it freed */
static int ops_dereg(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct mlx5_fw *fw = kunit_get_current_test()->priv;
	struct mlx5_ib_mr *crossed = to_mmr(ibmr)->dd_crossed_mr;
	int ret = mlx5_ib_dereg_mr(ibmr, udata);

	if (!ret && fw->mr == crossed)
		fw->mr = NULL;
	return ret;
}

static struct ib_umem *mr_umem(struct ib_mr *ibmr)
{
	return to_mmr(ibmr)->dd_crossed_mr->umem;
}

static u64 mr_fence_key(struct ib_mr *ibmr)
{
	return to_mmr(ibmr)->dd_crossed_mr->mmkey.key;
}

/*
 * The revoke UMR completes; fails on a QP that recovers (retried, a bounded
 * number of times); or fails on a dead QP with DESTROY_MKEY timing out too.
 */
static void answer_fence(struct kunit *test, enum ib_kunit_fence answer)
{
	struct mlx5_fw *fw = test->priv;

	fw->umr_err = answer == IB_KUNIT_FENCE_DONE ? 0 : -EFAULT;
	fw->umr_state_after = answer == IB_KUNIT_FENCE_GONE ?
			      MLX5_UMR_STATE_ERR : MLX5_UMR_STATE_ACTIVE;
	fw->destroy_err = answer == IB_KUNIT_FENCE_GONE ? -ETIMEDOUT : 0;
}

static void fail_reg(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;

	fw->ksm_err = -EIO;
}

/* The firmware answers DESTROY_MKEY again */
static void recover(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;

	fw->destroy_err = 0;
}

static const struct ib_kunit_mr_ops mlx5_mr_ops = {
	.mr_bytes = MR_BYTES,
	.try_reg = ops_try_reg,
	.dereg = ops_dereg,
	.umem = mr_umem,
	.fence_key = mr_fence_key,
	.answer_fence = answer_fence,
	.fail_reg = fail_reg,
	.recover = recover,
	.reg_fails_errno = -EIO,
	.dereg_gone_errno = -ETIMEDOUT,
	.stop_keeps_device = true,
};

/*
 * The UMR fails and the UMR QP is dead: the data-direct function's DMA is
 * stopped once, while the memory is still mapped, the mkey is not taken for
 * free, and no new data-direct MR is accepted.
 */
static void test_fence_fails_stops_dma(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mlx5_ib_mr *mr;

	mr = dd_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf), MR_KEY);
	fw->umr_err = -EFAULT;
	fw->umr_state_after = MLX5_UMR_STATE_ERR;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_stop);
	KUNIT_EXPECT_FALSE(test, mr->dd_fenced);
	KUNIT_EXPECT_EQ(test, fw->dd->dma_stops, 1);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	KUNIT_EXPECT_EQ(test, PTR_ERR(try_reg(test, -1)), -EIO);

	dereg_revoke(mr);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
}

/*
 * A function whose DMA runs is not refused: the registration gets as far as
 * the import (which fails on the bad fd).
 */
static void test_reg_not_refused(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, PTR_ERR(try_reg(test, -1)), -EBADF);
}

/*
 * A failed UMR the UMR QP recovered from did not run: it is posted again,
 * and the mkey is fenced without stopping anything.
 */
static void test_fence_retried_after_recovery(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mlx5_ib_mr *mr;

	mr = dd_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf), MR_KEY);
	fw->umr_err = -EFAULT;
	fw->umr_fails = 1;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 2);
	KUNIT_EXPECT_EQ(test, fw->umr_key[1], MR_KEY);
	KUNIT_EXPECT_TRUE(test, mr->dd_fenced);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_EQ(test, fw->dd->dma_stops, 0);
}

/* UMRs that keep failing on a recovered QP: a bounded number, then stop */
static void test_fence_retries_bounded(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mlx5_ib_mr *mr;

	mr = dd_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf), MR_KEY);
	fw->umr_err = -EFAULT;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 3);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_stop);
	KUNIT_EXPECT_FALSE(test, mr->dd_fenced);
}

/*
 * A device in internal error posts no UMR and does no DMA, as mlx5 takes it
 * for every MR: the mkey counts as fenced, nothing is stopped and
 * registration is not refused.
 */
static void test_internal_error_is_fenced(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mlx5_ib_mr *mr;

	mr = dd_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf), MR_KEY);
	fw->dev->mdev->state = MLX5_DEVICE_STATE_INTERNAL_ERROR;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_TRUE(test, mr->dd_fenced);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	KUNIT_EXPECT_EQ(test, PTR_ERR(try_reg(test, -1)), -EBADF);
}

/* The device enters internal error while the UMR is out: fenced too */
static void test_internal_error_during_fence(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct mlx5_ib_mr *mr;

	mr = dd_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf), MR_KEY);
	fw->error_in_umr = true;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_TRUE(test, mr->dd_fenced);
}

/*
 * Unbind of the data-direct function revokes every MR on the device's list,
 * once each and with its own key, empties the list and unmaps the memory;
 * their dereg posts nothing more.
 */
static void test_unbind_revokes_each(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct dma_buf *a_buf, *b_buf;
	struct mlx5_ib_mr *a, *b;

	a = dd_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf), MR_KEY);
	b = dd_mr(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf),
		  MR_KEY + 0x100);
	mutex_lock(&fw->dev->data_direct_lock);
	list_add_tail(&a->dd_node, &fw->dev->data_direct_mr_list);
	list_add_tail(&b->dd_node, &fw->dev->data_direct_mr_list);
	mlx5_ib_revoke_data_direct_mrs(fw->dev);
	KUNIT_EXPECT_TRUE(test, list_empty(&fw->dev->data_direct_mr_list));
	/* Off the list: dereg's list_del_init() finds an empty node */
	KUNIT_EXPECT_TRUE(test, list_empty(&a->dd_node));
	KUNIT_EXPECT_TRUE(test, list_empty(&b->dd_node));
	mutex_unlock(&fw->dev->data_direct_lock);

	KUNIT_EXPECT_EQ(test, fw->umrs, 2);
	KUNIT_EXPECT_EQ(test, fw->umr_key[0], MR_KEY);
	KUNIT_EXPECT_EQ(test, fw->umr_key[1], MR_KEY + 0x100);
	KUNIT_EXPECT_TRUE(test, a->dd_fenced);
	KUNIT_EXPECT_TRUE(test, b->dd_fenced);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	ib_kunit_expect_mock(test, a_buf, 1, 0, 0);
	ib_kunit_expect_mock(test, b_buf, 1, 0, 0);

	dereg_revoke(a);
	dereg_revoke(b);
	KUNIT_EXPECT_EQ(test, fw->umrs, 2);
}

/*
 * A data-direct MR pair as reg_user_mr_dmabuf_by_data_direct() leaves it: the
 * crossed MR, its mkey from the pool, on the device's list; the user's
 * crossing MR pointing at it. Both are freed by mlx5_ib_dereg_mr().
 */
static struct mlx5_ib_mr *dd_mr_pair(struct kunit *test, int fd)
{
	struct mlx5_fw *fw = test->priv;
	struct ib_umem_dmabuf *umem_dmabuf;
	struct mlx5_ib_mr *crossed, *crossing;

	crossed = kzalloc_obj(*crossed);
	KUNIT_ASSERT_NOT_NULL(test, crossed);
	crossed->ibmr.device = &fw->dev->ib_dev;
	crossed->ibmr.frmr.key.vendor_key = DD_POOL_KEY;
	KUNIT_ASSERT_EQ(test, ib_frmr_pool_pop(&fw->dev->ib_dev,
					       &crossed->ibmr), 0);
	crossed->mmkey.key = crossed->ibmr.frmr.handle;
	crossed->mmkey.type = MLX5_MKEY_MR;
	crossed->data_direct = true;
	INIT_LIST_HEAD(&crossed->dd_node);

	dd_import(test, crossed, fd);
	umem_dmabuf = to_ib_umem_dmabuf(crossed->umem);

	crossing = kzalloc_obj(*crossing);
	KUNIT_ASSERT_NOT_NULL(test, crossing);
	crossing->ibmr.device = &fw->dev->ib_dev;
	crossing->mmkey.key = CROSSING_KEY;
	crossing->mmkey.type = MLX5_MKEY_MR;
	crossing->data_direct = true;
	crossing->dd_crossed_mr = crossed;

	ib_umem_dmabuf_revoke_lock(umem_dmabuf);
	ib_umem_dmabuf_set_mr_locked(umem_dmabuf, &crossing->ibmr);
	ib_umem_dmabuf_revoke_unlock(umem_dmabuf);
	mutex_lock(&fw->dev->data_direct_lock);
	list_add_tail(&crossed->dd_node, &fw->dev->data_direct_mr_list);
	mutex_unlock(&fw->dev->data_direct_lock);
	fw->mr = crossed;
	return crossing;
}

/* The next mkey the pool hands out for the key it last made one for */
static u32 pool_next(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct ib_mr *ibmr;
	u32 key;

	ibmr = kunit_kzalloc(test, sizeof(*ibmr), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ibmr);
	ibmr->frmr.key = fw->pool_key;
	KUNIT_ASSERT_EQ(test, ib_frmr_pool_pop(&fw->dev->ib_dev, ibmr), 0);
	key = ibmr->frmr.handle;
	ib_frmr_pool_push(&fw->dev->ib_dev, ibmr);
	return key;
}

/*
 * Dereg of a data-direct MR nobody revoked: one revoke UMR for the crossed
 * mkey, before anything is destroyed; DESTROY_MKEY of the user's crossing
 * mkey only; the crossed mkey goes back to the pool without a second UMR,
 * off the device's list, and the memory is released.
 */
static void test_dereg_pair(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_mr *crossing;
	struct dma_buf *dmabuf;
	u32 crossed_key;

	crossing = dd_mr_pair(test, ib_kunit_mock_fd(test, MR_BYTES, 0,
						     &dmabuf));
	crossed_key = crossing->dd_crossed_mr->mmkey.key;
	KUNIT_EXPECT_EQ(test, fw->pool_creates, 1);
	ib_kunit_watch_revoke(test, crossing->dd_crossed_mr->umem,
			      &fw->fx.watch);
	fw->mr = NULL;

	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&crossing->ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->fx.watch.calls, 1);
	KUNIT_EXPECT_EQ(test, fw->fx.watch.calls_elsewhere, 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_EQ(test, fw->umr_key[0], crossed_key);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_umr);
	KUNIT_EXPECT_EQ(test, fw->destroys_at_umr, 0);
	KUNIT_EXPECT_EQ(test, fw->destroys, 1);
	KUNIT_EXPECT_EQ(test, fw->destroy_key[0], CROSSING_KEY);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_TRUE(test, list_empty(&fw->dev->data_direct_mr_list));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	/* Pooled, not destroyed: the next data-direct mkey is the same one */
	KUNIT_EXPECT_EQ(test, pool_next(test), crossed_key);
	KUNIT_EXPECT_EQ(test, fw->pool_creates, 1);

	/* Nothing stays armed */
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
}

/*
 * The exporter revokes a registered pair: one revoke UMR, for the crossed
 * mkey; dereg then posts none, destroys only the crossing mkey, pools the
 * crossed one and releases the memory.
 */
static void revoke_then_dereg(struct kunit *test, struct mlx5_ib_mr *crossing,
			      struct dma_buf *dmabuf)
{
	struct mlx5_fw *fw = test->priv;
	u32 crossed_key = crossing->dd_crossed_mr->mmkey.key;

	fw->mr = crossing->dd_crossed_mr;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_EQ(test, fw->umr_key[0], crossed_key);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);

	fw->mr = NULL;
	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&crossing->ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_EQ(test, fw->destroys, 1);
	KUNIT_EXPECT_EQ(test, fw->destroy_key[0], CROSSING_KEY);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, pool_next(test), crossed_key);
}

/* After the exporter's revoke, dereg posts no second UMR */
static void test_revoke_then_dereg_pair(struct kunit *test)
{
	struct mlx5_ib_mr *crossing;
	struct dma_buf *dmabuf;

	crossing = dd_mr_pair(test, ib_kunit_mock_fd(test, MR_BYTES, 0,
						     &dmabuf));
	revoke_then_dereg(test, crossing, dmabuf);
}

/*
 * The revoke's UMR failed on a dead QP: DMA was stopped, and dereg does not
 * pool an mkey it does not know to be free. Its own UMR fails too, so the
 * crossed mkey is destroyed, after the crossing one, and the pool makes a
 * new one next time.
 */
static void test_dereg_after_failed_fence(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_mr *crossing;
	struct dma_buf *dmabuf;
	u32 crossed_key;

	crossing = dd_mr_pair(test, ib_kunit_mock_fd(test, MR_BYTES, 0,
						     &dmabuf));
	crossed_key = crossing->dd_crossed_mr->mmkey.key;
	fw->umr_err = -EFAULT;
	fw->umr_state_after = MLX5_UMR_STATE_ERR;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_stop);
	fw->mr = NULL;

	KUNIT_EXPECT_EQ(test, PTR_ERR(try_reg(test, -1)), -EIO);

	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&crossing->ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->destroys, 2);
	KUNIT_EXPECT_EQ(test, fw->destroy_key[0], CROSSING_KEY);
	KUNIT_EXPECT_EQ(test, fw->destroy_key[1], crossed_key);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_NE(test, pool_next(test), crossed_key);
	KUNIT_EXPECT_EQ(test, fw->pool_creates, 2);
	/* The mkey is gone: DMA is back on, and registration accepted */
	KUNIT_EXPECT_EQ(test, fw->resumes, 1);
	KUNIT_EXPECT_EQ(test, fw->dd->dma_stops, 0);
	KUNIT_EXPECT_EQ(test, PTR_ERR(try_reg(test, -1)), -EBADF);
}

/*
 * A user's dereg on a dead UMR QP, nothing revoked before: the crossed mkey
 * is destroyed, after the crossing one and before its memory is unmapped,
 * and no DMA is stopped.
 */
static void test_dereg_umr_dead_destroys(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_mr *crossing;
	struct dma_buf *dmabuf;
	u32 crossed_key;

	crossing = dd_mr_pair(test, ib_kunit_mock_fd(test, MR_BYTES, 0,
						     &dmabuf));
	crossed_key = crossing->dd_crossed_mr->mmkey.key;
	fw->umr_err = -EFAULT;
	fw->umr_state_after = MLX5_UMR_STATE_ERR;

	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&crossing->ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->destroys, 2);
	KUNIT_EXPECT_EQ(test, fw->destroy_key[0], CROSSING_KEY);
	KUNIT_EXPECT_EQ(test, fw->destroy_key[1], crossed_key);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_destroy);
	KUNIT_EXPECT_EQ(test, fw->stops, 0);
	KUNIT_EXPECT_EQ(test, fw->dd->dma_stops, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * A user's dereg when neither the UMR nor DESTROY_MKEY succeeds: the
 * firmware does not answer, so the data-direct function's DMA is stopped
 * before the memory is unmapped, the dereg fails with nothing armed, and
 * the dereg that follows, once the firmware answers, lifts the stop.
 */
static void test_dereg_firmware_dead(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_mr *crossing;
	struct dma_buf *dmabuf;

	crossing = dd_mr_pair(test, ib_kunit_mock_fd(test, MR_BYTES, 0,
						     &dmabuf));
	fw->umr_err = -EFAULT;
	fw->umr_state_after = MLX5_UMR_STATE_ERR;
	fw->destroy_err = -ETIMEDOUT;

	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&crossing->ibmr, NULL),
			-ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_stop);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);

	fw->destroy_err = 0;
	fw->mr = NULL;
	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&crossing->ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->resumes, 1);
	KUNIT_EXPECT_EQ(test, fw->dd->dma_stops, 0);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * Two MRs' fences fail: DMA is stopped once, and turned back on only when
 * the second of their mkeys is destroyed.
 */
static void test_stop_until_last_mkey(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_mr *a, *b;
	struct dma_buf *a_buf, *b_buf;

	a = dd_mr_pair(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &a_buf));
	b = dd_mr_pair(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &b_buf));
	fw->umr_err = -EFAULT;
	fw->umr_state_after = MLX5_UMR_STATE_ERR;
	fw->mr = NULL;
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(a_buf), 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(b_buf), 0);
	KUNIT_EXPECT_EQ(test, fw->stops, 1);
	KUNIT_EXPECT_EQ(test, fw->dd->dma_stops, 2);

	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&a->ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->resumes, 0);
	KUNIT_EXPECT_EQ(test, PTR_ERR(try_reg(test, -1)), -EIO);
	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&b->ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->resumes, 1);
	KUNIT_EXPECT_EQ(test, fw->dd->dma_stops, 0);
}

/*
 * DESTROY_MKEY of the crossing mkey fails: the dereg fails, after the crossed
 * mkey was fenced, so the user keeps a revoked MR and no armed callback; the
 * dereg that follows completes it.
 */
static void test_dereg_destroy_fails(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_mr *crossing;
	struct dma_buf *dmabuf;

	crossing = dd_mr_pair(test, ib_kunit_mock_fd(test, MR_BYTES, 0,
						     &dmabuf));
	fw->destroy_err = -EIO;
	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&crossing->ibmr, NULL), -EIO);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_TRUE(test, crossing->dd_crossed_mr->dd_fenced);
	ib_kunit_expect_mock(test, dmabuf, 1, 0, 0);
	KUNIT_ASSERT_EQ(test, ib_kunit_mock_revoke(dmabuf), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);

	fw->destroy_err = 0;
	fw->mr = NULL;
	KUNIT_EXPECT_EQ(test, mlx5_ib_dereg_mr(&crossing->ibmr, NULL), 0);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_EQ(test, fw->destroys, 2);
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
}

/*
 * A registration that succeeds: the crossed mkey from the pool gets its KSM
 * translation under the import's lock, the crossing mkey is created for the
 * user, the crossed MR is on the device's list, and the revoke callback is
 * armed: the exporter's revoke fences the crossed mkey.
 */
static void test_reg_pair(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct mlx5_ib_mr *crossing;
	struct dma_buf *dmabuf;
	struct ib_mr *ibmr;
	u32 crossed_key;

	ibmr = try_reg(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(ibmr), "reg: %pe", ibmr);
	crossing = to_mmr(ibmr);
	KUNIT_EXPECT_EQ(test, crossing->mmkey.key, CROSSING_KEY);
	KUNIT_EXPECT_TRUE(test, crossing->data_direct);
	KUNIT_ASSERT_NOT_NULL(test, crossing->dd_crossed_mr);
	crossed_key = crossing->dd_crossed_mr->mmkey.key;
	KUNIT_EXPECT_EQ(test, fw->pool_creates, 1);
	KUNIT_EXPECT_EQ(test, fw->ksm_loads, 1);
	KUNIT_EXPECT_EQ(test, fw->ksm_key, crossed_key);
	KUNIT_EXPECT_EQ(test, fw->creates, 1);
	KUNIT_EXPECT_EQ(test, fw->umrs, 0);
	KUNIT_EXPECT_FALSE(test, list_empty(&fw->dev->data_direct_mr_list));
	ib_kunit_expect_mock(test, dmabuf, 1, 1, 1);

	revoke_then_dereg(test, crossing, dmabuf);
}

/*
 * A registration that failed with @err after loading the KSM translation:
 * its error path fenced the crossed mkey while the memory was still mapped
 * (the callback was armed), then pooled it; nothing stays attached or
 * listed.
 */
static void expect_failed_reg(struct kunit *test, struct ib_mr *ibmr, int err,
			      struct dma_buf *dmabuf)
{
	struct mlx5_fw *fw = test->priv;

	KUNIT_EXPECT_EQ(test, PTR_ERR(ibmr), err);
	KUNIT_EXPECT_EQ(test, fw->ksm_loads, 1);
	KUNIT_EXPECT_EQ(test, fw->umrs, 1);
	KUNIT_EXPECT_EQ(test, fw->umr_key[0], fw->ksm_key);
	KUNIT_EXPECT_TRUE(test, fw->mapped_at_umr);
	KUNIT_EXPECT_EQ(test, fw->destroys, 0);
	KUNIT_EXPECT_TRUE(test, list_empty(&fw->dev->data_direct_mr_list));
	ib_kunit_expect_mock(test, dmabuf, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, pool_next(test), fw->ksm_key);
}

/*
 * Loading the KSM translation fails: the registration fails with that error,
 * and its error path fences the crossed mkey (the callback was armed) before
 * the mkey goes back to the pool; nothing stays attached or listed.
 */
static void test_reg_ksm_load_fails(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ib_mr *ibmr;

	fw->ksm_err = -EIO;
	ibmr = try_reg(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	expect_failed_reg(test, ibmr, -EIO, dmabuf);
	KUNIT_EXPECT_EQ(test, fw->creates, 0);
}

/*
 * Creating the crossing mkey fails: the crossed MR is deregistered, fenced
 * first, its mkey pooled; the registration fails with the error.
 */
static void test_reg_crossing_fails(struct kunit *test)
{
	struct mlx5_fw *fw = test->priv;
	struct dma_buf *dmabuf;
	struct ib_mr *ibmr;

	fw->create_err = -ENOSPC;
	ibmr = try_reg(test, ib_kunit_mock_fd(test, MR_BYTES, 0, &dmabuf));
	expect_failed_reg(test, ibmr, -ENOSPC, dmabuf);
	KUNIT_EXPECT_EQ(test, fw->creates, 1);
}

static struct kunit_case mlx5_dd_dmabuf_mr_cases[] = {
	IB_KUNIT_MR_CASE(revoke_then_dereg),
	IB_KUNIT_MR_CASE(dereg_disarms),
	IB_KUNIT_MR_CASE_UNFENCED(revoke_fence_fails),
	IB_KUNIT_MR_CASE(dereg_fence_fails),
	KUNIT_CASE(test_fence_fails_stops_dma),
	KUNIT_CASE(test_reg_not_refused),
	KUNIT_CASE(test_fence_retried_after_recovery),
	KUNIT_CASE(test_fence_retries_bounded),
	KUNIT_CASE(test_internal_error_is_fenced),
	KUNIT_CASE(test_internal_error_during_fence),
	KUNIT_CASE(test_unbind_revokes_each),
	KUNIT_CASE(test_dereg_pair),
	IB_KUNIT_MR_CASE(dereg_races_revoke),
	KUNIT_CASE(test_revoke_then_dereg_pair),
	KUNIT_CASE(test_dereg_after_failed_fence),
	KUNIT_CASE(test_dereg_umr_dead_destroys),
	KUNIT_CASE(test_dereg_firmware_dead),
	KUNIT_CASE(test_stop_until_last_mkey),
	KUNIT_CASE(test_dereg_destroy_fails),
	KUNIT_CASE(test_reg_pair),
	KUNIT_CASE(test_reg_ksm_load_fails),
	KUNIT_CASE(test_reg_crossing_fails),
	IB_KUNIT_MR_CASE(reg_fails),
	{}
};

static struct kunit_suite mlx5_dd_dmabuf_mr_suite = {
	.name = "mlx5_dd_dmabuf_mr",
	.init = mlx5_fw_init,
	.test_cases = mlx5_dd_dmabuf_mr_cases,
};

kunit_test_suite(mlx5_dd_dmabuf_mr_suite);

MODULE_DESCRIPTION("KUnit tests for mlx5 data-direct dma-buf MRs");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("DMA_BUF");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
