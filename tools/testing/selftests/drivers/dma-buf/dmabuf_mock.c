// SPDX-License-Identifier: GPL-2.0
/*
 * User ABI of the dmabuf_mock exporter (CONFIG_DMABUF_MOCK_EXPORTER): create,
 * read and write, mmap, revoke, restore, the counters, and bad input. Every
 * test ends with the module holding exactly the buffers and pages it held
 * before (checked in the teardown), so nothing a test does may leak.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <linux/udmabuf.h>
#include <setjmp.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dmabuf_mock_utils.h"

static size_t page_size;

static sigjmp_buf sigbus_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(sigbus_jmp, 1);
}

/* Read one byte; true if it raised SIGBUS instead. */
static bool read_sigbus(const uint8_t *p, uint8_t *val)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	bool bus = false;

	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(sigbus_jmp, 1))
		bus = true;
	else
		*val = *p;
	sigaction(SIGBUS, &old, NULL);
	return bus;
}

static void *map_fd(int fd, size_t length)
{
	return mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

/* Both fixtures: open the mock, and leave it holding what it held. */
static void mock_open(struct __test_metadata *_metadata, int *mock,
		      struct dmabuf_mock_stats *before)
{
	page_size = sysconf(_SC_PAGESIZE);
	*mock = open(DMABUF_MOCK_PATH, O_RDWR);
	if (*mock < 0 && errno == ENOENT)
		SKIP(return, "no %s (CONFIG_DMABUF_MOCK_EXPORTER)", DMABUF_MOCK_PATH);
	ASSERT_LE(0, *mock);
	ASSERT_EQ(0, _test_cmd_stats(*mock, before));
}

static void mock_close(struct __test_metadata *_metadata, int mock,
		       struct dmabuf_mock_stats *before)
{
	struct dmabuf_mock_stats after;

	if (mock < 0)
		return;
	ASSERT_EQ(0, _test_cmd_stats(mock, &after));
	EXPECT_EQ(before->buffers, after.buffers);
	EXPECT_EQ(before->pages, after.pages);
	close(mock);
}

FIXTURE(dmabuf_mock) {
	int mock;
	struct dmabuf_mock_stats before;
};

FIXTURE_SETUP(dmabuf_mock)
{
	mock_open(_metadata, &self->mock, &self->before);
}

FIXTURE_TEARDOWN(dmabuf_mock)
{
	mock_close(_metadata, self->mock, &self->before);
}

TEST_F(dmabuf_mock, revoke_without_importers)
{
	uint8_t in[64], out[64];
	int fd;

	memset(in, 0xa5, sizeof(in));
	test_cmd_create(page_size, 0, &fd);
	test_cmd_write(fd, 0, in, sizeof(in));
	test_cmd_revoke(fd, 0);
	test_query_eq(fd, state, DMABUF_MOCK_STATE_REVOKED);
	test_query_eq(fd, revokes, 1);
	test_query_eq(fd, invalidates, 0);
	/* Nothing came in between: the revoke was the latest. */
	{
		struct dmabuf_mock_revoke cmd = { .size = sizeof(cmd), .fd = fd };

		ASSERT_EQ(0, ioctl(self->mock, DMABUF_MOCK_REVOKE, &cmd));
		EXPECT_EQ(0, cmd.out_flags);
		test_query_eq(fd, revokes, 2);
	}
	/* The exporter's own access still works, and the data is intact. */
	test_cmd_read(fd, 0, out, sizeof(out));
	EXPECT_EQ(0, memcmp(in, out, sizeof(in)));
	/* Revoking again waits again and succeeds. */
	test_cmd_revoke(fd, 0);
	test_query_eq(fd, revokes, 3);
	close(fd);
}

TEST_F(dmabuf_mock, revoke_zaps_mmap)
{
	uint8_t *p, val = 0;
	int fd;

	test_cmd_create(2 * page_size, 0, &fd);
	p = map_fd(fd, 2 * page_size);
	ASSERT_NE(MAP_FAILED, (void *)p);
	test_query_eq(fd, mmaps, 1);
	p[0] = 0x11;
	p[page_size] = 0x22;

	test_cmd_revoke(fd, DMABUF_MOCK_REVOKE_SWAP);
	/* Neither the old data nor the new pages: the mapping is gone. */
	EXPECT_TRUE(read_sigbus(p, &val));
	EXPECT_TRUE(read_sigbus(p + page_size, &val));
	EXPECT_EQ(MAP_FAILED, map_fd(fd, page_size));
	EXPECT_EQ(ENODEV, errno);

	/* After restore the same mapping faults in the new (zeroed) pages. */
	test_cmd_restore(fd);
	EXPECT_FALSE(read_sigbus(p + page_size, &val));
	EXPECT_EQ(0, val);
	ASSERT_EQ(0, munmap((void *)p, 2 * page_size));
	test_query_eq(fd, mmaps, 0);
	close(fd);
}

TEST_F(dmabuf_mock, revoke_poison)
{
	uint8_t buf[256];
	size_t i;
	int fd;

	test_cmd_create(3 * page_size, 0, &fd);
	memset(buf, 0x3c, sizeof(buf));
	test_cmd_write(fd, page_size - 128, buf, sizeof(buf));
	test_cmd_revoke(fd, DMABUF_MOCK_REVOKE_POISON);
	test_cmd_read(fd, page_size - 128, buf, sizeof(buf));
	for (i = 0; i < sizeof(buf); i++)
		if (buf[i] != DMABUF_MOCK_POISON)
			break;
	EXPECT_EQ(sizeof(buf), i);
	close(fd);
}

TEST_F(dmabuf_mock, restore)
{
	uint8_t *p;
	int fd;

	test_cmd_create(page_size, 0, &fd);
	test_cmd_revoke(fd, 0);
	test_cmd_restore(fd);
	test_query_eq(fd, state, 0);
	test_query_eq(fd, revokes, 1);
	p = map_fd(fd, page_size);
	ASSERT_NE(MAP_FAILED, (void *)p);
	p[10] = 0x77;
	ASSERT_EQ(0, munmap(p, page_size));
	/* Restoring a buffer that is not revoked is harmless. */
	test_cmd_restore(fd);
	close(fd);
}

TEST_F(dmabuf_mock, cpu_access_sync)
{
	struct dma_buf_sync sync = {
		.flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW,
	};
	int fd;

	test_cmd_create(page_size, 0, &fd);
	ASSERT_EQ(0, ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync));
	sync.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW;
	ASSERT_EQ(0, ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync));
	test_query_eq(fd, cpu_begins, 1);
	test_query_eq(fd, cpu_ends, 1);
	test_cmd_revoke(fd, 0);
	sync.flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW;
	EXPECT_ERRNO(ENODEV, ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync));
	/* A refused begin is not counted: an importer does not end it. */
	test_query_eq(fd, cpu_begins, 1);
	close(fd);
}

