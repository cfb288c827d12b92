/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for dmabuf_mr: dma-buf MRs, RC QP pairs, posting and polling.
 *
 * A dma-buf MR is registered with ibv_reg_dmabuf_mr() or, when the provider
 * has none (rxe in rdma-core before it gained one), with the raw uverbs
 * ioctl UVERBS_METHOD_REG_DMABUF_MR; struct dmabuf_mr hides which. Rereg
 * always goes through the write() command, because libibverbs refuses to
 * rereg a dma-buf MR itself (EINVAL) and never asks the kernel.
 *
 * Same style as dmabuf_mock_utils.h: _test_x() returns 0, or -1 with errno
 * set; test_cmd_x() macros assert that it worked. What the test programs
 * share is here, once: plain buffers, posting and polling, traffic
 * threads, netlink and the environment's device.
 * Nothing here waits without a timeout: a lost completion fails the test.
 */
#ifndef __SELFTEST_DMABUF_MR_UTILS_H
#define __SELFTEST_DMABUF_MR_UTILS_H

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "../drivers/dma-buf/dmabuf_mock_utils.h"

/* Where dma-buf MRs start in the IO virtual address space: not 0, not offset. */
#define DMABUF_MR_IOVA 0x10000000000ULL
#define DMABUF_MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
/* Per completion, and per REVOKE: the guest may run under TCG emulation. */
#define DMABUF_MR_TIMEOUT_MS 30000

/* A device as the environment names it, resolved once. */
struct rdma_dev_info {
	char name[IBV_SYSFS_NAME_MAX];
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	uint16_t lid;
	bool ib;		/* InfiniBand link layer: LID addressing */
	enum ibv_mtu mtu;
	uint8_t rd_atom;	/* outstanding RDMA READs and atomics per QP */
	uint32_t driver_id;	/* for the raw ioctl; UINT32_MAX if unknown */
};

/* One end of an RC connection. In loopback both ends share ctx and pd. */
struct rdma_side {
	struct rdma_dev_info d;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	bool shared;		/* ctx and pd belong to the other side */
};

struct rdma_pair {
	struct rdma_side s[2];
};

/* Set once, before any test runs: the provider has no reg_dmabuf_mr. */
static bool dmabuf_mr_raw;

struct dmabuf_mr {
	struct ibv_mr *mr;	/* NULL when registered by the raw ioctl */
	struct rdma_side *s;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
	uint64_t iova;
	uint64_t length;
	bool live;
};

static inline struct ibv_context *rdma_open_by_name(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i, err = ENODEV;

	for (i = 0; list && list[i]; i++) {
		if (!strcmp(ibv_get_device_name(list[i]), name)) {
			ctx = ibv_open_device(list[i]);
			err = errno;
			break;
		}
	}
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		errno = err;
	return ctx;
}

/*
 * One verbs ioctl. The header says which driver's uapi the caller speaks;
 * the kernel refuses any other with EINVAL before looking further.
 */
static inline int raw_ioctl(struct ibv_context *ctx, uint32_t driver_id,
			    uint16_t object, uint16_t method,
			    struct ib_uverbs_attr *attrs, unsigned int n)
{
	uint64_t buf[(sizeof(struct ib_uverbs_ioctl_hdr) +
		      12 * sizeof(struct ib_uverbs_attr)) / sizeof(uint64_t)];
	struct ib_uverbs_ioctl_hdr *hdr = (void *)buf;
	int ret;

	if (n > 12) {
		errno = E2BIG;
		return -1;
	}
	memset(buf, 0, sizeof(buf));
	hdr->length = sizeof(*hdr) + n * sizeof(*attrs);
	hdr->object_id = object;
	hdr->method_id = method;
	hdr->num_attrs = n;
	hdr->driver_id = driver_id;
	if (n)
		memcpy(hdr->attrs, attrs, n * sizeof(*attrs));
	ret = ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, hdr);
	if (n)
		memcpy(attrs, hdr->attrs, n * sizeof(*attrs));
	return ret;
}

/*
 * libibverbs keeps the driver id to itself. The kernel checks it before
 * anything else and refuses a wrong one with EINVAL; with the right one a
 * context query succeeds, or fails otherwise (EOPNOTSUPP from a driver
 * without query_ucontext, as rxe). No side effect either way.
 */
