// SPDX-License-Identifier: GPL-2.0
/*
 * The first CPU access to a udmabuf, from two threads at once.
 *
 * udmabuf maps the table it syncs for CPU access (DMA_BUF_IOCTL_SYNC, or a
 * kernel importer's dma_buf_begin_cpu_access()) on the first such access of
 * the buffer, and keeps it until the buffer is released. The dma-buf core
 * does not serialise these calls, so the exporter must: two first accesses
 * at once must map one table, and a first access that fails to map must
 * leave nothing a concurrent one could see.
 *
 * Whether two calls meet in the window cannot be forced from user space;
 * each test makes many fresh buffers and lets two threads start their
 * first sync at the same moment, then checks what must hold whatever the
 * interleaving: every sync succeeds (or, under fault injection, fails with
 * ENOMEM), and once the buffers are closed the udmabuf device holds no DMA
 * mapping (CONFIG_DMA_API_DEBUG's dump; without it the leak check skips,
 * and kmemleak is left to find a leaked table).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <linux/udmabuf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../kselftest_harness.h"

#define ROUNDS		300
/* A small buffer: the races are in making the table, not in its size. */
#define BUF_PAGES	16
#define FAIL_NTH_MAX	200

#define DMA_API_DUMP	"/sys/kernel/debug/dma-api/dump"
#define DMA_API_DISABLED "/sys/kernel/debug/dma-api/disabled"

/* DMA mappings of the udmabuf device itself, or -1 without the dump. */
static int udmabuf_mappings(void)
{
	FILE *f = fopen(DMA_API_DUMP, "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "misc udmabuf ", strlen("misc udmabuf ")))
			n++;
	fclose(f);
	return n;
}

static int new_memfd(void)
{
	size_t size = BUF_PAGES * sysconf(_SC_PAGESIZE);
	int memfd;

	memfd = memfd_create("udmabuf_cpu_access", MFD_ALLOW_SEALING);
	if (memfd < 0)
		return -1;
	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) || ftruncate(memfd, size)) {
		close(memfd);
		return -1;
	}
	return memfd;
}

/* A udmabuf of @memfd, or of a memfd of its own if @memfd < 0. */
static int new_udmabuf(int dev, int memfd)
{
	struct udmabuf_create create = {
		.memfd = memfd,
		.size = BUF_PAGES * sysconf(_SC_PAGESIZE),
	};
	int own = -1, fd;

	if (memfd < 0) {
		own = new_memfd();
		if (own < 0)
			return -1;
		create.memfd = own;
	}
	fd = ioctl(dev, UDMABUF_CREATE, &create);
	if (own >= 0)
		close(own);
	return fd;
}

static int dmabuf_sync(int fd, __u64 flags)
{
	struct dma_buf_sync sync = { .flags = flags | DMA_BUF_SYNC_RW };

	return ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) ? -errno : 0;
}

/* Fail the @n-th fault injection point this thread reaches (0: none). */
static int fail_nth_set(int fd, unsigned int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%u", n);

	return pwrite(fd, buf, len, 0) == len ? 0 : -1;
}

/* Disarm; true when the armed point was reached (and failed). */
static bool fail_nth_reached(int fd)
{
	char buf[16] = "";

	if (pread(fd, buf, sizeof(buf) - 1, 0) <= 0)
		return false;
	fail_nth_set(fd, 0);
	return strtoul(buf, NULL, 10) == 0;
}

/* What one thread does to a fresh buffer, and what it got. */
struct syncer {
	pthread_t thread;
	pthread_barrier_t *start, *done;
	int *fd;		/* the round's buffer; -1 ends the thread */
	bool idle;		/* leave the buffer alone this round */
	bool fail_nth;		/* arm fail-nth for the first sync */
	unsigned int nth;	/* ... at this point */
	int nth_fd;
	int first;		/* the first SYNC_START's result (0, -errno) */
	bool reached;		/* fail-nth reached its point */
	int other;		/* the first other failure, as -errno */
};

static void *syncer_run(void *arg)
{
	struct syncer *s = arg;

	if (s->fail_nth) {
		s->nth_fd = open("/proc/thread-self/fail-nth", O_RDWR);
		if (s->nth_fd < 0)
			s->other = -errno;
	}
	for (;;) {
		pthread_barrier_wait(s->start);
		if (*s->fd < 0)
			break;
		s->reached = false;
		s->first = 0;
		if (s->idle)
			goto done;
		if (s->fail_nth && s->nth_fd >= 0)
			fail_nth_set(s->nth_fd, s->nth);
		s->first = dmabuf_sync(*s->fd, DMA_BUF_SYNC_START);
		if (s->fail_nth && s->nth_fd >= 0)
			s->reached = fail_nth_reached(s->nth_fd);
		if (!s->first) {
			int ret = dmabuf_sync(*s->fd, DMA_BUF_SYNC_END);

			if (ret && !s->other)
				s->other = ret;
		}
		/* A failed first sync: the next one must work. */
		if (s->first) {
			int ret = dmabuf_sync(*s->fd, DMA_BUF_SYNC_START);

			if (!ret)
				ret = dmabuf_sync(*s->fd, DMA_BUF_SYNC_END);
			if (ret && !s->other)
				s->other = ret;
		}
done:
		pthread_barrier_wait(s->done);
	}
	if (s->fail_nth && s->nth_fd >= 0)
		close(s->nth_fd);
	return NULL;
}

