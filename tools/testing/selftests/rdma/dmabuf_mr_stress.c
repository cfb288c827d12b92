// SPDX-License-Identifier: GPL-2.0
/*
 * A bounded stress test for dma-buf MRs that honour revoke, with
 * dmabuf_mock as the exporter.
 *
 * Worker threads, each with its own RC QP pair between RDMA_DEV (side A)
 * and RDMA_PEER_DEV (side B, else RDMA_DEV again), register and deregister
 * dma-buf MRs on mock buffers of their own and post batches of RDMA WRITE,
 * READ, atomics and SEND from side B: to a dma-buf MR on side A through its
 * rkey ("remote"), and from or into a dma-buf MR on side B through its lkey
 * ("local"). Meanwhile a revoker thread revokes random buffers (poisoning
 * or swapping their pages) and later restores them.
 *
 * Each buffer carries a sequence count, odd while a REVOKE or RESTORE is
 * under way: an MR registered at count r is certainly alive while the count
 * is r and certainly revoked once it is r + 2 or more. That decides what
 * each completion may be:
 * - before any revoke of the MR began: SUCCESS, with the data the worker's
 *   model of the buffer says;
 * - posted after the revoke returned: exactly REM_ACCESS_ERR (remote WRITE,
 *   READ, atomics), REM_OP_ERR (remote SEND into a revoked RECV buffer),
 *   LOC_QP_OP_ERR (local WRITE or SEND from the lkey), LOC_PROT_ERR (local
 *   READ or atomic result into it), or WR_FLUSH_ERR after such an error;
 * - racing the revoke: SUCCESS or the error it would get after the revoke.
 * After an error both QPs are made again. Registering on a revoked buffer
 * must fail with ENODEV. The revoker reads each buffer through the mock
 * right after REVOKE returns and again just before RESTORE: it must hold
 * only poison (or zeroes after a swap), though the workers keep posting to
 * the revoked MRs in between. No new MR may get a key that a live MR of the
 * same device holds. At the end the mock holds no buffer, page, pin, map
 * or vmap, and the device's resource counts (netlink) are back to where
 * they were.
 *
 * Beside that, two buffers of their own see revokes and restores race each
 * other: a second revoker and a restorer act on them at random with no
 * lock between them, while a registrar keeps a dma-buf MR on them (WRITE,
 * READ back) and a toucher faults their pages in through mmap(). Every
 * REVOKE must return once the importers let go (one that finds a RESTORE
 * or another REVOKE came before it could scrub leaves the scrub to the
 * later REVOKE; how many did is reported); registrations fail only with
 * ENODEV; a WRITE that completed lands in the buffer when no revoke came
 * in between. Every CHAOS_QUIET_EVERY rounds, and once more at the end,
 * the registrar makes such a window itself: it stops the racing revoker
 * and restorer (they hold chaos_quiet for read around each ioctl),
 * restores the buffer, registers, WRITEs and reads back, and the WRITE
 * must succeed and land. Which windows the race itself reaches is left to
 * the scheduler, so those counts are only reported.
 *
 * DMABUF_MR_STRESS_SECS (default 20), DMABUF_MR_STRESS_THREADS (default 4),
 * DMABUF_MR_STRESS_SEED; rxe_dmabuf_mr_stress.sh sets up two rxe devices.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "dmabuf_mr_utils.h"

#define STRESS_SECS_DEFAULT 20
#define STRESS_THREADS_DEFAULT 4
#define STRESS_THREADS_MAX 16
#define SLOTS 8			/* one WR per slot per batch: no overlap */
#define BUF_PAGES SLOTS
#define STATUS_MAX 32
#define KEYS_MAX 4096
#define FAIL_LOG_MAX 20
#define CHAOS_BUFS 2
#define CHAOS_QUIET_EVERY 8	/* registrar rounds per quiet round */

enum { SIDE_A, SIDE_B };

static size_t page_size;

/* A mock buffer, owned by one worker, revoked by the revoker. */
struct sbuf {
	pthread_mutex_t lock;	/* fd and content: exporter-side access */
	int fd;
	unsigned long seq;	/* atomic: %4 == 0 live, 2 revoked, odd: moving */
	unsigned long posts_revoked;	/* atomic: WRs posted while revoked */
};

/* A dma-buf MR on a buffer, as the worker that registered it sees it. */
struct smr {
	struct dmabuf_mr m;
	unsigned long reg_seq;	/* the buffer's stable count at reg */
	bool live;
	uint8_t *model;		/* what the buffer holds, while alive */
};

enum kind { REMOTE, LOCAL };

/* One posted WR and what was known when it was posted. */
struct swr {
	enum kind kind;
	enum ibv_wr_opcode op;
	unsigned int slot;
	uint32_t off;
	uint32_t len;
	uint64_t add, compare, swap;
	uint64_t before;	/* LOCAL atomic: plain A's value before */
	bool dead;		/* the MR was revoked before the post */
	unsigned long reg_seq;
};

struct worker {
	int id;
	pthread_t thread;
	unsigned int seed;
	struct rdma_pair p;	/* s[SIDE_A] on RDMA_DEV, s[SIDE_B] on the peer */
	struct plain_mr plain[2];	/* on each side, SLOTS pages */
	struct sbuf *buf[2];	/* buf[SIDE_A]: remote target; [SIDE_B]: local */
	struct smr mr[2];
	/* counters, read by main after join */
	unsigned long ops, ok, regs, regs_refused, regs_raced, deregs,
		      renews, data_checks, bufs_replaced, raced;
	unsigned long status[STATUS_MAX];
};

static struct {
	struct rdma_dev_info dev[2];
	int keyset[2];		/* which key set each side's device uses */
	bool raw;
	const char *path;
	char skip[256];
	char fail[256];
	int mock;
	unsigned int secs, threads, seed;
	uint64_t end_ms;
	bool stop;		/* atomic */
	unsigned long failures;	/* atomic */
	pthread_mutex_t log_lock;
	struct sbuf bufs[2 * STRESS_THREADS_MAX];
	unsigned int nbufs;
	/* revoker counters */
	unsigned long revokes, revokes_poison, revokes_swap, restores,
		      scrub_checks;
	/* the buffers where revokes and restores race, and their counters */
	int chaos_fd[CHAOS_BUFS];
	uint8_t *chaos_map[CHAOS_BUFS];	/* mmap()ed before the race */
	unsigned long chaos_revokes, chaos_superseded, chaos_restores,
		      chaos_regs, chaos_refused, chaos_writes, chaos_checks,
		      chaos_touches, chaos_sigbus, chaos_quiet_rounds,
		      chaos_quiet_checks;
	/* read: a racing REVOKE or RESTORE; write: a quiet round */
	pthread_rwlock_t chaos_quiet;
	/* live keys per device: no new MR may get one */
	pthread_mutex_t key_lock;
	uint32_t keys[2][KEYS_MAX];
	unsigned int nkeys[2];
} env = {
	.log_lock = PTHREAD_MUTEX_INITIALIZER,
	.key_lock = PTHREAD_MUTEX_INITIALIZER,
};

