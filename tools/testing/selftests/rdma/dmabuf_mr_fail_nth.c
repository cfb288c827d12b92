// SPDX-License-Identifier: GPL-2.0
/*
 * dma-buf MRs under fault injection, and torn down while they are live.
 *
 * Fault injection (needs CONFIG_FAULT_INJECTION, FAILSLAB, FAIL_PAGE_ALLOC
 * and FAULT_INJECTION_DEBUG_FS; skips without them, and with
 * FAULT_INJECTION_USERCOPY or FAIL_FUTEX), in sweeps as iommufd_fail_nth.c
 * makes them: a whole scenario (registration; rereg; the CPU import from
 * registration through WRITE, READ and revoke to dereg; the exporter's
 * revoke) runs once with nothing injected, and must pass, then once with
 * the n-th injection point of its calls failing, for n = 1, 2, ... until a
 * run reaches no n-th point. A call that fails must fail with ENOMEM and
 * leave things as they were: after a failed registration no attachment,
 * pin, map or vmap at the exporter and no MR in the nldev dump; after a
 * failed rereg, revoke or dereg the MR as it was. A call that succeeds
 * although an allocation failed (a caller with a fallback) must have done
 * all its work. After every run nothing is left: no attachment, no MR, no
 * file descriptor, and at the end no reference on the PD. REVOKE cannot
 * fail in the importer (the callback is void), so whatever happens there
 * the MR ends up revoked with nothing pinned or vmapped. MR_DESTROY
 * reaches no injection point at all.
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
	char fail[256];		/* every test fails with this */
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
	/*
	 * fail-nth counts the points of every kind of fault injection: with
	 * these, the sweep's own reads and writes of fail-nth would count,
	 * and the calls under test would fail with EFAULT, not ENOMEM.
	 */
	if (!access("/sys/kernel/debug/fail_usercopy", F_OK) ||
	    !access("/sys/kernel/debug/fail_futex", F_OK)) {
		snprintf(env.nth_skip, sizeof(env.nth_skip),
			 "CONFIG_FAULT_INJECTION_USERCOPY or CONFIG_FAIL_FUTEX: only allocations may fail here");
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

/*
 * Disarm: how many injection points were still to pass before the armed
 * one (0: it was injected, or nothing was armed), or -1 on error.
 */
static int fail_nth_stop(int fd)
{
	char buf[16] = "";
	ssize_t n;

	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0 || pwrite(fd, "0", 1, 0) != 1)
		return -1;
	return strtoul(buf, NULL, 10);
}

/* Disarm: 1 when the failure was injected, 0 when not, -1 on error. */
static int fail_nth_disarm(int fd)
{
	int left = fail_nth_stop(fd);

	return left < 0 ? -1 : !left;
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
	struct ibv_pd *pd2;	/* another PD, for rereg */
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
	ASSERT_EQ(0, env.fail[0]) TH_LOG("%s", env.fail);
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
	if (l->pd2)
		EXPECT_EQ(0, ibv_dealloc_pd(l->pd2));
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
#define test_cmd_reg() \
	test_cmd_reg_mr(&l->p.s[0], &l->m, l->fd, 0, 4 * page_size)

#define test_cmd_dereg() test_cmd_dereg_mr(&l->m)

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

/* The plain buffer's first page, filled for a WRITE to @m. */
static struct rdma_sge plain_src(struct loop *l, struct dmabuf_mr *m)
{
	struct rdma_sge src = plain_sge(&l->plain, page_size);
	uint8_t *p = (uint8_t *)(uintptr_t)src.addr;
	size_t i;

	for (i = 0; i < page_size; i++)
		p[i] = i * 7 + m->lkey;
	return src;
}

/* Its second page, cleared for a READ. */
static struct rdma_sge plain_dst(struct loop *l)
{
	struct rdma_sge dst = plain_sge(&l->plain, 2 * page_size);

	dst.addr += page_size;
	dst.length = page_size;
	memset((void *)(uintptr_t)dst.addr, 0, page_size);
	return dst;
}

/* Where the data checks WRITE and READ: @m's last page. */
static uint64_t mr_last_page(struct dmabuf_mr *m)
{
	return m->iova + m->length - page_size;
}

/* The READ brought back what the WRITE took there. */
#define test_read_back()                                                    \
	EXPECT_EQ(0, memcmp(l->plain.buf + CANARY,                          \
			    l->plain.buf + CANARY + page_size, page_size))

/* Data goes through the MR: WRITE a page into it, READ it back. */
static void check_mr_data(struct __test_metadata *_metadata, struct loop *l,
			  struct dmabuf_mr *m)
{
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma_op(_metadata, &l->p.s[1], IBV_WR_RDMA_WRITE,
			  plain_src(l, m), mr_last_page(m), m->rkey, 0, 0));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma_op(_metadata, &l->p.s[1], IBV_WR_RDMA_READ, plain_dst(l),
			  mr_last_page(m), m->rkey, 0, 0));
	test_read_back();
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
	struct dmabuf_mock_query q;

	ASSERT_EQ(0, _test_cmd_query(l->mock, l->fd, 0, &q));
	EXPECT_EQ((__u32)DMABUF_MOCK_STATE_REVOKED, q.state);
	test_mock_counts(1U, 0U, 0U);
	test_nldev_mr(1, 1);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma_op(_metadata, &l->p.s[1], IBV_WR_RDMA_WRITE,
			  plain_sge(&l->plain, 64), l->m.iova, l->m.rkey, 0,
			  0));
	/* The error moved the QPs to the error state: new ones. */
	ASSERT_EQ(0, rdma_pair_connect(&l->p));
}

