// SPDX-License-Identifier: GPL-2.0
/*
 * dma-buf MRs that honour revoke, with dmabuf_mock as the exporter.
 *
 * Data moves through a dma-buf MR for every RDMA operation, as the local
 * and as the remote buffer. Once the exporter revokes the buffer the MR is
 * a tombstone: remote access to its rkey gets a remote access error, local
 * use of its lkey a local error, no new MR gets its keys before dereg,
 * rereg is refused, dereg works, and nothing reaches the memory after
 * REVOKE has returned, even under traffic (the mock poisons or swaps the
 * pages, so a late write would show). Exporters that cannot be imported
 * are refused without leaving anything attached, pinned or mapped.
 *
 * Runs on any RDMA device: RDMA_DEV (else the first one), port RDMA_PORT
 * (else 1), GID RDMA_GID_INDEX (else the first RoCE v2 IPv4 GID; LIDs on
 * InfiniBand), and RDMA_PEER_DEV for the tests between two devices.
 * MRs are registered with ibv_reg_dmabuf_mr(), or with the raw uverbs
 * ioctl when the provider has none (or DMABUF_MR_RAW is set, to test that
 * path with a provider that has it).
 * rxe_dmabuf_mr.sh sets up two rxe devices, the peer in another network
 * namespace. Every test checks in its teardown that the mock holds exactly
 * the buffers and pages it held before.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <fcntl.h>
#include <drm/drm.h>
#include <drm/drm_mode.h>
#include <drm/vgem_drm.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "dmabuf_mr_utils.h"

static size_t page_size;

/* What main() found out before any test ran; every test inherits it. */
static struct {
	struct rdma_dev_info dev;
	struct rdma_dev_info peer;
	bool pinned;		/* the importer pins the dma-buf */
	bool cpu;		/* the importer vmaps it: CPU copies, as rxe */
	const char *path;	/* how MRs get registered */
	char skip[256];		/* every test skips with this */
	char fail[256];		/* every test fails with this */
	char peer_fail[256];	/* the RDMA_PEER_DEV tests fail with this */
	bool *logged;		/* shared: the setup was logged once */
} env;

#define MR_SLOTS 20
#define FD_SLOTS 4

/* Byte palindromes: the same value whichever order the device reads. */
#define ATOMIC_VALUE 0x5aa5c33cc33ca55aULL
#define ATOMIC_SWAP 0x0f1e2d3c3c2d1e0fULL

/*
 * What every fixture has. Side 0 owns the dma-buf MRs. Side @req posts
 * the operations that target them: side 0 in loopback, where both QPs
 * share one PD, side 1 (RDMA_PEER_DEV) between two devices.
 */
struct mr_ctx {
	struct dmabuf_mock_stats before;
	struct rdma_pair p;
	int req;
	struct plain_mr plain[2];
	struct dmabuf_mr dmr[MR_SLOTS];
	int fd[FD_SLOTS];
	struct ibv_pd *pd2;
};

static uint64_t round_up_page(uint64_t x)
{
	return (x + page_size - 1) & ~(uint64_t)(page_size - 1);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint32_t)((i + seed) * 2654435761U) >> 24;
}

#define test_same(expected, seen, n, what)                                   \
	({                                                                   \
		const uint8_t *__e = (expected), *__s = (seen);              \
		ssize_t __d = first_diff(__e, __s, n);                       \
		EXPECT_EQ(-1, __d)                                           \
		TH_LOG("%s: byte %zd is %#x, expected %#x", what, __d,       \
		       __s[__d], __e[__d]);                                  \
	})

#define test_all(value, seen, n, what)                                       \
	({                                                                   \
		const uint8_t *__s = (seen), __v = (value);                  \
		ssize_t __d = first_not(__s, n, __v);                        \
		EXPECT_EQ(-1, __d)                                           \
		TH_LOG("%s: byte %zd is %#x, expected %#x", what, __d,       \
		       __s[__d], __v);                                       \
	})

/* @after is @before plus @add, in either byte order. */
static bool added(const void *before, const void *after, uint64_t add)
{
	uint64_t b, a;

	memcpy(&b, before, sizeof(b));
	memcpy(&a, after, sizeof(a));
	return le64toh(a) == le64toh(b) + add || be64toh(a) == be64toh(b) + add;
}

static struct rdma_sge mr_sge(struct dmabuf_mr *m, uint64_t offset,
			      uint32_t length)
{
	return (struct rdma_sge){ m->iova + offset, length, m->lkey };
}

/* The window of @b holds @expect, and the canaries around it are intact. */
static void check_plain(struct __test_metadata *_metadata,
			struct plain_mr *b, const uint8_t *expect, size_t len)
{
	size_t tail = b->length - CANARY - len;

	test_all(CANARY_BYTE, b->buf, CANARY, "canary before the window");
	test_same(expect, b->buf + CANARY, len, "window");
	test_all(CANARY_BYTE, b->buf + CANARY + len,
		 tail < CANARY ? tail : CANARY, "canary after the window");
}

/* The whole dma-buf holds @expect. */
static void check_dmabuf(struct __test_metadata *_metadata, int mock, int fd,
			 const uint8_t *expect, size_t size)
{
	uint8_t *seen = malloc(size);

	ASSERT_NE(NULL, seen);
	ASSERT_EQ(0, _test_cmd_rw(mock, fd, 0, 0, seen, size));
	test_same(expect, seen, size, "dma-buf");
	free(seen);
}

/* The first @size bytes of the dma-buf all hold @v. */
static void check_dmabuf_all(struct __test_metadata *_metadata, int mock,
			     int fd, uint8_t v, size_t size)
{
	uint8_t *seen = malloc(size);

	ASSERT_NE(NULL, seen);
	ASSERT_EQ(0, _test_cmd_rw(mock, fd, 0, 0, seen, size));
	test_all(v, seen, size, "dma-buf");
	free(seen);
}

static void mr_ctx_setup(struct __test_metadata *_metadata, int *mock,
			 struct mr_ctx *c, bool peer, size_t window)
{
	int i;

	*mock = -1;
	for (i = 0; i < FD_SLOTS; i++)
		c->fd[i] = -1;
	if (env.skip[0])
		SKIP(return, "%s", env.skip);
	ASSERT_EQ(0, env.fail[0]) TH_LOG("%s", env.fail);
	if (peer)
		ASSERT_EQ(0, env.peer_fail[0]) TH_LOG("%s", env.peer_fail);

	*mock = open(DMABUF_MOCK_PATH, O_RDWR);
	ASSERT_LE(0, *mock);
	ASSERT_EQ(0, _test_cmd_stats(*mock, &c->before));

	ASSERT_EQ(0, rdma_side_open(&c->p.s[0], &env.dev))
	TH_LOG("%s: %s", env.dev.name, strerror(errno));
	if (peer) {
		ASSERT_EQ(0, rdma_side_open(&c->p.s[1], &env.peer))
		TH_LOG("%s: %s", env.peer.name, strerror(errno));
		c->req = 1;
	} else {
		c->p.s[1] = c->p.s[0];
		c->p.s[1].shared = true;
	}
	ASSERT_EQ(0, rdma_pair_connect(&c->p))
	TH_LOG("connecting RC QPs: %s", strerror(errno));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, plain_alloc(&c->plain[i], c->p.s[i].pd, window))
		TH_LOG("ibv_reg_mr(%zu): %s", window, strerror(errno));
	}

	if (!__atomic_test_and_set(env.logged, __ATOMIC_RELAXED))
		ksft_print_msg("%s: dma-buf MRs through %s; the importer %s\n",
			       env.dev.name, env.path,
			       env.cpu ? "pins and vmaps (CPU copies)" :
			       env.pinned ? "pins and maps" : "maps");
}

static void mr_ctx_teardown(struct __test_metadata *_metadata, int mock,
			    struct mr_ctx *c)
{
	struct dmabuf_mock_stats after;
	int i;

	for (i = 0; i < MR_SLOTS; i++) {
		EXPECT_EQ(0, _test_dereg_dmabuf_mr(&c->dmr[i]))
		TH_LOG("dereg: %s", strerror(errno));
	}
	for (i = 0; i < 2; i++)
		plain_free(&c->plain[i]);
	if (c->pd2)
		ibv_dealloc_pd(c->pd2);
	/* Closing the device releases whatever a failed test left behind. */
	rdma_side_close(&c->p.s[1]);
	rdma_side_close(&c->p.s[0]);
	for (i = 0; i < FD_SLOTS; i++)
		if (c->fd[i] >= 0)
			close(c->fd[i]);
	if (mock < 0)
		return;
	ASSERT_EQ(0, _test_cmd_stats(mock, &after));
	EXPECT_EQ(c->before.buffers, after.buffers);
	EXPECT_EQ(c->before.pages, after.pages);
	close(mock);
}

static int new_buf(struct __test_metadata *_metadata, int mock,
		   struct mr_ctx *c, uint64_t length, uint32_t flags)
{
	int i, fd = -1;

	ASSERT_EQ(0, _test_cmd_create(mock, length, flags, &fd))
	TH_LOG("CREATE %llu bytes: %s", (unsigned long long)length,
	       strerror(errno));
	for (i = 0; i < FD_SLOTS && c->fd[i] >= 0; i++)
		;
	ASSERT_GT(FD_SLOTS, i);
	c->fd[i] = fd;
	return fd;
}

static void close_buf(struct mr_ctx *c, int fd)
{
	int i;

	for (i = 0; i < FD_SLOTS; i++)
		if (c->fd[i] == fd)
			c->fd[i] = -1;
	close(fd);
}

/* @op from the requester's plain buffer to @m at @offset. */
static enum ibv_wc_status remote_op(struct __test_metadata *_metadata,
				    struct mr_ctx *c, enum ibv_wr_opcode op,
				    struct dmabuf_mr *m, uint64_t offset,
				    uint32_t length, uint64_t add,
				    uint64_t swap)
{
	return rdma_op(_metadata, &c->p.s[c->req], op,
		       plain_sge(&c->plain[c->req], length), m->iova + offset,
		       m->rkey, add, swap);
}

/* @op from side 0 with local buffer @l to side 1's plain buffer. */
static enum ibv_wc_status local_op(struct __test_metadata *_metadata,
				   struct mr_ctx *c, enum ibv_wr_opcode op,
				   struct rdma_sge l, uint64_t add,
				   uint64_t swap)
{
	struct plain_mr *b = &c->plain[1];

	if (op == IBV_WR_SEND) {
		ASSERT_EQ(0, rdma_post_recv(&c->p.s[1],
					    plain_sge(b, b->length - 2 * CANARY),
					    IBV_WR_SEND));
	}
	return rdma_op(_metadata, &c->p.s[0], op, l,
		       (uintptr_t)b->buf + CANARY, b->mr->rkey, add, swap);
}

/* SEND @length bytes of the requester's plain buffer into @dst. */
static void send_to(struct __test_metadata *_metadata, struct mr_ctx *c,
		    struct rdma_sge dst, uint32_t length,
		    enum ibv_wc_status *sent, enum ibv_wc_status *received)
{
	struct rdma_side *rx = &c->p.s[!c->req];
	struct ibv_wc wc;

	ASSERT_EQ(0, rdma_post_recv(rx, dst, IBV_WR_SEND));
	*sent = rdma_op(_metadata, &c->p.s[c->req], IBV_WR_SEND,
			plain_sge(&c->plain[c->req], length), 0, 0, 0, 0);
	ASSERT_EQ(0, rdma_poll(rx->cq, &wc, DMABUF_MR_TIMEOUT_MS))
	TH_LOG("no receive completion: %s", strerror(errno));
	*received = wc.status;
}

#define test_wc(expected, status)                                            \
	({                                                                   \
		enum ibv_wc_status __ex = (expected), __st = (status);       \
		ASSERT_EQ((int)__ex, (int)__st)                              \
		TH_LOG("completion %s, expected %s",                         \
		       ibv_wc_status_str(__st), ibv_wc_status_str(__ex));    \
	})

/* After a completion in error both QPs are in error: start again. */
#define test_cmd_renew()                                                     \
	({                                                                   \
		ASSERT_EQ(0, rdma_pair_connect(&self->c.p))                  \
		TH_LOG("new QPs: %s", strerror(errno));                      \
	})

/* ATOMIC WRITE of @value from the requester to @m at @offset: its status. */
static enum ibv_wc_status remote_atomic_write(struct __test_metadata *_metadata,
					      struct mr_ctx *c,
					      struct dmabuf_mr *m,
					      uint64_t offset, uint64_t value)
{
	struct rdma_side *s = &c->p.s[c->req];
	struct ibv_wc wc;

	ASSERT_EQ(0, rdma_post_atomic_write(s, m->iova + offset, m->rkey,
					    value, 1))
	TH_LOG("posting ATOMIC WRITE: %s", strerror(errno));
	ASSERT_EQ(0, rdma_poll(s->cq, &wc, DMABUF_MR_TIMEOUT_MS))
	TH_LOG("ATOMIC WRITE: no completion: %s", strerror(errno));
	return wc.status;
}

#define test_cmd_remote(op, m, offset, length)                               \
	test_wc(IBV_WC_SUCCESS,                                              \
		remote_op(_metadata, &self->c, op, m, offset, length, 0, 0))