static __printf(1, 2) void stress_fail(const char *fmt, ...)
{
	unsigned long n = __atomic_add_fetch(&env.failures, 1, __ATOMIC_RELAXED);
	char msg[512];
	va_list ap;

	__atomic_store_n(&env.stop, true, __ATOMIC_RELAXED);
	if (n > FAIL_LOG_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&env.log_lock);
	ksft_print_msg("FAIL: %s\n", msg);
	pthread_mutex_unlock(&env.log_lock);
}

static bool stopping(void)
{
	return __atomic_load_n(&env.stop, __ATOMIC_RELAXED) ||
	       now_ms() >= env.end_ms;
}

static unsigned long seq_of(struct sbuf *b)
{
	return __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
}

static void seq_step(struct sbuf *b)
{
	__atomic_add_fetch(&b->seq, 1, __ATOMIC_RELEASE);
}

static unsigned int rnd(struct worker *w, unsigned int n)
{
	return rand_r(&w->seed) % n;
}

static void fill_random(unsigned int *seed, uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = rand_r(seed);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* Live keys: a new MR's keys must not be held by any live MR. */
static bool keys_add(int set, uint32_t lkey, uint32_t rkey)
{
	bool ok = true;
	unsigned int i;

	pthread_mutex_lock(&env.key_lock);
	for (i = 0; i < env.nkeys[set]; i++)
		if (env.keys[set][i] == lkey || env.keys[set][i] == rkey)
			ok = false;
	if (env.nkeys[set] + 2 <= KEYS_MAX) {
		env.keys[set][env.nkeys[set]++] = lkey;
		if (rkey != lkey)
			env.keys[set][env.nkeys[set]++] = rkey;
	}
	pthread_mutex_unlock(&env.key_lock);
	return ok;
}

/* Before the dereg: once it returns, the device may hand the keys out. */
static void keys_del(int set, uint32_t lkey, uint32_t rkey)
{
	unsigned int i;

	pthread_mutex_lock(&env.key_lock);
	for (i = 0; i < env.nkeys[set];) {
		if (env.keys[set][i] == lkey || env.keys[set][i] == rkey)
			env.keys[set][i] = env.keys[set][--env.nkeys[set]];
		else
			i++;
	}
	pthread_mutex_unlock(&env.key_lock);
}

static int mock_rw(int fd, bool write, void *buf, size_t len)
{
	return _test_cmd_rw(env.mock, fd, write ? DMABUF_MOCK_RW_WRITE : 0, 0,
			    buf, len);
}

static void mr_dereg(struct worker *w, int side)
{
	struct smr *r = &w->mr[side];

	if (!r->live)
		return;
	keys_del(env.keyset[side], r->m.lkey, r->m.rkey);
	if (_test_dereg_dmabuf_mr(&r->m))
		stress_fail("worker %d: dereg of MR %#x: %s", w->id, r->m.lkey,
			    strerror(errno));
	else
		w->deregs++;
	r->live = false;
}

/*
 * Register a dma-buf MR on the worker's buffer of @side. On a live buffer
 * it is first filled with a known pattern. Whether the registration may
 * fail depends on the buffer's state throughout; when a REVOKE or RESTORE
 * ran meanwhile, the outcome is not known and the MR is dropped.
 */
static void mr_reg(struct worker *w, int side)
{
	struct sbuf *b = w->buf[side];
	struct smr *r = &w->mr[side];
	size_t size = BUF_PAGES * page_size;
	unsigned long s, s2;
	int ret, err;

	pthread_mutex_lock(&b->lock);
	s = seq_of(b);
	if (s % 4 == 0) {
		fill_random(&w->seed, r->model, size);
		if (mock_rw(b->fd, true, r->model, size))
			stress_fail("worker %d: RW write: %s", w->id,
				    strerror(errno));
	}
	pthread_mutex_unlock(&b->lock);

	ret = _test_reg_dmabuf_mr(&w->p.s[side], b->fd, 0, size,
				  DMABUF_MR_IOVA, DMABUF_MR_ACCESS, &r->m);
	err = errno;
	s2 = seq_of(b);
	if (!ret) {
		w->regs++;
		r->live = true;
		r->reg_seq = s;
		if (!keys_add(env.keyset[side], r->m.lkey, r->m.rkey))
			stress_fail("worker %d: new MR on %s: lkey %#x rkey %#x held by a live MR",
				    w->id, env.dev[side].name, r->m.lkey,
				    r->m.rkey);
	}
	if (s2 != s || s % 2) {
		w->regs_raced++;
		mr_dereg(w, side);
		return;
	}
	if (s % 4 == 2) {
		if (!ret)
			stress_fail("worker %d: registration on a revoked buffer succeeded",
				    w->id);
		else if (err != ENODEV)
			stress_fail("worker %d: reg on a revoked buffer: %s, not ENODEV",
				    w->id, strerror(err));
		w->regs_refused++;
		mr_dereg(w, side);
		return;
	}
	if (ret)
		stress_fail("worker %d: registration on a live buffer: %s",
			    w->id, strerror(err));
}

/*
 * With no MR on it, now and then a fresh buffer. Only a live one: a revoked
 * buffer waits for the revoker's last look at it before RESTORE.
 */
static void buf_replace(struct worker *w, int side)
{
	struct sbuf *b = w->buf[side];
	int fd;

	pthread_mutex_lock(&b->lock);
	if (seq_of(b) % 4 == 0) {
		if (_test_cmd_create(env.mock, BUF_PAGES * page_size, 0, &fd)) {
			stress_fail("worker %d: CREATE: %s", w->id,
				    strerror(errno));
		} else {
			close(b->fd);
			b->fd = fd;
			/* A new live count: no MR is on either buffer. */
			__atomic_store_n(&b->seq, seq_of(b) + 4,
					 __ATOMIC_RELEASE);
			w->bufs_replaced++;
		}
	}
	pthread_mutex_unlock(&b->lock);
}

/* The buffer holds what the model says, if no revoke touched the MR. */
static void model_check(struct worker *w, int side)
{
	size_t size = BUF_PAGES * page_size;
	struct sbuf *b = w->buf[side];
	struct smr *r = &w->mr[side];
	uint8_t *seen = malloc(size);
	ssize_t d;

	if (!seen)
		return;
	pthread_mutex_lock(&b->lock);
	if (r->live && seq_of(b) == r->reg_seq) {
		if (mock_rw(b->fd, false, seen, size)) {
			stress_fail("worker %d: RW read: %s", w->id,
				    strerror(errno));
		} else {
			d = first_diff(r->model, seen, size);
			if (d >= 0)
				stress_fail("worker %d: buffer %s byte %zd is %#x, expected %#x",
					    w->id, side ? "B" : "A", d,
					    seen[d], r->model[d]);
			w->data_checks++;
		}
	}
	pthread_mutex_unlock(&b->lock);
	free(seen);
}

/*
 * After an error the QPs are gone, but a WR that completed in error or
 * was flushed may have reached a live MR first: read what it holds.
 */
static void model_resync(struct worker *w, int side)
{
	struct sbuf *b = w->buf[side];
	struct smr *r = &w->mr[side];

	pthread_mutex_lock(&b->lock);
	if (r->live && seq_of(b) == r->reg_seq &&
	    mock_rw(b->fd, false, r->model, BUF_PAGES * page_size))
		stress_fail("worker %d: RW read: %s", w->id, strerror(errno));
	pthread_mutex_unlock(&b->lock);
}

static const enum ibv_wr_opcode ops[] = {
	IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_FETCH_AND_ADD,
	IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_SEND,
};

/* What a completion in error must be when the MR was revoked. */
static enum ibv_wc_status revoked_status(const struct swr *r)
{
	if (r->kind == REMOTE)
		return r->op == IBV_WR_SEND ? IBV_WC_REM_OP_ERR :
					      IBV_WC_REM_ACCESS_ERR;
	if (r->op == IBV_WR_RDMA_WRITE || r->op == IBV_WR_SEND)
		return IBV_WC_LOC_QP_OP_ERR;
	return IBV_WC_LOC_PROT_ERR;
}

static const char *kind_name(const struct swr *r)
{
	return r->kind == REMOTE ? "remote" : "local";
}

/* Prepare and post WR @i of a batch; 0 or an errno. */
static int post_one(struct worker *w, struct swr *r, uint64_t i)
{
	size_t ss = page_size;
	struct smr *m = &w->mr[r->kind == REMOTE ? SIDE_A : SIDE_B];
	uint8_t *pa = w->plain[SIDE_A].buf + CANARY + r->slot * ss;
	uint8_t *pb = w->plain[SIDE_B].buf + CANARY + r->slot * ss;
	uint64_t maddr = m->m.iova + r->slot * ss + r->off;
	struct rdma_sge l;
	int ret;

	if (r->kind == REMOTE) {
		l = (struct rdma_sge){ (uintptr_t)pb + r->off, r->len,
				       w->plain[SIDE_B].mr->lkey };
		if (r->op == IBV_WR_RDMA_READ || rdma_op_is_atomic(r->op))
			memset(pb + r->off, 0, r->len);
		else
			fill_random(&w->seed, pb + r->off, r->len);
		if (r->op == IBV_WR_SEND) {
			ret = rdma_post_recv(&w->p.s[SIDE_A],
					     (struct rdma_sge){ maddr, r->len,
								m->m.lkey }, i);
			if (ret)
				return ret;
		}
		return rdma_post(&w->p.s[SIDE_B], r->op, l, maddr, m->m.rkey,
				 r->op == IBV_WR_ATOMIC_CMP_AND_SWP ?
				 r->compare : r->add, r->swap, i);
	}
	l = (struct rdma_sge){ maddr, r->len, m->m.lkey };
	if (r->op == IBV_WR_RDMA_READ) {
		fill_random(&w->seed, pa + r->off, r->len);
	} else if (rdma_op_is_atomic(r->op)) {
		r->before = ((uint64_t)rand_r(&w->seed) << 32) |
			    rand_r(&w->seed);
		r->compare = r->before;
		put64(pa, r->before);
	} else {
		memset(pa + r->off, 0, r->len);
	}
	if (r->op == IBV_WR_SEND) {
		ret = rdma_post_recv(&w->p.s[SIDE_A],
				     (struct rdma_sge){ (uintptr_t)pa + r->off,
							r->len,
							w->plain[SIDE_A].mr->lkey },
				     i);
		if (ret)
			return ret;
	}
	return rdma_post(&w->p.s[SIDE_B], r->op, l, (uintptr_t)pa + r->off,
			 w->plain[SIDE_A].mr->rkey,
			 r->op == IBV_WR_ATOMIC_CMP_AND_SWP ? r->compare : r->add,
			 r->swap, i);
}

/* A successful WR: check the data it moved and update the model. */
static void check_success(struct worker *w, struct swr *r)
{
	size_t ss = page_size;
	struct smr *m = &w->mr[r->kind == REMOTE ? SIDE_A : SIDE_B];
	uint8_t *model = m->model + r->slot * ss + r->off;
	uint8_t *pa = w->plain[SIDE_A].buf + CANARY + r->slot * ss + r->off;
	uint8_t *pb = w->plain[SIDE_B].buf + CANARY + r->slot * ss + r->off;
	uint64_t old, now;
	ssize_t d = -1;

	w->data_checks++;
	if (r->kind == REMOTE) {
		switch (r->op) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_SEND:
			memcpy(model, pb, r->len);
			break;
		case IBV_WR_RDMA_READ:
			d = first_diff(model, pb, r->len);
			break;
		default:
			old = get64(model);
			if (get64(pb) != old)
				stress_fail("worker %d: remote %s returned %#llx, MR held %#llx",
					    w->id, rdma_op_name(r->op),
					    (unsigned long long)get64(pb),
					    (unsigned long long)old);
			if (r->op == IBV_WR_ATOMIC_FETCH_AND_ADD)
				put64(model, old + r->add);
			else if (old == r->compare)
				put64(model, r->swap);
		}
	} else {
		switch (r->op) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_SEND:
			d = first_diff(model, pa, r->len);
			break;
		case IBV_WR_RDMA_READ:
			memcpy(model, pa, r->len);
			break;
		default:
			put64(model, r->before);
			now = get64(pa);
			if ((r->op == IBV_WR_ATOMIC_FETCH_AND_ADD &&
			     now != r->before + r->add) ||
			    (r->op == IBV_WR_ATOMIC_CMP_AND_SWP &&
			     now != r->swap))
				stress_fail("worker %d: local %s left %#llx from %#llx",
					    w->id, rdma_op_name(r->op),
					    (unsigned long long)now,
					    (unsigned long long)r->before);
		}
	}
	if (d >= 0)
		stress_fail("worker %d: %s %s slot %u+%u: byte %zd differs",
			    w->id, kind_name(r), rdma_op_name(r->op), r->slot,
			    r->off, d);
}

