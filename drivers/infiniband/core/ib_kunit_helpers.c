// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * KUnit helpers for the RDMA core and its drivers: a fake ib_device, a DMA
 * device, and dmabuf_mock buffers as file descriptors, as the dma-buf MR
 * verbs take them. Each test's resources go with the test.
 */

#include <kunit/device.h>
#include <kunit/resource.h>
#include <kunit/test.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <net/net_namespace.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_verbs.h>

#include "../../dma-buf/dmabuf_mock.h"

/**
 * ib_kunit_dma_device() - A device the DMA API can map for
 * @test: the test that owns it
 * @name: its name
 *
 * A KUnit device with a 64-bit DMA mask: dma-direct on a test machine.
 *
 * Return: the device, unregistered when the test ends. Asserts on failure.
 */
struct device *ib_kunit_dma_device(struct kunit *test, const char *name)
{
	struct device *dev = kunit_device_register(test, name);

	KUNIT_ASSERT_FALSE(test, IS_ERR(dev));
	dev->dma_mask = &dev->coherent_dma_mask;
	KUNIT_ASSERT_EQ(test, dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64)),
			0);
	return dev;
}
EXPORT_SYMBOL_GPL(ib_kunit_dma_device);

KUNIT_DEFINE_ACTION_WRAPPER(dealloc_ibdev, ib_dealloc_device,
			    struct ib_device *);

/**
 * ib_kunit_alloc_device() - A fake ib_device that is never registered
 * @test: the test that owns it
 * @size: the size of the driver's structure, whose first member is the
 *	ib_device
 * @name: the device's name, also that of its DMA device
 *
 * What the umem code and a driver's MR verbs need: a named ib_device whose
 * dma_device is ib_kunit_dma_device().
 *
 * Return: the ib_device, freed when the test ends. Asserts on failure.
 */
struct ib_device *ib_kunit_alloc_device(struct kunit *test, size_t size,
					const char *name)
{
	struct ib_device *ibdev;

	ibdev = _ib_alloc_device(size, &init_net);
	KUNIT_ASSERT_NOT_NULL(test, ibdev);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, dealloc_ibdev,
							ibdev), 0);
	KUNIT_ASSERT_EQ(test, dev_set_name(&ibdev->dev, "%s", name), 0);
	ibdev->dma_device = ib_kunit_dma_device(test, name);
	return ibdev;
}
EXPORT_SYMBOL_GPL(ib_kunit_alloc_device);

KUNIT_DEFINE_ACTION_WRAPPER(put_dmabuf, dma_buf_put, struct dma_buf *);

static void close_fd_action(void *fd)
{
	close_fd((unsigned long)fd);
}

/**
 * ib_kunit_install_fd() - A file descriptor for a dma-buf, until the test ends
 * @test: the test
 * @dmabuf: the buffer; the test takes over the caller's reference
 *
 * The dma-buf MR verbs take a file descriptor. KUnit runs each case in a
 * kernel thread, which shares the init task's file table: install the
 * buffer there, and keep a reference of the test's own to look at it.
 *
 * Return: the file descriptor. Asserts on failure.
 */
int ib_kunit_install_fd(struct kunit *test, struct dma_buf *dmabuf)
{
	int fd;

	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, put_dmabuf,
							dmabuf), 0);
	get_dma_buf(dmabuf);
	fd = dma_buf_fd(dmabuf, O_CLOEXEC);
	if (fd < 0)
		dma_buf_put(dmabuf);
	KUNIT_ASSERT_GE(test, fd, 0);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, close_fd_action,
							(void *)(long)fd), 0);
	return fd;
}
EXPORT_SYMBOL_GPL(ib_kunit_install_fd);

/**
 * ib_kunit_mock_fd() - A dmabuf_mock buffer as a file descriptor
 * @test: the test
 * @length: its size in bytes
 * @flags: DMABUF_MOCK_* creation flags
 * @out: the buffer, valid until the test ends
 *
 * Return: the file descriptor. Asserts on failure.
 */
int ib_kunit_mock_fd(struct kunit *test, u64 length, u32 flags,
		     struct dma_buf **out)
{
	struct dma_buf *dmabuf = dmabuf_mock_create(length, flags);

	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(dmabuf), "no mock buffer: %d",
			       PTR_ERR_OR_ZERO(dmabuf));
	*out = dmabuf;
	return ib_kunit_install_fd(test, dmabuf);
}
EXPORT_SYMBOL_GPL(ib_kunit_mock_fd);

/**
 * ib_kunit_expect_mock() - Check a mock buffer's attachments, pins and maps
 * @test: the test
 * @dmabuf: a dmabuf_mock buffer
 * @attachments: the attachments expected
 * @pins: the pins expected
 * @maps: the mappings expected
 *
 * Takes the reservation lock: never with the buffer's lock held.
 */
void ib_kunit_expect_mock(struct kunit *test, struct dma_buf *dmabuf,
			  u32 attachments, u32 pins, u32 maps)
{
	struct dmabuf_mock_query q = {};

	KUNIT_ASSERT_EQ(test, dmabuf_mock_query(dmabuf, &q), 0);
	KUNIT_EXPECT_EQ(test, q.attachments, attachments);
	KUNIT_EXPECT_EQ(test, q.pins, pins);
	KUNIT_EXPECT_EQ(test, q.maps, maps);
}
EXPORT_SYMBOL_GPL(ib_kunit_expect_mock);

/**
 * ib_kunit_mock_revoke() - Revoke a mock buffer for good, as its exporter
 * @dmabuf: a dmabuf_mock buffer
 *
 * Return: dmabuf_mock_revoke()'s result.
 */
int ib_kunit_mock_revoke(struct dma_buf *dmabuf)
{
	return dmabuf_mock_revoke(dmabuf, 0, 1000, NULL, 0);
}
EXPORT_SYMBOL_GPL(ib_kunit_mock_revoke);

struct mock_leaks {
	struct kunit *test;
	struct dmabuf_mock_stats before;
};

static void expect_no_mock_leaks(void *data)
{
	struct mock_leaks *leaks = data;
	struct dmabuf_mock_stats after;

	/* fput() from a kernel thread defers the final release. */
	flush_delayed_fput();
	dmabuf_mock_stats(&after);
	KUNIT_EXPECT_EQ_MSG(leaks->test, after.buffers, leaks->before.buffers,
			    "mock buffers leaked");
	KUNIT_EXPECT_EQ_MSG(leaks->test, after.pages, leaks->before.pages,
			    "mock pages leaked");
}

/**
 * ib_kunit_expect_no_mock_leaks() - Check that no mock buffer outlives a test
 * @test: the test
 *
 * Call it before the test makes its buffers: the check runs after their
 * cleanup.
 */
void ib_kunit_expect_no_mock_leaks(struct kunit *test)
{
	struct mock_leaks *leaks;

	leaks = kunit_kzalloc(test, sizeof(*leaks), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, leaks);
	leaks->test = test;
	dmabuf_mock_stats(&leaks->before);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							expect_no_mock_leaks,
							leaks), 0);
}
EXPORT_SYMBOL_GPL(ib_kunit_expect_no_mock_leaks);

MODULE_DESCRIPTION("KUnit helpers for the RDMA core and its drivers");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("DMA_BUF");
MODULE_IMPORT_NS("DMABUF_MOCK");