#define test_err_remote(status, op, m, offset, length)                       \
	({                                                                   \
		test_wc(status, remote_op(_metadata, &self->c, op, m,        \
					  offset, length, 1, 0));            \
		test_cmd_renew();                                            \
	})

#define test_cmd_local(op, l)                                                \
	test_wc(IBV_WC_SUCCESS, local_op(_metadata, &self->c, op, l, 0, 0))

/*
 * Local use of a revoked lkey completes with @status: on rxe a SEND or
 * WRITE from it with LOC_QP_OP_ERR (the lookup of the lkey fails), a READ
 * or atomic result into it with LOC_PROT_ERR.
 */
#define test_err_local(status, op, l)                                        \
	({                                                                   \
		test_wc(status, local_op(_metadata, &self->c, op, l, 1, 0)); \
		test_cmd_renew();                                            \
	})

#define test_new_buf(length, flags)                                          \
	new_buf(_metadata, self->mock, &self->c, length, flags)

#define test_cmd_reg(m, fd, offset, length)                                  \
	test_cmd_reg_mr(&self->c.p.s[0], m, fd, offset, length)

#define test_err_reg(_errno, fd, offset, length, iova, access)               \
	EXPECT_ERRNO(_errno,                                                 \
		     _test_reg_dmabuf_mr(&self->c.p.s[0], fd, offset, length,\
					 iova, access,                       \
					 &self->c.dmr[MR_SLOTS - 1]))

#define test_cmd_dereg(m) test_cmd_dereg_mr(m)

#define test_err_rereg(_errno, handle)                                       \
	EXPECT_ERRNO(_errno, _test_rereg_mr_pd(self->c.p.s[0].ctx, handle,   \
					       self->c.pd2))

#define test_cmd_revoke_wait(fd, flags)                                      \
	({                                                                   \
		ASSERT_EQ(0, _test_cmd_revoke(self->mock, fd, flags,         \
					      DMABUF_MR_TIMEOUT_MS, NULL,    \
					      0))                            \
		TH_LOG("REVOKE: %s", strerror(errno));                       \
	})

/*
 * Data integrity: one MR per variant, at the start, at an odd offset, or
 * ending with the buffer; every operation, with the dma-buf MR on either
 * end. The buffer starts with a background pattern, and after each
 * operation all of it is compared, so a byte written outside the range
 * shows.
 */
FIXTURE(dmabuf_mr_data) {
	int mock;
	struct mr_ctx c;
	struct dmabuf_mr *dmr;
	int fd;
	uint64_t size;
	uint64_t off;
	uint64_t len;
	uint8_t *expect;
};

FIXTURE_VARIANT(dmabuf_mr_data) {
	uint64_t offset;
	uint64_t length;
	bool at_end;		/* the MR ends with the buffer's last byte */
};

FIXTURE_VARIANT_ADD(dmabuf_mr_data, off0_len1) { .offset = 0, .length = 1 };
FIXTURE_VARIANT_ADD(dmabuf_mr_data, off0_len4093) { .offset = 0, .length = 4093 };
FIXTURE_VARIANT_ADD(dmabuf_mr_data, off7_len4093) { .offset = 7, .length = 4093 };
FIXTURE_VARIANT_ADD(dmabuf_mr_data, off0_len1m) { .offset = 0, .length = 1 << 20 };
FIXTURE_VARIANT_ADD(dmabuf_mr_data, off4093_len1m) { .offset = 4093, .length = 1 << 20 };
FIXTURE_VARIANT_ADD(dmabuf_mr_data, end_len1) { .length = 1, .at_end = true };
FIXTURE_VARIANT_ADD(dmabuf_mr_data, end_len4093) { .length = 4093, .at_end = true };
FIXTURE_VARIANT_ADD(dmabuf_mr_data, last_page) { .length = 4096, .at_end = true };

FIXTURE_SETUP(dmabuf_mr_data)
{
	self->len = variant->length;
	mr_ctx_setup(_metadata, &self->mock, &self->c, false, self->len);
	if (_metadata->exit_code)
		return;
	if (variant->at_end) {
		self->size = round_up_page(self->len) + page_size;
		self->off = self->size - self->len;
	} else {
		self->off = variant->offset;
		self->size = round_up_page(self->off + self->len) + page_size;
	}
	self->expect = malloc(self->size);
	ASSERT_NE(NULL, self->expect);
	fill(self->expect, self->size, 0x11);
	self->fd = test_new_buf(self->size, 0);
	test_cmd_write(self->fd, 0, self->expect, self->size);
	self->dmr = &self->c.dmr[0];
	test_cmd_reg(self->dmr, self->fd, self->off, self->len);
}

FIXTURE_TEARDOWN(dmabuf_mr_data)
{
	mr_ctx_teardown(_metadata, self->mock, &self->c);
	free(self->expect);
}

#define check_data() \
	check_dmabuf(_metadata, self->mock, self->fd, self->expect, self->size)

/* Fill the MR's range of the dma-buf through the exporter. */
#define set_data(seed)                                                       \
	({                                                                   \
		fill(self->expect + self->off, self->len, seed);             \
		test_cmd_write(self->fd, self->off, self->expect + self->off,\
			       self->len);                                   \
	})

TEST_F(dmabuf_mr_data, rdma_write_to_mr)
{
	struct plain_mr *b = &self->c.plain[self->c.req];

	fill(b->buf + CANARY, self->len, 0x22);
	test_cmd_remote(IBV_WR_RDMA_WRITE, self->dmr, 0, self->len);
	memcpy(self->expect + self->off, b->buf + CANARY, self->len);
	check_data();
}

TEST_F(dmabuf_mr_data, rdma_read_from_mr)
{
	set_data(0x33);
	test_cmd_remote(IBV_WR_RDMA_READ, self->dmr, 0, self->len);
	check_plain(_metadata, &self->c.plain[self->c.req],
		    self->expect + self->off, self->len);
	check_data();
}

TEST_F(dmabuf_mr_data, rdma_write_from_mr)
{
	set_data(0x44);
	test_cmd_local(IBV_WR_RDMA_WRITE, mr_sge(self->dmr, 0, self->len));
	check_plain(_metadata, &self->c.plain[1], self->expect + self->off,
		    self->len);
	check_data();
}

TEST_F(dmabuf_mr_data, rdma_read_to_mr)
{
	struct plain_mr *b = &self->c.plain[1];

	fill(b->buf + CANARY, self->len, 0x55);
	test_cmd_local(IBV_WR_RDMA_READ, mr_sge(self->dmr, 0, self->len));
	memcpy(self->expect + self->off, b->buf + CANARY, self->len);
	check_data();
}