/*
 * One batch: up to SLOTS WRs from side B, each on a slot of its own, then
 * every completion, in order.
 */
static void batch(struct worker *w)
{
	struct swr wr[SLOTS];
	unsigned int n, i, nsend = 0, errors = 0, flushes = 0, err_at = 0;
	enum ibv_wc_status st;
	struct ibv_wc wc;
	unsigned long s;
	int ret, side;

	n = 1 + rnd(w, SLOTS);
	for (i = 0; i < n; i++) {
		struct swr *r = &wr[i];
		struct smr *m;

		memset(r, 0, sizeof(*r));
		r->kind = rnd(w, 2) ? REMOTE : LOCAL;
		side = r->kind == REMOTE ? SIDE_A : SIDE_B;
		m = &w->mr[side];
		if (!m->live) {
			r->kind = !r->kind;
			side = !side;
			m = &w->mr[side];
		}
		if (!m->live) {
			n = i;
			break;
		}
		r->op = ops[rnd(w, ARRAY_SIZE(ops))];
		r->slot = i;
		if (rdma_op_is_atomic(r->op)) {
			r->len = 8;
			r->add = 1 + rnd(w, 1000);
			r->swap = ((uint64_t)rand_r(&w->seed) << 32) |
				  rand_r(&w->seed);
			if (r->kind == REMOTE)
				r->compare = rnd(w, 2) ?
					get64(m->model + r->slot * page_size) :
					r->swap;
		} else {
			r->off = rnd(w, page_size / 2);
			r->len = 1 + rnd(w, page_size - r->off);
		}
		r->reg_seq = m->reg_seq;
		s = seq_of(w->buf[side]);
		r->dead = s >= m->reg_seq + 2;
		if (r->dead)
			__atomic_add_fetch(&w->buf[side]->posts_revoked, 1,
					   __ATOMIC_RELAXED);
	}
	if (!n)
		return;
	for (i = 0; i < n; i++) {
		ret = post_one(w, &wr[i], i);
		if (ret) {
			stress_fail("worker %d: posting %s %s: %s", w->id,
				    kind_name(&wr[i]), rdma_op_name(wr[i].op),
				    strerror(ret));
			return;
		}
		if (wr[i].op == IBV_WR_SEND)
			nsend++;
	}
	w->ops += n;

	for (i = 0; i < n; i++) {
		struct swr *r = &wr[i];

		side = r->kind == REMOTE ? SIDE_A : SIDE_B;
		if (rdma_poll(w->p.s[SIDE_B].cq, &wc, DMABUF_MR_TIMEOUT_MS)) {
			stress_fail("worker %d: no completion for %s %s (%u of %u): %s",
				    w->id, kind_name(r), rdma_op_name(r->op),
				    i, n, strerror(errno));
			return;
		}
		s = seq_of(w->buf[side]);
		st = wc.status;
		w->status[st < STATUS_MAX ? st : STATUS_MAX - 1]++;
		if (wc.wr_id != i) {
			stress_fail("worker %d: completion for WR %llu, expected %u",
				    w->id, (unsigned long long)wc.wr_id, i);
			return;
		}
		/* Posted to a live MR, completed once a revoke had begun */
		if (!r->dead && s != r->reg_seq)
			w->raced++;
		if (st == IBV_WC_SUCCESS) {
			w->ok++;
			if (errors || flushes)
				stress_fail("worker %d: %s %s succeeded after an error on its QP",
					    w->id, kind_name(r),
					    rdma_op_name(r->op));
			else if (r->dead)
				stress_fail("worker %d: %s %s posted after revoke succeeded",
					    w->id, kind_name(r),
					    rdma_op_name(r->op));
			else
				check_success(w, r);
			continue;
		}
		if (st == IBV_WC_WR_FLUSH_ERR) {
			flushes++;
			continue;
		}
		if (errors++) {
			stress_fail("worker %d: second error on a QP: %s %s: %s",
				    w->id, kind_name(r), rdma_op_name(r->op),
				    ibv_wc_status_str(st));
			continue;
		}
		err_at = i;
		/*
		 * Racing the revoke or after it, one status per operation: a
		 * revoke between the lookup of a key and the copy completes
		 * the work request as one before the lookup.
		 */
		if (st != revoked_status(r))
			stress_fail("worker %d: %s %s on a %s MR: %s, expected %s",
				    w->id, kind_name(r), rdma_op_name(r->op),
				    r->dead ? "revoked" : "revoking",
				    ibv_wc_status_str(st),
				    ibv_wc_status_str(revoked_status(r)));
		else if (!r->dead && s == r->reg_seq)
			stress_fail("worker %d: %s %s: %s, but no revoke had begun",
				    w->id, kind_name(r), rdma_op_name(r->op),
				    ibv_wc_status_str(st));
	}
	/* A flush without an error of its own QP would hide a lost error. */
	if (flushes && !errors)
		stress_fail("worker %d: %u WRs flushed, but none failed",
			    w->id, flushes);

	if (errors || flushes) {
		/* Whatever side A received before the error: no other status. */
		while (ibv_poll_cq(w->p.s[SIDE_A].cq, 1, &wc) > 0) {
			st = wc.status;
			if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR &&
			    st != IBV_WC_LOC_QP_OP_ERR &&
			    st != IBV_WC_LOC_PROT_ERR)
				stress_fail("worker %d: receive completion %s after %s %s failed",
					    w->id, ibv_wc_status_str(st),
					    kind_name(&wr[err_at]),
					    rdma_op_name(wr[err_at].op));
		}
		if (rdma_pair_connect(&w->p))
			stress_fail("worker %d: new QPs: %s", w->id,
				    strerror(errno));
		w->renews++;
		model_resync(w, SIDE_A);
		model_resync(w, SIDE_B);
		return;
	}
	for (i = 0; i < nsend; i++) {
		if (rdma_poll(w->p.s[SIDE_A].cq, &wc, DMABUF_MR_TIMEOUT_MS)) {
			stress_fail("worker %d: no receive completion: %s",
				    w->id, strerror(errno));
			return;
		}
		if (wc.status != IBV_WC_SUCCESS)
			stress_fail("worker %d: receive %s after the SEND succeeded",
				    w->id, ibv_wc_status_str(wc.status));
	}
}