TEST_F(dmabuf_mock, counters)
{
	struct dmabuf_mock_query q;
	void *a, *b;
	int fd;

	test_cmd_create(4 * page_size, DMABUF_MOCK_REQUIRE_REVOCABLE, &fd);
	test_cmd_query(fd, &q);
	EXPECT_EQ(4 * page_size, q.length);
	EXPECT_EQ(0, q.state);
	EXPECT_EQ(0, q.attachments);
	EXPECT_EQ(0, q.pins);
	EXPECT_EQ(0, q.maps);
	EXPECT_EQ(0, q.vmaps);
	EXPECT_EQ(0, q.mmaps);
	EXPECT_EQ(0, q.revokes);

	a = map_fd(fd, 4 * page_size);
	b = map_fd(fd, page_size);
	ASSERT_NE(MAP_FAILED, a);
	ASSERT_NE(MAP_FAILED, b);
	test_query_eq(fd, mmaps, 2);
	/* Splitting a mapping makes two VMAs. */
	ASSERT_EQ(0, munmap((char *)a + page_size, page_size));
	test_query_eq(fd, mmaps, 3);
	ASSERT_EQ(0, munmap(a, 4 * page_size));
	ASSERT_EQ(0, munmap(b, page_size));
	test_query_eq(fd, mmaps, 0);
	close(fd);
}

/* The mock's max_pages module parameter: 0 lets it use the machine's. */
static int set_max_pages(unsigned long pages)
{
	FILE *f = fopen("/sys/module/dmabuf_mock/parameters/max_pages", "w");
	int ret;

	if (!f)
		return -1;
	ret = fprintf(f, "%lu\n", pages) > 0 ? 0 : -1;
	return fclose(f) || ret ? -1 : 0;
}