static inline bool raw_driver_id_is(struct ibv_context *ctx, uint32_t id)
{
	return !raw_ioctl(ctx, id, UVERBS_OBJECT_DEVICE,
			  UVERBS_METHOD_QUERY_CONTEXT, NULL, 0) ||
	       errno != EINVAL;
}

static inline uint32_t raw_driver_id(struct ibv_context *ctx)
{
	uint32_t id;

	if (raw_driver_id_is(ctx, RDMA_DRIVER_RXE))
		return RDMA_DRIVER_RXE;
	for (id = 0; id < 64; id++)
		if (raw_driver_id_is(ctx, id))
			return id;
	return UINT32_MAX;
}

static inline bool gid_is_ipv4(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid->raw, prefix, sizeof(prefix));
}

/* The first RoCE v2 GID that maps an IPv4 address (::ffff:a.b.c.d). */
static inline int rdma_find_ipv4_gid(struct ibv_context *ctx, uint8_t port,
				     int tbl_len, int *index,
				     union ibv_gid *gid)
{
	struct ibv_gid_entry e;
	int i;

	for (i = 0; i < tbl_len; i++) {
		if (ibv_query_gid_ex(ctx, port, i, &e, 0)) {
			if (errno != EOPNOTSUPP)
				continue;
			/* Old kernel: no types, take any IPv4-mapped GID. */
			if (ibv_query_gid(ctx, port, i, &e.gid))
				continue;
			e.gid_type = IBV_GID_TYPE_ROCE_V2;
		}
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && gid_is_ipv4(&e.gid)) {
			*index = i;
			*gid = e.gid;
			return 0;
		}
	}
	return -1;
}

/*
 * Port from RDMA_PORT (default 1), GID index @gid_index or, if negative,
 * the first RoCE v2 IPv4 GID; on InfiniBand GID 0 and the LID.
 */
static inline int rdma_dev_resolve(const char *name, int gid_index,
				   struct rdma_dev_info *d, char *why,
				   size_t why_len)
{
	const char *port = getenv("RDMA_PORT");
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	int ret = -1;

	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->port = port ? atoi(port) : 1;
	ctx = rdma_open_by_name(name);
	if (!ctx) {
		snprintf(why, why_len, "cannot open RDMA device %s: %s", name,
			 strerror(errno));
		return -1;
	}
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, d->port, &pa)) {
		snprintf(why, why_len, "cannot query %s port %u", name,
			 d->port);
		goto out;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		snprintf(why, why_len, "%s port %u is %s", name, d->port,
			 ibv_port_state_str(pa.state));
		goto out;
	}
	d->rd_atom = da.max_qp_rd_atom < da.max_qp_init_rd_atom ?
		     da.max_qp_rd_atom : da.max_qp_init_rd_atom;
	if (d->rd_atom > 16)
		d->rd_atom = 16;
	if (!d->rd_atom)
		d->rd_atom = 1;
	d->ib = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
	d->lid = pa.lid;
	d->mtu = pa.active_mtu;
	if (gid_index >= 0 || d->ib) {
		d->gid_index = gid_index >= 0 ? gid_index : 0;
		if (ibv_query_gid(ctx, d->port, d->gid_index, &d->gid)) {
			snprintf(why, why_len, "no GID %d on %s port %u",
				 d->gid_index, name, d->port);
			goto out;
		}
	} else if (rdma_find_ipv4_gid(ctx, d->port, pa.gid_tbl_len,
				      &d->gid_index, &d->gid)) {
		snprintf(why, why_len,
			 "no RoCE v2 IPv4 GID on %s port %u (set RDMA_GID_INDEX)",
			 name, d->port);
		goto out;
	}
	d->driver_id = raw_driver_id(ctx);
	ret = 0;
out:
	ibv_close_device(ctx);
	return ret;
}

/*
 * The device the tests run on: RDMA_DEV, else the first one, with GID
 * RDMA_GID_INDEX, else as rdma_dev_resolve() picks one. 0, or -1 with the
 * reason in @fail when RDMA_DEV names it (a device the caller named must
 * work), in @skip when it does not (the first device may not be usable).
 */