static void *worker_thread(void *arg)
{
	struct worker *w = arg;
	unsigned long batches = 0;
	int side;

	while (!stopping()) {
		for (side = 0; side < 2; side++) {
			struct smr *m = &w->mr[side];

			if (m->live && seq_of(w->buf[side]) >= m->reg_seq + 2 &&
			    !rnd(w, 2))
				mr_dereg(w, side);	/* revoked: let go */
			else if (m->live && !rnd(w, 32))
				mr_dereg(w, side);	/* churn */
			if (!m->live && !rnd(w, 16))
				buf_replace(w, side);
			if (!m->live)
				mr_reg(w, side);
		}
		/* Both buffers revoked: wait for a RESTORE, do not spin. */
		if (!w->mr[SIDE_A].live && !w->mr[SIDE_B].live)
			usleep(1000);
		batch(w);
		if (!(++batches % 8))
			model_check(w, rnd(w, 2));
	}
	for (side = 0; side < 2; side++)
		mr_dereg(w, side);
	return NULL;
}

/* The whole buffer must hold @v: nothing landed after REVOKE returned. */
static void scrub_check(struct sbuf *b, uint8_t v, const char *when)
{
	size_t size = BUF_PAGES * page_size;
	uint8_t *seen = malloc(size);
	ssize_t d;

	if (!seen) {
		stress_fail("out of memory");
		return;
	}
	if (mock_rw(b->fd, false, seen, size)) {
		stress_fail("RW read %s: %s", when, strerror(errno));
	} else {
		d = first_not(seen, size, v);
		if (d >= 0)
			stress_fail("buf %ld %s: byte %zd is %#x, not %#x (%lu late WRs)",
				    (long)(b - env.bufs), when, d, seen[d], v,
				    __atomic_load_n(&b->posts_revoked,
						    __ATOMIC_RELAXED));
		env.scrub_checks++;
	}
	free(seen);
}

