/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for tests that drive the dmabuf_mock exporter, in the style of
 * iommufd_utils.h: for each command a _test_cmd_x() returning the ioctl's
 * result (errno set on -1), a test_cmd_x() that asserts success and a
 * test_err_x(ERRNO, ...) that asserts that failure. They use self->mock,
 * an open /dev/dmabuf_mock, so that test bodies read like the protocol.
 */
#ifndef __SELFTEST_DMABUF_MOCK_UTILS_H
#define __SELFTEST_DMABUF_MOCK_UTILS_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

#include "../../kselftest_harness.h"
#include "../../../../../drivers/dma-buf/dmabuf_mock.h"

#define DMABUF_MOCK_PATH "/dev/" DMABUF_MOCK_DEVICE

#define EXPECT_ERRNO(expected_errno, cmd)         \
	({                                        \
		ASSERT_EQ(-1, cmd);               \
		EXPECT_EQ(expected_errno, errno); \
	})

static inline int _test_cmd_create(int mock, uint64_t length, uint32_t flags,
				   int *fd)
{
	struct dmabuf_mock_create cmd = {
		.size = sizeof(cmd),
		.length = length,
		.flags = flags,
		.fd = -1,
	};
	int ret;

	ret = ioctl(mock, DMABUF_MOCK_CREATE, &cmd);
	if (!ret && fd)
		*fd = cmd.fd;
	return ret;
}

#define test_cmd_create(length, flags, fd) \
	ASSERT_EQ(0, _test_cmd_create(self->mock, length, flags, fd))
#define test_err_create(_errno, length, flags) \
	EXPECT_ERRNO(_errno, _test_cmd_create(self->mock, length, flags, NULL))

static inline int _test_cmd_revoke(int mock, int fd, uint32_t flags,
				   uint32_t timeout_ms, char *holder,
				   size_t holder_len)
{
	struct dmabuf_mock_revoke cmd = {
		.size = sizeof(cmd),
		.fd = fd,
		.flags = flags,
		.timeout_ms = timeout_ms,
	};
	int ret;

	ret = ioctl(mock, DMABUF_MOCK_REVOKE, &cmd);
	if (holder)
		snprintf(holder, holder_len, "%s", cmd.holder);
	return ret;
}

#define test_cmd_revoke(fd, flags) \
	ASSERT_EQ(0, _test_cmd_revoke(self->mock, fd, flags, 5000, NULL, 0))
#define test_err_revoke(_errno, fd, flags) \
	EXPECT_ERRNO(_errno, _test_cmd_revoke(self->mock, fd, flags, 0, NULL, 0))

static inline int _test_cmd_restore(int mock, int fd, uint32_t flags)
{
	struct dmabuf_mock_restore cmd = {
		.size = sizeof(cmd),
		.fd = fd,
		.flags = flags,
	};

	return ioctl(mock, DMABUF_MOCK_RESTORE, &cmd);
}

#define test_cmd_restore(fd) ASSERT_EQ(0, _test_cmd_restore(self->mock, fd, 0))
#define test_err_restore(_errno, fd, flags) \
	EXPECT_ERRNO(_errno, _test_cmd_restore(self->mock, fd, flags))

static inline int _test_cmd_query(int mock, int fd, uint32_t flags,
				  struct dmabuf_mock_query *q)
{
	struct dmabuf_mock_query cmd = {
		.size = sizeof(cmd),
		.fd = fd,
		.flags = flags,
	};
	int ret;

	ret = ioctl(mock, DMABUF_MOCK_QUERY, &cmd);
	if (!ret && q)
		*q = cmd;
	return ret;
}

#define test_cmd_query(fd, q) ASSERT_EQ(0, _test_cmd_query(self->mock, fd, 0, q))
#define test_err_query(_errno, fd, flags) \
	EXPECT_ERRNO(_errno, _test_cmd_query(self->mock, fd, flags, NULL))

/* Assert one counter (or the state) of a buffer. */
#define test_query_eq(fd, field, value)                  \
	({                                               \
		struct dmabuf_mock_query __q;            \
		test_cmd_query(fd, &__q);                \
		EXPECT_EQ((uint64_t)(value), __q.field); \
	})

static inline int _test_cmd_rw(int mock, int fd, uint32_t flags,
			       uint64_t offset, void *buf, uint64_t length)
{
	struct dmabuf_mock_rw cmd = {
		.size = sizeof(cmd),
		.fd = fd,
		.flags = flags,
		.offset = offset,
		.length = length,
		.uptr = (uintptr_t)buf,
	};

	return ioctl(mock, DMABUF_MOCK_RW, &cmd);
}

#define test_cmd_write(fd, offset, buf, length) \
	ASSERT_EQ(0, _test_cmd_rw(self->mock, fd, DMABUF_MOCK_RW_WRITE, offset, buf, length))
#define test_cmd_read(fd, offset, buf, length) \
	ASSERT_EQ(0, _test_cmd_rw(self->mock, fd, 0, offset, buf, length))
#define test_err_rw(_errno, fd, flags, offset, buf, length) \
	EXPECT_ERRNO(_errno, _test_cmd_rw(self->mock, fd, flags, offset, buf, length))

static inline int _test_cmd_stats(int mock, struct dmabuf_mock_stats *s)
{
	struct dmabuf_mock_stats cmd = { .size = sizeof(cmd) };
	int ret;

	ret = ioctl(mock, DMABUF_MOCK_STATS, &cmd);
	if (!ret)
		*s = cmd;
	return ret;
}

#define test_cmd_stats(s) ASSERT_EQ(0, _test_cmd_stats(self->mock, s))

#endif