TEST_F(dmabuf_mr_data, send_from_mr)
{
	struct ibv_wc wc;

	set_data(0x66);
	test_cmd_local(IBV_WR_SEND, mr_sge(self->dmr, 0, self->len));
	ASSERT_EQ(0, rdma_poll(self->c.p.s[1].cq, &wc, DMABUF_MR_TIMEOUT_MS));
	test_wc(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(self->len, wc.byte_len);
	check_plain(_metadata, &self->c.plain[1], self->expect + self->off,
		    self->len);
}

TEST_F(dmabuf_mr_data, recv_to_mr)
{
	struct plain_mr *b = &self->c.plain[self->c.req];
	enum ibv_wc_status sent, received;

	fill(b->buf + CANARY, self->len, 0x77);
	send_to(_metadata, &self->c, mr_sge(self->dmr, 0, self->len),
		self->len, &sent, &received);
	test_wc(IBV_WC_SUCCESS, sent);
	test_wc(IBV_WC_SUCCESS, received);
	memcpy(self->expect + self->off, b->buf + CANARY, self->len);
	check_data();
}

/*
 * Offset in the MR of its first 8-byte aligned word (iova and offset agree
 * modulo the page size), or -1 if it has none.
 */
static int64_t atomic_word(uint64_t off, uint64_t len)
{
	uint64_t a = (8 - off % 8) % 8;

	return a + 8 <= len ? (int64_t)a : -1;
}

/*
 * An MR too short for an aligned 8-byte word: an atomic on the aligned word
 * that holds its first byte reaches outside the MR, which the responder
 * refuses as a range violation (remote access error), touching nothing.
 */
#define test_err_atomic_past_end(op)                                         \
	({                                                                   \
		test_err_remote(IBV_WC_REM_ACCESS_ERR, op, self->dmr,        \
				-(self->dmr->iova % 8), 8);                  \
		check_data();                                                \
	})

TEST_F(dmabuf_mr_data, fetch_add_on_mr)
{
	int64_t a = atomic_word(self->off, self->len);
	uint8_t *orig = self->c.plain[self->c.req].buf + CANARY, *word;
	uint64_t v = ATOMIC_VALUE;

	if (a < 0) {
		test_err_atomic_past_end(IBV_WR_ATOMIC_FETCH_AND_ADD);
		return;
	}
	word = self->expect + self->off + a;
	memcpy(word, &v, sizeof(v));
	test_cmd_write(self->fd, self->off + a, word, sizeof(v));
	test_wc(IBV_WC_SUCCESS,
		remote_op(_metadata, &self->c, IBV_WR_ATOMIC_FETCH_AND_ADD,
			  self->dmr, a, sizeof(v), 0x101, 0));
	test_same((uint8_t *)&v, orig, sizeof(v), "original value");
	test_cmd_read(self->fd, self->off + a, word, sizeof(v));
	EXPECT_TRUE(added(&v, word, 0x101));
	check_data();
}

TEST_F(dmabuf_mr_data, cmp_swap_on_mr)
{
	int64_t a = atomic_word(self->off, self->len);
	uint8_t *orig = self->c.plain[self->c.req].buf + CANARY, *word;
	uint64_t v = ATOMIC_VALUE, s = ATOMIC_SWAP;

	if (a < 0) {
		test_err_atomic_past_end(IBV_WR_ATOMIC_CMP_AND_SWP);
		return;
	}
	word = self->expect + self->off + a;
	memcpy(word, &v, sizeof(v));
	test_cmd_write(self->fd, self->off + a, word, sizeof(v));
	/* A compare that fails leaves the word alone... */
	test_wc(IBV_WC_SUCCESS,
		remote_op(_metadata, &self->c, IBV_WR_ATOMIC_CMP_AND_SWP,
			  self->dmr, a, sizeof(v), ~v, s));
	test_same((uint8_t *)&v, orig, sizeof(v), "original value");
	check_data();
	/* ...one that matches swaps it. */
	test_wc(IBV_WC_SUCCESS,
		remote_op(_metadata, &self->c, IBV_WR_ATOMIC_CMP_AND_SWP,
			  self->dmr, a, sizeof(v), v, s));
	test_same((uint8_t *)&v, orig, sizeof(v), "original value");
	memcpy(word, &s, sizeof(s));
	check_data();
}

TEST_F(dmabuf_mr_data, atomic_result_to_mr)
{
	int64_t a = atomic_word(self->off, self->len);
	struct plain_mr *b = &self->c.plain[1];
	uint64_t v = ATOMIC_VALUE;

	if (a < 0) {
		/* 8 bytes of result into a shorter MR: a local error. */
		test_err_local(IBV_WC_LOC_PROT_ERR, IBV_WR_ATOMIC_FETCH_AND_ADD,
			       mr_sge(self->dmr, 0, sizeof(v)));
		check_data();
		return;
	}
	memcpy(b->buf + CANARY, &v, sizeof(v));
	test_wc(IBV_WC_SUCCESS,
		local_op(_metadata, &self->c, IBV_WR_ATOMIC_FETCH_AND_ADD,
			 mr_sge(self->dmr, a, sizeof(v)), 1, 0));
	EXPECT_TRUE(added(&v, b->buf + CANARY, 1));
	memcpy(self->expect + self->off + a, &v, sizeof(v));
	check_data();
}

TEST_F(dmabuf_mr_data, atomic_write_on_mr)
{
	int64_t a = atomic_word(self->off, self->len);
	uint64_t v = ATOMIC_VALUE;

	if (!self->c.p.s[self->c.req].qpx)
		SKIP(return, "no ATOMIC WRITE on %s's QPs", env.dev.name);
	if (a < 0) {
		test_wc(IBV_WC_REM_ACCESS_ERR,
			remote_atomic_write(_metadata, &self->c, self->dmr,
					    -(self->dmr->iova % 8), v));
		test_cmd_renew();
		check_data();
		return;
	}
	test_wc(IBV_WC_SUCCESS,
		remote_atomic_write(_metadata, &self->c, self->dmr, a, v));
	memcpy(self->expect + self->off + a, &v, sizeof(v));
	check_data();
}

FIXTURE(dmabuf_mr_size) {
	int mock;
	struct mr_ctx c;
};

FIXTURE_SETUP(dmabuf_mr_size)
{
	mr_ctx_setup(_metadata, &self->mock, &self->c, false, 4 * page_size);
}

FIXTURE_TEARDOWN(dmabuf_mr_size)
{
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

/*
 * 64 MiB in one WRITE is 16384 packets at a 4096-byte RoCE MTU. A KASAN
 * kernel under TCG takes most of a minute for that, so the completion gets
 * a bound of its own, well inside the case's; the time it took is printed.
 * It tests size, not the registration path, so it runs once, on the path
 * the environment chose.
 */
#define WRITE_64M_TIMEOUT_MS (240 * 1000)

TEST_F_TIMEOUT(dmabuf_mr_size, rdma_write_64m, 300)
{
	const uint64_t len = 64ULL << 20;
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct rdma_side *s = &self->c.p.s[0];
	struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };
	struct plain_mr big = {};
	uint64_t start;
	uint8_t *seen;
	int fd;

	fd = test_new_buf(len + page_size, 0);
	test_cmd_reg(m, fd, 0, len);
	if (plain_alloc(&big, s->pd, len)) {
		int err = errno;

		plain_free(&big);
		if (geteuid())
			SKIP(return, "cannot register 64 MiB: %s (RLIMIT_MEMLOCK?)",
			     strerror(err));
		ASSERT_EQ(0, err);
	}
	fill(big.buf + CANARY, len, 0x99);
	start = now_ms();
	ASSERT_EQ(0, rdma_post(s, IBV_WR_RDMA_WRITE, plain_sge(&big, len),
			       m->iova, m->rkey, 0, 0, IBV_WR_RDMA_WRITE))
	TH_LOG("posting the WRITE: %s", strerror(errno));
	ASSERT_EQ(0, rdma_poll(s->cq, &wc, WRITE_64M_TIMEOUT_MS))
	TH_LOG("64 MiB WRITE: %s after %llu ms", strerror(errno),
	       (unsigned long long)(now_ms() - start));
	ksft_print_msg("64 MiB WRITE completed in %llu ms\n",
		       (unsigned long long)(now_ms() - start));
	EXPECT_EQ(IBV_WR_RDMA_WRITE, wc.wr_id);
	test_wc(IBV_WC_SUCCESS, wc.status);
	seen = malloc(len + page_size);
	ASSERT_NE(NULL, seen);
	test_cmd_read(fd, 0, seen, len + page_size);
	test_same(big.buf + CANARY, seen, len, "64 MiB");
	test_all(0, seen + len, page_size, "the page after the MR");
	free(seen);
	plain_free(&big);
}

/*
 * Loopback on RDMA_DEV: two RC QPs in one PD, connected to each other. Each
 * case runs once for each way user space registers a dma-buf MR:
 * ibv_reg_dmabuf_mr(), the raw UVERBS_METHOD_REG_DMABUF_MR ioctl, and
 * UVERBS_METHOD_REG_MR with a dma-buf fd. The other fixtures take the path
 * the environment chose (DMABUF_MR_RAW, DMABUF_MR_REG_MR; the provider's).
 */
enum reg_path { REG_VERBS, REG_DMABUF_MR, REG_MR_FD };

FIXTURE(dmabuf_mr) {
	int mock;
	struct mr_ctx c;
};

FIXTURE_VARIANT(dmabuf_mr) {
	enum reg_path path;
};

FIXTURE_VARIANT_ADD(dmabuf_mr, verbs) {
	.path = REG_VERBS,
};

FIXTURE_VARIANT_ADD(dmabuf_mr, reg_dmabuf_mr) {
	.path = REG_DMABUF_MR,
};

FIXTURE_VARIANT_ADD(dmabuf_mr, reg_mr_fd) {
	.path = REG_MR_FD,
};

FIXTURE_SETUP(dmabuf_mr)
{
	self->mock = -1;
	/* Each case runs in a child of its own: the path is the case's. */
	dmabuf_mr_raw = variant->path == REG_DMABUF_MR;
	dmabuf_mr_regmr = variant->path == REG_MR_FD;
	if (variant->path == REG_VERBS && dmabuf_mr_verbs_err && !env.skip[0])
		SKIP(return, "ibv_reg_dmabuf_mr() on this device: %s",
		     strerror(dmabuf_mr_verbs_err));
	mr_ctx_setup(_metadata, &self->mock, &self->c, false, 4 * page_size);
	if (variant->path != REG_VERBS &&
	    self->c.p.s[0].d.driver_id == UINT32_MAX)
		SKIP(return, "no uverbs driver id for %s: no raw ioctl",
		     self->c.p.s[0].d.name);
}

FIXTURE_TEARDOWN(dmabuf_mr)
{
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

/* Revoke with no traffic: the exporter's counters. */
TEST_F(dmabuf_mr, revoke_idle)
{
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct dmabuf_mock_query q;
	int fd;

	fd = test_new_buf(2 * page_size, 0);
	test_cmd_reg(m, fd, 0, 2 * page_size);
	test_cmd_query(fd, &q);
	EXPECT_EQ(1U, q.attachments);
	EXPECT_EQ(env.pinned ? 1U : 0U, q.pins);
	EXPECT_EQ(env.cpu ? 1U : 0U, q.vmaps);
	test_cmd_remote(IBV_WR_RDMA_WRITE, m, 0, 64);

	test_cmd_revoke_wait(fd, 0);
	test_cmd_query(fd, &q);
	EXPECT_EQ((__u32)DMABUF_MOCK_STATE_REVOKED, q.state);
	EXPECT_EQ(1U, q.revokes);
	EXPECT_EQ(1U, q.invalidates);
	EXPECT_EQ(0U, q.pins);
	EXPECT_EQ(0U, q.maps);
	EXPECT_EQ(0U, q.vmaps);
	/* The MR keeps its attachment, and its keys, until dereg. */
	EXPECT_EQ(1U, q.attachments);

	test_cmd_dereg(m);
	test_query_eq(fd, attachments, 0);
	test_query_eq(fd, pins, 0);
}

/* Every remote access with the old rkey: a remote access error. */
TEST_F_TIMEOUT(dmabuf_mr, revoke_remote_access, 120)
{
	struct plain_mr *b = &self->c.plain[0];
	struct dmabuf_mr *m = &self->c.dmr[0];
	uint8_t data[256], seen[256];
	int fd;

	fd = test_new_buf(page_size, 0);
	fill(data, sizeof(data), 0x3c);
	test_cmd_write(fd, 0, data, sizeof(data));
	test_cmd_reg(m, fd, 0, page_size);
	test_cmd_remote(IBV_WR_RDMA_READ, m, 0, sizeof(data));
	test_same(data, b->buf + CANARY, sizeof(data), "READ before revoke");
	if (self->c.p.s[self->c.req].qpx) {
		uint64_t v = ATOMIC_VALUE;

		test_wc(IBV_WC_SUCCESS,
			remote_atomic_write(_metadata, &self->c, m, 8, v));
		memcpy(data + 8, &v, sizeof(v));
	}

	test_cmd_revoke_wait(fd, 0);
	memset(b->buf + CANARY, 0xa5, sizeof(data));
	test_err_remote(IBV_WC_REM_ACCESS_ERR, IBV_WR_RDMA_WRITE, m, 0, 256);
	test_err_remote(IBV_WC_REM_ACCESS_ERR, IBV_WR_RDMA_READ, m, 0, 256);
	test_err_remote(IBV_WC_REM_ACCESS_ERR, IBV_WR_ATOMIC_FETCH_AND_ADD, m,
			0, 8);
	test_err_remote(IBV_WC_REM_ACCESS_ERR, IBV_WR_ATOMIC_CMP_AND_SWP, m,
			0, 8);
	if (self->c.p.s[self->c.req].qpx) {
		test_wc(IBV_WC_REM_ACCESS_ERR,
			remote_atomic_write(_metadata, &self->c, m, 16, 1));
		test_cmd_renew();
	}
	test_cmd_read(fd, 0, seen, sizeof(seen));
	test_same(data, seen, sizeof(data), "dma-buf after the revoke");
}

/*
 * An atomic on an address that is not 8-byte aligned, inside the MR: the
 * requester may refuse to post it (rxe's provider does, EINVAL), else the
 * responder refuses it as an invalid request. Nothing is touched.
 */
TEST_F(dmabuf_mr, misaligned_atomics)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP,
	};
	struct rdma_side *s = &self->c.p.s[self->c.req];
	struct plain_mr *b = &self->c.plain[self->c.req];
	struct dmabuf_mr *m = &self->c.dmr[0];
	uint8_t data[64], seen[64];
	struct ibv_wc wc;
	unsigned int i;
	int fd, ret;

	fd = test_new_buf(page_size, 0);
	fill(data, sizeof(data), 0x6a);
	test_cmd_write(fd, 0, data, sizeof(data));
	test_cmd_reg(m, fd, 0, page_size);
	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		ret = rdma_post(s, ops[i], plain_sge(b, 8), m->iova + 1 + 4 * i,
				m->rkey, 1, 2, ops[i]);
		if (s->d.driver_id == RDMA_DRIVER_RXE) {
			EXPECT_EQ(EINVAL, ret) TH_LOG("%s at an odd address",
						      rdma_op_name(ops[i]));
		} else if (!ret) {
			ASSERT_EQ(0, rdma_poll(s->cq, &wc, DMABUF_MR_TIMEOUT_MS));
			test_wc(IBV_WC_REM_INV_REQ_ERR, wc.status);
			test_cmd_renew();
		}
	}
	/* rxe's provider posts it: its responder refuses it. */
	if (s->qpx && !rdma_post_atomic_write(s, m->iova + 20, m->rkey, 1, 1)) {
		ASSERT_EQ(0, rdma_poll(s->cq, &wc, DMABUF_MR_TIMEOUT_MS));
		test_wc(IBV_WC_REM_INV_REQ_ERR, wc.status);
		test_cmd_renew();
	}
	test_cmd_read(fd, 0, seen, sizeof(seen));
	test_same(data, seen, sizeof(data), "dma-buf after the refused atomics");
}

/* Every local use of the old lkey: a local error, whatever the operation. */
TEST_F_TIMEOUT(dmabuf_mr, revoke_local_access, 120)
{
	struct dmabuf_mr *m = &self->c.dmr[0];
	enum ibv_wc_status sent, received;
	uint8_t data[256], seen[256];
	int fd;

	fd = test_new_buf(page_size, 0);
	fill(data, sizeof(data), 0x4d);
	test_cmd_write(fd, 0, data, sizeof(data));
	test_cmd_reg(m, fd, 0, page_size);
	test_cmd_revoke_wait(fd, 0);

	test_err_local(IBV_WC_LOC_QP_OP_ERR, IBV_WR_SEND, mr_sge(m, 0, 256));
	test_err_local(IBV_WC_LOC_QP_OP_ERR, IBV_WR_RDMA_WRITE,
		       mr_sge(m, 0, 256));
	test_err_local(IBV_WC_LOC_PROT_ERR, IBV_WR_RDMA_READ,
		       mr_sge(m, 0, 256));
	test_err_local(IBV_WC_LOC_PROT_ERR, IBV_WR_ATOMIC_FETCH_AND_ADD,
		       mr_sge(m, 0, 8));

	/* As a receive buffer: the responder fails, the sender hears so. */
	fill(self->c.plain[self->c.req].buf + CANARY, 256, 0x5e);
	send_to(_metadata, &self->c, mr_sge(m, 0, 256), 256, &sent, &received);
	test_wc(IBV_WC_LOC_QP_OP_ERR, received);
	test_wc(IBV_WC_REM_OP_ERR, sent);
	test_cmd_renew();

	test_cmd_read(fd, 0, seen, sizeof(seen));
	test_same(data, seen, sizeof(data), "dma-buf after the revoke");
}

/* Rereg is refused before and after revoke; restore does not revive. */
TEST_F_TIMEOUT(dmabuf_mr, revoke_rereg_restore, 120)
{
	struct plain_mr *b = &self->c.plain[0];
	struct dmabuf_mr *m = &self->c.dmr[0], *fresh = &self->c.dmr[1];
	struct ibv_mr *pm = b->mr;
	uint8_t data[256], seen[256];
	int fd;

	self->c.pd2 = ibv_alloc_pd(self->c.p.s[0].ctx);
	ASSERT_NE(NULL, self->c.pd2);
	/* The same command works on a plain MR, where the device allows it. */
	if (!_test_rereg_mr_pd(self->c.p.s[0].ctx, pm->handle, self->c.pd2)) {
		ASSERT_EQ(0, _test_rereg_mr_pd(self->c.p.s[0].ctx, pm->handle,
					       self->c.p.s[0].pd));
	} else {
		TH_LOG("rereg of a plain MR: %s", strerror(errno));
	}

	fd = test_new_buf(page_size, 0);
	fill(data, sizeof(data), 0x6f);
	test_cmd_write(fd, 0, data, sizeof(data));
	test_cmd_reg(m, fd, 0, page_size);
	test_err_rereg(EOPNOTSUPP, m->handle);

	test_cmd_revoke_wait(fd, 0);
	test_err_rereg(EOPNOTSUPP, m->handle);

	test_cmd_restore(fd);
	test_query_eq(fd, state, 0);
	memset(b->buf + CANARY, 0xa5, sizeof(data));
	if (env.pinned) {
		test_err_remote(IBV_WC_REM_ACCESS_ERR, IBV_WR_RDMA_WRITE, m, 0,
				256);
	} else {
		TH_LOG("a dynamic importer may map a restored buffer again");
	}
	test_cmd_read(fd, 0, seen, sizeof(seen));
	test_same(data, seen, sizeof(data), "dma-buf after the restore");

	/* A new MR on the restored buffer works. */
	test_cmd_reg(fresh, fd, 0, page_size);
	test_cmd_remote(IBV_WR_RDMA_WRITE, fresh, 0, 256);
	test_cmd_read(fd, 0, seen, sizeof(seen));
	test_all(0xa5, seen, sizeof(seen), "dma-buf after a WRITE to a new MR");

	test_cmd_dereg(m);
	test_cmd_dereg(fresh);
	test_query_eq(fd, attachments, 0);
}