static void *revoker_thread(void *arg)
{
	unsigned int seed = env.seed ^ 0x5bd1e995;
	uint8_t scrubbed[2 * STRESS_THREADS_MAX] = {};
	char holder[32] = "";
	struct sbuf *b;
	uint32_t flags;
	unsigned int i;

	while (!stopping()) {
		usleep(1000 * (rand_r(&seed) % 20));
		i = rand_r(&seed) % env.nbufs;
		b = &env.bufs[i];
		pthread_mutex_lock(&b->lock);
		if (seq_of(b) % 4 == 0) {
			flags = rand_r(&seed) % 2 ? DMABUF_MOCK_REVOKE_POISON :
						    DMABUF_MOCK_REVOKE_SWAP;
			seq_step(b);
			if (_test_cmd_revoke(env.mock, b->fd, flags,
					     DMABUF_MR_TIMEOUT_MS, holder,
					     sizeof(holder)))
				stress_fail("REVOKE: %s (still mapped by %s)",
					    strerror(errno), holder);
			seq_step(b);
			env.revokes++;
			if (flags == DMABUF_MOCK_REVOKE_POISON)
				env.revokes_poison++;
			else
				env.revokes_swap++;
			scrubbed[i] = flags == DMABUF_MOCK_REVOKE_POISON ?
				      DMABUF_MOCK_POISON : 0;
			scrub_check(b, scrubbed[i], "after REVOKE");
		} else {
			scrub_check(b, scrubbed[i], "before RESTORE");
			seq_step(b);
			if (_test_cmd_restore(env.mock, b->fd, 0))
				stress_fail("RESTORE: %s", strerror(errno));
			seq_step(b);
			env.restores++;
		}
		pthread_mutex_unlock(&b->lock);
	}
	return NULL;
}

/* The second revoker: REVOKE the race buffers, with no lock of its own. */
static void *chaos_revoker_thread(void *arg)
{
	unsigned int seed = env.seed ^ 0x27d4eb2f;
	char holder[32] = "";
	struct dmabuf_mock_revoke cmd;
	int ret;

	while (!stopping()) {
		static const uint32_t scrub[] = {
			0, DMABUF_MOCK_REVOKE_POISON, DMABUF_MOCK_REVOKE_SWAP,
		};

		memset(&cmd, 0, sizeof(cmd));
		cmd.size = sizeof(cmd);
		cmd.fd = env.chaos_fd[rand_r(&seed) % CHAOS_BUFS];
		cmd.flags = scrub[rand_r(&seed) % 3];
		cmd.timeout_ms = DMABUF_MR_TIMEOUT_MS;
		pthread_rwlock_rdlock(&env.chaos_quiet);
		ret = ioctl(env.mock, DMABUF_MOCK_REVOKE, &cmd);
		pthread_rwlock_unlock(&env.chaos_quiet);
		if (ret) {
			memcpy(holder, cmd.holder, sizeof(holder) - 1);
			stress_fail("racing REVOKE: %s (still mapped by %s)",
				    strerror(errno), holder);
			break;
		}
		__atomic_add_fetch(&env.chaos_revokes, 1, __ATOMIC_RELAXED);
		if (cmd.out_flags & DMABUF_MOCK_REVOKE_SUPERSEDED)
			__atomic_add_fetch(&env.chaos_superseded, 1,
					   __ATOMIC_RELAXED);
		usleep(rand_r(&seed) % 500);
	}
	return NULL;
}

/* The restorer: RESTORE the race buffers at random, revoked or not. */
static void *chaos_restorer_thread(void *arg)
{
	unsigned int seed = env.seed ^ 0x165667b1;
	int ret;

	while (!stopping()) {
		pthread_rwlock_rdlock(&env.chaos_quiet);
		ret = _test_cmd_restore(env.mock,
					env.chaos_fd[rand_r(&seed) % CHAOS_BUFS],
					0);
		pthread_rwlock_unlock(&env.chaos_quiet);
		if (ret) {
			stress_fail("racing RESTORE: %s", strerror(errno));
			break;
		}
		__atomic_add_fetch(&env.chaos_restores, 1, __ATOMIC_RELAXED);
		usleep(rand_r(&seed) % 500);
	}
	return NULL;
}

/* The registrar's QP pair, on which it WRITEs into its MRs. */
struct chaos_reg {
	struct rdma_pair p;
	struct plain_mr src;
	struct rdma_sge l;
	unsigned int seed;
};

/*
 * One round of the registrar: an MR on a race buffer, a WRITE through its
 * rkey, and the buffer read back through the exporter. When the buffer was
 * neither revoked nor restored from before the registration to after the
 * read, the WRITE must be there. A @quiet round is one in which nothing
 * revokes or restores (the caller holds chaos_quiet for write): the buffer
 * is restored first, and the registration and the WRITE must succeed.
 * Returns -1 when the registrar cannot go on.
 */
static int chaos_round(struct chaos_reg *c, int fd, bool quiet)
{
	const char *what = quiet ? "quiet" : "racing";
	struct dmabuf_mock_query q0, q1;
	enum ibv_wc_status st;
	struct dmabuf_mr m;
	uint8_t seen[256];
	struct ibv_wc wc;

	if (quiet && _test_cmd_restore(env.mock, fd, 0))
		return -1;
	if (_test_cmd_query(env.mock, fd, 0, &q0))
		return -1;
	if (_test_reg_dmabuf_mr(&c->p.s[SIDE_A], fd, 0, BUF_PAGES * page_size,
				DMABUF_MR_IOVA, DMABUF_MR_ACCESS, &m)) {
		/*
		 * Only a racing revoke refuses it, with ENODEV. Anything else
		 * is a failure and no refusal; in a quiet round the caller
		 * holds the write lock, under which nothing may wait.
		 */
		if (quiet || errno != ENODEV) {
			stress_fail("%s registration: %s%s", what,
				    strerror(errno), quiet ? "" : ", not ENODEV");
			return 0;
		}
		__atomic_add_fetch(&env.chaos_refused, 1, __ATOMIC_RELAXED);
		/* Give the restorer a chance before the next try. */
		usleep(200);
		return 0;
	}
	__atomic_add_fetch(&env.chaos_regs, 1, __ATOMIC_RELAXED);
	memset(c->src.buf + CANARY, rand_r(&c->seed) | 1, sizeof(seen));
	/* Clear of the first byte of a page, which the toucher uses */
	if (_test_rdma_op(&c->p.s[SIDE_B], IBV_WR_RDMA_WRITE, c->l,
			  m.iova + page_size + 64, m.rkey, 0, 0, &wc)) {
		stress_fail("%s WRITE: %s", what, strerror(errno));
		_test_dereg_dmabuf_mr(&m);
		return -1;
	}
	st = wc.status;
	if (st == IBV_WC_SUCCESS) {
		__atomic_add_fetch(&env.chaos_writes, 1, __ATOMIC_RELAXED);
		if (_test_cmd_rw(env.mock, fd, 0, page_size + 64, seen,
				 sizeof(seen)) ||
		    _test_cmd_query(env.mock, fd, 0, &q1)) {
			_test_dereg_dmabuf_mr(&m);
			return -1;
		}
		if (quiet && (q1.revokes != q0.revokes || q1.state)) {
			stress_fail("the buffer was revoked in a quiet round");
		} else if (q1.revokes == q0.revokes && !q1.state &&
			   !q0.state) {
			if (first_diff(c->src.buf + CANARY, seen,
				       sizeof(seen)) >= 0)
				stress_fail("%s WRITE did not land in the buffer",
					    what);
			else if (quiet)
				__atomic_add_fetch(&env.chaos_quiet_checks, 1,
						   __ATOMIC_RELAXED);
			else
				__atomic_add_fetch(&env.chaos_checks, 1,
						   __ATOMIC_RELAXED);
		}
	} else if (quiet || st != IBV_WC_REM_ACCESS_ERR) {
		stress_fail("%s WRITE: %s, not success%s", what,
			    ibv_wc_status_str(st),
			    quiet ? "" : " or REM_ACCESS_ERR");
	}
	if (_test_dereg_dmabuf_mr(&m))
		stress_fail("%s dereg: %s", what, strerror(errno));
	if (st != IBV_WC_SUCCESS && rdma_pair_connect(&c->p))
		return -1;
	return 0;
}