/* A test's buffers and threads. */
struct rig {
	int dev;
	int memfd;		/* the buffers' memfd, or -1: one each */
	int fd;
	int mappings;		/* the udmabuf device's before the test */
	pthread_barrier_t start, done;
	struct syncer s[2];
};

FIXTURE(udmabuf_cpu_access) {
	struct rig r;
};

FIXTURE_SETUP(udmabuf_cpu_access)
{
	int i;

	self->r.dev = open("/dev/udmabuf", O_RDWR);
	if (self->r.dev < 0)
		SKIP(return, "no /dev/udmabuf (CONFIG_UDMABUF)");
	self->r.mappings = udmabuf_mappings();
	self->r.fd = 0;
	self->r.memfd = -1;
	ASSERT_EQ(0, pthread_barrier_init(&self->r.start, NULL, 3));
	ASSERT_EQ(0, pthread_barrier_init(&self->r.done, NULL, 3));
	for (i = 0; i < 2; i++) {
		self->r.s[i] = (struct syncer) {
			.start = &self->r.start, .done = &self->r.done,
			.fd = &self->r.fd, .nth_fd = -1,
		};
	}
}

FIXTURE_TEARDOWN(udmabuf_cpu_access)
{
	if (self->r.dev >= 0)
		close(self->r.dev);
}

static void start_syncers(struct __test_metadata *_metadata,
			  struct rig *self)
{
	int i;

	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&self->s[i].thread, NULL,
					    syncer_run, &self->s[i]));
}

static void stop_syncers(struct rig *self)
{
	int i;

	self->fd = -1;
	pthread_barrier_wait(&self->start);
	for (i = 0; i < 2; i++)
		pthread_join(self->s[i].thread, NULL);
}

/* Both threads sync a fresh buffer; returns false when a round failed. */
static bool round_run(struct __test_metadata *_metadata,
		      struct rig *self)
{
	self->fd = new_udmabuf(self->dev, self->memfd);
	if (self->fd < 0) {
		TH_LOG("udmabuf: %s", strerror(errno));
		return false;
	}
	pthread_barrier_wait(&self->start);
	pthread_barrier_wait(&self->done);
	close(self->fd);
	return true;
}

static int file_rw(const char *path, char *buf, size_t len, bool wr)
{
	int fd = open(path, wr ? O_WRONLY : O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = wr ? write(fd, buf, strlen(buf)) : read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	if (!wr) {
		buf[n] = 0;
		buf[strcspn(buf, "\n")] = 0;
	}
	return 0;
}

static void check_no_mapping(struct __test_metadata *_metadata,
			     struct rig *self)
{
	int now = udmabuf_mappings();
	char disabled[8];

	if (self->mappings < 0 || now < 0)
		SKIP(return,
		     "no " DMA_API_DUMP " (CONFIG_DMA_API_DEBUG): no leak check");
	/* dma-debug stops tracking when its own allocations fail. */
	ASSERT_EQ(0, access(DMA_API_DISABLED, R_OK));
	ASSERT_EQ(0, file_rw(DMA_API_DISABLED, disabled, sizeof(disabled),
			     false));
	ASSERT_STREQ("N", disabled)
		TH_LOG("dma-debug disabled itself: no leak check");
	/* Each mapped table that was never unmapped stays in the dump. */
	EXPECT_EQ(self->mappings, now)
		TH_LOG("the udmabuf device kept %d DMA mapping entries",
		       now - self->mappings);
}

/*
 * Two first syncs at once on each of ROUNDS fresh buffers: both succeed,
 * and closing the buffers unmaps everything they mapped.
 */
TEST_F(udmabuf_cpu_access, first_sync_two_threads)
{
	int r, i;

	start_syncers(_metadata, &self->r);
	for (r = 0; r < ROUNDS; r++) {
		if (!round_run(_metadata, &self->r))
			break;
		for (i = 0; i < 2; i++) {
			if (self->r.s[i].first || self->r.s[i].other)
				break;
		}
		if (i < 2)
			break;
	}
	stop_syncers(&self->r);
	ASSERT_EQ(ROUNDS, r);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, self->r.s[i].first);
		ASSERT_EQ(0, self->r.s[i].other);
	}
	check_no_mapping(_metadata, &self->r);
}

/* Fault injection knobs, and their values before the test. */
static struct {
	const char *path;
	const char *value;
	char saved[32];
} fi_knobs[] = {
	/* The allocations here are GFP_KERNEL: let them fail. */
	{ "/sys/kernel/debug/failslab/ignore-gfp-wait", "N", "" },
	{ "/sys/kernel/debug/fail_page_alloc/ignore-gfp-wait", "N", "" },
	/* One injected failure per call: keep the kernel log readable. */
	{ "/sys/kernel/debug/failslab/verbose", "0", "" },
	{ "/sys/kernel/debug/fail_page_alloc/verbose", "0", "" },
};