/* Open file descriptors of the process */
static int fd_count(struct __test_metadata *_metadata)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ASSERT_NE(NULL, d) TH_LOG("/proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * A sweep, as iommufd_fail_nth.c does it: a whole scenario once with
 * nothing injected, then once with the n-th injection point failing, for
 * n = 1, 2, ... until a run reaches no n-th point. Only the calls the
 * scenario makes through nth_try() and nth_err() count: fail-nth is off
 * around everything else (setup, checks, other threads' work), whose
 * allocations are not under test and would only fail the checks. fail-nth
 * fires once, so what follows the injected failure runs as if nothing had
 * been injected. After every run the sweep checks that nothing was left:
 * no attachment, pin or vmap at the exporter, no MR in netlink, no file
 * descriptor.
 */
struct fail_nth {
	const char *what;
	int fd;			/* /proc/thread-self/fail-nth */
	unsigned int n;		/* the point that fails; 0: none */
	unsigned int left;	/* points to pass before it, while off */
	bool armed;
	bool hit;		/* it failed in this run */
	bool need_enomem;	/* some call of the sweep must fail with it */
	unsigned int points;	/* runs in which it failed */
	unsigned int failed;	/* calls that failed with it, all ENOMEM */
	unsigned int absorbed;	/* calls that got it and still worked */
};

static void fail_nth_resume(struct __test_metadata *_metadata,
			    struct fail_nth *nth)
{
	if (!nth->n || nth->hit)
		return;
	ASSERT_EQ(0, fail_nth_arm(nth->fd, nth->left));
	nth->armed = true;
}

/* Off again: whether the failure was injected since fail_nth_resume(). */
static bool fail_nth_pause(struct __test_metadata *_metadata,
			   struct fail_nth *nth)
{
	int left;

	if (!nth->armed)
		return false;
	nth->armed = false;
	left = fail_nth_stop(nth->fd);
	ASSERT_LE(0, left) TH_LOG("fail-nth: %s", strerror(errno));
	nth->left = left;
	nth->hit = !left;
	return nth->hit;
}

/*
 * How a call that the sweep armed ended: @ret 0, or -1 with @err. What it
 * does with nothing injected (@expect: 0 for success, or the errno it is
 * refused with) it may do with the failure injected too, when it has a
 * fallback; otherwise it may only fail, with ENOMEM, and only when it got
 * the failure. 0 when it ended as without injection, -1 when with ENOMEM.
 */
static int fail_nth_result(struct __test_metadata *_metadata,
			   struct fail_nth *nth, const char *call, int expect,
			   int ret, bool hit, int err)
{
	int seen = ret ? err : 0;

	if (seen == expect) {
		nth->absorbed += hit;
		return 0;
	}
	ASSERT_TRUE(hit)
	TH_LOG("n=%u: %s: %s with nothing injected, expected %s", nth->n,
	       call, seen ? strerror(seen) : "success",
	       expect ? strerror(expect) : "success");
	ASSERT_NE(0, ret) TH_LOG("n=%u: %s succeeded, expected %s", nth->n,
				 call, strerror(expect));
	EXPECT_EQ(ENOMEM, err)
	TH_LOG("n=%u: %s: %s", nth->n, call, strerror(err));
	nth->failed++;
	return -1;
}

/*
 * @call, an expression that is 0 or -1 with errno set, with the injection
 * armed: fail_nth_result() with @_errno expected.
 */
#define nth_err(_errno, call)                                               \
	({                                                                  \
		int __ret, __err;                                           \
		bool __hit;                                                 \
		fail_nth_resume(_metadata, _nth);                           \
		__ret = (call);                                             \
		__err = errno;                                              \
		__hit = fail_nth_pause(_metadata, _nth);                    \
		fail_nth_result(_metadata, _nth, #call, _errno, __ret,      \
				__hit, __err);                              \
	})

#define nth_try(call) nth_err(0, call)

static void fail_nth_sweep(struct __test_metadata *_metadata, struct loop *l,
			   struct fail_nth *nth,
			   void (*scenario)(struct __test_metadata *_metadata,
					    struct loop *l,
					    struct fail_nth *_nth))
{
	int fds;

	nth->fd = l->nth;
	for (nth->n = 0; nth->n < FAIL_NTH_MAX; nth->n++) {
		nth->left = nth->n;
		nth->hit = false;
		fds = fd_count(_metadata);
		scenario(_metadata, l, nth);
		ASSERT_FALSE(nth->armed);
		/* Whatever failed, nothing is left behind. */
		test_mock_counts(0U, 0U, 0U);
		test_mr_count(0);
		EXPECT_EQ(fds, fd_count(_metadata))
		TH_LOG("n=%u: file descriptors leaked", nth->n);
		if (!__test_passed(_metadata))
			break;
		/* It reached no n-th point: every point has been swept. */
		if (nth->n && !nth->hit)
			break;
		nth->points += !!nth->n;
	}
	ksft_print_msg("%s: %u points, %u ENOMEM, %u absorbed\n", nth->what,
		       nth->points, nth->failed, nth->absorbed);
	ASSERT_GT(FAIL_NTH_MAX, nth->n);
	/* A sweep that reaches no injection point tests nothing. */
	ASSERT_LT(0U, nth->points);
	if (nth->need_enomem)
		EXPECT_LT(0U, nth->failed);
}

/*
 * A sweep of scenario @name, a function of the fail_nth fixture's loop l
 * and of _nth, the sweep's state, which nth_try() and nth_err() use.
 */
#define TEST_FAIL_NTH(name)                                                 \
	static void sweep_##name(struct __test_metadata *_metadata,         \
				 struct loop *l, struct fail_nth *_nth);    \
	TEST_F_TIMEOUT(fail_nth, name, 600)                                 \
	{                                                                   \
		struct fail_nth nth = { .what = #name };                    \
									    \
		fail_nth_sweep(_metadata, &self->l, &nth, sweep_##name);    \
	}                                                                   \
	static void sweep_##name(struct __test_metadata *_metadata,         \
				 struct loop *l, struct fail_nth *_nth)

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

/*
 * Each sweep once per raw uverbs way to register a dma-buf MR: the
 * REG_DMABUF_MR method, and REG_MR with a dma-buf fd.
 */
FIXTURE_VARIANT(fail_nth) {
	bool reg_mr_fd;
};

FIXTURE_VARIANT_ADD(fail_nth, reg_dmabuf_mr) {
	.reg_mr_fd = false,
};

FIXTURE_VARIANT_ADD(fail_nth, reg_mr_fd) {
	.reg_mr_fd = true,
};

FIXTURE_SETUP(fail_nth)
{
	/* Each case runs in a child of its own: the path is the case's. */
	dmabuf_mr_regmr = variant->reg_mr_fd;
	loop_setup(_metadata, &self->l, &env.dev, true);
}

FIXTURE_TEARDOWN(fail_nth)
{
	loop_teardown(_metadata, &self->l);
}

/*
 * Registration, through the variant's method: one that fails leaves
 * nothing behind (the exporter, netlink), and the same call, uninjected,
 * then works; one that succeeds gave a working MR.
 */
TEST_FAIL_NTH(reg)
{
	_nth->need_enomem = true;
	if (nth_try(_test_reg_dmabuf_mr(&l->p.s[0], l->fd, 0, 4 * page_size,
					DMABUF_MR_IOVA, DMABUF_MR_ACCESS,
					&l->m))) {
		test_mock_counts(0U, 0U, 0U);
		test_mr_count(0);
		test_cmd_reg();
	}
	check_mr_works(_metadata, l);
	test_cmd_dereg();
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
	struct sweep s = { .what = variant->reg_mr_fd ? "revoke (reg_mr_fd)" :
							"revoke (reg_dmabuf_mr)" };
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

/*
 * Rereg of a dma-buf MR, live or revoked, is refused with EOPNOTSUPP
 * (ib_umem_check_rereg(), the driver's first check); uverbs allocates the
 * uobject of a possible new MR before it asks the driver, so an injected
 * failure refuses it with ENOMEM instead. Either way nothing changes: the
 * MR keeps its keys (netlink still lists it), its PD and its range (a
 * WRITE from a QP of the old PD to the old address, and a READ back,
 * work), and once revoked it stays revoked.
 */
TEST_FAIL_NTH(rereg)
{
	_nth->need_enomem = true;
	if (!l->pd2) {
		l->pd2 = ibv_alloc_pd(l->p.s[0].ctx);
		ASSERT_NE(NULL, l->pd2);
	}
	ASSERT_EQ(0, _test_cmd_restore(l->mock, l->fd, 0));
	test_cmd_reg();
	nth_err(EOPNOTSUPP,
		_test_rereg_mr_pd(l->p.s[0].ctx, l->m.handle, l->pd2));
	check_mr_works(_metadata, l);

	ASSERT_EQ(0, _test_cmd_revoke(l->mock, l->fd, 0, DMABUF_MR_TIMEOUT_MS,
				      NULL, 0));
	nth_err(EOPNOTSUPP,
		_test_rereg_mr_pd(l->p.s[0].ctx, l->m.handle, l->pd2));
	check_mr_revoked(_metadata, l);
	test_cmd_dereg();
}

/* An errno, as rdma_post() returns it, as -1 with errno set, or 0 */
static int errno_ret(int err)
{
	errno = err;
	return err ? -1 : 0;
}

/*
 * @op of a page, from side 1's plain buffer @sge to the MR at @raddr, with
 * the post armed: a user QP's doorbell is a system call that allocates.
 * rxe's provider queues the WR before it rings it, so a post that failed
 * may have left the WR queued: new QPs drop it, and the WR goes again.
 * Either way it must succeed.
 */
static void nth_rdma_op(struct __test_metadata *_metadata, struct loop *l,
			struct fail_nth *_nth, enum ibv_wr_opcode op,
			struct rdma_sge sge, uint64_t raddr)
{
	struct ibv_wc wc;

	if (nth_try(errno_ret(rdma_post(&l->p.s[1], op, sge, raddr, l->m.rkey,
					0, 0, op)))) {
		ASSERT_EQ(0, rdma_pair_connect(&l->p));
		ASSERT_EQ(IBV_WC_SUCCESS,
			  rdma_op(_metadata, &l->p.s[1], op, sge, raddr,
				  l->m.rkey, 0, 0));
		return;
	}
	ASSERT_EQ(0, rdma_poll(l->p.s[1].cq, &wc, DMABUF_MR_TIMEOUT_MS));
	EXPECT_EQ(op, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status)
	TH_LOG("%s: %s", rdma_op_name(op), ibv_wc_status_str(wc.status));
}

/*
 * The CPU importer's whole path, every call armed: registration (attach,
 * pin, wait for the exporter's kernel fences, vmap), an RDMA WRITE into
 * the MR and an RDMA READ out of it (the copies run in rxe's work items,
 * which fail-nth of this thread does not reach; the posts do), the
 * exporter's revoke (the callback drops the vmap, the core unpins) and the
 * dereg (detach). A registration that fails leaves nothing; any other
 * call that fails with ENOMEM leaves the MR as it was, and is made again.
 * The data is checked through the READ and through the exporter.
 */
TEST_FAIL_NTH(cpu_import)
{
	uint8_t seen[64];
	uint64_t raddr;

	_nth->need_enomem = true;
	ASSERT_EQ(0, _test_cmd_restore(l->mock, l->fd, 0));
	if (nth_try(_test_reg_dmabuf_mr(&l->p.s[0], l->fd, 0, 4 * page_size,
					DMABUF_MR_IOVA, DMABUF_MR_ACCESS,
					&l->m)))
		return;
	test_mock_counts(1U, 1U, 1U);
	test_nldev_mr(1, 0);

	raddr = mr_last_page(&l->m);
	nth_rdma_op(_metadata, l, _nth, IBV_WR_RDMA_WRITE, plain_src(l, &l->m),
		    raddr);
	ASSERT_EQ(0, _test_cmd_rw(l->mock, l->fd, 0, 3 * page_size, seen,
				  sizeof(seen)));
	EXPECT_EQ(0, memcmp(l->plain.buf + CANARY, seen, sizeof(seen)));
	nth_rdma_op(_metadata, l, _nth, IBV_WR_RDMA_READ, plain_dst(l), raddr);
	test_read_back();

	if (nth_try(_test_cmd_revoke(l->mock, l->fd, 0, DMABUF_MR_TIMEOUT_MS,
				     NULL, 0))) {
		/* Refused before it touched anything: still live */
		test_mock_eq(state, 0);
		check_mr_works(_metadata, l);
		ASSERT_EQ(0, _test_cmd_revoke(l->mock, l->fd, 0,
					      DMABUF_MR_TIMEOUT_MS, NULL, 0));
	}
	check_mr_revoked(_metadata, l);
	if (nth_try(_test_dereg_dmabuf_mr(&l->m))) {
		test_nldev_mr(1, 1);
		test_cmd_dereg();
	}
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
	/* WRITEs and READs of a page, one at a time, until the first error */
	struct traffic t = {
		.s = &l->p.s[1],
		.op = IBV_WR_RDMA_WRITE,
		.alternate = true,
		.local = l->plain.buf + CANARY,
		.lkey = l->plain.mr->lkey,
		.window = 1,
		.chunk = page_size,
		.chunks = 1,
		.held = -1,
		/* No completion once the device is gone: do not wait long. */
		.idle_ms = 2000,
		.max_ms = 3 * DMABUF_MR_TIMEOUT_MS,
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
	EXPECT_LE(16U, traffic_wait(&t, 16, DMABUF_MR_TIMEOUT_MS));

	start = now_ms();
	EXPECT_EQ(0, run("rdma link delete %s", self->name));
	ksft_print_msg("rdma link delete: %llu ms, %u operations before it\n",
		       (unsigned long long)(now_ms() - start),
		       __atomic_load_n(&t.ok, __ATOMIC_RELAXED));
	__atomic_store_n(&t.stop, true, __ATOMIC_RELAXED);
	ASSERT_EQ(0, pthread_join(thread, NULL));
	ksft_print_msg("traffic ended with %s\n",
		       t.post_error ? strerror(t.post_error) :
		       t.errors ? ibv_wc_status_str(t.first_error) :
		       t.timed_out ? "no completion" : "the stop");
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
		struct ibv_wc wc;

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
		src = plain_sge(&child.plain, page_size);
		/* Traffic into the MR until killed. */
		while (!_test_rdma_op(&child.p.s[1], IBV_WR_RDMA_WRITE, src,
				      child.m.iova, child.m.rkey, 0, 0, &wc) &&
		       wc.status == IBV_WC_SUCCESS)
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
	dmabuf_mr_raw = true;
	if (access(DMABUF_MOCK_PATH, R_OK | W_OK)) {
		snprintf(env.skip, sizeof(env.skip),
			 "no %s (CONFIG_DMABUF_MOCK_EXPORTER)",
			 DMABUF_MOCK_PATH);
		return;
	}
	if (dmabuf_mr_env_dev(&env.dev, env.skip, env.fail, sizeof(env.skip)))
		return;
	if (env.dev.driver_id == UINT32_MAX)
		snprintf(env.skip, sizeof(env.skip),
			 "%s: no driver id for the raw ioctl", env.dev.name);
	fi_setup();
}

int main(int argc, char **argv)
{
	page_size = sysconf(_SC_PAGESIZE);
	env_probe();
	return test_harness_run(argc, argv);
}
