// SPDX-License-Identifier: GPL-2.0
/*
 * dma-buf MRs under fault injection, and torn down while they are live.
 *
 * Fault injection (needs CONFIG_FAULT_INJECTION, FAILSLAB, FAIL_PAGE_ALLOC
 * and FAULT_INJECTION_DEBUG_FS; skips without them): register, revoke and
 * deregister a dma-buf MR with the n-th allocation of the call failing,
 * for n = 1, 2, ... until a call runs without reaching the n-th one. A
 * call that fails must fail with ENOMEM and leave nothing behind: no
 * attachment, pin, map or vmap at the exporter, no MR in the nldev dump,
 * no reference on the PD; the same call without injection must then work.
 * A call that succeeds although an allocation failed (a caller with a
 * fallback) must have done all its work. REVOKE cannot fail in the
 * importer (the callback is void), so whatever happens there the MR must
 * end up revoked with nothing pinned or vmapped.
 *
 * Teardown with live MRs: dmabuf_mock cannot be unloaded while an MR holds
 * one of its dma-bufs and unloads once they are gone; removing the rxe
 * device under traffic revokes and releases every MR (the uverbs
 * disassociate path); the dma-buf fd and the verbs context can be closed
 * in any order.
 *
 * MRs are registered with the raw UVERBS_METHOD_REG_DMABUF_MR ioctl, so
 * that the injection window is exactly one system call (libibverbs may
 * allocate, and fault, around its own). RDMA_DEV names the device (else
 * the first one); RDMA_SCRATCH_NETDEV a network device on which the device
 * removal test may create, and remove, an rxe device of its own.
 * rxe_dmabuf_mr_fail_nth.sh sets both up.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "dmabuf_mr_utils.h"

/* More than any path here needs; a sweep that reaches it fails. */
#define FAIL_NTH_MAX 2000
#define SCRATCH_PREFIX "rxe_fnth"

static size_t page_size;

static struct {
	struct rdma_dev_info dev;
	char skip[256];		/* every test skips with this */
	char nth_skip[256];	/* the fail-nth tests skip with this */
} env;

/* failslab and fail_page_alloc knobs, and their values before we ran. */
static struct {
	const char *path;
	const char *value;
	char saved[32];
} fi_knobs[] = {
	/* GFP_KERNEL allocations, which is all of these paths, may fail. */
	{ "/sys/kernel/debug/failslab/ignore-gfp-wait", "N" },
	{ "/sys/kernel/debug/fail_page_alloc/ignore-gfp-wait", "N" },
	{ "/sys/kernel/debug/fail_page_alloc/ignore-gfp-highmem", "N" },
	/* One injected failure per call: keep the kernel log readable. */
	{ "/sys/kernel/debug/failslab/verbose", "0" },
	{ "/sys/kernel/debug/fail_page_alloc/verbose", "0" },
};

static int read_str(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static void fi_restore(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(fi_knobs); i++)
		if (fi_knobs[i].saved[0])
			write_str(fi_knobs[i].path, fi_knobs[i].saved);
}

static void fi_setup(void)
{
	unsigned int i;

	if (access("/proc/thread-self/fail-nth", R_OK | W_OK)) {
		snprintf(env.nth_skip, sizeof(env.nth_skip),
			 "no /proc/thread-self/fail-nth (CONFIG_FAULT_INJECTION)");
		return;
	}
	for (i = 0; i < ARRAY_SIZE(fi_knobs); i++) {
		if (read_str(fi_knobs[i].path, fi_knobs[i].saved,
			     sizeof(fi_knobs[i].saved)) ||
		    write_str(fi_knobs[i].path, fi_knobs[i].value)) {
			snprintf(env.nth_skip, sizeof(env.nth_skip),
				 "cannot set %s (CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC, CONFIG_FAULT_INJECTION_DEBUG_FS, debugfs mounted?)",
				 fi_knobs[i].path);
			fi_knobs[i].saved[0] = 0;
			return;
		}
	}
	atexit(fi_restore);
}

/* Fail the @n-th fault injection point this thread reaches from now on. */
static int fail_nth_arm(int fd, unsigned int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%u", n);

	return pwrite(fd, buf, len, 0) == len ? 0 : -1;
}

/* Disarm: 1 when the failure was injected, 0 when not, -1 on error. */
static int fail_nth_disarm(int fd)
{
	char buf[16] = "";
	ssize_t n;

	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0 || pwrite(fd, "0", 1, 0) != 1)
		return -1;
	return strtoul(buf, NULL, 10) == 0;
}

static int nldev_mr_count_cb(struct nlmsghdr *nlh, void *arg)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX], *table, *entry;
	int *count = arg, rem;

	nldev_parse(tb, NLMSG_DATA(nlh), nlh->nlmsg_len - NLMSG_HDRLEN);
	table = tb[RDMA_NLDEV_ATTR_RES_MR];
	if (!table)
		return 0;
	entry = nla_payload(table);
	rem = nla_payload_len(table);
	while (rem >= NLA_HDRLEN && entry->nla_len >= NLA_HDRLEN &&
	       entry->nla_len <= rem) {
		(*count)++;
		rem -= NLA_ALIGN(entry->nla_len);
		entry = (void *)entry + NLA_ALIGN(entry->nla_len);
	}
	return 0;
}

