/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What the KUnit tests of the RDMA core and of its drivers share: a fake
 * ib_device that is never registered, a DMA device to map for, buffers of
 * the dmabuf_mock exporter with the counts it keeps, an exporter's revoke
 * that waits for the lock a driver holds, and a count of the async events
 * a device raises.
 */

#ifndef IB_KUNIT_HELPERS_H
#define IB_KUNIT_HELPERS_H

#include <linux/types.h>
#include <rdma/ib_verbs.h>

struct device;
struct dma_buf;
struct ib_umem;
struct ib_kunit_events;
struct ib_kunit_revoker;
struct kunit;
struct pci_dev;
struct rw_semaphore;

struct device *ib_kunit_dma_device(struct kunit *test, const char *name);
struct pci_dev *ib_kunit_pci_dev(struct kunit *test, const char *name);
struct ib_device *ib_kunit_alloc_device(struct kunit *test, size_t size,
					const char *name);
int ib_kunit_install_fd(struct kunit *test, struct dma_buf *dmabuf);
int ib_kunit_mock_fd(struct kunit *test, u64 length, u32 flags,
		     struct dma_buf **out);
void ib_kunit_expect_mock(struct kunit *test, struct dma_buf *dmabuf,
			  u32 attachments, u32 pins, u32 maps);
int ib_kunit_mock_revoke(struct dma_buf *dmabuf);
void ib_kunit_expect_no_mock_leaks(struct kunit *test);
/**
 * struct ib_kunit_revoke_watch - Where a dma-buf umem's revoke callback ran
 * @owner: the task that installed the watch (the test's)
 * @calls: the callback's runs in @owner
 * @calls_elsewhere: its runs in any other task
 * @revoke: the driver's callback
 * @priv: its argument
 */
struct ib_kunit_revoke_watch {
	struct task_struct *owner;
	unsigned int calls;
	unsigned int calls_elsewhere;
	void (*revoke)(void *priv);
	void *priv;
};

void ib_kunit_watch_revoke(struct kunit *test, struct ib_umem *umem,
			   struct ib_kunit_revoke_watch *watch);
struct ib_kunit_revoker *ib_kunit_revoke_behind(struct kunit *test,
						struct dma_buf *dmabuf);
struct ib_kunit_revoker *ib_kunit_revoke_blocked_on(struct kunit *test,
						    struct dma_buf *dmabuf,
						    struct rw_semaphore *sem);
int ib_kunit_revoker_wait(struct kunit *test, struct ib_kunit_revoker *r);
struct ib_kunit_events *ib_kunit_watch_events(struct kunit *test,
					      struct ib_device *ibdev);
int ib_kunit_events_seen(struct ib_kunit_events *events,
			 enum ib_event_type type);

#endif /* IB_KUNIT_HELPERS_H */