static inline int dmabuf_mr_env_dev(struct rdma_dev_info *d, char *skip,
				    char *fail, size_t len)
{
	const char *name = getenv("RDMA_DEV"), *gid = getenv("RDMA_GID_INDEX");
	char first[IBV_SYSFS_NAME_MAX] = "", why[200];
	struct ibv_device **list;
	int n = 0;

	if (!name) {
		list = ibv_get_device_list(&n);
		if (list && n > 0)
			snprintf(first, sizeof(first), "%s",
				 ibv_get_device_name(list[0]));
		if (list)
			ibv_free_device_list(list);
		if (!first[0]) {
			snprintf(skip, len, "no RDMA device");
			return -1;
		}
	}
	if (!rdma_dev_resolve(name ? name : first, gid ? atoi(gid) : -1, d,
			      why, sizeof(why)))
		return 0;
	snprintf(name ? fail : skip, len, "%s", why);
	return -1;
}

static inline int rdma_side_open(struct rdma_side *s,
				 const struct rdma_dev_info *d)
{
	memset(s, 0, sizeof(*s));
	s->d = *d;
	s->ctx = rdma_open_by_name(d->name);
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd) {
		ibv_close_device(s->ctx);
		s->ctx = NULL;
		return -1;
	}
	return 0;
}

static inline void rdma_side_close(struct rdma_side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	s->qp = NULL;
	s->cq = NULL;
	if (s->shared)
		return;
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	s->pd = NULL;
	s->ctx = NULL;
}

static inline int _test_reg_dmabuf_mr(struct rdma_side *s, int fd,
				      uint64_t offset, uint64_t length,
				      uint64_t iova, int access,
				      struct dmabuf_mr *m)
{
	uint32_t lkey = 0, rkey = 0, fd32 = fd, access32 = access;
	struct ib_uverbs_attr a[] = {
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_HANDLE },
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE,
		  .data = s->pd->handle },
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_OFFSET,
		  .len = sizeof(offset), .data = offset },
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_LENGTH,
		  .len = sizeof(length), .data = length },
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_IOVA,
		  .len = sizeof(iova), .data = iova },
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_FD,
		  .len = sizeof(fd32) },
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS,
		  .len = sizeof(access32) },
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY,
		  .len = sizeof(lkey), .data = (uintptr_t)&lkey },
		{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY,
		  .len = sizeof(rkey), .data = (uintptr_t)&rkey },
	};
	unsigned int i;

	memset(m, 0, sizeof(*m));
	if (!dmabuf_mr_raw) {
		m->mr = ibv_reg_dmabuf_mr(s->pd, offset, length, iova, fd,
					  access);
		if (!m->mr)
			return -1;
		m->handle = m->mr->handle;
		m->lkey = m->mr->lkey;
		m->rkey = m->mr->rkey;
	} else {
		/* Inline data is read from the start of the field. */
		memcpy(&a[5].data, &fd32, sizeof(fd32));
		memcpy(&a[6].data, &access32, sizeof(access32));
		for (i = 0; i < ARRAY_SIZE(a); i++)
			a[i].flags = UVERBS_ATTR_F_MANDATORY;
		if (raw_ioctl(s->ctx, s->d.driver_id, UVERBS_OBJECT_MR,
			      UVERBS_METHOD_REG_DMABUF_MR, a, ARRAY_SIZE(a)))
			return -1;
		m->handle = a[0].data;
		m->lkey = lkey;
		m->rkey = rkey;
	}
	m->s = s;
	m->iova = iova;
	m->length = length;
	m->live = true;
	return 0;
}

static inline int _test_dereg_dmabuf_mr(struct dmabuf_mr *m)
{
	struct ib_uverbs_attr a = {
		.attr_id = UVERBS_ATTR_DESTROY_MR_HANDLE,
		.flags = UVERBS_ATTR_F_MANDATORY,
		.data = m->handle,
	};
	int ret;

	if (!m->live)
		return 0;
	if (m->mr) {
		ret = ibv_dereg_mr(m->mr);
		if (ret) {
			errno = ret;
			ret = -1;
		}
	} else {
		ret = raw_ioctl(m->s->ctx, m->s->d.driver_id, UVERBS_OBJECT_MR,
				UVERBS_METHOD_MR_DESTROY, &a, 1);
	}
	if (!ret)
		m->live = false;
	return ret;
}

/* IB_USER_VERBS_CMD_REREG_MR moving MR @handle to @pd, nothing else. */
static inline int _test_rereg_mr_pd(struct ibv_context *ctx, uint32_t handle,
				    struct ibv_pd *pd)
{
	uint64_t buf[(sizeof(struct ib_uverbs_cmd_hdr) +
		      sizeof(struct ib_uverbs_rereg_mr)) / sizeof(uint64_t)];
	struct ib_uverbs_cmd_hdr *hdr = (void *)buf;
	struct ib_uverbs_rereg_mr *cmd = (void *)(hdr + 1);
	struct ib_uverbs_rereg_mr_resp resp;