/* How many MRs device @dev_index has, as `rdma resource show mr` lists. */
static int nldev_mr_count(uint32_t dev_index)
{
	int count = 0;

	if (nldev_request(RDMA_NLDEV_CMD_RES_MR_GET, dev_index,
			  nldev_mr_count_cb, &count))
		return -1;
	return count;
}

/* Memory under an ordinary MR: the other end of the loopback transfers. */
struct plain_mr {
	uint8_t *buf;
	size_t length;
	struct ibv_mr *mr;
};

static int plain_alloc(struct plain_mr *b, struct ibv_pd *pd, size_t length)
{
	b->length = length;
	if (posix_memalign((void **)&b->buf, page_size, length))
		return -1;
	memset(b->buf, 0, length);
	b->mr = ibv_reg_mr(pd, b->buf, length, DMABUF_MR_ACCESS);
	return b->mr ? 0 : -1;
}

static void plain_free(struct plain_mr *b)
{
	if (b->mr)
		ibv_dereg_mr(b->mr);
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

/* Post @op from @l to @raddr/@rkey on @s and wait: the completion status. */
static int rdma_op(struct rdma_side *s, enum ibv_wr_opcode op,
		   struct rdma_sge l, uint64_t raddr, uint32_t rkey,
		   enum ibv_wc_status *status)
{
	struct ibv_wc wc;

	errno = rdma_post(s, op, l, raddr, rkey, 0, 0, op);
	if (errno || rdma_poll(s->cq, &wc, DMABUF_MR_TIMEOUT_MS))
		return -1;
	*status = wc.status;
	return 0;
}

/*
 * Loopback on RDMA_DEV: side 0 owns the dma-buf MRs, side 1 shares its
 * context and PD and posts to them. @mock is open for the whole test.
 */
struct loop {
	int mock;
	struct dmabuf_mock_stats before;
	uint32_t dev_index;
	int mrs_before;		/* MRs of the device before the test */
	struct rdma_pair p;
	struct plain_mr plain;
	struct dmabuf_mr m;
	int fd;
	int nth;		/* /proc/thread-self/fail-nth */
};

static void loop_setup(struct __test_metadata *_metadata, struct loop *l,
		       const struct rdma_dev_info *d, bool fail_nth)
{
	l->mock = -1;
	l->fd = -1;
	l->nth = -1;
	if (env.skip[0])
		SKIP(return, "%s", env.skip);
	if (fail_nth && env.nth_skip[0])
		SKIP(return, "%s", env.nth_skip);
	l->mock = open(DMABUF_MOCK_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, l->mock);
	ASSERT_EQ(0, _test_cmd_stats(l->mock, &l->before));
	l->dev_index = nldev_dev_index(d->name);
	ASSERT_NE(UINT32_MAX, l->dev_index)
	TH_LOG("no nldev index for %s: %s", d->name, strerror(errno));
	ASSERT_EQ(0, rdma_side_open(&l->p.s[0], d))
	TH_LOG("%s: %s", d->name, strerror(errno));
	l->p.s[1] = l->p.s[0];
	l->p.s[1].shared = true;
	ASSERT_EQ(0, rdma_pair_connect(&l->p))
	TH_LOG("connecting RC QPs: %s", strerror(errno));
	ASSERT_EQ(0, plain_alloc(&l->plain, l->p.s[0].pd, 2 * page_size));
	l->mrs_before = nldev_mr_count(l->dev_index);
	ASSERT_LE(0, l->mrs_before);
	/*
	 * Vmapped by the importer, on registration: an injected failure
	 * inside the exporter's vmap() must come back as ENOMEM, with no
	 * warning from dma_buf_vmap().
	 */
	ASSERT_EQ(0, _test_cmd_create(l->mock, 4 * page_size, 0, &l->fd));
	if (fail_nth) {
		l->nth = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, l->nth);
	}
}

static void loop_teardown(struct __test_metadata *_metadata, struct loop *l)
{
	struct dmabuf_mock_stats after;
	int ret;

	if (l->nth >= 0)
		close(l->nth);
	EXPECT_EQ(0, _test_dereg_dmabuf_mr(&l->m));
	plain_free(&l->plain);
	if (l->p.s[0].pd) {
		/* A reference a failed call left on the PD shows here. */
		if (l->p.s[0].qp)
			ibv_destroy_qp(l->p.s[0].qp);
		if (l->p.s[1].qp)
			ibv_destroy_qp(l->p.s[1].qp);
		l->p.s[0].qp = NULL;
		l->p.s[1].qp = NULL;
		ret = ibv_dealloc_pd(l->p.s[0].pd);
		EXPECT_EQ(0, ret) TH_LOG("dealloc PD: %s", strerror(ret));
		if (!ret)
			l->p.s[0].pd = NULL;
	}
	rdma_side_close(&l->p.s[1]);
	rdma_side_close(&l->p.s[0]);
	if (l->fd >= 0)
		close(l->fd);
	if (l->mock < 0)
		return;
	ASSERT_EQ(0, _test_cmd_stats(l->mock, &after));
	EXPECT_EQ(l->before.buffers, after.buffers);
	EXPECT_EQ(l->before.pages, after.pages);
	close(l->mock);
}