/* A round with the racing revoker and restorer held off. */
static int chaos_quiet_round(struct chaos_reg *c, int fd)
{
	int ret;

	pthread_rwlock_wrlock(&env.chaos_quiet);
	__atomic_add_fetch(&env.chaos_quiet_rounds, 1, __ATOMIC_RELAXED);
	ret = chaos_round(c, fd, true);
	pthread_rwlock_unlock(&env.chaos_quiet);
	return ret;
}

/*
 * The registrar: racing rounds, every CHAOS_QUIET_EVERY-th a quiet one,
 * and a last quiet round once the race is over.
 */
static void *chaos_registrar_thread(void *arg)
{
	struct chaos_reg c = { .seed = env.seed ^ 0x9e3779b1 };
	unsigned long round = 0;
	int side, fd, ret = 0;

	for (side = 0; side < 2; side++)
		if (rdma_side_open(&c.p.s[side], &env.dev[side]))
			goto fail;
	if (plain_alloc(&c.src, c.p.s[SIDE_B].pd, page_size) ||
	    rdma_pair_connect(&c.p))
		goto fail;
	c.l = plain_sge(&c.src, 256);

	while (!stopping() && !ret) {
		fd = env.chaos_fd[rand_r(&c.seed) % CHAOS_BUFS];
		if (++round % CHAOS_QUIET_EVERY)
			ret = chaos_round(&c, fd, false);
		else
			ret = chaos_quiet_round(&c, fd);
	}
	if (!ret && !__atomic_load_n(&env.failures, __ATOMIC_RELAXED))
		ret = chaos_quiet_round(&c, env.chaos_fd[0]);
	if (!ret)
		goto out;
fail:
	stress_fail("race registrar: %s", strerror(errno));
out:
	plain_free(&c.src);
	rdma_side_close(&c.p.s[SIDE_B]);
	rdma_side_close(&c.p.s[SIDE_A]);
	return NULL;
}

static __thread sigjmp_buf chaos_jmp;

static void chaos_sigbus(int sig)
{
	siglongjmp(chaos_jmp, 1);
}

/*
 * The toucher: fault the race buffers' pages in through a user mapping,
 * which a REVOKE zaps only after it has unlocked. A revoked buffer's pages
 * give SIGBUS until the next RESTORE.
 */
static void *chaos_toucher_thread(void *arg)
{
	unsigned int seed = env.seed ^ 0x85ebca6b;
	struct sigaction sa = { .sa_handler = chaos_sigbus };
	unsigned int i;
	size_t off;

	sigaction(SIGBUS, &sa, NULL);
	while (!stopping()) {
		i = rand_r(&seed) % CHAOS_BUFS;
		off = (rand_r(&seed) % BUF_PAGES) * page_size;
		if (sigsetjmp(chaos_jmp, 1)) {
			__atomic_add_fetch(&env.chaos_sigbus, 1,
					   __ATOMIC_RELAXED);
		} else {
			/* A real load and store of the mapping, each of which may fault. */
			__atomic_store_n(&env.chaos_map[i][off],
					 __atomic_load_n(&env.chaos_map[i][off],
							 __ATOMIC_RELAXED) + 1,
					 __ATOMIC_RELAXED);
			__atomic_add_fetch(&env.chaos_touches, 1,
					   __ATOMIC_RELAXED);
		}
		usleep(rand_r(&seed) % 200);
	}
	return NULL;
}

static void *(*const chaos_threads[])(void *) = {
	chaos_revoker_thread, chaos_restorer_thread, chaos_registrar_thread,
	chaos_toucher_thread,
};

/* Append to a summary line. */
#define SUMMARY_SIZE 1024

static __printf(2, 3) void cat(char *buf, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf + len, SUMMARY_SIZE - len, fmt, ap);
	va_end(ap);
}

/* RDMA_NLDEV_CMD_RES_GET: the device's resource counts by name. */
#define RES_MAX 16

struct res_summary {
	uint32_t index;
	unsigned int n;
	char name[RES_MAX][16];
	uint64_t curr[RES_MAX];
};

static int res_cb(struct nlmsghdr *nlh, void *arg)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX], *table, *entry, *name, *curr;
	struct res_summary *r = arg;
	int rem;

	nldev_parse(tb, NLMSG_DATA(nlh), nlh->nlmsg_len - NLMSG_HDRLEN);
	if (!tb[RDMA_NLDEV_ATTR_DEV_INDEX] ||
	    nla_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]) != r->index)
		return 0;
	table = tb[RDMA_NLDEV_ATTR_RES_SUMMARY];
	if (!table)
		return 0;
	rem = nla_payload_len(table);
	for (entry = nla_payload(table); nla_ok(entry, rem) && r->n < RES_MAX;
	     entry = nla_next(entry, &rem)) {
		nldev_parse(tb, nla_payload(entry), nla_payload_len(entry));
		name = tb[RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME];
		curr = tb[RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR];
		if (name && curr) {
			snprintf(r->name[r->n], sizeof(r->name[0]), "%.*s",
				 nla_payload_len(name), (char *)nla_payload(name));
			memcpy(&r->curr[r->n], nla_payload(curr),
			       sizeof(r->curr[0]));
			r->n++;
		}
	}
	return 1;
}

