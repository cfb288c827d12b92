// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * KUnit helpers for the RDMA core and its drivers: a fake ib_device, a DMA
 * device, dmabuf_mock buffers as file descriptors, as the dma-buf MR verbs
 * take them, an exporter's revoke forced into the window behind a driver's
 * dereg, and a count of async events. Each test's resources go with the
 * test.
 */

#include <kunit/device.h>
#include <kunit/resource.h>
#include <kunit/test.h>
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/sched.h>
#include <linux/sched/debug.h>
#include <linux/sched/task.h>
#include <net/net_namespace.h>
#include <rdma/ib_kunit_helpers.h>
#include <rdma/ib_umem.h>
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

static void ib_kunit_pci_dev_release(struct device *dev)
{
}

KUNIT_DEFINE_ACTION_WRAPPER(put_pci_dev, put_device, struct device *);

/**
 * ib_kunit_pci_dev() - A PCI function that no bus knows, for DMA
 * @test: the test that owns it
 * @name: its device's name
 *
 * For a driver that maps or allocates coherent memory for &pdev->dev: the
 * DMA API maps for it (dma-direct, 64-bit mask). Nothing reaches its PCI
 * side: the code under test must not touch config space.
 *
 * Return: the pci_dev, put and freed when the test ends. Asserts on
 * failure.
 */
struct pci_dev *ib_kunit_pci_dev(struct kunit *test, const char *name)
{
	struct pci_dev *pdev;

	pdev = kunit_kzalloc(test, sizeof(*pdev), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, pdev);
	device_initialize(&pdev->dev);
	pdev->dev.release = ib_kunit_pci_dev_release;
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, put_pci_dev,
							&pdev->dev), 0);
	KUNIT_ASSERT_EQ(test, dev_set_name(&pdev->dev, "%s", name), 0);
	pdev->dev.dma_mask = &pdev->dev.coherent_dma_mask;
	KUNIT_ASSERT_EQ(test, dma_set_mask_and_coherent(&pdev->dev,
							DMA_BIT_MASK(64)), 0);
	return pdev;
}
EXPORT_SYMBOL_GPL(ib_kunit_pci_dev);

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

struct ib_kunit_revoker {
	struct kunit *test;
	struct task_struct *task;
	struct dma_buf *dmabuf;
	struct completion done;
	int ret;
	bool started;
	bool forced;		/* it must be seen waiting for a lock */
	bool waited;		/* it was seen waiting for the lock */
	bool pinned;		/* the caller, to the revoker's CPU */
};

static int revoker_thread(void *data)
{
	struct ib_kunit_revoker *r = data;

	/* The test's static stubs follow this thread too */
	current->kunit_test = r->test;
	r->ret = ib_kunit_mock_revoke(r->dmabuf);
	/* For ib_kunit_revoker_wait() and for revoker_end() */
	complete_all(&r->done);
	return 0;
}

static void revoker_unpin(struct ib_kunit_revoker *r)
{
	if (r->pinned) {
		set_cpus_allowed_ptr(current, cpu_possible_mask);
		r->pinned = false;
	}
}

static void revoker_end(void *data)
{
	struct ib_kunit_revoker *r = data;

	if (!r->started)
		return;
	/* Its memory goes with the test: it must have ended */
	if (!wait_for_completion_timeout(&r->done, 10 * HZ)) {
		pr_err("ib_kunit: a revoke thread has not ended:\n");
		sched_show_task(r->task);
		wait_for_completion(&r->done);
	}
	put_task_struct(r->task);
	revoker_unpin(r);
}

static struct ib_kunit_revoker *revoker_create(struct kunit *test,
					       struct dma_buf *dmabuf)
{
	struct ib_kunit_revoker *r;
	struct task_struct *t;

	/* No assertion here: the caller may hold locks */
	r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	if (!r || kunit_add_action(test, revoker_end, r)) {
		KUNIT_FAIL(test, "no memory for the revoke thread");
		return NULL;
	}
	r->test = test;
	r->dmabuf = dmabuf;
	init_completion(&r->done);
	t = kthread_create(revoker_thread, r, "ib_kunit_revoke");
	if (IS_ERR(t)) {
		KUNIT_FAIL(test, "no revoke thread: %pe", t);
		return NULL;
	}
	r->task = get_task_struct(t);
	return r;
}