/*
 * As dmabuf_mr.c's: assert on one command or one piece of state. They
 * work on l, the struct loop of the test or helper they are used in.
 */
#define test_cmd_reg()                                                      \
	({                                                                  \
		ASSERT_EQ(0, _test_reg_dmabuf_mr(&l->p.s[0], l->fd, 0,      \
						 4 * page_size,             \
						 DMABUF_MR_IOVA,            \
						 DMABUF_MR_ACCESS, &l->m))  \
		TH_LOG("registering a dma-buf MR: %s", strerror(errno));    \
	})

#define test_cmd_dereg()                                                    \
	({                                                                  \
		ASSERT_EQ(0, _test_dereg_dmabuf_mr(&l->m))                  \
		TH_LOG("deregistering a dma-buf MR: %s", strerror(errno));  \
	})

/* The exporter's counts for the test's buffer. */
#define test_mock_counts(attach, pin, vmap)                                 \
	({                                                                  \
		struct dmabuf_mock_query __q;                               \
		ASSERT_EQ(0, _test_cmd_query(l->mock, l->fd, 0, &__q));     \
		EXPECT_EQ((attach), __q.attachments);                       \
		EXPECT_EQ((pin), __q.pins);                                 \
		EXPECT_EQ(0U, __q.maps);                                    \
		EXPECT_EQ((vmap), __q.vmaps);                               \
	})

/* One counter (or the state) of the test's buffer. */
#define test_mock_eq(field, value)                                          \
	({                                                                  \
		struct dmabuf_mock_query __q;                               \
		ASSERT_EQ(0, _test_cmd_query(l->mock, l->fd, 0, &__q));     \
		EXPECT_EQ((uint64_t)(value), __q.field);                    \
	})

/* The MR as nldev shows it: @_found entries, @_revoked if there is one. */
#define test_nldev_mr(_found, _revoked)                                     \
	({                                                                  \
		struct nldev_mr __nl;                                       \
		ASSERT_EQ(0, nldev_mr_get(l->dev_index, l->m.lkey,          \
					  l->m.rkey, &__nl));               \
		ASSERT_EQ((_found), __nl.found);                            \
		if (__nl.found) {                                           \
			EXPECT_EQ(1, __nl.dmabuf);                          \
			EXPECT_EQ((_revoked), __nl.revoked);                \
		}                                                           \
	})

/* The device has @extra MRs more than before the test. */
#define test_mr_count(extra) \
	EXPECT_EQ(l->mrs_before + (extra), nldev_mr_count(l->dev_index))

/* Data goes through the MR: WRITE a page into it, READ it back. */
static void check_mr_data(struct __test_metadata *_metadata, struct loop *l,
			  struct dmabuf_mr *m)
{
	struct rdma_sge src = { (uintptr_t)l->plain.buf, page_size,
				l->plain.mr->lkey };
	struct rdma_sge dst = { src.addr + page_size, page_size, src.lkey };
	enum ibv_wc_status st;
	size_t i;

	for (i = 0; i < page_size; i++)
		l->plain.buf[i] = i * 7 + m->lkey;
	memset(l->plain.buf + page_size, 0, page_size);
	ASSERT_EQ(0, rdma_op(&l->p.s[1], IBV_WR_RDMA_WRITE, src,
			     m->iova + m->length - page_size, m->rkey, &st));
	ASSERT_EQ(IBV_WC_SUCCESS, st);
	ASSERT_EQ(0, rdma_op(&l->p.s[1], IBV_WR_RDMA_READ, dst,
			     m->iova + m->length - page_size, m->rkey, &st));
	ASSERT_EQ(IBV_WC_SUCCESS, st);
	EXPECT_EQ(0, memcmp(l->plain.buf, l->plain.buf + page_size,
			    page_size));
}

/* A live MR: the exporter pins and vmaps once, and data goes through. */
static void check_mr_works(struct __test_metadata *_metadata, struct loop *l)
{
	test_mock_counts(1U, 1U, 1U);
	test_nldev_mr(1, 0);
	check_mr_data(_metadata, l, &l->m);
}

/* A revoked MR: nothing pinned or vmapped, its rkey gives access errors. */
static void check_mr_revoked(struct __test_metadata *_metadata,
			     struct loop *l)
{
	struct rdma_sge src = { (uintptr_t)l->plain.buf, 64,
				l->plain.mr->lkey };
	struct dmabuf_mock_query q;
	enum ibv_wc_status st;

	ASSERT_EQ(0, _test_cmd_query(l->mock, l->fd, 0, &q));
	EXPECT_EQ((__u32)DMABUF_MOCK_STATE_REVOKED, q.state);
	test_mock_counts(1U, 0U, 0U);
	test_nldev_mr(1, 1);
	ASSERT_EQ(0, rdma_op(&l->p.s[1], IBV_WR_RDMA_WRITE, src, l->m.iova,
			     l->m.rkey, &st));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st);
	/* The error moved the QPs to the error state: new ones. */
	ASSERT_EQ(0, rdma_pair_connect(&l->p));
}

/* What a sweep saw, for the log. */
struct sweep {
	const char *what;
	unsigned int failed;	/* calls that failed, all with ENOMEM */
	unsigned int absorbed;	/* calls that succeeded despite a failure */
	unsigned int points;	/* injection points reached */
};