/* The revoked MR keeps its keys: no new MR gets them before dereg. */
TEST_F_TIMEOUT(dmabuf_mr, revoke_no_key_reuse, 300)
{
	struct ibv_pd *pd = self->c.p.s[0].pd;
	struct dmabuf_mr *m = &self->c.dmr[0];
	const int n = 150;
	struct ibv_mr **plain;
	struct dmabuf_mr *dm;
	int fd, fd2, i;

	if (self->c.p.s[0].d.driver_id == RDMA_DRIVER_RXE)
		SKIP(return, "rxe hands out MR indices cyclically, no key comes back soon");
	plain = calloc(n, sizeof(*plain));
	dm = calloc(n, sizeof(*dm));
	ASSERT_NE(NULL, plain);
	ASSERT_NE(NULL, dm);
	fd = test_new_buf(page_size, 0);
	fd2 = test_new_buf(page_size, 0);
	test_cmd_reg(m, fd, 0, page_size);
	test_cmd_revoke_wait(fd, 0);

	for (i = 0; i < n; i++) {
		plain[i] = ibv_reg_mr(pd, self->c.plain[0].buf, page_size,
				      DMABUF_MR_ACCESS);
		ASSERT_NE(NULL, plain[i]) TH_LOG("MR %d: %s", i, strerror(errno));
		ASSERT_EQ(0, _test_reg_dmabuf_mr(&self->c.p.s[0], fd2, 0,
						 page_size, DMABUF_MR_IOVA,
						 DMABUF_MR_ACCESS, &dm[i]))
		TH_LOG("dma-buf MR %d: %s", i, strerror(errno));
		EXPECT_NE(m->lkey, plain[i]->lkey);
		EXPECT_NE(m->rkey, plain[i]->rkey);
		EXPECT_NE(m->lkey, dm[i].lkey);
		EXPECT_NE(m->rkey, dm[i].rkey);
	}
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, ibv_dereg_mr(plain[i]));
		ASSERT_EQ(0, _test_dereg_dmabuf_mr(&dm[i]));
	}
	test_query_eq(fd2, attachments, 0);
	test_cmd_dereg(m);
	free(plain);
	free(dm);
}

/* One REVOKE takes the buffer from every MR on it. */
TEST_F_TIMEOUT(dmabuf_mr, revoke_many_mrs, 300)
{
	const unsigned int n = 16;
	struct dmabuf_mock_query q;
	unsigned int i;
	int fd;

	fd = test_new_buf(n * page_size, 0);
	for (i = 0; i < n; i++)
		test_cmd_reg(&self->c.dmr[i], fd, i * page_size + i, page_size - i);
	test_cmd_query(fd, &q);
	EXPECT_EQ(n, q.attachments);
	EXPECT_EQ(env.pinned ? n : 0U, q.pins);
	/* The dma-buf core shares one vmap between its users. */
	EXPECT_EQ(env.cpu ? 1U : 0U, q.vmaps);
	test_cmd_remote(IBV_WR_RDMA_WRITE, &self->c.dmr[n - 1], 0, 64);

	test_cmd_revoke_wait(fd, 0);
	test_cmd_query(fd, &q);
	EXPECT_EQ((__u32)DMABUF_MOCK_STATE_REVOKED, q.state);
	EXPECT_EQ(n, q.invalidates);
	EXPECT_EQ(0U, q.pins);
	EXPECT_EQ(0U, q.maps);
	EXPECT_EQ(0U, q.vmaps);
	EXPECT_EQ(n, q.attachments);
	for (i = 0; i < n; i++)
		test_err_remote(IBV_WC_REM_ACCESS_ERR, IBV_WR_RDMA_WRITE,
				&self->c.dmr[i], 0, 64);
	for (i = 0; i < n; i++)
		test_cmd_dereg(&self->c.dmr[i]);
	test_query_eq(fd, attachments, 0);
}

/* Dereg first: the revoke finds nothing to take back. */
TEST_F(dmabuf_mr, dereg_then_revoke)
{
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct dmabuf_mock_query q;
	int fd;

	fd = test_new_buf(page_size, 0);
	test_cmd_reg(m, fd, 0, page_size);
	test_cmd_remote(IBV_WR_RDMA_WRITE, m, 0, 64);
	test_cmd_dereg(m);
	test_cmd_query(fd, &q);
	EXPECT_EQ(0U, q.attachments);
	EXPECT_EQ(0U, q.pins);
	EXPECT_EQ(0U, q.maps);
	EXPECT_EQ(0U, q.vmaps);
	/* One second is plenty when nothing is mapped. */
	ASSERT_EQ(0, _test_cmd_revoke(self->mock, fd, 0, 1000, NULL, 0));
	test_query_eq(fd, invalidates, 0);
}

/* The MR holds the dma-buf: closing its fd changes nothing until dereg. */
TEST_F(dmabuf_mr, close_fd_before_dereg)
{
	struct plain_mr *b = &self->c.plain[0];
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct dmabuf_mock_stats s;
	uint8_t data[512];
	int fd;

	fd = test_new_buf(page_size, 0);
	test_cmd_reg(m, fd, 0, page_size);
	close_buf(&self->c, fd);
	test_cmd_stats(&s);
	EXPECT_EQ(self->c.before.buffers + 1, s.buffers);

	fill(data, sizeof(data), 0x7a);
	memcpy(b->buf + CANARY, data, sizeof(data));
	test_cmd_remote(IBV_WR_RDMA_WRITE, m, 100, sizeof(data));
	memset(b->buf + CANARY, 0, sizeof(data));
	test_cmd_remote(IBV_WR_RDMA_READ, m, 100, sizeof(data));
	test_same(data, b->buf + CANARY, sizeof(data), "READ back");

	test_cmd_dereg(m);
	test_cmd_stats(&s);
	EXPECT_EQ(self->c.before.buffers, s.buffers);
	EXPECT_EQ(self->c.before.pages, s.pages);
}

TEST_F(dmabuf_mr, bad_input)
{
	const uint64_t size = 2 * page_size, iova = DMABUF_MR_IOVA;
	int fd, null, p[2];

	fd = test_new_buf(size, 0);
	/* dma_buf_get(): no file, or a file that is no dma-buf. */
	test_err_reg(EBADF, -1, 0, page_size, iova, DMABUF_MR_ACCESS);
	null = open("/dev/null", O_RDWR);
	ASSERT_LE(0, null);
	test_err_reg(EINVAL, null, 0, page_size, iova, DMABUF_MR_ACCESS);
	close(null);
	ASSERT_EQ(0, pipe(p));
	test_err_reg(EINVAL, p[0], 0, page_size, iova, DMABUF_MR_ACCESS);
	close(p[0]);
	close(p[1]);
	/* ib_umem_dmabuf_get_with_dma_device(): the range. */
	test_err_reg(EINVAL, fd, page_size, UINT64_MAX - page_size + 1,
		     iova + page_size, DMABUF_MR_ACCESS);
	test_err_reg(EINVAL, fd, 0, size + 1, iova, DMABUF_MR_ACCESS);
	test_err_reg(EINVAL, fd, page_size, size, iova + page_size,
		     DMABUF_MR_ACCESS);
	test_err_reg(EINVAL, fd, size, 1, iova + size, DMABUF_MR_ACCESS);
	test_err_reg(EINVAL, fd, 0, 0, iova, DMABUF_MR_ACCESS);
	test_err_reg(EINVAL, fd, 7, 0, iova + 7, DMABUF_MR_ACCESS);
	/* The uverbs method: iova and offset agree within a page; flags. */
	test_err_reg(EINVAL, fd, 0, page_size, iova + 1, DMABUF_MR_ACCESS);
	test_err_reg(EINVAL, fd, 0, page_size, iova, IBV_ACCESS_REMOTE_WRITE);
	test_err_reg(EINVAL, fd, 0, page_size, iova,
		     DMABUF_MR_ACCESS | IBV_ACCESS_ON_DEMAND);
	test_err_reg(EINVAL, fd, 0, page_size, iova,
		     DMABUF_MR_ACCESS | IBV_ACCESS_MW_BIND);
	/* Nothing was left attached, and the buffer still registers. */
	test_query_eq(fd, attachments, 0);
	test_query_eq(fd, pins, 0);
	test_query_eq(fd, vmaps, 0);
	test_cmd_reg(&self->c.dmr[0], fd, 0, size);
}

/*
 * An exporter that migrates a buffer when it is pinned (TTM) fences the
 * copy with a kernel fence: the registration must wait for it, or the first
 * accesses see what was there before. The mock's PIN_FENCE writes
 * DMABUF_MOCK_MIGRATED over the buffer DMABUF_MOCK_PIN_FENCE_MS after the
 * pin, then signals the fence.
 */
TEST_F(dmabuf_mr, reg_waits_for_migration)
{
	struct plain_mr *b = &self->c.plain[self->c.req];
	struct dmabuf_mr *m = &self->c.dmr[0];
	int fd;

	if (!env.pinned)
		SKIP(return, "%s does not pin dma-bufs: no migration at pin",
		     env.dev.name);
	fd = test_new_buf(page_size, DMABUF_MOCK_PIN_FENCE);
	test_cmd_reg(m, fd, 0, page_size);
	test_query_eq(fd, fences, 0);
	test_cmd_remote(IBV_WR_RDMA_READ, m, 0, 256);
	test_all(DMABUF_MOCK_MIGRATED, b->buf + CANARY, 256,
		 "READ right after registration");
}

/*
 * dma-buf asks an importer that touches the memory with the CPU to bracket
 * its access with begin_cpu_access and end_cpu_access. A CPU importer that
 * stands for a NIC brackets once per registration, as long as a NIC's
 * pinned mapping lasts: one begin when it registers, none per WRITE, READ
 * or atomic (each would wait for the buffer's fences), one end when it
 * deregisters, revoked or not.
 */
TEST_F(dmabuf_mr, cpu_access_bracketed)
{
	struct dmabuf_mr *m = &self->c.dmr[0];
	int fd, i;

	if (!env.cpu)
		SKIP(return, "%s maps dma-bufs for DMA: no CPU access",
		     env.dev.name);
	for (i = 0; i < 2; i++) {
		fd = test_new_buf(page_size, 0);
		test_cmd_reg(m, fd, 0, page_size);
		test_query_eq(fd, cpu_begins, 1);
		test_query_eq(fd, cpu_ends, 0);
		if (i) {
			test_cmd_revoke_wait(fd, 0);
		} else {
			test_cmd_remote(IBV_WR_RDMA_WRITE, m, 0, 64);
			test_cmd_remote(IBV_WR_RDMA_READ, m, 0, 64);
			test_wc(IBV_WC_SUCCESS,
				remote_op(_metadata, &self->c,
					  IBV_WR_ATOMIC_FETCH_AND_ADD, m, 0, 8,
					  1, 0));
		}
		test_query_eq(fd, cpu_begins, 1);
		test_query_eq(fd, cpu_ends, 0);
		test_cmd_dereg(m);
		test_query_eq(fd, cpu_begins, 1);
		test_query_eq(fd, cpu_ends, 1);
	}
}

/* UVERBS_METHOD_ADVISE_MR on one SGE of @lkey. */
static int raw_advise_mr(struct rdma_side *s, uint32_t advice,
			 uint32_t flags, uint64_t addr, uint32_t length,
			 uint32_t lkey)
{
	struct ib_uverbs_sge sge = {
		.addr = addr, .length = length, .lkey = lkey,
	};
	struct ib_uverbs_attr a[] = {
		{ .attr_id = UVERBS_ATTR_ADVISE_MR_PD_HANDLE,
		  .flags = UVERBS_ATTR_F_MANDATORY, .data = s->pd->handle },
		{ .attr_id = UVERBS_ATTR_ADVISE_MR_ADVICE,
		  .flags = UVERBS_ATTR_F_MANDATORY, .len = sizeof(uint64_t),
		  .data = advice },
		{ .attr_id = UVERBS_ATTR_ADVISE_MR_FLAGS,
		  .flags = UVERBS_ATTR_F_MANDATORY, .len = sizeof(uint64_t),
		  .data = flags },
		{ .attr_id = UVERBS_ATTR_ADVISE_MR_SGE_LIST,
		  .flags = UVERBS_ATTR_F_MANDATORY, .len = sizeof(sge),
		  .data = (uintptr_t)&sge },
	};

	return raw_ioctl(s->ctx, s->d.driver_id, UVERBS_OBJECT_MR,
			 UVERBS_METHOD_ADVISE_MR, a, ARRAY_SIZE(a));
}

/*
 * Prefetch (ibv_advise_mr()) faults in the pages of an ODP MR; a pinned
 * MR, plain or dma-buf, has none to fault in. rxe refuses it with
 * EOPNOTSUPP, synchronously (FLUSH) or not, for reading or writing. The raw
 * ioctl, so that the kernel is asked whatever the provider implements.
 */