static void fi_restore(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(fi_knobs); i++)
		if (fi_knobs[i].saved[0])
			file_rw(fi_knobs[i].path, fi_knobs[i].saved, 0, true);
}

/* NULL when fail-nth can fail this test's allocations, else why not. */
static const char *fi_setup(void)
{
	static char why[128];
	unsigned int i;
	char value[8];

	if (access("/proc/thread-self/fail-nth", R_OK | W_OK))
		return "no /proc/thread-self/fail-nth (CONFIG_FAULT_INJECTION)";
	/* These count in fail-nth too, and fail calls with EFAULT. */
	if (!access("/sys/kernel/debug/fail_usercopy", F_OK) ||
	    !access("/sys/kernel/debug/fail_futex", F_OK))
		return "CONFIG_FAULT_INJECTION_USERCOPY or CONFIG_FAIL_FUTEX";
	for (i = 0; i < ARRAY_SIZE(fi_knobs); i++) {
		snprintf(value, sizeof(value), "%s", fi_knobs[i].value);
		if (file_rw(fi_knobs[i].path, fi_knobs[i].saved,
			    sizeof(fi_knobs[i].saved), false) ||
		    file_rw(fi_knobs[i].path, value, 0, true)) {
			fi_knobs[i].saved[0] = 0;
			fi_restore();
			snprintf(why, sizeof(why), "cannot set %s",
				 fi_knobs[i].path);
			return why;
		}
	}
	return NULL;
}

/*
 * One thread's first sync of a fresh buffer fails at its n-th fault
 * injection point, for n = 1, 2, ... until it reaches no n-th point: each
 * such call fails with ENOMEM, or succeeds (an allocation with a fallback,
 * such as kmemleak's), and the next sync works. Then the same
 * points again, while a second thread makes its first sync of the same
 * buffer at the same moment: the second thread's calls all succeed (a
 * failed first sync leaves nothing half made for it to find). In the end
 * the buffers leave no mapping behind.
 */
TEST_F(udmabuf_cpu_access, first_sync_fails)
{
	int n, points, failed = 0, keeper;
	bool alone_ok;
	struct syncer *a = &self->r.s[0], *b = &self->r.s[1];
	const char *why = fi_setup();

	if (why)
		SKIP(return, "%s", why);

	/*
	 * dma-debug disables itself when the allocation of its cacheline
	 * tracking fails. Every buffer here maps the pages of one memfd that
	 * a buffer kept mapped already tracks: nothing is left to allocate.
	 */
	self->r.memfd = new_memfd();
	ASSERT_LE(0, self->r.memfd);
	keeper = new_udmabuf(self->r.dev, self->r.memfd);
	ASSERT_LE(0, keeper);
	ASSERT_EQ(0, dmabuf_sync(keeper, DMA_BUF_SYNC_START));
	ASSERT_EQ(0, dmabuf_sync(keeper, DMA_BUF_SYNC_END));

	a->fail_nth = true;
	b->idle = true;
	start_syncers(_metadata, &self->r);
	/* Alone: which points the first sync reaches. */
	for (n = 1; n <= FAIL_NTH_MAX; n++) {
		a->nth = n;
		if (!round_run(_metadata, &self->r) || a->other)
			break;
		/* Success with a point reached: an allocation with a fallback */
		if (!a->reached || (a->first && a->first != -ENOMEM))
			break;
	}
	points = n - 1;
	/* The sweep ended with a sync that reached no point and worked. */
	alone_ok = n <= FAIL_NTH_MAX && !a->reached && !a->first && !a->other;
	/* With a second thread making its own first sync. */
	b->idle = false;
	for (n = 1; alone_ok && n <= points; n++) {
		a->nth = n;
		if (!round_run(_metadata, &self->r) || a->other ||
		    b->first || b->other)
			break;
		if (a->first && a->first != -ENOMEM)
			break;
		failed += !!a->first;
	}
	stop_syncers(&self->r);
	fi_restore();
	close(keeper);
	close(self->r.memfd);
	TH_LOG("%d injection points in the first sync", points);
	TH_LOG("with a second thread syncing, %d of them failed it", failed);
	ASSERT_TRUE(alone_ok)
		TH_LOG("alone, point %d: sync %s, later sync %s, point %sreached",
		       points + 1, strerror(-a->first), strerror(-a->other),
		       a->reached ? "" : "not ");
	ASSERT_GE(points, 1);
	ASSERT_EQ(points + 1, n)
		TH_LOG("with a second thread, point %d: %s / %s, second thread %s / %s",
		       n, strerror(-a->first), strerror(-a->other),
		       strerror(-b->first), strerror(-b->other));
	check_no_mapping(_metadata, &self->r);
}

TEST_HARNESS_MAIN