static void sweep_log(const struct sweep *s)
{
	ksft_print_msg("%s: %u injection points, %u calls failed with ENOMEM, %u succeeded\n",
		       s->what, s->points, s->failed, s->absorbed);
}

FIXTURE(fail_nth) {
	struct loop l;
};

FIXTURE_SETUP(fail_nth)
{
	loop_setup(_metadata, &self->l, &env.dev, true);
}

FIXTURE_TEARDOWN(fail_nth)
{
	loop_teardown(_metadata, &self->l);
}

TEST_F_TIMEOUT(fail_nth, reg_dmabuf_mr, 600)
{
	struct sweep s = { .what = "reg_dmabuf_mr" };
	struct loop *l = &self->l;
	unsigned int n;
	int ret, err, hit;

	for (n = 1; n < FAIL_NTH_MAX; n++) {
		ASSERT_EQ(0, fail_nth_arm(l->nth, n));
		ret = _test_reg_dmabuf_mr(&l->p.s[0], l->fd, 0, 4 * page_size,
					  DMABUF_MR_IOVA, DMABUF_MR_ACCESS,
					  &l->m);
		err = errno;
		hit = fail_nth_disarm(l->nth);
		ASSERT_LE(0, hit);
		if (!hit) {
			ASSERT_EQ(0, ret) TH_LOG("n=%u: %s", n, strerror(err));
			check_mr_works(_metadata, l);
			break;
		}
		s.points++;
		if (!ret) {
			s.absorbed++;
			check_mr_works(_metadata, l);
			test_cmd_dereg();
			continue;
		}
		s.failed++;
		EXPECT_EQ(ENOMEM, err) TH_LOG("n=%u: %s", n, strerror(err));
		test_mock_counts(0U, 0U, 0U);
		test_mr_count(0);
		/* Not hit again: the same call, uninjected, works. */
		test_cmd_reg();
		check_mr_works(_metadata, l);
		test_cmd_dereg();
		test_mock_counts(0U, 0U, 0U);
	}
	ASSERT_GT(FAIL_NTH_MAX, n);
	EXPECT_LT(0, s.failed);
	sweep_log(&s);
}

/*
 * The exporter's revoke with an MR attached. The importer cannot fail it;
 * the mock fails only before it has touched anything.
 */
/*
 * The exporter's REVOKE, swapping the pages: the revoke itself cannot fail
 * in the importer, the swap's new pages are best effort (the old ones
 * stay when they cannot be had). Whatever fails, the MR ends up revoked
 * with nothing pinned or vmapped.
 */
TEST_F_TIMEOUT(fail_nth, revoke, 600)
{
	struct sweep s = { .what = "revoke" };
	struct loop *l = &self->l;
	struct dmabuf_mock_query q;
	unsigned int n;
	int ret, err, hit;

	for (n = 1; n < FAIL_NTH_MAX; n++) {
		ASSERT_EQ(0, _test_cmd_restore(l->mock, l->fd, 0));
		test_cmd_reg();
		ASSERT_EQ(0, _test_cmd_query(l->mock, l->fd, 0, &q));
		ASSERT_EQ(0, fail_nth_arm(l->nth, n));
		ret = _test_cmd_revoke(l->mock, l->fd, DMABUF_MOCK_REVOKE_SWAP,
				       DMABUF_MR_TIMEOUT_MS, NULL, 0);
		err = errno;
		hit = fail_nth_disarm(l->nth);
		ASSERT_LE(0, hit);
		if (hit)
			s.points++;
		if (ret) {
			ASSERT_EQ(1, hit) TH_LOG("n=%u: %s", n, strerror(err));
			s.failed++;
			EXPECT_EQ(ENOMEM, err) TH_LOG("n=%u: %s", n,
						      strerror(err));
			test_mock_eq(state, 0);
			check_mr_works(_metadata, l);
			ASSERT_EQ(0, _test_cmd_revoke(l->mock, l->fd, 0,
						      DMABUF_MR_TIMEOUT_MS,
						      NULL, 0));
		} else if (hit) {
			s.absorbed++;
		}
		test_mock_eq(invalidates, q.invalidates + 1);
		check_mr_revoked(_metadata, l);
		test_cmd_dereg();
		test_mock_counts(0U, 0U, 0U);
		if (!hit)
			break;
	}
	ASSERT_GT(FAIL_NTH_MAX, n);
	sweep_log(&s);
	/* A sweep that reaches no injection point tests nothing. */
	ASSERT_LT(0U, s.points);
}

/*
 * MR_DESTROY, armed to fail the first injection point it reaches: the
 * uverbs destroy, rxe's dereg, the umem's release and the dma-buf's detach
 * allocate nothing in the calling thread, so it reaches none, and a sweep
 * of it would test nothing. The dereg works, and nothing is left.
 */
TEST_F(fail_nth, dereg)
{
	struct loop *l = &self->l;
	int ret, err, hit;

	test_cmd_reg();
	check_mr_works(_metadata, l);
	ASSERT_EQ(0, fail_nth_arm(l->nth, 1));
	ret = _test_dereg_dmabuf_mr(&l->m);
	err = errno;
	hit = fail_nth_disarm(l->nth);
	ASSERT_EQ(0, ret) TH_LOG("dereg: %s", strerror(err));
	EXPECT_EQ(0, hit) TH_LOG("MR_DESTROY reached an injection point");
	test_mock_counts(0U, 0U, 0U);
	test_mr_count(0);
}