TEST_F(dmabuf_mr, advise_mr_not_odp)
{
	static const uint32_t advice[] = {
		IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH,
		IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
	};
	static const uint32_t flags[] = { 0, IB_UVERBS_ADVISE_MR_FLAG_FLUSH };
	struct plain_mr *b = &self->c.plain[0];
	struct rdma_side *s = &self->c.p.s[0];
	struct dmabuf_mr *m = &self->c.dmr[0];
	unsigned int i, j;
	int fd;

	if (s->d.driver_id != RDMA_DRIVER_RXE)
		SKIP(return, "non-ODP MR errno is the driver's (mlx5: ENOENT)");
	fd = test_new_buf(page_size, 0);
	test_cmd_reg(m, fd, 0, page_size);
	for (i = 0; i < ARRAY_SIZE(advice); i++) {
		for (j = 0; j < ARRAY_SIZE(flags); j++) {
			EXPECT_ERRNO(EOPNOTSUPP,
				     raw_advise_mr(s, advice[i], flags[j],
						   (uintptr_t)b->buf, 64,
						   b->mr->lkey));
			EXPECT_ERRNO(EOPNOTSUPP,
				     raw_advise_mr(s, advice[i], flags[j],
						   m->iova, 64, m->lkey));
		}
	}
	/* The MR still works. */
	test_cmd_remote(IBV_WR_RDMA_WRITE, m, 0, 64);
}

/*
 * Exporters that emulate others: vfio-pci's "revocable importers only" is
 * met; an importer that pins is refused by an exporter that will not pin,
 * one that copies with the CPU by one without a kernel mapping or with an
 * I/O memory one. A refusal leaves nothing attached, pinned or mapped.
 */
FIXTURE(dmabuf_mr_exporter) {
	int mock;
	struct mr_ctx c;
};

FIXTURE_VARIANT(dmabuf_mr_exporter) {
	uint32_t flags;
	bool refuses_pin;	/* refused by an importer that pins */
	bool refuses_cpu;	/* refused by an importer that vmaps */
};

FIXTURE_VARIANT_ADD(dmabuf_mr_exporter, require_revocable) {
	.flags = DMABUF_MOCK_REQUIRE_REVOCABLE,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_exporter, no_pin) {
	.flags = DMABUF_MOCK_NO_PIN,
	.refuses_pin = true,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_exporter, no_vmap) {
	.flags = DMABUF_MOCK_NO_VMAP,
	.refuses_cpu = true,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_exporter, vmap_iomem) {
	.flags = DMABUF_MOCK_VMAP_IOMEM,
	.refuses_cpu = true,
};

FIXTURE_SETUP(dmabuf_mr_exporter)
{
	mr_ctx_setup(_metadata, &self->mock, &self->c, false, page_size);
}

FIXTURE_TEARDOWN(dmabuf_mr_exporter)
{
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

TEST_F(dmabuf_mr_exporter, reg_mr)
{
	bool refused = (variant->refuses_pin && env.pinned) ||
		       (variant->refuses_cpu && env.cpu);
	struct plain_mr *b = &self->c.plain[0];
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct dmabuf_mock_query q;
	uint8_t seen[256];
	int fd;

	fd = test_new_buf(2 * page_size, variant->flags);
	if (refused) {
		test_err_reg(EOPNOTSUPP, fd, 0, 2 * page_size, DMABUF_MR_IOVA,
			     DMABUF_MR_ACCESS);
	} else {
		test_cmd_reg(m, fd, 0, 2 * page_size);
		fill(b->buf + CANARY, sizeof(seen), 0x8b);
		test_cmd_remote(IBV_WR_RDMA_WRITE, m, page_size - 128,
				sizeof(seen));
		test_cmd_read(fd, page_size - 128, seen, sizeof(seen));
		test_same(b->buf + CANARY, seen, sizeof(seen), "dma-buf");
		test_cmd_dereg(m);
	}
	test_cmd_query(fd, &q);
	EXPECT_EQ(0U, q.attachments);
	EXPECT_EQ(0U, q.pins);
	EXPECT_EQ(0U, q.maps);
	EXPECT_EQ(0U, q.vmaps);
}

/*
 * Revoke under traffic: a thread keeps a window of WRITEs (or READs) in
 * flight on the dma-buf MR while the exporter revokes and then poisons or
 * swaps the pages. Whatever a WRITE put there after REVOKE returned would
 * show through the poison (the swapped-in pages are zeroed), and a READ
 * that completes successfully must carry what the buffer held before.
 */
#define TRAFFIC_WINDOW 8
#define TRAFFIC_CHUNK 16384
#define TRAFFIC_CHUNKS 16
#define TRAFFIC_WRITTEN 0xa5	/* what the WRITEs carry */
#define TRAFFIC_HELD 0x5a	/* what the buffer holds for the READs */

FIXTURE(dmabuf_mr_traffic) {
	int mock;
	struct mr_ctx c;
};

FIXTURE_VARIANT(dmabuf_mr_traffic) {
	enum ibv_wr_opcode op;
	uint32_t revoke;
	uint8_t scrubbed;	/* what the buffer holds after the revoke */
};

FIXTURE_VARIANT_ADD(dmabuf_mr_traffic, write_poison) {
	.op = IBV_WR_RDMA_WRITE,
	.revoke = DMABUF_MOCK_REVOKE_POISON,
	.scrubbed = DMABUF_MOCK_POISON,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_traffic, write_swap) {
	.op = IBV_WR_RDMA_WRITE,
	.revoke = DMABUF_MOCK_REVOKE_SWAP,
	.scrubbed = 0,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_traffic, read_poison) {
	.op = IBV_WR_RDMA_READ,
	.revoke = DMABUF_MOCK_REVOKE_POISON,
	.scrubbed = DMABUF_MOCK_POISON,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_traffic, read_swap) {
	.op = IBV_WR_RDMA_READ,
	.revoke = DMABUF_MOCK_REVOKE_SWAP,
	.scrubbed = 0,
};

FIXTURE_SETUP(dmabuf_mr_traffic)
{
	mr_ctx_setup(_metadata, &self->mock, &self->c, false,
		     TRAFFIC_WINDOW * TRAFFIC_CHUNK);
}

FIXTURE_TEARDOWN(dmabuf_mr_traffic)
{
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

TEST_F_TIMEOUT(dmabuf_mr_traffic, revoke_under_traffic, 180)
{
	const size_t size = TRAFFIC_CHUNKS * TRAFFIC_CHUNK;
	struct plain_mr *b = &self->c.plain[0];
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct traffic t = {
		.s = &self->c.p.s[0],
		.op = variant->op,
		.local = b->buf + CANARY,
		.lkey = b->mr->lkey,
		.window = TRAFFIC_WINDOW,
		.chunk = TRAFFIC_CHUNK,
		.chunks = TRAFFIC_CHUNKS,
		.held = TRAFFIC_HELD,
		.idle_ms = DMABUF_MR_TIMEOUT_MS,
		.max_ms = 2 * DMABUF_MR_TIMEOUT_MS,
	};
	unsigned int ok_before;
	char holder[32] = "";
	uint8_t *seen;
	pthread_t thread;
	int fd, ret, err;

	seen = malloc(size);
	ASSERT_NE(NULL, seen);
	memset(seen, TRAFFIC_HELD, size);
	fd = test_new_buf(size, 0);
	test_cmd_write(fd, 0, seen, size);
	test_cmd_reg(m, fd, 0, size);
	memset(t.local, TRAFFIC_WRITTEN, TRAFFIC_WINDOW * TRAFFIC_CHUNK);
	t.raddr = m->iova;
	t.rkey = m->rkey;

	ASSERT_EQ(0, pthread_create(&thread, NULL, traffic_thread, &t));
	ok_before = traffic_wait(&t, 4 * TRAFFIC_WINDOW, DMABUF_MR_TIMEOUT_MS);
	ret = _test_cmd_revoke(self->mock, fd, variant->revoke,
			       DMABUF_MR_TIMEOUT_MS, holder, sizeof(holder));
	err = errno;
	if (ret)
		__atomic_store_n(&t.stop, true, __ATOMIC_RELAXED);
	pthread_join(thread, NULL);

	ASSERT_EQ(0, ret)
	TH_LOG("REVOKE: %s (still mapped by %s)", strerror(err), holder);
	ASSERT_EQ(0, t.post_error) TH_LOG("traffic: %s", strerror(t.post_error));
	ASSERT_FALSE(t.timed_out) TH_LOG("no error completion after the revoke");
	EXPECT_LT(0U, ok_before)
	TH_LOG("no %s completed before the revoke", rdma_op_name(variant->op));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, (int)t.first_error)
	TH_LOG("first error %s", ibv_wc_status_str(t.first_error));
	EXPECT_EQ(0U, t.unexpected);
	EXPECT_EQ(0U, t.bad_reads)
	TH_LOG("%u READs returned what was not in the buffer", t.bad_reads);
	TH_LOG("%u %s before REVOKE, %u after, then %s and %u flushed",
	       ok_before, rdma_op_name(variant->op), t.ok - ok_before,
	       ibv_wc_status_str(t.first_error), t.errors - 1);

	test_cmd_read(fd, 0, seen, size);
	test_all(variant->scrubbed, seen, size, "dma-buf after the revoke");
	test_query_eq(fd, pins, 0);
	test_query_eq(fd, vmaps, 0);
	free(seen);
}

/* Between RDMA_DEV and RDMA_PEER_DEV (rxe_dmabuf_mr.sh: across netns). */
FIXTURE(dmabuf_mr_peer) {
	int mock;
	struct mr_ctx c;
};

FIXTURE_SETUP(dmabuf_mr_peer)
{
	self->mock = -1;
	if (env.skip[0])
		SKIP(return, "%s", env.skip);
	if (!getenv("RDMA_PEER_DEV"))
		SKIP(return, "RDMA_PEER_DEV is not set: no second device");
	mr_ctx_setup(_metadata, &self->mock, &self->c, true, 4 * page_size);
}

FIXTURE_TEARDOWN(dmabuf_mr_peer)
{
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

TEST_F_TIMEOUT(dmabuf_mr_peer, write_read_revoke, 120)
{
	const uint64_t off = 100, len = 3 * page_size;
	struct plain_mr *b = &self->c.plain[1];
	struct dmabuf_mr *m = &self->c.dmr[0];
	uint8_t *data, *seen;
	int fd;

	data = malloc(len);
	seen = malloc(len);
	ASSERT_NE(NULL, data);
	ASSERT_NE(NULL, seen);
	fd = test_new_buf(4 * page_size, 0);
	test_cmd_reg(m, fd, off, len);

	/* The peer writes into the MR and reads it back. */
	fill(data, len, 0x12);
	memcpy(b->buf + CANARY, data, len);
	test_cmd_remote(IBV_WR_RDMA_WRITE, m, 0, len);
	test_cmd_read(fd, off, seen, len);
	test_same(data, seen, len, "dma-buf after the peer's WRITE");
	memset(b->buf + CANARY, 0, len);
	test_cmd_remote(IBV_WR_RDMA_READ, m, 0, len);
	test_same(data, b->buf + CANARY, len, "the peer's READ");
	/* The MR's own side writes from it to the peer. */
	memset(b->buf + CANARY, 0, len);
	test_cmd_local(IBV_WR_RDMA_WRITE, mr_sge(m, 0, len));
	test_same(data, b->buf + CANARY, len, "the peer after a WRITE from the MR");

	test_cmd_revoke_wait(fd, 0);
	fill(b->buf + CANARY, len, 0x34);
	test_err_remote(IBV_WC_REM_ACCESS_ERR, IBV_WR_RDMA_WRITE, m, 0, len);
	test_err_remote(IBV_WC_REM_ACCESS_ERR, IBV_WR_RDMA_READ, m, 0, len);
	test_cmd_read(fd, off, seen, len);
	test_same(data, seen, len, "dma-buf after the revoke");
	free(data);
	free(seen);
}

/*
 * The peer's link under a plug qdisc (on its end of the veth pair, which
 * rxe_dmabuf_mr.sh names in DMABUF_MR_PEER_NETNS and _NETDEV): what the
 * peer sends waits there until the test releases it, so that the test
 * decides how much of a message has arrived.
 */
static int peer_tc(const char *verb, const char *qdisc)
{
	const char *ns = getenv("DMABUF_MR_PEER_NETNS");
	const char *dev = getenv("DMABUF_MR_PEER_NETDEV");
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "ip netns exec %s tc qdisc %s dev %s root %s >/dev/null 2>&1",
		 ns, verb, dev, qdisc);
	return system(cmd) ? -1 : 0;
}

/* Whether packets wait in the peer's plug. */
static bool peer_plug_holds(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "ip netns exec %s tc -s qdisc show dev %s root | grep -q 'backlog [1-9]'",
		 getenv("DMABUF_MR_PEER_NETNS"), getenv("DMABUF_MR_PEER_NETDEV"));
	return !system(cmd);
}

FIXTURE(dmabuf_mr_plugged) {
	int mock;
	struct mr_ctx c;
	bool plugged;
};

FIXTURE_SETUP(dmabuf_mr_plugged)
{
	self->mock = -1;
	if (env.skip[0])
		SKIP(return, "%s", env.skip);
	if (!getenv("RDMA_PEER_DEV") || !getenv("DMABUF_MR_PEER_NETNS") ||
	    !getenv("DMABUF_MR_PEER_NETDEV"))
		SKIP(return, "no peer link to plug (RDMA_PEER_DEV, DMABUF_MR_PEER_*)");
	mr_ctx_setup(_metadata, &self->mock, &self->c, true, 4 * page_size);
}