TEST_F(dmabuf_mock, bad_input)
{
	struct dmabuf_mock_stats stats;
	uint8_t byte = 0;
	int fd, memfd;

	test_err_create(EINVAL, 0, 0);
	test_err_create(EINVAL, page_size + 1, 0);
	test_err_create(EINVAL, page_size / 2, 0);
	test_err_create(EINVAL, 1ULL << 62, 0);
	test_err_create(EINVAL, UINT64_MAX & ~(page_size - 1), 0);
	test_err_create(EINVAL, page_size, 1U << 31);
	/*
	 * Allowed by the ABI, more than the mock may hold: its max_pages
	 * parameter makes it run out of memory the same way on any machine.
	 */
	ASSERT_EQ(0, set_max_pages(64));
	test_err_create(ENOMEM, 128 * page_size, 0);
	ASSERT_EQ(0, set_max_pages(0));

	test_cmd_create(page_size, 0, &fd);
	test_err_revoke(EINVAL, fd, 1U << 31);
	test_err_revoke(EINVAL, fd, DMABUF_MOCK_REVOKE_POISON | DMABUF_MOCK_REVOKE_SWAP);
	test_err_restore(EINVAL, fd, 1);
	test_err_query(EINVAL, fd, 1);
	{
		struct dmabuf_mock_revoke revoke = {
			.size = sizeof(revoke), .fd = fd, .out_flags = 1,
		};
		struct dmabuf_mock_restore restore = {
			.size = sizeof(restore), .fd = fd, .__reserved = 1,
		};

		EXPECT_ERRNO(EINVAL, ioctl(self->mock, DMABUF_MOCK_REVOKE, &revoke));
		revoke.out_flags = 0;
		revoke.__reserved = 1;
		EXPECT_ERRNO(EINVAL, ioctl(self->mock, DMABUF_MOCK_REVOKE, &revoke));
		EXPECT_ERRNO(EINVAL, ioctl(self->mock, DMABUF_MOCK_RESTORE, &restore));
	}
	test_err_rw(EINVAL, fd, 1U << 31, 0, &byte, 1);
	test_err_rw(EINVAL, fd, 0, page_size, &byte, 1);
	test_err_rw(EINVAL, fd, 0, 1, &byte, page_size);
	test_err_rw(EINVAL, fd, 0, 1, &byte, UINT64_MAX);
	test_err_rw(EFAULT, fd, 0, 0, NULL, 1);
	test_err_rw(EFAULT, fd, DMABUF_MOCK_RW_WRITE, 0, (void *)8, 1);
	test_query_eq(fd, revokes, 0);
	test_query_eq(fd, state, 0);
	close(fd);

	/* Not a dma-buf, not ours, not open. */
	memfd = memfd_create("not-a-dmabuf", 0);
	ASSERT_LE(0, memfd);
	test_err_revoke(EINVAL, memfd, 0);
	test_err_query(EINVAL, memfd, 0);
	close(memfd);
	test_err_revoke(EBADF, -1, 0);
	test_err_restore(EBADF, fd, 0);
	test_err_query(EBADF, 1 << 20, 0);
	EXPECT_ERRNO(ENOTTY, ioctl(self->mock, _IO(DMABUF_MOCK_TYPE, 0x7f)));

	stats.size = sizeof(stats);
	stats.flags = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->mock, DMABUF_MOCK_STATS, &stats));
}

TEST_F(dmabuf_mock, not_our_dmabuf)
{
	struct udmabuf_create create = {};
	int dev, memfd, fd;

	dev = open("/dev/udmabuf", O_RDWR);
	if (dev < 0)
		SKIP(return, "no /dev/udmabuf to make a foreign dma-buf");
	memfd = memfd_create("udmabuf", MFD_ALLOW_SEALING);
	ASSERT_LE(0, memfd);
	ASSERT_EQ(0, ftruncate(memfd, page_size));
	ASSERT_EQ(0, fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK));
	create.memfd = memfd;
	create.size = page_size;
	fd = ioctl(dev, UDMABUF_CREATE, &create);
	ASSERT_LE(0, fd);
	test_err_revoke(EINVAL, fd, 0);
	test_err_restore(EINVAL, fd, 0);
	test_err_query(EINVAL, fd, 0);
	close(fd);
	close(memfd);
	close(dev);
}

/*
 * Every command starts with its size and the ioctl number does not encode
 * it (dmabuf_mock.h): a caller built against a newer header, with a longer
 * struct, is served when the bytes this module does not know are zero, and
 * refused with E2BIG when they are not; a struct shorter than the command's
 * first version is refused with EINVAL.
 */