	memset(buf, 0, sizeof(buf));
	hdr->command = IB_USER_VERBS_CMD_REREG_MR;
	hdr->in_words = sizeof(buf) / 4;
	hdr->out_words = sizeof(resp) / 4;
	cmd->response = (uintptr_t)&resp;
	cmd->mr_handle = handle;
	cmd->flags = IBV_REREG_MR_CHANGE_PD;
	cmd->pd_handle = pd->handle;
	return write(ctx->cmd_fd, buf, sizeof(buf)) == sizeof(buf) ? 0 : -1;
}

/* An RC QP in INIT, with every remote access allowed. */
static inline int rdma_qp_create(struct rdma_side *s)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = 64,
			.max_recv_wr = 64,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = s->d.port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	if (!s->cq)
		return -1;
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		return -1;
	errno = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	return errno ? -1 : 0;
}

/* INIT -> RTR -> RTS, towards @t (which may be @s itself's peer QP). */
static inline int rdma_qp_connect(struct rdma_side *s,
				  const struct rdma_side *t)
{
	uint8_t rd_atom = s->d.rd_atom < t->d.rd_atom ? s->d.rd_atom :
							t->d.rd_atom;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = s->d.mtu < t->d.mtu ? s->d.mtu : t->d.mtu,
		.dest_qp_num = t->qp->qp_num,
		.max_dest_rd_atomic = rd_atom,
		.min_rnr_timer = 12,
		.ah_attr = { .port_num = s->d.port },
	};

	if (s->d.ib) {
		a.ah_attr.dlid = t->d.lid;
	} else {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = t->d.gid;
		a.ah_attr.grh.sgid_index = s->d.gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	errno = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			      IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			      IBV_QP_MIN_RNR_TIMER);
	if (errno)
		return -1;
	/* ~0.5 s ACK timeout: TCG is slow, and a retry is harmless here. */
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS,
		.timeout = 17,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = rd_atom,
	};
	errno = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	return errno ? -1 : 0;
}

/* Fresh CQs and QPs on both sides, connected to each other. */
static inline int rdma_pair_connect(struct rdma_pair *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (p->s[i].qp)
			ibv_destroy_qp(p->s[i].qp);
		if (p->s[i].cq)
			ibv_destroy_cq(p->s[i].cq);
		p->s[i].qp = NULL;
		p->s[i].cq = NULL;
	}
	for (i = 0; i < 2; i++)
		if (rdma_qp_create(&p->s[i]))
			return -1;
	if (rdma_qp_connect(&p->s[0], &p->s[1]) ||
	    rdma_qp_connect(&p->s[1], &p->s[0]))
		return -1;
	return 0;
}

struct rdma_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

static inline bool rdma_op_is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	       op == IBV_WR_ATOMIC_CMP_AND_SWP;
}

/* One signaled WR; returns 0 or an errno like ibv_post_send(). */
static inline int rdma_post(struct rdma_side *s, enum ibv_wr_opcode op,
			    struct rdma_sge l, uint64_t raddr, uint32_t rkey,
			    uint64_t add, uint64_t swap, uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = l.addr,
		.length = l.length,
		.lkey = l.lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (rdma_op_is_atomic(op)) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
		wr.wr.atomic.swap = swap;
	} else if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(s->qp, &wr, &bad);
}

static inline int rdma_post_recv(struct rdma_side *s, struct rdma_sge l,
				 uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = l.addr,
		.length = l.length,
		.lkey = l.lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000;
}

/* Defined below */
static inline int rdma_poll(struct ibv_cq *cq, struct ibv_wc *wc,
			    unsigned int timeout_ms);
static inline const char *rdma_op_name(enum ibv_wr_opcode op);

/* The first byte where @a and @b differ, or -1. */
static inline ssize_t first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
	size_t i;

	if (!memcmp(a, b, n))
		return -1;
	for (i = 0; a[i] == b[i]; i++)
		;
	return i;
}

/* The first byte of @p that is not @v, or -1. */
static inline ssize_t first_not(const uint8_t *p, size_t n, uint8_t v)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != v)
			return i;
	return -1;
}