FIXTURE_TEARDOWN(dmabuf_mr_plugged)
{
	if (self->plugged)
		EXPECT_EQ(0, peer_tc("del", ""));
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

/*
 * A REVOKE in the middle of one long WRITE: it waits for the packet being
 * copied at most, not for the message, whose end the peer controls. The
 * peer's first packets are let through, the rest held back; the REVOKE
 * returns while the WRITE is still incomplete; once the rest is released it
 * is refused, so the WRITE completes with REM_ACCESS_ERR, and the buffer
 * holds only the poison the exporter wrote once the REVOKE had returned.
 */
TEST_F_TIMEOUT(dmabuf_mr_plugged, revoke_mid_write, 180)
{
	const size_t len = 4 << 20;
	struct rdma_side *peer = &self->c.p.s[self->c.req];
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct plain_mr big = {};
	uint64_t t0, t_revoke;
	struct ibv_wc wc;
	uint8_t byte = 0;
	int fd;

	fd = test_new_buf(len, 0);
	test_cmd_reg(m, fd, 0, len);
	ASSERT_EQ(0, plain_alloc(&big, peer->pd, len));
	/* Both ends know each other's address before the link is plugged. */
	test_wc(IBV_WC_SUCCESS,
		rdma_op(_metadata, peer, IBV_WR_RDMA_WRITE, plain_sge(&big, 64),
			m->iova + page_size, m->rkey, 0, 0));
	memset(big.buf + CANARY, 0x77, len);

	ASSERT_EQ(0, peer_tc("replace", "plug limit 64mb"))
	TH_LOG("tc qdisc plug on %s failed (CONFIG_NET_SCH_PLUG, tc?)",
	       getenv("DMABUF_MR_PEER_NETDEV"));
	self->plugged = true;
	ASSERT_EQ(0, rdma_post(peer, IBV_WR_RDMA_WRITE,
			       plain_sge(&big, len), m->iova, m->rkey, 0, 0,
			       1));
	/*
	 * The first packets wait in the plug: close their batch and let it
	 * through; whatever rxe sends after them stays there.
	 */
	t0 = now_ms();
	while (!peer_plug_holds() && now_ms() - t0 < DMABUF_MR_TIMEOUT_MS)
		usleep(1000);
	ASSERT_EQ(0, peer_tc("change", "plug block"));
	ASSERT_EQ(0, peer_tc("change", "plug release"));
	while (byte != 0x77 && now_ms() - t0 < DMABUF_MR_TIMEOUT_MS)
		test_cmd_read(fd, 0, &byte, 1);
	ASSERT_EQ(0x77, byte) TH_LOG("no packet of the WRITE arrived");
	test_cmd_read(fd, len - 1, &byte, 1);
	ASSERT_NE(0x77, byte) TH_LOG("the whole WRITE got through the plug");
	ASSERT_EQ(0, ibv_poll_cq(peer->cq, 1, &wc));

	t0 = now_ms();
	test_cmd_revoke_wait(fd, DMABUF_MOCK_REVOKE_POISON);
	t_revoke = now_ms() - t0;
	ASSERT_EQ(0, peer_tc("change", "plug release_indefinite"));
	/*
	 * Had the revoke waited for the message, it would not have returned
	 * before the release; the rest of the WRITE was refused instead.
	 */
	ASSERT_EQ(0, rdma_poll(peer->cq, &wc, DMABUF_MR_TIMEOUT_MS));
	test_wc(IBV_WC_REM_ACCESS_ERR, wc.status);
	TH_LOG("REVOKE took %llu ms in the middle of a %zu-byte WRITE",
	       (unsigned long long)t_revoke, len);
	check_dmabuf_all(_metadata, self->mock, fd, DMABUF_MOCK_POISON, len);
	plain_free(&big);
	test_cmd_renew();
}

/*
 * What `rdma resource show mr` sees (RDMA_NLDEV_CMD_RES_MR_GET): every
 * dma-buf MR says so, and one the exporter can revoke (a pinning
 * importer: every pinned dma-buf MR is revocable) says
 * whether it was. Other MRs carry neither attribute.
 */
#define test_cmd_nldev_mr(index, lkey, rkey, nl)                             \
	({                                                                   \
		ASSERT_EQ(0, nldev_mr_get(index, lkey, rkey, nl))            \
		TH_LOG("RDMA_NLDEV_CMD_RES_MR_GET: %s", strerror(errno));    \
	})

static uint32_t nldev_index(struct __test_metadata *_metadata)
{
	uint32_t index = nldev_dev_index(env.dev.name);

	ASSERT_NE(UINT32_MAX, index)
	TH_LOG("no nldev index for %s: %s", env.dev.name, strerror(errno));
	return index;
}

TEST_F(dmabuf_mr, nldev_revoke)
{
	int revocable = env.pinned ? 0 : -1;
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct nldev_mr nl;
	uint32_t index, mrn;
	int fd;

	index = nldev_index(_metadata);
	fd = test_new_buf(page_size, 0);
	test_cmd_reg(m, fd, 0, page_size);
	test_cmd_nldev_mr(index, m->lkey, m->rkey, &nl);
	ASSERT_EQ(1, nl.found);
	EXPECT_EQ(1, nl.dmabuf);
	EXPECT_EQ(revocable, nl.revoked);
	mrn = nl.mrn;

	test_cmd_revoke_wait(fd, 0);
	test_cmd_nldev_mr(index, m->lkey, m->rkey, &nl);
	ASSERT_EQ(1, nl.found);
	EXPECT_EQ(mrn, nl.mrn);
	EXPECT_EQ(1, nl.dmabuf);
	EXPECT_EQ(env.pinned ? 1 : -1, nl.revoked);

	test_cmd_dereg(m);
	test_cmd_nldev_mr(index, m->lkey, m->rkey, &nl);
	EXPECT_EQ(0, nl.found);
}

TEST_F(dmabuf_mr, nldev_dereg)
{
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct nldev_mr nl;
	uint32_t index;
	int fd;

	index = nldev_index(_metadata);
	fd = test_new_buf(page_size, 0);
	test_cmd_reg(m, fd, 0, page_size);
	test_cmd_nldev_mr(index, m->lkey, m->rkey, &nl);
	ASSERT_EQ(1, nl.found);
	EXPECT_EQ(1, nl.dmabuf);
	EXPECT_EQ(env.pinned ? 0 : -1, nl.revoked);

	test_cmd_dereg(m);
	test_cmd_nldev_mr(index, m->lkey, m->rkey, &nl);
	EXPECT_EQ(0, nl.found);
	/* Deregistration is no revoke: the buffer is still the exporter's. */
	test_query_eq(fd, invalidates, 0);
}

TEST_F(dmabuf_mr, nldev_plain_mr)
{
	struct plain_mr *b = &self->c.plain[0];
	uint32_t index, lkey = b->mr->lkey, rkey = b->mr->rkey;
	struct nldev_mr nl;

	index = nldev_index(_metadata);
	test_cmd_nldev_mr(index, lkey, rkey, &nl);
	ASSERT_EQ(1, nl.found);
	EXPECT_EQ(-1, nl.dmabuf);
	EXPECT_EQ(-1, nl.revoked);

	plain_free(b);
	test_cmd_nldev_mr(index, lkey, rkey, &nl);
	EXPECT_EQ(0, nl.found);
}

/*
 * A receive CQ that overflows: the peer WRITEs WITH IMMEDIATE into an MR
 * of a QP whose receive CQ holds one completion, and the second one finds
 * it full. The QP goes to the error state, and nothing it did may keep
 * the MR: deregistration returns at once, the MR is gone from `rdma
 * resource show mr`, and a dma-buf MR leaves nothing attached, pinned or
 * mapped. rxe's responder used to keep the reference it took for the
 * WRITE on that path; deregistration then waited 50 s for it and WARNed.
 */
FIXTURE(dmabuf_mr_overflow) {
	int mock;
	struct mr_ctx c;
	struct ibv_cq *rcq;
};

FIXTURE_VARIANT(dmabuf_mr_overflow) {
	bool dmabuf;
};

FIXTURE_VARIANT_ADD(dmabuf_mr_overflow, plain) {
	.dmabuf = false,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_overflow, dmabuf) {
	.dmabuf = true,
};

/* Side 0's QP again, its receives completing on a CQ of one entry. */
FIXTURE_SETUP(dmabuf_mr_overflow)
{
	struct rdma_side *rx = &self->c.p.s[0], *tx = &self->c.p.s[1];
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = env.dev.port,
		.qp_access_flags = DMABUF_MR_ACCESS,
	};

	self->rcq = NULL;
	mr_ctx_setup(_metadata, &self->mock, &self->c, false, page_size);
	self->rcq = ibv_create_cq(rx->ctx, 1, NULL, NULL, 0);
	ASSERT_NE(NULL, self->rcq);
	ASSERT_EQ(0, ibv_destroy_qp(tx->qp));
	ASSERT_EQ(0, ibv_destroy_qp(rx->qp));
	rx->qp = NULL;
	rx->qpx = NULL;
	tx->qp = NULL;
	tx->qpx = NULL;
	ASSERT_EQ(0, ibv_destroy_cq(tx->cq));
	tx->cq = NULL;
	ASSERT_EQ(0, rdma_qp_create(tx));

	ia.send_cq = rx->cq;
	ia.recv_cq = self->rcq;
	rx->qp = ibv_create_qp(rx->pd, &ia);
	ASSERT_NE(NULL, rx->qp);
	ASSERT_EQ(0, ibv_modify_qp(rx->qp, &a, IBV_QP_STATE |
				   IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS));
	ASSERT_EQ(0, rdma_qp_connect(rx, tx));
	ASSERT_EQ(0, rdma_qp_connect(tx, rx));
}

FIXTURE_TEARDOWN(dmabuf_mr_overflow)
{
	struct rdma_side *rx = &self->c.p.s[0];

	if (rx->qp)
		ibv_destroy_qp(rx->qp);
	rx->qp = NULL;
	if (self->rcq)
		ibv_destroy_cq(self->rcq);
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

TEST_F_TIMEOUT(dmabuf_mr_overflow, dereg_after_cq_overflow, 180)
{
	struct rdma_side *rx = &self->c.p.s[0], *tx = &self->c.p.s[1];
	struct plain_mr *b = &self->c.plain[0];
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct ibv_qp_attr a = {};
	struct ibv_qp_init_attr ia;
	uint32_t index, lkey, rkey;
	struct dmabuf_mock_query q;
	struct nldev_mr nl;
	uint64_t raddr, t0;
	int i, fd = -1;

	index = nldev_index(_metadata);
	if (variant->dmabuf) {
		fd = test_new_buf(page_size, 0);
		test_cmd_reg(m, fd, 0, page_size);
		lkey = m->lkey;
		rkey = m->rkey;
		raddr = m->iova;
	} else {
		lkey = b->mr->lkey;
		rkey = b->mr->rkey;
		raddr = (uintptr_t)b->buf + CANARY;
	}

	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, rdma_post_recv(rx, (struct rdma_sge){}, i));
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, rdma_post(tx, IBV_WR_RDMA_WRITE_WITH_IMM,
				       plain_sge(&self->c.plain[1], 64),
				       raddr, rkey, 0, 0, i));
	/* The second completion overflows the CQ: the QP goes to error. */
	t0 = now_ms();
	do {
		ASSERT_EQ(0, ibv_query_qp(rx->qp, &a, IBV_QP_STATE, &ia));
	} while (a.qp_state != IBV_QPS_ERR &&
		 now_ms() - t0 < DMABUF_MR_TIMEOUT_MS);
	ASSERT_EQ(IBV_QPS_ERR, a.qp_state)
	TH_LOG("the receive CQ did not overflow");

	t0 = now_ms();
	if (variant->dmabuf) {
		test_cmd_dereg(m);
	} else {
		ASSERT_EQ(0, ibv_dereg_mr(b->mr));
		b->mr = NULL;
	}
	t0 = now_ms() - t0;
	/* Not a speed goal: a reference left behind holds it for 50 s. */
	EXPECT_GT(10000, t0)
	TH_LOG("deregistration took %llu ms", (unsigned long long)t0);
	test_cmd_nldev_mr(index, lkey, rkey, &nl);
	EXPECT_EQ(0, nl.found);
	if (variant->dmabuf) {
		test_cmd_query(fd, &q);
		EXPECT_EQ(0U, q.attachments);
		EXPECT_EQ(0U, q.pins);
		EXPECT_EQ(0U, q.vmaps);
	}
}

/*
 * The rdma_core:mr_revoke tracepoint, in a trace instance of the test's
 * own: one line per revoked MR with its device, restrack id (the nldev
 * MRN) and keys, by=exporter for the exporter's revoke, by=driver for
 * deregistration of an MR the exporter never revoked; never two.
 */
FIXTURE(dmabuf_mr_trace) {
	int mock;
	struct mr_ctx c;
	struct trace_inst t;
	uint32_t index;
};