/* /sys/module/dmabuf_mock/refcnt, or -1 when there is none. */
static int mock_refcnt(void)
{
	char buf[32];

	if (read_str("/sys/module/dmabuf_mock/refcnt", buf, sizeof(buf)))
		return -1;
	return atoi(buf);
}

static bool mock_loaded(void)
{
	return !access("/sys/module/dmabuf_mock", F_OK);
}

static bool dir_empty(const char *path)
{
	struct dirent *e;
	bool empty = true;
	DIR *d = opendir(path);

	if (!d)
		return true;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			empty = false;
	closedir(d);
	return empty;
}

/*
 * Unloading the exporter while MRs hold its dma-bufs: each dma-buf holds
 * a reference on the module, so delete_module() refuses (EWOULDBLOCK, as
 * for any module in use) and the MRs keep working; once the MRs are gone
 * it unloads. The test loads the module again at the end.
 */
FIXTURE(mock_unload) {
	struct loop l;
	struct dmabuf_mr live, revoked;
	int fd2;
};

FIXTURE_SETUP(mock_unload)
{
	self->fd2 = -1;
	if (env.skip[0])
		SKIP(return, "%s", env.skip);
	if (access("/sys/module/dmabuf_mock/initstate", F_OK))
		SKIP(return, "dmabuf_mock is built in");
	if (!dir_empty("/sys/module/dmabuf_mock/holders"))
		SKIP(return, "another module uses dmabuf_mock");
	if (mock_refcnt()) {
		struct dmabuf_mock_stats st = {};
		int mock = open(DMABUF_MOCK_PATH, O_RDWR | O_CLOEXEC);

		/* Buffers still alive here are a leak, not a reason to skip. */
		ASSERT_LE(0, mock);
		ASSERT_EQ(0, _test_cmd_stats(mock, &st));
		close(mock);
		ASSERT_EQ(0, st.buffers)
		TH_LOG("dmabuf_mock still holds %llu buffers (%llu pages): leaked",
		       (unsigned long long)st.buffers,
		       (unsigned long long)st.pages);
		SKIP(return, "dmabuf_mock is open elsewhere (refcnt %d)",
		     mock_refcnt());
	}
	loop_setup(_metadata, &self->l, &env.dev, false);
}

FIXTURE_TEARDOWN(mock_unload)
{
	EXPECT_EQ(0, _test_dereg_dmabuf_mr(&self->live));
	EXPECT_EQ(0, _test_dereg_dmabuf_mr(&self->revoked));
	if (self->fd2 >= 0)
		close(self->fd2);
	if (mock_loaded()) {
		loop_teardown(_metadata, &self->l);
		return;
	}
	/* Unloaded: nothing of the mock's to compare with any more. */
	close(self->l.mock);
	self->l.mock = -1;
	loop_teardown(_metadata, &self->l);
	EXPECT_EQ(0, system("modprobe dmabuf_mock"));
	EXPECT_EQ(0, access(DMABUF_MOCK_PATH, F_OK));
}

TEST_F(mock_unload, refused_with_live_mrs)
{
	struct loop *l = &self->l;
	struct dmabuf_mock_stats st;

	ASSERT_EQ(0, _test_cmd_create(l->mock, page_size, 0, &self->fd2));
	ASSERT_EQ(0, _test_reg_dmabuf_mr(&l->p.s[0], l->fd, 0, 4 * page_size,
					 DMABUF_MR_IOVA, DMABUF_MR_ACCESS,
					 &self->live));
	ASSERT_EQ(0, _test_reg_dmabuf_mr(&l->p.s[0], self->fd2, 0, page_size,
					 DMABUF_MR_IOVA, DMABUF_MR_ACCESS,
					 &self->revoked));
	ASSERT_EQ(0, _test_cmd_revoke(l->mock, self->fd2, 0,
				      DMABUF_MR_TIMEOUT_MS, NULL, 0));
	/* Only the MRs hold the module now: one reference per dma-buf. */
	close(self->fd2);
	self->fd2 = -1;
	close(l->fd);
	l->fd = -1;
	close(l->mock);
	l->mock = -1;
	EXPECT_EQ(2, mock_refcnt());

	EXPECT_NE(0, system("modprobe -r dmabuf_mock 2>/dev/null"));
	EXPECT_EQ(-1, syscall(SYS_delete_module, "dmabuf_mock", O_NONBLOCK));
	EXPECT_EQ(EWOULDBLOCK, errno);
	ASSERT_TRUE(mock_loaded());

	check_mr_data(_metadata, l, &self->live);
	l->m = self->live;
	self->live.live = false;
	test_nldev_mr(1, 0);
	test_cmd_dereg();
	test_nldev_mr(0, 0);
	l->m = self->revoked;
	self->revoked.live = false;
	test_nldev_mr(1, 1);
	test_cmd_dereg();
	EXPECT_EQ(0, mock_refcnt());

	ASSERT_EQ(0, syscall(SYS_delete_module, "dmabuf_mock", O_NONBLOCK))
	TH_LOG("unloading dmabuf_mock without MRs: %s", strerror(errno));
	EXPECT_FALSE(mock_loaded());
	ASSERT_EQ(0, system("modprobe dmabuf_mock"));
	l->mock = open(DMABUF_MOCK_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, l->mock);
	ASSERT_EQ(0, _test_cmd_stats(l->mock, &st));
	EXPECT_EQ(0U, st.buffers);
	EXPECT_EQ(0U, st.pages);
	l->before = st;
}