TEST_F(dmabuf_mock, cmd_size)
{
	struct {
		struct dmabuf_mock_query q;
		uint64_t newer;
	} query;
	struct {
		struct dmabuf_mock_create c;
		uint32_t newer[3];
	} create;
	struct dmabuf_mock_stats stats;
	int fd;

	memset(&create, 0, sizeof(create));
	create.c.size = sizeof(create);
	create.c.length = page_size;
	ASSERT_EQ(0, ioctl(self->mock, DMABUF_MOCK_CREATE, &create));
	fd = create.c.fd;
	ASSERT_LE(0, fd);

	memset(&query, 0, sizeof(query));
	query.q.size = sizeof(query);
	query.q.fd = fd;
	ASSERT_EQ(0, ioctl(self->mock, DMABUF_MOCK_QUERY, &query));
	EXPECT_EQ(page_size, query.q.length);
	EXPECT_EQ(0, query.q.attachments);
	EXPECT_EQ(0, query.q.state);

	query.newer = 1;
	EXPECT_ERRNO(E2BIG, ioctl(self->mock, DMABUF_MOCK_QUERY, &query));
	create.newer[2] = 1;
	EXPECT_ERRNO(E2BIG, ioctl(self->mock, DMABUF_MOCK_CREATE, &create));

	memset(&query, 0, sizeof(query));
	query.q.fd = fd;
	query.q.size = sizeof(query.q) - 8;
	EXPECT_ERRNO(EINVAL, ioctl(self->mock, DMABUF_MOCK_QUERY, &query));
	query.q.size = 0;
	EXPECT_ERRNO(EINVAL, ioctl(self->mock, DMABUF_MOCK_QUERY, &query));
	create.c.size = offsetof(struct dmabuf_mock_create, fd);
	create.newer[2] = 0;
	EXPECT_ERRNO(EINVAL, ioctl(self->mock, DMABUF_MOCK_CREATE, &create));

	/* The refused CREATEs made nothing. */
	test_cmd_stats(&stats);
	EXPECT_EQ(self->before.buffers + 1, stats.buffers);
	close(fd);
}

FIXTURE(dmabuf_mock_size) {
	int mock;
	struct dmabuf_mock_stats before;
};

/* A length in pages, or else in bytes. */
FIXTURE_VARIANT(dmabuf_mock_size) {
	uint64_t pages;
	uint64_t bytes;
};

FIXTURE_VARIANT_ADD(dmabuf_mock_size, one_page) { .pages = 1 };
FIXTURE_VARIANT_ADD(dmabuf_mock_size, odd_pages) { .pages = 7 };
FIXTURE_VARIANT_ADD(dmabuf_mock_size, one_gib) { .bytes = 1ULL << 30 };

FIXTURE_SETUP(dmabuf_mock_size)
{
	mock_open(_metadata, &self->mock, &self->before);
}

FIXTURE_TEARDOWN(dmabuf_mock_size)
{
	mock_close(_metadata, self->mock, &self->before);
}

/* Write through RW, read through mmap, and the other way, at both ends. */
TEST_F(dmabuf_mock_size, rw_mmap_round_trip)
{
	uint64_t length = variant->pages ? variant->pages * page_size :
					   variant->bytes;
	struct dmabuf_mock_stats stats;
	uint64_t offs[3] = { 0, length / 2 + 5, length - 8 };
	uint8_t *p;
	int fd, i;

	test_cmd_create(length, 0, &fd);
	test_query_eq(fd, length, length);
	test_cmd_stats(&stats);
	EXPECT_EQ(self->before.pages + length / page_size, stats.pages);
	p = map_fd(fd, length);
	ASSERT_NE(MAP_FAILED, (void *)p);
	for (i = 0; i < 3; i++) {
		uint64_t w = 0x0123456789abcdefULL ^ offs[i], r = 0;

		test_cmd_write(fd, offs[i], &w, sizeof(w));
		memcpy(&r, p + offs[i], sizeof(r));
		EXPECT_EQ(w, r);
		w = ~w;
		memcpy(p + offs[i], &w, sizeof(w));
		test_cmd_read(fd, offs[i], &r, sizeof(r));
		EXPECT_EQ(w, r);
	}
	/* Fresh pages are zeroed. */
	EXPECT_EQ(0, p[length - 9]);
	ASSERT_EQ(0, munmap(p, length));
	close(fd);
}

TEST_HARNESS_MAIN