/**
 * ib_kunit_revoke_behind() - Start a revoke that waits for the caller's lock
 * @test: the test
 * @dmabuf: a dmabuf_mock buffer whose reservation lock the caller holds,
 *	for instance from a stub the driver calls under it
 *
 * Starts the exporter's revoke, ib_kunit_mock_revoke(), in a kthread that
 * the test's static stubs follow, and returns once dmabuf_mock has seen it
 * wait for @dmabuf's reservation lock. The kthread runs on the caller's CPU,
 * to which the caller is bound until ib_kunit_revoker_wait(), at a real-time
 * priority: when the caller releases the lock, the revoke takes it before
 * the caller can take it again. That forces the window in which an
 * exporter's revoke follows a driver's dereg or fence at once.
 *
 * It does not assert, so that a stub may call it under the driver's locks.
 *
 * Return: the revoker, for ib_kunit_revoker_wait(), or NULL if it could not
 * start one (the test has failed).
 */
struct ib_kunit_revoker *ib_kunit_revoke_behind(struct kunit *test,
						struct dma_buf *dmabuf)
{
	unsigned int before = dmabuf_mock_revoke_lock_waits(dmabuf);
	unsigned long end = jiffies + 10 * HZ;
	struct ib_kunit_revoker *r;
	int cpu;

	r = revoker_create(test, dmabuf);
	if (!r)
		return NULL;
	r->forced = true;
	cpu = raw_smp_processor_id();
	KUNIT_EXPECT_EQ(test, set_cpus_allowed_ptr(current, cpumask_of(cpu)),
			0);
	r->pinned = true;
	kthread_bind(r->task, cpu);
	sched_set_fifo(r->task);
	r->started = true;
	wake_up_process(r->task);
	while (dmabuf_mock_revoke_lock_waits(dmabuf) == before &&
	       time_before(jiffies, end))
		usleep_range(100, 200);
	r->waited = dmabuf_mock_revoke_lock_waits(dmabuf) != before;
	return r;
}
EXPORT_SYMBOL_GPL(ib_kunit_revoke_behind);

/**
 * ib_kunit_revoke_blocked_on() - Start a revoke that waits for a driver's rwsem
 * @test: the test
 * @dmabuf: a dmabuf_mock buffer
 * @sem: a driver's rw_semaphore, which the caller holds for read, for
 *	instance from a stub the driver calls under it
 *
 * Starts the exporter's revoke, ib_kunit_mock_revoke(), in a kthread that
 * the test's static stubs follow, and returns once @sem has a waiter (the
 * revoke's callback, which takes it for write), or after 10 seconds if it
 * never gets one (the driver's callback does not take it: the revoke then
 * runs on). That forces the window in which an exporter's revoke meets a
 * driver operation in flight under @sem.
 *
 * It does not assert, so that a stub may call it under the driver's locks.
 *
 * Return: the revoker, for ib_kunit_revoker_wait(), which asserts that the
 * revoke was seen waiting, or NULL if it could not start one (the test has
 * failed).
 */
struct ib_kunit_revoker *ib_kunit_revoke_blocked_on(struct kunit *test,
						    struct dma_buf *dmabuf,
						    struct rw_semaphore *sem)
{
	unsigned long end = jiffies + 10 * HZ;
	struct ib_kunit_revoker *r = revoker_create(test, dmabuf);

	if (!r)
		return NULL;
	r->forced = true;
	r->started = true;
	wake_up_process(r->task);
	while (!rwsem_is_contended(sem) && time_before(jiffies, end))
		usleep_range(100, 200);
	r->waited = rwsem_is_contended(sem);
	return r;
}
EXPORT_SYMBOL_GPL(ib_kunit_revoke_blocked_on);

/**
 * ib_kunit_revoker_wait() - Wait for a revoke ib_kunit_revoke_behind() or
 *	ib_kunit_revoke_blocked_on() started
 * @test: the test
 * @r: the revoker
 *
 * Asserts that the revoke ended within 10 seconds and that it was seen
 * waiting for the lock (the window was reached), and unbinds the caller.
 *
 * Return: the revoke's result.
 */
int ib_kunit_revoker_wait(struct kunit *test, struct ib_kunit_revoker *r)
{
	KUNIT_ASSERT_NOT_NULL_MSG(test, r, "no revoke was started");
	if (!wait_for_completion_timeout(&r->done, 10 * HZ)) {
		sched_show_task(r->task);
		KUNIT_FAIL_AND_ABORT(test, "the revoke did not end");
	}
	revoker_unpin(r);
	KUNIT_ASSERT_TRUE_MSG(test, !r->forced || r->waited,
			      "the revoke never waited for the lock");
	return r->ret;
}
EXPORT_SYMBOL_GPL(ib_kunit_revoker_wait);