/* RDMA WRITEs and READs through a dma-buf MR until the first error. */
struct traffic {
	struct rdma_side *s;
	struct rdma_sge l;
	uint64_t raddr;
	uint32_t rkey;
	unsigned long done;	/* operations completed successfully */
	int err;		/* errno of the post or poll that ended it */
	enum ibv_wc_status status;	/* else the status that ended it */
	bool stop;
};

static void *traffic_thread(void *arg)
{
	struct traffic *t = arg;
	enum ibv_wr_opcode op;
	struct ibv_wc wc;

	while (!__atomic_load_n(&t->stop, __ATOMIC_RELAXED)) {
		op = t->done & 1 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		t->err = rdma_post(t->s, op, t->l, t->raddr, t->rkey, 0, 0, op);
		if (t->err)
			break;
		/* No completion once the device is gone: do not wait long. */
		if (rdma_poll(t->s->cq, &wc, 2000)) {
			t->err = errno;
			break;
		}
		t->status = wc.status;
		if (wc.status != IBV_WC_SUCCESS)
			break;
		__atomic_add_fetch(&t->done, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int run(const char *fmt, ...)
{
	char cmd[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/*
 * Removing the rxe device (rdma link delete) while a process has dma-buf
 * MRs on it, one under traffic, one idle, one revoked: uverbs
 * disassociates the context and destroys every MR, so the exporter must
 * see no attachment, pin or vmap left as soon as the removal returns,
 * while the process still holds the dma-buf and the verbs context. After
 * that the verbs calls fail with EIO and closing everything works.
 */
FIXTURE(device_removal) {
	char name[IBV_SYSFS_NAME_MAX];
	struct rdma_dev_info dev;
	struct loop l;
	struct dmabuf_mr idle, revoked;
	int fd2;
};

FIXTURE_SETUP(device_removal)
{
	const char *netdev = getenv("RDMA_SCRATCH_NETDEV");
	char why[256] = "";
	int i;

	self->fd2 = -1;
	self->l.mock = -1;
	self->l.fd = -1;
	self->l.nth = -1;
	if (env.skip[0])
		SKIP(return, "%s", env.skip);
	if (!netdev)
		SKIP(return, "RDMA_SCRATCH_NETDEV not set: no rxe device to remove");
	snprintf(self->name, sizeof(self->name), SCRATCH_PREFIX "%d",
		 getpid());
	ASSERT_EQ(0, run("rdma link add %s type rxe netdev %s", self->name,
			 netdev));
	/* TCG is slow: up to 30 s for the port and its GID. */
	for (i = 0; i < 300; i++) {
		if (!rdma_dev_resolve(self->name, -1, &self->dev, why,
				      sizeof(why)))
			break;
		usleep(100000);
	}
	ASSERT_GT(300, i) TH_LOG("%s", why);
	loop_setup(_metadata, &self->l, &self->dev, false);
	ASSERT_EQ(0, _test_cmd_create(self->l.mock, page_size, 0, &self->fd2));
}

FIXTURE_TEARDOWN(device_removal)
{
	if (self->name[0] && nldev_dev_index(self->name) != UINT32_MAX)
		run("rdma link delete %s", self->name);
	self->idle.live = false;
	self->revoked.live = false;
	if (self->fd2 >= 0)
		close(self->fd2);
	loop_teardown(_metadata, &self->l);
}

TEST_F_TIMEOUT(device_removal, under_traffic, 120)
{
	struct loop *l = &self->l;
	struct traffic t = {
		.s = &l->p.s[1],
		.l = { (uintptr_t)l->plain.buf, page_size, l->plain.mr->lkey },
	};
	struct dmabuf_mock_query q;
	pthread_t thread;
	uint64_t start;

	test_cmd_reg();
	ASSERT_EQ(0, _test_reg_dmabuf_mr(&l->p.s[0], l->fd, 0, page_size,
					 DMABUF_MR_IOVA, DMABUF_MR_ACCESS,
					 &self->idle));
	ASSERT_EQ(0, _test_reg_dmabuf_mr(&l->p.s[0], self->fd2, 0, page_size,
					 DMABUF_MR_IOVA, DMABUF_MR_ACCESS,
					 &self->revoked));
	ASSERT_EQ(0, _test_cmd_revoke(l->mock, self->fd2, 0,
				      DMABUF_MR_TIMEOUT_MS, NULL, 0));
	test_mock_counts(2U, 2U, 1U);

	t.raddr = l->m.iova + page_size;
	t.rkey = l->m.rkey;
	ASSERT_EQ(0, pthread_create(&thread, NULL, traffic_thread, &t));
	start = now_ms();
	while (__atomic_load_n(&t.done, __ATOMIC_RELAXED) < 16 &&
	       now_ms() - start < DMABUF_MR_TIMEOUT_MS && !t.err &&
	       t.status == IBV_WC_SUCCESS)
		usleep(1000);
	EXPECT_LE(16, __atomic_load_n(&t.done, __ATOMIC_RELAXED));

	start = now_ms();
	EXPECT_EQ(0, run("rdma link delete %s", self->name));
	ksft_print_msg("rdma link delete: %llu ms, %lu operations before it\n",
		       (unsigned long long)(now_ms() - start),
		       __atomic_load_n(&t.done, __ATOMIC_RELAXED));
	__atomic_store_n(&t.stop, true, __ATOMIC_RELAXED);
	ASSERT_EQ(0, pthread_join(thread, NULL));
	ksft_print_msg("traffic ended with %s\n",
		       t.err ? strerror(t.err) : ibv_wc_status_str(t.status));
	EXPECT_EQ(UINT32_MAX, nldev_dev_index(self->name));

	/* Released by the removal, not by our close. */
	test_mock_counts(0U, 0U, 0U);
	ASSERT_EQ(0, _test_cmd_query(l->mock, self->fd2, 0, &q));
	EXPECT_EQ(0U, q.attachments);
	EXPECT_EQ(0U, q.pins);

	/*
	 * A disassociated context refuses every command with EIO but the
	 * destroys, which succeed so that user space can clean up
	 * (rdma_lookup_get_uobject()).
	 */
	EXPECT_EQ(NULL, ibv_alloc_pd(l->p.s[0].ctx));
	EXPECT_EQ(EIO, errno);
	EXPECT_EQ(0, _test_dereg_dmabuf_mr(&l->m))
	TH_LOG("dereg after removal: %s", strerror(errno));
	EXPECT_EQ(0, _test_dereg_dmabuf_mr(&self->idle));
	EXPECT_EQ(0, _test_dereg_dmabuf_mr(&self->revoked));
	EXPECT_EQ(NULL, rdma_open_by_name(self->name));
}

enum close_step { STEP_END, CLOSE_FD, DEREG, CLOSE_CTX, REVOKE };

/* Closing the dma-buf and the verbs context, MR still there, in order. */
FIXTURE(close_order) {
	struct loop l;
};

FIXTURE_VARIANT(close_order) {
	enum close_step steps[4];
};

FIXTURE_VARIANT_ADD(close_order, dereg_fd_ctx) {
	.steps = { DEREG, CLOSE_FD, CLOSE_CTX },
};

FIXTURE_VARIANT_ADD(close_order, fd_dereg_ctx) {
	.steps = { CLOSE_FD, DEREG, CLOSE_CTX },
};

FIXTURE_VARIANT_ADD(close_order, fd_ctx) {
	.steps = { CLOSE_FD, CLOSE_CTX },
};

FIXTURE_VARIANT_ADD(close_order, ctx_fd) {
	.steps = { CLOSE_CTX, CLOSE_FD },
};

FIXTURE_VARIANT_ADD(close_order, revoke_fd_ctx) {
	.steps = { REVOKE, CLOSE_FD, CLOSE_CTX },
};

FIXTURE_VARIANT_ADD(close_order, revoke_ctx_fd) {
	.steps = { REVOKE, CLOSE_CTX, CLOSE_FD },
};

FIXTURE_VARIANT_ADD(close_order, ctx_revoke_fd) {
	.steps = { CLOSE_CTX, REVOKE, CLOSE_FD },
};

FIXTURE_SETUP(close_order)
{
	loop_setup(_metadata, &self->l, &env.dev, false);
}

FIXTURE_TEARDOWN(close_order)
{
	loop_teardown(_metadata, &self->l);
}

TEST_F(close_order, mr)
{
	bool fd_open = true, ctx_open = true, mr = true, revoked = false;
	struct loop *l = &self->l;
	struct dmabuf_mock_stats st;
	struct dmabuf_mock_query q;
	const enum close_step *step;
	bool held;

	test_cmd_reg();
	check_mr_works(_metadata, l);
	for (step = variant->steps; *step != STEP_END; step++) {
		switch (*step) {
		case CLOSE_FD:
			close(l->fd);
			l->fd = -1;
			fd_open = false;
			break;
		case DEREG:
			test_cmd_dereg();
			mr = false;
			break;
		case CLOSE_CTX:
			/*
			 * The PD and the MRs still in it. Not the QPs and
			 * CQs: rxe maps their rings from the context's fd,
			 * which then outlives the close (process_exit).
			 */
			rdma_side_close(&l->p.s[1]);
			ASSERT_EQ(0, ibv_destroy_qp(l->p.s[0].qp));
			ASSERT_EQ(0, ibv_destroy_cq(l->p.s[0].cq));
			ASSERT_EQ(0, ibv_close_device(l->p.s[0].ctx));
			free(l->plain.buf);
			memset(&l->plain, 0, sizeof(l->plain));
			memset(&l->p, 0, sizeof(l->p));
			l->m.live = false;
			ctx_open = false;
			mr = false;
			break;
		case REVOKE:
			ASSERT_EQ(0, _test_cmd_revoke(l->mock, l->fd, 0,
						      DMABUF_MR_TIMEOUT_MS,
						      NULL, 0));
			revoked = mr;
			break;
		default:
			ASSERT_TRUE(false);
		}
		held = mr && !revoked;
		if (fd_open) {
			ASSERT_EQ(0, _test_cmd_query(l->mock, l->fd, 0, &q));
			EXPECT_EQ(mr ? 1U : 0U, q.attachments);
			EXPECT_EQ(held ? 1U : 0U, q.pins);
			EXPECT_EQ(0U, q.maps);
			EXPECT_EQ(held ? 1U : 0U, q.vmaps);
		}
		ASSERT_EQ(0, _test_cmd_stats(l->mock, &st));
		EXPECT_EQ(l->before.buffers + (fd_open || mr), st.buffers);
		if (ctx_open)
			test_nldev_mr(mr ? 1 : 0, revoked ? 1 : 0);
		else	/* the plain MR went with the context */
			test_mr_count(-1);
	}
}

/* WRITEs the child of process_exit completes before it is killed */
#define EXIT_AFTER_WRITES 16
#define EXIT_WAIT_MS 15000

/*
 * A process that exits with a dma-buf MR, QPs under traffic and rings
 * still mapped: the exit releases the MR, and the exporter sees nothing
 * left while the parent still holds the dma-buf. The child counts its
 * completed WRITEs in memory shared with the parent, which kills it only
 * once EXIT_AFTER_WRITES of them have succeeded: traffic was flowing.
 */
TEST_F(close_order, process_exit)
{
	struct loop *l = &self->l;
	struct dmabuf_mock_query q;
	unsigned long *writes, n;
	int ready[2], status = 0;
	pid_t exited = 0;
	uint64_t t0;
	char c = 0;
	pid_t pid;

	writes = mmap(NULL, sizeof(*writes), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, (void *)writes);
	*writes = 0;
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct loop child = { .fd = l->fd };
		struct rdma_sge src;
		enum ibv_wc_status st;

		/* A context of its own: the parent's is shared after fork. */
		close(ready[0]);
		if (rdma_side_open(&child.p.s[0], &env.dev))
			_exit(1);
		child.p.s[1] = child.p.s[0];
		child.p.s[1].shared = true;
		if (rdma_pair_connect(&child.p) ||
		    plain_alloc(&child.plain, child.p.s[0].pd, page_size) ||
		    _test_reg_dmabuf_mr(&child.p.s[0], l->fd, 0,
					4 * page_size, DMABUF_MR_IOVA,
					DMABUF_MR_ACCESS, &child.m))
			_exit(1);
		c = 1;
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		src = (struct rdma_sge){ (uintptr_t)child.plain.buf,
					 page_size, child.plain.mr->lkey };
		/* Traffic into the MR until killed. */
		while (!rdma_op(&child.p.s[1], IBV_WR_RDMA_WRITE, src,
				child.m.iova, child.m.rkey, &st) &&
		       st == IBV_WC_SUCCESS)
			__atomic_add_fetch(writes, 1, __ATOMIC_RELEASE);
		_exit(1);
	}
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	close(ready[0]);
	test_mock_counts(1U, 1U, 1U);
	/* Well inside the test's own timeout. */
	t0 = now_ms();
	while ((n = __atomic_load_n(writes, __ATOMIC_ACQUIRE)) <
		       EXIT_AFTER_WRITES &&
	       now_ms() - t0 < EXIT_WAIT_MS &&
	       !(exited = waitpid(pid, &status, WNOHANG)))
		usleep(1000);
	if (!exited) {
		ASSERT_EQ(0, kill(pid, SIGKILL));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
	}
	munmap(writes, sizeof(*writes));
	EXPECT_TRUE(WIFSIGNALED(status))
	TH_LOG("the child exited with %d after %lu WRITEs",
	       WEXITSTATUS(status), n);
	ASSERT_LE(EXIT_AFTER_WRITES, n)
	TH_LOG("the child completed only %lu WRITEs", n);
	ASSERT_EQ(0, _test_cmd_query(l->mock, l->fd, 0, &q));
	EXPECT_EQ(0U, q.attachments);
	EXPECT_EQ(0U, q.pins);
	EXPECT_EQ(0U, q.vmaps);
}

static void env_probe(void)
{
	const char *name = getenv("RDMA_DEV");
	struct ibv_device **list;
	char why[256];

	dmabuf_mr_raw = true;
	if (access(DMABUF_MOCK_PATH, R_OK | W_OK)) {
		snprintf(env.skip, sizeof(env.skip),
			 "no %s (CONFIG_DMABUF_MOCK_EXPORTER)",
			 DMABUF_MOCK_PATH);
		return;
	}
	list = ibv_get_device_list(NULL);
	if (!name && list && list[0])
		name = ibv_get_device_name(list[0]);
	if (!name) {
		snprintf(env.skip, sizeof(env.skip), "no RDMA device");
	} else if (rdma_dev_resolve(name, -1, &env.dev, why, sizeof(why))) {
		snprintf(env.skip, sizeof(env.skip), "%s", why);
	} else if (env.dev.driver_id == UINT32_MAX) {
		snprintf(env.skip, sizeof(env.skip),
			 "%s: no driver id for the raw ioctl", name);
	}
	if (list)
		ibv_free_device_list(list);
	fi_setup();
}

int main(int argc, char **argv)
{
	page_size = sysconf(_SC_PAGESIZE);
	env_probe();
	return test_harness_run(argc, argv);
}