/* Guard bytes on either side of the window of a plain buffer. */
#define CANARY 64
#define CANARY_BYTE 0xee

/*
 * malloc'ed memory under an ordinary MR, the other end of the transfers:
 * a window of the size asked for, between canaries that show a transfer
 * that went past either end of it.
 */
struct plain_mr {
	uint8_t *buf;
	size_t length;
	struct ibv_mr *mr;
};

/* 0, or -1 with errno set; plain_free() cleans up either way. */
static inline int plain_alloc(struct plain_mr *b, struct ibv_pd *pd,
			      size_t window)
{
	int ret;

	b->length = window + 2 * CANARY;
	ret = posix_memalign((void **)&b->buf, sysconf(_SC_PAGESIZE),
			     b->length);
	if (ret) {
		b->buf = NULL;
		errno = ret;
		return -1;
	}
	memset(b->buf, CANARY_BYTE, b->length);
	b->mr = ibv_reg_mr(pd, b->buf, b->length, DMABUF_MR_ACCESS);
	return b->mr ? 0 : -1;
}

static inline void plain_free(struct plain_mr *b)
{
	if (b->mr)
		ibv_dereg_mr(b->mr);
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

/* The first @length bytes of @b's window. */
static inline struct rdma_sge plain_sge(struct plain_mr *b, uint32_t length)
{
	return (struct rdma_sge){ (uintptr_t)b->buf + CANARY, length,
				  b->mr->lkey };
}

/*
 * Post @op on @s, signaled, with @op as its wr_id, and wait for its
 * completion: 0 with it in @wc, or -1 with errno set (the post's, or
 * ETIMEDOUT or EIO from the poll).
 */
static inline int _test_rdma_op(struct rdma_side *s, enum ibv_wr_opcode op,
				struct rdma_sge l, uint64_t raddr,
				uint32_t rkey, uint64_t add, uint64_t swap,
				struct ibv_wc *wc)
{
	errno = rdma_post(s, op, l, raddr, rkey, add, swap, op);
	if (errno)
		return -1;
	return rdma_poll(s->cq, wc, DMABUF_MR_TIMEOUT_MS);
}

/* As _test_rdma_op(), asserting that the WR completed: its status. */
static inline enum ibv_wc_status rdma_op(struct __test_metadata *_metadata,
					 struct rdma_side *s,
					 enum ibv_wr_opcode op,
					 struct rdma_sge l, uint64_t raddr,
					 uint32_t rkey, uint64_t add,
					 uint64_t swap)
{
	struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };

	ASSERT_EQ(0, _test_rdma_op(s, op, l, raddr, rkey, add, swap, &wc))
	TH_LOG("%s: %s", rdma_op_name(op), strerror(errno));
	EXPECT_EQ(op, wc.wr_id);
	return wc.status;
}

/*
 * Assert that a dma-buf MR on @s registers: @length bytes of dma-buf @fd
 * from @offset, at DMABUF_MR_IOVA + @offset, with DMABUF_MR_ACCESS.
 */