static void watched_revoke(void *priv)
{
	struct ib_kunit_revoke_watch *watch = priv;

	if (current == watch->owner)
		watch->calls++;
	else
		watch->calls_elsewhere++;
	watch->revoke(watch->priv);
}

/**
 * ib_kunit_watch_revoke() - Count where a dma-buf umem's revoke callback runs
 * @test: the test
 * @umem: a revocable dma-buf umem, with the driver's callback set
 * @watch: what to fill: the calls from the task calling this, and from
 *	any other, such as an exporter's revoke in ib_kunit_revoke_behind()
 *
 * Puts a counter in front of the driver's revoke callback. A dereg is the
 * owner's doing and must run the callback itself: a call from another task
 * after it means the dereg left the callback to whoever revoked next.
 */
void ib_kunit_watch_revoke(struct kunit *test, struct ib_umem *umem,
			   struct ib_kunit_revoke_watch *watch)
{
	struct ib_umem_dmabuf *umem_dmabuf = to_ib_umem_dmabuf(umem);
	struct dma_resv *resv = umem_dmabuf->attach->dmabuf->resv;

	KUNIT_ASSERT_TRUE(test, umem->is_dmabuf);
	dma_resv_lock(resv, NULL);
	KUNIT_EXPECT_NOT_NULL(test, umem_dmabuf->pinned_revoke);
	memset(watch, 0, sizeof(*watch));
	watch->owner = current;
	watch->revoke = umem_dmabuf->pinned_revoke;
	watch->priv = umem_dmabuf->private;
	umem_dmabuf->pinned_revoke = watched_revoke;
	umem_dmabuf->private = watch;
	dma_resv_unlock(resv);
}
EXPORT_SYMBOL_GPL(ib_kunit_watch_revoke);

/* Room for every enum ib_event_type value, with some to spare */
#define IB_KUNIT_EVENT_TYPES 32

struct ib_kunit_events {
	struct ib_event_handler handler;
	atomic_t count[IB_KUNIT_EVENT_TYPES];
};

static void count_event(struct ib_event_handler *handler,
			struct ib_event *event)
{
	struct ib_kunit_events *events =
		container_of(handler, struct ib_kunit_events, handler);

	if (event->event < ARRAY_SIZE(events->count))
		atomic_inc(&events->count[event->event]);
}

static void unwatch_events(void *data)
{
	struct ib_kunit_events *events = data;

	flush_workqueue(ib_wq);
	ib_unregister_event_handler(&events->handler);
}

/**
 * ib_kunit_watch_events() - Count the async events a device raises
 * @test: the test that owns the watch
 * @ibdev: the device, registered or not
 *
 * An event handler on @ibdev, as a consumer registers one: it counts every
 * event ib_dispatch_event() delivers for @ibdev, by type.
 *
 * Return: the watch, removed when the test ends. Asserts on failure.
 */
struct ib_kunit_events *ib_kunit_watch_events(struct kunit *test,
					      struct ib_device *ibdev)
{
	struct ib_kunit_events *events;

	events = kunit_kzalloc(test, sizeof(*events), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, events);
	INIT_IB_EVENT_HANDLER(&events->handler, ibdev, count_event);
	ib_register_event_handler(&events->handler);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, unwatch_events,
							events), 0);
	return events;
}
EXPORT_SYMBOL_GPL(ib_kunit_watch_events);

/**
 * ib_kunit_events_seen() - How many events of a type a device raised
 * @events: the watch
 * @type: the event type
 *
 * ib_dispatch_event() queues the handlers' calls on ib_wq: every event
 * dispatched before this call is counted.
 *
 * Return: the number of @type events since ib_kunit_watch_events().
 */
int ib_kunit_events_seen(struct ib_kunit_events *events,
			 enum ib_event_type type)
{
	flush_workqueue(ib_wq);
	if (type >= ARRAY_SIZE(events->count))
		return -EINVAL;
	return atomic_read(&events->count[type]);
}
EXPORT_SYMBOL_GPL(ib_kunit_events_seen);

MODULE_DESCRIPTION("KUnit helpers for the RDMA core and its drivers");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_IMPORT_NS("DMA_BUF");
MODULE_IMPORT_NS("DMABUF_MOCK");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