FIXTURE_SETUP(dmabuf_mr_trace)
{
	const char *root;
	char name[256];

	self->mock = -1;
	if (env.skip[0])
		SKIP(return, "%s", env.skip);
	if (!env.pinned)
		SKIP(return, "%s does not pin dma-bufs: nothing to revoke",
		     env.dev.name);
	root = tracefs_root();
	if (!root)
		SKIP(return,
		     "no tracefs instances at /sys/kernel/tracing or /sys/kernel/debug/tracing");
	snprintf(name, sizeof(name), "%s/events/rdma_core/mr_revoke", root);
	if (access(name, F_OK))
		SKIP(return, "no rdma_core:mr_revoke tracepoint (%s: %s)", name,
		     strerror(errno));
	mr_ctx_setup(_metadata, &self->mock, &self->c, false, page_size);
	if (_metadata->exit_code)
		return;
	self->index = nldev_index(_metadata);
	snprintf(name, sizeof(name), "dmabuf_mr.%d", getpid());
	ASSERT_EQ(0, trace_inst_start(&self->t, root, name,
				      "rdma_core/mr_revoke"))
	TH_LOG("trace instance %s: %s", name, strerror(errno));
}

FIXTURE_TEARDOWN(dmabuf_mr_trace)
{
	EXPECT_EQ(0, trace_inst_stop(&self->t))
	TH_LOG("removing the trace instance: %s", strerror(errno));
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

/* The mr_revoke lines for @lkey on the test's device: count, last in @r. */
static int mr_revoke_lines(struct __test_metadata *_metadata,
			   struct trace_inst *t, uint32_t lkey,
			   struct mr_revoke_trace *r)
{
	char *trace = trace_inst_read(t);
	int n, unparsed;

	ASSERT_NE(NULL, trace) TH_LOG("reading the trace: %s", strerror(errno));
	n = trace_mr_revoke_find(trace, env.dev.name, lkey, r, &unparsed);
	EXPECT_EQ(0, unparsed) TH_LOG("mr_revoke lines not understood:\n%s",
				      trace);
	free(trace);
	return n;
}

/* @r is the revoke of @m, restrack id @mrn, by @by. */
static void check_trace_revoke(struct __test_metadata *_metadata,
			       const struct dmabuf_mr *m, uint32_t mrn,
			       const struct mr_revoke_trace *r, const char *by)
{
	EXPECT_STREQ(env.dev.name, r->device);
	EXPECT_EQ(mrn, r->id);
	EXPECT_EQ(m->lkey, r->lkey);
	EXPECT_EQ(m->rkey, r->rkey);
	EXPECT_STREQ(by, r->by);
	EXPECT_LE(0, r->duration_ns);
	EXPECT_GT(DMABUF_MR_TIMEOUT_MS * 1000000LL, r->duration_ns);
}

TEST_F(dmabuf_mr_trace, revoke_by_exporter)
{
	struct dmabuf_mr *m = &self->c.dmr[0];
	struct mr_revoke_trace r;
	struct nldev_mr nl;
	int fd;

	fd = test_new_buf(page_size, 0);
	test_cmd_reg(m, fd, 0, page_size);
	test_cmd_nldev_mr(self->index, m->lkey, m->rkey, &nl);
	ASSERT_EQ(1, nl.found);
	ASSERT_EQ(0, mr_revoke_lines(_metadata, &self->t, m->lkey, &r));

	test_cmd_revoke_wait(fd, 0);
	ASSERT_EQ(1, mr_revoke_lines(_metadata, &self->t, m->lkey, &r));
	check_trace_revoke(_metadata, m, nl.mrn, &r, "exporter");

	/* The release finds the MR revoked already: no second line. */
	test_cmd_dereg(m);
	ASSERT_EQ(1, mr_revoke_lines(_metadata, &self->t, m->lkey, &r));
	check_trace_revoke(_metadata, m, nl.mrn, &r, "exporter");
}

TEST_F(dmabuf_mr_trace, dereg_by_driver)
{
	struct plain_mr *b = &self->c.plain[0];
	struct dmabuf_mr *m = &self->c.dmr[0];
	uint32_t plain_lkey = b->mr->lkey;
	struct mr_revoke_trace r;
	struct nldev_mr nl;
	int fd;

	fd = test_new_buf(page_size, 0);
	test_cmd_reg(m, fd, 0, page_size);
	test_cmd_nldev_mr(self->index, m->lkey, m->rkey, &nl);
	ASSERT_EQ(1, nl.found);

	test_cmd_dereg(m);
	ASSERT_EQ(1, mr_revoke_lines(_metadata, &self->t, m->lkey, &r));
	check_trace_revoke(_metadata, m, nl.mrn, &r, "driver");
	/* The exporter finds nothing left to revoke. */
	test_cmd_revoke_wait(fd, 0);
	ASSERT_EQ(1, mr_revoke_lines(_metadata, &self->t, m->lkey, &r));

	/* An MR that is no dma-buf MR has no revoke to trace. */
	plain_free(b);
	EXPECT_EQ(0, mr_revoke_lines(_metadata, &self->t, plain_lkey, &r));

	/*
	 * Nor has a registration that failed after the import: a CPU
	 * importer is refused a buffer it cannot vmap, and releases the
	 * import, which no MR ever had.
	 */
	if (!env.cpu)
		return;
	fd = test_new_buf(page_size, DMABUF_MOCK_NO_VMAP);
	test_err_reg(EOPNOTSUPP, fd, 0, page_size, DMABUF_MR_IOVA,
		     DMABUF_MR_ACCESS);
	EXPECT_EQ(0, mr_revoke_lines(_metadata, &self->t, 0, &r));
}

/*
 * Exporters that users have, not ours: udmabuf (a memfd's pages), the
 * system dma-heap, and DRM's vgem (a GEM object of shmem pages). They do
 * not revoke; they show that registration and the data path work on memory
 * that no one here wrote. The exporter's side of the buffer is its own
 * mmap(), bracketed by DMA_BUF_IOCTL_SYNC.
 */
enum real_exporter { REAL_UDMABUF, REAL_HEAP_SYSTEM, REAL_VGEM };

FIXTURE(dmabuf_mr_real) {
	int mock;
	struct mr_ctx c;
	int fd;			/* the dma-buf */
	int owner;		/* what backs it: memfd, DRM device */
	uint8_t *map;		/* the dma-buf, mmap()ed */
	size_t size;
};

FIXTURE_VARIANT(dmabuf_mr_real) {
	enum real_exporter exp;
	const char *exp_name;	/* as debugfs' bufinfo names the exporter */
	uint64_t offset;
	uint64_t length;
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, udmabuf_page) {
	.exp = REAL_UDMABUF, .exp_name = "udmabuf", .offset = 0, .length = 4096,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, udmabuf_odd) {
	.exp = REAL_UDMABUF, .exp_name = "udmabuf", .offset = 4096 + 100,
	.length = 3 * 4096 + 17,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, udmabuf_1m) {
	.exp = REAL_UDMABUF, .exp_name = "udmabuf", .offset = 8192, .length = 1 << 20,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, heap_system_page) {
	.exp = REAL_HEAP_SYSTEM, .exp_name = "system", .offset = 0, .length = 4096,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, heap_system_odd) {
	.exp = REAL_HEAP_SYSTEM, .exp_name = "system", .offset = 4096 + 100,
	.length = 3 * 4096 + 17,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, heap_system_1m) {
	.exp = REAL_HEAP_SYSTEM, .exp_name = "system", .offset = 8192, .length = 1 << 20,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, vgem_page) {
	.exp = REAL_VGEM, .exp_name = "drm", .offset = 0, .length = 4096,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, vgem_odd) {
	.exp = REAL_VGEM, .exp_name = "drm", .offset = 4096 + 100,
	.length = 3 * 4096 + 17,
};

FIXTURE_VARIANT_ADD(dmabuf_mr_real, vgem_1m) {
	.exp = REAL_VGEM, .exp_name = "drm", .offset = 8192, .length = 1 << 20,
};

static int udmabuf_new(struct __test_metadata *_metadata, size_t size,
		       int *memfd)
{
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = size };
	int dev, fd;

	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -1;
	*memfd = memfd_create("dmabuf_mr", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (*memfd < 0 || ftruncate(*memfd, size) ||
	    fcntl(*memfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		close(dev);
		return -1;
	}
	c.memfd = *memfd;
	fd = ioctl(dev, UDMABUF_CREATE, &c);
	close(dev);
	return fd;
}

static int heap_new(size_t size)
{
	struct dma_heap_allocation_data a = {
		.len = size, .fd_flags = O_RDWR | O_CLOEXEC,
	};
	int heap = open("/dev/dma_heap/system", O_RDWR | O_CLOEXEC);

	if (heap < 0)
		return -1;
	if (ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &a)) {
		close(heap);
		return -1;
	}
	close(heap);
	return a.fd;
}

/* The first DRM node whose driver is vgem, open; -1 if there is none. */
static int vgem_open(void)
{
	char path[64], name[16];
	int i, fd;

	for (i = 0; i < 16; i++) {
		struct drm_version v = { .name = name, .name_len = sizeof(name) - 1 };

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(name, 0, sizeof(name));
		if (!ioctl(fd, DRM_IOCTL_VERSION, &v) && !strcmp(name, "vgem"))
			return fd;
		close(fd);
	}
	return -1;
}

static int vgem_new(size_t size, int *drm)
{
	struct drm_mode_create_dumb d = {
		.width = size / 4, .height = 1, .bpp = 32,
	};
	struct drm_prime_handle h = { .flags = DRM_CLOEXEC | DRM_RDWR };

	*drm = vgem_open();
	if (*drm < 0)
		return -1;
	if (ioctl(*drm, DRM_IOCTL_MODE_CREATE_DUMB, &d))
		return -1;
	h.handle = d.handle;
	if (ioctl(*drm, DRM_IOCTL_PRIME_HANDLE_TO_FD, &h))
		return -1;
	return h.fd;
}

/*
 * The attachments of the dma-buf with inode @ino, as debugfs' bufinfo
 * lists them: their count, -1 when the buffer is not listed (gone), -2
 * when bufinfo cannot be read. @exp_name must match the exporter's.
 */
static int bufinfo_attachments(unsigned long ino, const char *exp_name)
{
	FILE *f = fopen("/sys/kernel/debug/dma_buf/bufinfo", "r");
	char line[512], exp[64];
	unsigned long size, flags, mode, count, i;
	int n = -1, found = 0;

	if (!f)
		return -2;
	while (fgets(line, sizeof(line), f)) {
		if (found && sscanf(line, "Total %d devices attached", &n) == 1)
			break;
		if (sscanf(line, "%lu\t%lx\t%lx\t%lu\t%63s\t%lu", &size, &flags,
			   &mode, &count, exp, &i) == 6 && i == ino)
			found = !strcmp(exp, exp_name);
	}
	fclose(f);
	return found ? n : -1;
}

FIXTURE_SETUP(dmabuf_mr_real)
{
	struct stat st;

	self->fd = -1;
	self->owner = -1;
	self->map = MAP_FAILED;
	mr_ctx_setup(_metadata, &self->mock, &self->c, false, 4 * page_size);
	if (_metadata->exit_code)
		return;
	self->size = round_up_page(variant->offset + variant->length) +
		     page_size;
	switch (variant->exp) {
	case REAL_UDMABUF:
		self->fd = udmabuf_new(_metadata, self->size, &self->owner);
		if (self->fd < 0 && errno == ENOENT)
			SKIP(return, "no /dev/udmabuf (CONFIG_UDMABUF)");
		break;
	case REAL_HEAP_SYSTEM:
		self->fd = heap_new(self->size);
		if (self->fd < 0 && errno == ENOENT)
			SKIP(return, "no /dev/dma_heap/system (CONFIG_DMABUF_HEAPS_SYSTEM)");
		break;
	case REAL_VGEM:
		if (system("modprobe vgem >/dev/null 2>&1"))
			SKIP(return, "no vgem module (CONFIG_DRM_VGEM)");
		self->fd = vgem_new(self->size, &self->owner);
		if (self->owner < 0)
			SKIP(return, "no vgem DRM device");
		break;
	}
	ASSERT_LE(0, self->fd) TH_LOG("%s: %s", variant->exp_name,
				      strerror(errno));
	self->map = mmap(NULL, self->size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 self->fd, 0);
	ASSERT_NE(MAP_FAILED, self->map);
	ASSERT_EQ(0, fstat(self->fd, &st));
	/* Nobody has attached yet. */
	ASSERT_EQ(0, bufinfo_attachments(st.st_ino, variant->exp_name))
	TH_LOG("bufinfo: %s buffer %lu", variant->exp_name,
	       (unsigned long)st.st_ino);
}

FIXTURE_TEARDOWN(dmabuf_mr_real)
{
	if (self->map != MAP_FAILED)
		munmap(self->map, self->size);
	if (self->fd >= 0)
		close(self->fd);
	if (self->owner >= 0)
		close(self->owner);
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

/* CPU access through the exporter's own mapping, bracketed. */
static void real_sync(struct __test_metadata *_metadata, int fd, bool start)
{
	struct dma_buf_sync sync = {
		.flags = (start ? DMA_BUF_SYNC_START : DMA_BUF_SYNC_END) |
			 DMA_BUF_SYNC_RW,
	};

	ASSERT_EQ(0, ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync));
}

/*
 * WRITE into the MR and READ it back from the peer, then the exporter's
 * view: every byte in range is the peer's and none outside it changed;
 * then the other way. Dereg and close let go of the buffer entirely.
 */
TEST_F_TIMEOUT(dmabuf_mr_real, write_read, 120)
{
	struct plain_mr *b = &self->c.plain[self->c.req];
	const uint64_t off = variant->offset, len = variant->length;
	struct dmabuf_mr *m = &self->c.dmr[0];
	uint64_t done, n, chunk = 4 * page_size - 2 * CANARY;
	uint8_t *expect;
	struct stat st;

	ASSERT_EQ(0, fstat(self->fd, &st));
	expect = malloc(self->size);
	ASSERT_NE(NULL, expect);
	real_sync(_metadata, self->fd, true);
	fill(self->map, self->size, 0x21);
	memcpy(expect, self->map, self->size);
	real_sync(_metadata, self->fd, false);

	ASSERT_EQ(0, _test_reg_dmabuf_mr(&self->c.p.s[0], self->fd, off, len,
					 DMABUF_MR_IOVA + off,
					 DMABUF_MR_ACCESS, m))
	TH_LOG("registering %s at %llu+%llu: %s", variant->exp_name,
	       (unsigned long long)off, (unsigned long long)len,
	       strerror(errno));
	EXPECT_EQ(1, bufinfo_attachments(st.st_ino, variant->exp_name));

	/* The peer writes the MR, a chunk at a time, and reads it back. */
	for (done = 0; done < len; done += n) {
		n = len - done < chunk ? len - done : chunk;
		fill(b->buf + CANARY, n, 0x43 + done);
		memcpy(expect + off + done, b->buf + CANARY, n);
		test_cmd_remote(IBV_WR_RDMA_WRITE, m, done, n);
		memset(b->buf + CANARY, 0, n);
		test_cmd_remote(IBV_WR_RDMA_READ, m, done, n);
		test_same(expect + off + done, b->buf + CANARY, n,
			  "READ after WRITE");
	}
	real_sync(_metadata, self->fd, true);
	test_same(expect, self->map, self->size, "the exporter's view");
	/* The exporter writes, the peer reads. */
	fill(self->map + off, len, 0x65);
	memcpy(expect + off, self->map + off, len);
	real_sync(_metadata, self->fd, false);
	for (done = 0; done < len; done += n) {
		n = len - done < chunk ? len - done : chunk;
		test_cmd_remote(IBV_WR_RDMA_READ, m, done, n);
		test_same(expect + off + done, b->buf + CANARY, n,
			  "READ of what the exporter wrote");
	}

	test_cmd_dereg(m);
	EXPECT_EQ(0, bufinfo_attachments(st.st_ino, variant->exp_name));
	munmap(self->map, self->size);
	self->map = MAP_FAILED;
	close(self->fd);
	self->fd = -1;
	/* vgem's GEM object holds its dma-buf until the DRM file closes. */
	if (self->owner >= 0)
		close(self->owner);
	self->owner = -1;
	/* Nothing holds the buffer any more: it is gone. */
	EXPECT_EQ(-1, bufinfo_attachments(st.st_ino, variant->exp_name));
	free(expect);
}

/*
 * A fence on the buffer holds nothing of rxe's. rxe begins CPU access once,
 * at registration, so no packet waits for the buffer's implicit fences:
 * with an unsignalled WRITE fence on it, the peer's WRITE and READ of the
 * MR complete, with the data, and the MR deregisters, all while the fence
 * is still pending. Then the fence signals and nothing of the MR is left.
 *
 * Two fences: vgem's own (DRM_IOCTL_VGEM_FENCE_ATTACH), on a vgem buffer;
 * vgem signals it by itself after 10 s, so seeing it signalled means that
 * much time went by. And a sw_sync fence (CONFIG_SW_SYNC, debugfs) that
 * only the test signals, imported into a mock buffer with
 * DMA_BUF_IOCTL_IMPORT_SYNC_FILE as any process with the buffer may.
 */
enum fence_kind { FENCE_VGEM, FENCE_SW_SYNC };

struct sw_sync_create_fence_data {
	uint32_t value;
	char name[32];
	int32_t fence;
};

#define SW_SYNC_IOC_CREATE_FENCE _IOWR('W', 0, struct sw_sync_create_fence_data)
#define SW_SYNC_IOC_INC _IOW('W', 1, uint32_t)
#define SW_SYNC_PATH "/sys/kernel/debug/sync/sw_sync"

FIXTURE(dmabuf_mr_fence) {
	int mock;
	struct mr_ctx c;
	int fd;			/* the dma-buf */
	int drm;		/* vgem: the DRM file that owns it */
	uint32_t handle;	/* vgem: its GEM handle */
	uint32_t vgem_fence;	/* vgem: the fence, 0 if none */
	int timeline;		/* sw_sync: the timeline, -1 if none */
	bool pending;		/* a fence to signal in teardown */
};

FIXTURE_VARIANT(dmabuf_mr_fence) {
	enum fence_kind kind;
	const char *exp_name;	/* as debugfs' bufinfo names the exporter */
};

FIXTURE_VARIANT_ADD(dmabuf_mr_fence, vgem) {
	.kind = FENCE_VGEM, .exp_name = "drm",
};

FIXTURE_VARIANT_ADD(dmabuf_mr_fence, sw_sync_mock) {
	.kind = FENCE_SW_SYNC, .exp_name = "dmabuf_mock",
};

/*
 * Signal the fence, if *@pending: on the sw_sync @timeline, or vgem's
 * @fence on @drm. 0 or -1 with errno.
 */
static int fence_signal(int timeline, int drm, uint32_t fence, bool *pending)
{
	struct drm_vgem_fence_signal sig = { .fence = fence };
	uint32_t one = 1;
	int ret;

	if (!*pending)
		return 0;
	if (timeline >= 0)
		ret = ioctl(timeline, SW_SYNC_IOC_INC, &one);
	else
		ret = ioctl(drm, DRM_IOCTL_VGEM_FENCE_SIGNAL, &sig);
	*pending = false;
	return ret;
}

#define test_fence_signal()                                                  \
	fence_signal(self->timeline, self->drm, self->vgem_fence,            \
		     &self->pending)

FIXTURE_SETUP(dmabuf_mr_fence)
{
	struct drm_prime_handle h = {};

	self->fd = -1;
	self->drm = -1;
	self->timeline = -1;
	mr_ctx_setup(_metadata, &self->mock, &self->c, false, 4 * page_size);
	if (_metadata->exit_code)
		return;
	if (variant->kind == FENCE_VGEM) {
		if (system("modprobe vgem >/dev/null 2>&1"))
			SKIP(return, "no vgem module (CONFIG_DRM_VGEM)");
		self->fd = vgem_new(2 * page_size, &self->drm);
		if (self->drm < 0)
			SKIP(return, "no vgem DRM device");
		ASSERT_LE(0, self->fd) TH_LOG("vgem: %s", strerror(errno));
		h.fd = self->fd;
		ASSERT_EQ(0, ioctl(self->drm, DRM_IOCTL_PRIME_FD_TO_HANDLE, &h));
		self->handle = h.handle;
		return;
	}
	self->timeline = open(SW_SYNC_PATH, O_RDWR | O_CLOEXEC);
	if (self->timeline < 0 && errno == ENOENT)
		SKIP(return, "no %s (CONFIG_SW_SYNC)", SW_SYNC_PATH);
	ASSERT_LE(0, self->timeline) TH_LOG("%s: %s", SW_SYNC_PATH,
					    strerror(errno));
	self->fd = dup(test_new_buf(2 * page_size, 0));
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(dmabuf_mr_fence)
{
	/* First, whatever happened: a task may be waiting for it */
	EXPECT_EQ(0, test_fence_signal())
	TH_LOG("signalling: %s", strerror(errno));
	if (self->timeline >= 0)
		close(self->timeline);
	if (self->fd >= 0)
		close(self->fd);
	if (self->drm >= 0)
		close(self->drm);
	mr_ctx_teardown(_metadata, self->mock, &self->c);
}

/* Whether the dma-buf still has a WRITE fence that has not signalled. */
static bool write_fence_pending(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

#define test_fence_pending(what)                                             \
	({                                                                   \
		ASSERT_TRUE(write_fence_pending(self->fd))                   \
		TH_LOG("the fence signalled before %s was done, %llu ms "   \
		       "after it was attached%s", what,                      \
		       (unsigned long long)(now_ms() - attached),            \
		       variant->kind == FENCE_VGEM ?                         \
		       " (vgem signals it after 10 s)" : "");                \
	})

TEST_F_TIMEOUT(dmabuf_mr_fence, write_fence_holds_nothing, 120)
{
	struct plain_mr *b = &self->c.plain[self->c.req];
	struct dmabuf_mr *m = &self->c.dmr[0];
	uint64_t attached;
	struct stat st;

	ASSERT_EQ(0, fstat(self->fd, &st));
	test_cmd_reg(m, self->fd, 0, page_size);
	EXPECT_EQ(1, bufinfo_attachments(st.st_ino, variant->exp_name));

	if (variant->kind == FENCE_VGEM) {
		struct drm_vgem_fence_attach a = {
			.handle = self->handle, .flags = VGEM_FENCE_WRITE,
		};

		ASSERT_EQ(0, ioctl(self->drm, DRM_IOCTL_VGEM_FENCE_ATTACH, &a))
		TH_LOG("VGEM_FENCE_ATTACH: %s", strerror(errno));
		self->vgem_fence = a.out_fence;
	} else {
		struct sw_sync_create_fence_data f = { .value = 1 };
		struct dma_buf_import_sync_file imp = {
			.flags = DMA_BUF_SYNC_WRITE,
		};

		strcpy(f.name, "dmabuf_mr_fence");
		ASSERT_EQ(0, ioctl(self->timeline, SW_SYNC_IOC_CREATE_FENCE, &f))
		TH_LOG("SW_SYNC_IOC_CREATE_FENCE: %s", strerror(errno));
		imp.fd = f.fence;
		ASSERT_EQ(0, ioctl(self->fd, DMA_BUF_IOCTL_IMPORT_SYNC_FILE,
				   &imp))
		TH_LOG("DMA_BUF_IOCTL_IMPORT_SYNC_FILE: %s", strerror(errno));
		close(f.fence);
	}
	self->pending = true;
	attached = now_ms();
	test_fence_pending("anything");

	memset(b->buf + CANARY, 0x5c, page_size);
	test_cmd_remote(IBV_WR_RDMA_WRITE, m, 0, page_size);
	test_fence_pending("the WRITE");
	memset(b->buf + CANARY, 0, page_size);
	test_cmd_remote(IBV_WR_RDMA_READ, m, 0, page_size);
	test_fence_pending("the READ");
	test_all(0x5c, b->buf + CANARY, page_size, "READ of the WRITE");

	test_cmd_dereg(m);
	test_fence_pending("the dereg");
	EXPECT_EQ(0, bufinfo_attachments(st.st_ino, variant->exp_name));

	ASSERT_EQ(0, test_fence_signal())
	TH_LOG("signalling: %s", strerror(errno));
	EXPECT_FALSE(write_fence_pending(self->fd));
	EXPECT_EQ(0, bufinfo_attachments(st.st_ino, variant->exp_name));
}

static void env_probe_mr(int mock)
{
	struct dmabuf_mr_probe p = {};

	dmabuf_mr_probe(mock, &env.dev, &p, NULL);
	env.path = p.path;
	env.pinned = p.pinned;
	env.cpu = p.cpu;
	snprintf(env.skip, sizeof(env.skip), "%s", p.skip);
	snprintf(env.fail, sizeof(env.fail), "%s", p.fail);
}

static void env_probe(void)
{
	const char *peer = getenv("RDMA_PEER_DEV");
	char why[200];
	int mock;

	mock = open(DMABUF_MOCK_PATH, O_RDWR);
	if (mock < 0) {
		snprintf(env.skip, sizeof(env.skip),
			 "no %s (CONFIG_DMABUF_MOCK_EXPORTER): %s",
			 DMABUF_MOCK_PATH, strerror(errno));
		return;
	}
	if (dmabuf_mr_env_dev(&env.dev, env.skip, env.fail, sizeof(env.skip)))
		goto out;
	if (peer && rdma_dev_resolve(peer, -1, &env.peer, why, sizeof(why)))
		snprintf(env.peer_fail, sizeof(env.peer_fail), "%s", why);
	env_probe_mr(mock);
out:
	close(mock);
}

/*
 * kselftest_harness passes a run in which every test skipped; say "skip"
 * when the whole environment is missing (no device, no mock), as other
 * kselftests do, after letting each test report its own skip.
 */
int main(int argc, char **argv)
{
	int status;
	pid_t pid;

	page_size = sysconf(_SC_PAGESIZE);
	env.logged = mmap(NULL, sizeof(*env.logged), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (env.logged == MAP_FAILED)
		return KSFT_FAIL;
	env_probe();
	if (!env.skip[0])
		return test_harness_run(argc, argv);

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return KSFT_FAIL;
	if (!pid)
		return test_harness_run(argc, argv);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return KSFT_FAIL;
	return WEXITSTATUS(status) == KSFT_PASS ? KSFT_SKIP :
						   WEXITSTATUS(status);
}