static int res_get(const char *dev, struct res_summary *r)
{
	memset(r, 0, sizeof(*r));
	r->index = nldev_dev_index(dev);
	if (r->index == UINT32_MAX)
		return -1;
	if (nldev_request(RDMA_NLDEV_CMD_RES_GET, r->index, res_cb, r))
		return -1;
	if (!r->n) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

static bool res_same(const struct res_summary *a, const struct res_summary *b,
		     char *why, size_t len)
{
	unsigned int i;

	if (a->n != b->n) {
		snprintf(why, len, "%u resource types, %u before", b->n, a->n);
		return false;
	}
	for (i = 0; i < a->n; i++) {
		if (strcmp(a->name[i], b->name[i]) || a->curr[i] != b->curr[i]) {
			snprintf(why, len, "%s %llu, %s %llu before",
				 b->name[i], (unsigned long long)b->curr[i],
				 a->name[i], (unsigned long long)a->curr[i]);
			return false;
		}
	}
	return true;
}

/* Which registration path works: ibv_reg_dmabuf_mr(), or the raw ioctl. */
static void env_probe(void)
{
	const char *peer = getenv("RDMA_PEER_DEV");
	struct dmabuf_mr_probe p = {};
	char why[200];

	env.mock = open(DMABUF_MOCK_PATH, O_RDWR | O_CLOEXEC);
	if (env.mock < 0) {
		snprintf(env.skip, sizeof(env.skip),
			 "no %s (CONFIG_DMABUF_MOCK_EXPORTER): %s",
			 DMABUF_MOCK_PATH, strerror(errno));
		return;
	}
	if (dmabuf_mr_env_dev(&env.dev[SIDE_A], env.skip, env.fail,
			      sizeof(env.skip)))
		return;
	env.dev[SIDE_B] = env.dev[SIDE_A];
	if (peer && rdma_dev_resolve(peer, -1, &env.dev[SIDE_B], why,
				     sizeof(why))) {
		snprintf(env.fail, sizeof(env.fail), "%s", why);
		return;
	}
	env.keyset[SIDE_B] = strcmp(env.dev[SIDE_A].name,
				    env.dev[SIDE_B].name) ? 1 : 0;

	dmabuf_mr_probe(env.mock, &env.dev[SIDE_A], &p, NULL);
	env.path = p.path;
	snprintf(env.skip, sizeof(env.skip), "%s", p.skip);
	snprintf(env.fail, sizeof(env.fail), "%s", p.fail);
	if (!p.skip[0] && !p.fail[0] && !p.pinned)
		snprintf(env.skip, sizeof(env.skip),
			 "%s does not pin dma-bufs: its MRs are not revoked, they fault",
			 env.dev[SIDE_A].name);
}

static int worker_setup(struct worker *w)
{
	size_t size = BUF_PAGES * page_size;
	int side;

	for (side = 0; side < 2; side++) {
		if (rdma_side_open(&w->p.s[side], &env.dev[side]) ||
		    plain_alloc(&w->plain[side], w->p.s[side].pd, size))
			return -1;
		keys_add(env.keyset[side], w->plain[side].mr->lkey,
			 w->plain[side].mr->rkey);
		w->mr[side].model = malloc(size);
		if (!w->mr[side].model)
			return -1;
	}
	return rdma_pair_connect(&w->p);
}

static void worker_teardown(struct worker *w)
{
	int side;

	for (side = 0; side < 2; side++) {
		mr_dereg(w, side);
		if (w->plain[side].mr)
			keys_del(env.keyset[side], w->plain[side].mr->lkey,
				 w->plain[side].mr->rkey);
		plain_free(&w->plain[side]);
		free(w->mr[side].model);
	}
	rdma_side_close(&w->p.s[SIDE_B]);
	rdma_side_close(&w->p.s[SIDE_A]);
}

TEST(revoke_stress)
{
	struct res_summary res_before[2], res_after[2];
	struct dmabuf_mock_stats before, after;
	struct worker *workers;
	unsigned long status[STATUS_MAX] = {};
	unsigned long ops = 0, ok = 0, regs = 0, refused = 0, raced = 0,
		      deregs = 0, renews = 0, checks = 0, replaced = 0,
		      revoked_posts = 0, raced_wcs = 0;
	struct dmabuf_mock_query q;
	char sum[SUMMARY_SIZE] = "", why[128];
	pthread_t revoker, chaos[ARRAY_SIZE(chaos_threads)];
	unsigned int i, started = 0, chaos_started = 0;
	uint64_t t0, waited;
	bool same;
	int side;

	if (env.skip[0])
		SKIP(return, "%s", env.skip);
	ASSERT_EQ(0, env.fail[0]) TH_LOG("%s", env.fail);

	ASSERT_EQ(0, _test_cmd_stats(env.mock, &before));
	for (side = 0; side < 2; side++)
		ASSERT_EQ(0, res_get(env.dev[side].name, &res_before[side]))
		TH_LOG("resource counts of %s: %s", env.dev[side].name,
		       strerror(errno));
	ksft_print_msg("%s <-> %s, %u s, %u threads, seed %u, MRs through %s\n",
		       env.dev[SIDE_A].name, env.dev[SIDE_B].name, env.secs,
		       env.threads, env.seed, env.path);

	workers = calloc(env.threads, sizeof(*workers));
	ASSERT_NE(NULL, workers);
	env.nbufs = 2 * env.threads;
	for (i = 0; i < env.nbufs; i++) {
		pthread_mutex_init(&env.bufs[i].lock, NULL);
		ASSERT_EQ(0, _test_cmd_create(env.mock, BUF_PAGES * page_size,
					      0, &env.bufs[i].fd))
		TH_LOG("CREATE: %s", strerror(errno));
	}
	for (i = 0; i < CHAOS_BUFS; i++) {
		ASSERT_EQ(0, _test_cmd_create(env.mock, BUF_PAGES * page_size,
					      0, &env.chaos_fd[i]))
		TH_LOG("CREATE: %s", strerror(errno));
		/* Before the race: a revoked buffer refuses new mappings. */
		env.chaos_map[i] = mmap(NULL, BUF_PAGES * page_size,
					PROT_READ | PROT_WRITE, MAP_SHARED,
					env.chaos_fd[i], 0);
		ASSERT_NE(MAP_FAILED, (void *)env.chaos_map[i])
		TH_LOG("mmap: %s", strerror(errno));
	}
	for (i = 0; i < env.threads; i++) {
		struct worker *w = &workers[i];

		w->id = i;
		w->seed = env.seed + i * 7919;
		w->buf[SIDE_A] = &env.bufs[2 * i];
		w->buf[SIDE_B] = &env.bufs[2 * i + 1];
		ASSERT_EQ(0, worker_setup(w))
		TH_LOG("worker %u: %s", i, strerror(errno));
	}

	t0 = now_ms();
	env.end_ms = t0 + env.secs * 1000ULL;
	for (i = 0; i < env.threads; i++) {
		if (pthread_create(&workers[i].thread, NULL, worker_thread,
				   &workers[i]))
			break;
		started++;
	}
	for (i = 0; i < ARRAY_SIZE(chaos_threads); i++) {
		if (pthread_create(&chaos[i], NULL, chaos_threads[i], NULL))
			break;
		chaos_started++;
	}
	if (started == env.threads &&
	    chaos_started == ARRAY_SIZE(chaos_threads) &&
	    pthread_create(&revoker, NULL, revoker_thread, NULL))
		started = 0;
	if (started != env.threads ||
	    chaos_started != ARRAY_SIZE(chaos_threads))
		__atomic_store_n(&env.stop, true, __ATOMIC_RELAXED);
	else
		pthread_join(revoker, NULL);
	for (i = 0; i < started; i++)
		pthread_join(workers[i].thread, NULL);
	for (i = 0; i < chaos_started; i++)
		pthread_join(chaos[i], NULL);
	ASSERT_EQ(env.threads, started) TH_LOG("pthread_create failed");
	ASSERT_EQ(ARRAY_SIZE(chaos_threads), chaos_started)
	TH_LOG("pthread_create failed");

	for (i = 0; i < env.threads; i++) {
		struct worker *w = &workers[i];
		unsigned int k;

		ops += w->ops;
		ok += w->ok;
		regs += w->regs;
		refused += w->regs_refused;
		raced += w->regs_raced;
		deregs += w->deregs;
		renews += w->renews;
		checks += w->data_checks;
		replaced += w->bufs_replaced;
		raced_wcs += w->raced;
		for (k = 0; k < STATUS_MAX; k++)
			status[k] += w->status[k];
		worker_teardown(w);
	}

	/* Every MR is gone: nothing attached, pinned, mapped or vmapped. */
	for (i = 0; i < env.nbufs; i++) {
		revoked_posts += env.bufs[i].posts_revoked;
		ASSERT_EQ(0, _test_cmd_query(env.mock, env.bufs[i].fd, 0, &q));
		EXPECT_EQ(0U, q.attachments);
		EXPECT_EQ(0U, q.pins);
		EXPECT_EQ(0U, q.maps);
		EXPECT_EQ(0U, q.vmaps);
		close(env.bufs[i].fd);
	}
	for (i = 0; i < CHAOS_BUFS; i++) {
		munmap((void *)env.chaos_map[i], BUF_PAGES * page_size);
		ASSERT_EQ(0, _test_cmd_query(env.mock, env.chaos_fd[i], 0, &q));
		EXPECT_EQ(0U, q.attachments);
		EXPECT_EQ(0U, q.pins);
		EXPECT_EQ(0U, q.maps);
		EXPECT_EQ(0U, q.vmaps);
		EXPECT_EQ(0U, q.mmaps);
		close(env.chaos_fd[i]);
	}
	ASSERT_EQ(0, _test_cmd_stats(env.mock, &after));
	EXPECT_EQ(before.buffers, after.buffers);
	EXPECT_EQ(before.pages, after.pages);

	/* Resource counts: the devices may tear down a little after close. */
	for (side = 0; side < 2; side++) {
		waited = now_ms();
		do {
			ASSERT_EQ(0, res_get(env.dev[side].name,
					     &res_after[side]));
			same = res_same(&res_before[side], &res_after[side],
					why, sizeof(why));
			if (!same)
				usleep(100000);
		} while (!same && now_ms() - waited < 10000);
		EXPECT_TRUE(same) TH_LOG("%s: %s", env.dev[side].name, why);
	}

	cat(sum, "%llu s, %u threads: ",
	    (unsigned long long)(now_ms() - t0) / 1000, env.threads);
	cat(sum, "%lu operations (%lu ok), ", ops, ok);
	cat(sum, "%lu revokes (%lu poison, %lu swap), %lu restores, ",
	    env.revokes, env.revokes_poison, env.revokes_swap, env.restores);
	cat(sum, "%lu scrub checks, %lu WRs posted to revoked MRs, ",
	    env.scrub_checks, revoked_posts);
	cat(sum, "%lu registrations (%lu refused on revoked buffers, ", regs,
	    refused);
	cat(sum, "%lu raced a revoke), %lu deregs, %lu QP renewals, ", raced,
	    deregs, renews);
	cat(sum, "%lu completions raced a revoke, ", raced_wcs);
	cat(sum, "%lu data checks, %lu buffers replaced; errors:", checks,
	    replaced);
	for (i = 0; i < STATUS_MAX; i++)
		if (status[i] && i != IBV_WC_SUCCESS)
			cat(sum, " %s=%lu", ibv_wc_status_str(i), status[i]);
	if (ops == ok)
		cat(sum, " none");
	ksft_print_msg("summary: %s\n", sum);
	sum[0] = 0;
	cat(sum, "%lu revokes (%lu superseded), %lu restores, ",
	    env.chaos_revokes, env.chaos_superseded, env.chaos_restores);
	cat(sum, "%lu registrations (%lu refused), %lu WRITEs, ",
	    env.chaos_regs, env.chaos_refused, env.chaos_writes);
	cat(sum, "%lu checked in racing rounds, %lu of %lu quiet rounds checked, ",
	    env.chaos_checks, env.chaos_quiet_checks, env.chaos_quiet_rounds);
	cat(sum, "%lu mmap touches (%lu SIGBUS)", env.chaos_touches,
	    env.chaos_sigbus);
	ksft_print_msg("race buffers: %s\n", sum);
	EXPECT_EQ(0UL, env.failures)
	TH_LOG("%lu failures, the first ones above", env.failures);
	/*
	 * It has to have stressed something: the workers, the revokers and
	 * the restorer each ran. Which windows they hit (WRs posted to
	 * revoked MRs, completions that raced a revoke, SIGBUS on a revoked
	 * mapping, WRITEs checked between racing revokes, superseded
	 * revokes) is up to the scheduler and only reported above; the
	 * tests that force those windows are dmabuf_mr's and the KUnit
	 * suites dmabuf_mock, ib_umem_dmabuf and rxe_dmabuf.
	 */
	EXPECT_LT(0UL, ok);
	EXPECT_LT(0UL, env.revokes);
	EXPECT_LT(0UL, env.chaos_revokes);
	EXPECT_LT(0UL, env.chaos_restores);
	/*
	 * The windows the registrar makes itself: every quiet round, the
	 * last one after the race included, registered on the restored
	 * buffer and found its WRITE there.
	 */
	EXPECT_LT(0UL, env.chaos_quiet_rounds);
	EXPECT_EQ(env.chaos_quiet_rounds, env.chaos_quiet_checks);
	free(workers);
}

static unsigned int env_uint(const char *name, unsigned int def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

int main(int argc, char **argv)
{
	pthread_rwlockattr_t rwattr;

	page_size = sysconf(_SC_PAGESIZE);
	env.secs = env_uint("DMABUF_MR_STRESS_SECS", STRESS_SECS_DEFAULT);
	env.threads = env_uint("DMABUF_MR_STRESS_THREADS",
			       STRESS_THREADS_DEFAULT);
	env.seed = env_uint("DMABUF_MR_STRESS_SEED", time(NULL));
	pthread_rwlockattr_init(&rwattr);
	/* The registrar's quiet round must not wait for a gap in the race. */
	pthread_rwlockattr_setkind_np(&rwattr,
				      PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&env.chaos_quiet, &rwattr);
	if (!env.threads || env.threads > STRESS_THREADS_MAX) {
		ksft_print_msg("DMABUF_MR_STRESS_THREADS: 1 to %d\n",
			       STRESS_THREADS_MAX);
		return KSFT_FAIL;
	}
	/* The run, its teardown, and slack for a slow (emulated) guest. */
	_revoke_stress_object.timeout = env.secs + 300;
	env_probe();
	return test_harness_run(argc, argv);
}