#define test_cmd_reg_mr(s, m, fd, offset, length)                            \
	({                                                                   \
		uint64_t __off = (offset);                                   \
		ASSERT_EQ(0, _test_reg_dmabuf_mr(s, fd, __off, length,       \
						 DMABUF_MR_IOVA + __off,     \
						 DMABUF_MR_ACCESS, m))       \
		TH_LOG("registering %s: %s", #m, strerror(errno));           \
	})

#define test_cmd_dereg_mr(m)                                                 \
	({                                                                   \
		ASSERT_EQ(0, _test_dereg_dmabuf_mr(m))                       \
		TH_LOG("dereg of %s: %s", #m, strerror(errno));              \
	})

/*
 * A thread that keeps up to @window RDMA WRITEs or READs of @chunk bytes
 * in flight on @s, from @local (@window chunks under @lkey) to @raddr
 * (@chunks chunks under @rkey), until the first error; @alternate makes
 * every other one a READ. A READ that succeeds must bring back only @held,
 * if @held is 0 to 255. The thread ends when nothing is outstanding any
 * more after an error or after the caller set @stop; and when no
 * completion came for @idle_ms, or it ran for @max_ms (@timed_out): a lost
 * completion, a device that went away, or an error that never came.
 */
#define TRAFFIC_WINDOW_MAX 16

struct traffic {
	struct rdma_side *s;
	enum ibv_wr_opcode op;
	bool alternate;
	uint8_t *local;
	uint32_t lkey;
	uint64_t raddr;
	uint32_t rkey;
	unsigned int window;
	uint32_t chunk;
	unsigned int chunks;
	int held;
	unsigned int idle_ms;
	unsigned int max_ms;
	/* What the thread saw */
	unsigned int ok;		/* atomic while the thread runs */
	bool stop;			/* atomic: the main thread gives up */
	bool done;			/* atomic: the thread has returned */
	enum ibv_wc_status first_error;
	unsigned int errors;
	unsigned int unexpected;	/* errors after the first, not flushes */
	unsigned int bad_reads;
	int post_error;
	bool timed_out;
};

static inline void traffic_loop(struct traffic *t)
{
	uint64_t now = now_ms(), end = now + t->max_ms, last = now, next = 0;
	unsigned int outstanding = 0, slot;
	struct ibv_wc wc[TRAFFIC_WINDOW_MAX];
	enum ibv_wr_opcode op;
	int i, n;

	for (;;) {
		while (!t->errors && outstanding < t->window &&
		       !__atomic_load_n(&t->stop, __ATOMIC_RELAXED)) {
			struct rdma_sge l = {
				(uintptr_t)t->local +
					(next % t->window) * t->chunk,
				t->chunk, t->lkey,
			};

			op = t->alternate && next % 2 ? IBV_WR_RDMA_READ :
							t->op;
			if (op == IBV_WR_RDMA_READ)
				memset((void *)(uintptr_t)l.addr, 0, t->chunk);
			t->post_error = rdma_post(t->s, op, l, t->raddr +
						  (next % t->chunks) *
						  t->chunk, t->rkey, 0, 0,
						  next);
			if (t->post_error)
				return;
			next++;
			outstanding++;
		}
		n = ibv_poll_cq(t->s->cq, ARRAY_SIZE(wc), wc);
		if (n < 0) {
			t->post_error = EIO;
			return;
		}
		now = now_ms();
		if (n)
			last = now;
		for (i = 0; i < n; i++) {
			outstanding--;
			if (wc[i].status == IBV_WC_SUCCESS) {
				slot = wc[i].wr_id % t->window;
				if (wc[i].opcode == IBV_WC_RDMA_READ &&
				    t->held >= 0 &&
				    first_not(t->local + slot * t->chunk,
					      t->chunk, t->held) >= 0)
					t->bad_reads++;
				__atomic_add_fetch(&t->ok, 1, __ATOMIC_RELAXED);
			} else if (!t->errors++) {
				t->first_error = wc[i].status;
			} else if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
				t->unexpected++;
			}
		}
		if (!outstanding && (t->errors ||
				     __atomic_load_n(&t->stop, __ATOMIC_RELAXED)))
			return;
		if (now > end || now - last > t->idle_ms) {
			t->timed_out = true;
			return;
		}
		if (!n)
			usleep(50);
	}
}

static inline void *traffic_thread(void *arg)
{
	struct traffic *t = arg;

	traffic_loop(t);
	__atomic_store_n(&t->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Wait until @t has completed @n WRs successfully, or has ended, or
 * @timeout_ms have passed: how many it has completed.
 */
static inline unsigned int traffic_wait(struct traffic *t, unsigned int n,
					unsigned int timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	unsigned int ok;

	while ((ok = __atomic_load_n(&t->ok, __ATOMIC_RELAXED)) < n &&
	       !__atomic_load_n(&t->done, __ATOMIC_ACQUIRE) && now_ms() < end)
		usleep(1000);
	return ok;
}

/* One completion within @timeout_ms: 0, or -1 with errno ETIMEDOUT/EIO. */
static inline int rdma_poll(struct ibv_cq *cq, struct ibv_wc *wc,
			    unsigned int timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	unsigned int spins = 0;
	int n;

	for (;;) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n > 0)
			return 0;
		if (n < 0) {
			errno = EIO;
			return -1;
		}
		if (now_ms() > end) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (++spins < 256)
			sched_yield();
		else
			usleep(500);
	}
}

static inline const char *rdma_op_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
		return "RDMA WRITE";
	case IBV_WR_RDMA_READ:
		return "RDMA READ";
	case IBV_WR_SEND:
		return "SEND";
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return "FETCH AND ADD";
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return "COMPARE AND SWAP";
	default:
		return "?";
	}
}

#endif
