/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What the KUnit tests of the RDMA core and of its drivers share: a fake
 * ib_device that is never registered, a DMA device to map for, and buffers
 * of the dmabuf_mock exporter with the counts it keeps.
 */

#ifndef IB_KUNIT_HELPERS_H
#define IB_KUNIT_HELPERS_H

#include <linux/types.h>

struct device;
struct dma_buf;
struct ib_device;
struct kunit;

struct device *ib_kunit_dma_device(struct kunit *test, const char *name);
struct ib_device *ib_kunit_alloc_device(struct kunit *test, size_t size,
					const char *name);
int ib_kunit_install_fd(struct kunit *test, struct dma_buf *dmabuf);
int ib_kunit_mock_fd(struct kunit *test, u64 length, u32 flags,
		     struct dma_buf **out);
void ib_kunit_expect_mock(struct kunit *test, struct dma_buf *dmabuf,
			  u32 attachments, u32 pins, u32 maps);
int ib_kunit_mock_revoke(struct dma_buf *dmabuf);
void ib_kunit_expect_no_mock_leaks(struct kunit *test);

#endif /* IB_KUNIT_HELPERS_H */
