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
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <linux/netlink.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_netlink.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
	struct ibv_qp_ex *qpx;	/* NULL without ATOMIC WRITE */
	bool shared;		/* ctx and pd belong to the other side */
};

struct rdma_pair {
	struct rdma_side s[2];
};

/* Set once, before any test runs: the provider has no reg_dmabuf_mr. */
static bool dmabuf_mr_raw;
/*
 * Set once too: register through UVERBS_METHOD_REG_MR with a dma-buf fd
 * (DMABUF_MR_REG_MR), the other uverbs way to a driver's reg_user_mr_dmabuf.
 */
static bool dmabuf_mr_regmr;
/*
 * Set once too: 0 when ibv_reg_dmabuf_mr() registered the probe's MR,
 * else its errno, whichever path the tests take by default.
 */
static int dmabuf_mr_verbs_err = EOPNOTSUPP;

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
	s->qpx = NULL;
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

/*
 * UVERBS_METHOD_REG_MR with a dma-buf fd and an offset into it, instead of
 * a user address: the same driver op as REG_DMABUF_MR, with no user handle
 * (and so no IB_EVENT_MR_REVOKED).
 */
static inline int _test_reg_dmabuf_mr_regmr(struct rdma_side *s, int fd,
					    uint64_t offset, uint64_t length,
					    uint64_t iova, int access,
					    struct dmabuf_mr *m)
{
	uint32_t lkey = 0, rkey = 0, access32 = access;
	struct ib_uverbs_attr a[] = {
		{ .attr_id = UVERBS_ATTR_REG_MR_HANDLE },
		{ .attr_id = UVERBS_ATTR_REG_MR_PD_HANDLE,
		  .data = s->pd->handle },
		{ .attr_id = UVERBS_ATTR_REG_MR_IOVA,
		  .len = sizeof(iova), .data = iova },
		{ .attr_id = UVERBS_ATTR_REG_MR_LENGTH,
		  .len = sizeof(length), .data = length },
		{ .attr_id = UVERBS_ATTR_REG_MR_ACCESS_FLAGS,
		  .len = sizeof(access32) },
		{ .attr_id = UVERBS_ATTR_REG_MR_FD_OFFSET,
		  .len = sizeof(offset), .data = offset },
		{ .attr_id = UVERBS_ATTR_REG_MR_FD, .data_s64 = fd },
		{ .attr_id = UVERBS_ATTR_REG_MR_RESP_LKEY,
		  .len = sizeof(lkey), .data = (uintptr_t)&lkey },
		{ .attr_id = UVERBS_ATTR_REG_MR_RESP_RKEY,
		  .len = sizeof(rkey), .data = (uintptr_t)&rkey },
	};
	unsigned int i;

	memset(m, 0, sizeof(*m));
	memcpy(&a[4].data, &access32, sizeof(access32));
	for (i = 0; i < ARRAY_SIZE(a); i++)
		a[i].flags = UVERBS_ATTR_F_MANDATORY;
	if (raw_ioctl(s->ctx, s->d.driver_id, UVERBS_OBJECT_MR,
		      UVERBS_METHOD_REG_MR, a, ARRAY_SIZE(a)))
		return -1;
	m->handle = a[0].data;
	m->lkey = lkey;
	m->rkey = rkey;
	m->s = s;
	m->iova = iova;
	m->length = length;
	m->live = true;
	return 0;
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

	if (dmabuf_mr_regmr)
		return _test_reg_dmabuf_mr_regmr(s, fd, offset, length, iova,
						 access, m);
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

/* What registering one dma-buf MR showed, before any test ran. */
struct dmabuf_mr_probe {
	const char *path;	/* how MRs get registered */
	bool pinned;		/* the importer pins the dma-buf */
	bool mapped;		/* it maps it for DMA */
	bool cpu;		/* it vmaps it: CPU copies, as rxe */
	char skip[256];		/* every test skips with this */
	char fail[256];		/* every test fails with this */
};

/* "pin,vmap" and the like: what the importer does with a dma-buf. */
static inline int dmabuf_mr_expect_parse(const char *s, bool *pin, bool *map,
					 bool *vmap)
{
	char buf[64], *tok, *save;

	*pin = *map = *vmap = false;
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "pin"))
			*pin = true;
		else if (!strcmp(tok, "map"))
			*map = true;
		else if (!strcmp(tok, "vmap"))
			*vmap = true;
		else if (strcmp(tok, "none"))
			return -1;
	}
	return 0;
}

/*
 * Register one dma-buf MR on @d the way every test will: with libibverbs,
 * or with the raw ioctl when the provider has no reg_dmabuf_mr (or
 * DMABUF_MR_RAW is set), and see from the mock's counters whether the
 * importer pins, maps and vmaps. The rxe wrappers say what rxe must do in
 * DMABUF_MR_EXPECT ("pin,vmap"), and the probe must find exactly that;
 * without it (hardware), what it finds is what the tests expect. A device
 * without dma-buf MRs skips, unless the caller named it in RDMA_DEV: then
 * it fails. @more runs with the MR's device open and a buffer, if all went
 * well.
 */
static inline void dmabuf_mr_probe(int mock, const struct rdma_dev_info *d,
				   struct dmabuf_mr_probe *p,
				   void (*more)(struct rdma_side *s, int fd))
{
	const char *expect = getenv("DMABUF_MR_EXPECT");
	size_t page = sysconf(_SC_PAGESIZE);
	bool pin = false, map = false, vmap = false;
	struct dmabuf_mock_query q;
	struct rdma_side s;
	struct dmabuf_mr m;
	int fd = -1, ret;

	if (expect && dmabuf_mr_expect_parse(expect, &pin, &map, &vmap)) {
		snprintf(p->fail, sizeof(p->fail),
			 "DMABUF_MR_EXPECT=%s: not a list of pin, map, vmap",
			 expect);
		return;
	}
	if (rdma_side_open(&s, d)) {
		snprintf(p->fail, sizeof(p->fail), "%s: %s", d->name,
			 strerror(errno));
		return;
	}
	if (_test_cmd_create(mock, page, 0, &fd)) {
		snprintf(p->fail, sizeof(p->fail), "CREATE: %s",
			 strerror(errno));
		goto out;
	}
	/* Tried whatever the environment asks for: a test may want it. */
	if (!dmabuf_mr_raw && !dmabuf_mr_regmr) {
		dmabuf_mr_verbs_err = 0;
		if (_test_reg_dmabuf_mr(&s, fd, 0, page, DMABUF_MR_IOVA,
					DMABUF_MR_ACCESS, &m))
			dmabuf_mr_verbs_err = errno;
		else
			_test_dereg_dmabuf_mr(&m);
	}
	p->path = "ibv_reg_dmabuf_mr()";
	ret = -1;
	errno = EOPNOTSUPP;
	if (getenv("DMABUF_MR_REG_MR")) {
		p->path = "the raw REG_MR ioctl with a dma-buf fd (DMABUF_MR_REG_MR is set)";
		dmabuf_mr_regmr = true;
		if (s.d.driver_id == UINT32_MAX) {
			snprintf(p->fail, sizeof(p->fail),
				 "no uverbs driver id found for %s", d->name);
			goto out;
		}
		ret = _test_reg_dmabuf_mr(&s, fd, 0, page, DMABUF_MR_IOVA,
					  DMABUF_MR_ACCESS, &m);
		goto registered;
	}
	if (!getenv("DMABUF_MR_RAW"))
		ret = _test_reg_dmabuf_mr(&s, fd, 0, page, DMABUF_MR_IOVA,
					  DMABUF_MR_ACCESS, &m);
	if (ret && errno == EOPNOTSUPP) {
		p->path = getenv("DMABUF_MR_RAW") ?
			"the raw REG_DMABUF_MR ioctl (DMABUF_MR_RAW is set)" :
			"the raw REG_DMABUF_MR ioctl (provider has no reg_dmabuf_mr)";
		dmabuf_mr_raw = true;
		if (s.d.driver_id == UINT32_MAX) {
			snprintf(p->fail, sizeof(p->fail),
				 "no uverbs driver id found for %s", d->name);
			goto out;
		}
		ret = _test_reg_dmabuf_mr(&s, fd, 0, page, DMABUF_MR_IOVA,
					  DMABUF_MR_ACCESS, &m);
		if (ret && errno == EOPNOTSUPP) {
			/* A device named by the caller must have them. */
			snprintf(getenv("RDMA_DEV") ? p->fail : p->skip,
				 sizeof(p->skip), "%s has no dma-buf MRs (%s)",
				 d->name, getenv("RDMA_DEV") ?
				 "RDMA_DEV names it" : "the first device");
			goto out;
		}
	}
registered:
	if (ret) {
		snprintf(p->fail, sizeof(p->fail),
			 "registering a dma-buf MR through %s: %s", p->path,
			 strerror(errno));
		goto out;
	}
	if (_test_cmd_query(mock, fd, 0, &q)) {
		snprintf(p->fail, sizeof(p->fail), "QUERY: %s",
			 strerror(errno));
		_test_dereg_dmabuf_mr(&m);
		goto out;
	}
	p->pinned = q.pins;
	p->mapped = q.maps;
	p->cpu = q.vmaps;
	_test_dereg_dmabuf_mr(&m);
	if (expect && (pin != p->pinned || map != p->mapped ||
		       vmap != p->cpu)) {
		snprintf(p->fail, sizeof(p->fail),
			 "%s: the importer %s, %s, %s; DMABUF_MR_EXPECT=%s",
			 d->name, p->pinned ? "pins" : "does not pin",
			 p->mapped ? "maps" : "does not map",
			 p->cpu ? "vmaps" : "does not vmap", expect);
		goto out;
	}
	if (more)
		more(&s, fd);
out:
	if (fd >= 0)
		close(fd);
	rdma_side_close(&s);
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

	struct ibv_qp_init_attr_ex iax = {
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_SEND |
				  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
				  IBV_QP_EX_WITH_ATOMIC_WRITE,
	};

	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	if (!s->cq)
		return -1;
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	/* With ATOMIC WRITE where the device and the provider have it. */
	iax.send_cq = s->cq;
	iax.recv_cq = s->cq;
	iax.cap = ia.cap;
	iax.pd = s->pd;
	s->qpx = NULL;
	s->qp = ibv_create_qp_ex(s->ctx, &iax);
	if (s->qp)
		s->qpx = ibv_qp_to_qp_ex(s->qp);
	else
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

/* ATOMIC WRITE of @value to @raddr: -1 with EOPNOTSUPP on a QP without. */
static inline int rdma_post_atomic_write(struct rdma_side *s, uint64_t raddr,
					 uint32_t rkey, uint64_t value,
					 uint64_t wr_id)
{
	if (!s->qpx) {
		errno = EOPNOTSUPP;
		return -1;
	}
	ibv_wr_start(s->qpx);
	s->qpx->wr_id = wr_id;
	s->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(s->qpx, rkey, raddr, &value);
	errno = ibv_wr_complete(s->qpx);
	return errno ? -1 : 0;
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

/*
 * RDMA netlink (NETLINK_RDMA, the nldev client), as `rdma resource show mr`
 * uses it: a request, then the replies until NLMSG_DONE, or the error.
 * @cb sees every reply message of a dump; it returns non-zero to stop.
 */
#define NLDEV_BUF_SIZE 65536

static inline int nldev_request(uint16_t cmd, uint32_t dev_index,
				int (*cb)(struct nlmsghdr *nlh, void *arg),
				void *arg)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct {
		struct nlmsghdr nlh;
		struct nlattr index;
		uint32_t value;
	} req = {
		.nlh = {
			.nlmsg_len = NLMSG_LENGTH(0),
			.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd),
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			.nlmsg_seq = 1,
		},
	};
	int sk, ret = -1, err = 0, stop = 0;
	struct nlmsghdr *nlh;
	void *buf;
	ssize_t n;

	if (dev_index != UINT32_MAX) {
		req.index.nla_type = RDMA_NLDEV_ATTR_DEV_INDEX;
		req.index.nla_len = NLA_HDRLEN + sizeof(req.value);
		req.value = dev_index;
		req.nlh.nlmsg_len = sizeof(req);
	}
	buf = malloc(NLDEV_BUF_SIZE);
	if (!buf)
		return -1;
	sk = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	if (sk < 0)
		goto out;
	if (sendto(sk, &req, req.nlh.nlmsg_len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) != req.nlh.nlmsg_len)
		goto out;
	for (;;) {
		n = recv(sk, buf, NLDEV_BUF_SIZE, 0);
		if (n < 0)
			goto out;
		for (nlh = buf; NLMSG_OK(nlh, n); nlh = NLMSG_NEXT(nlh, n)) {
			if (nlh->nlmsg_seq != req.nlh.nlmsg_seq)
				continue;
			if (nlh->nlmsg_type == NLMSG_DONE) {
				ret = 0;
				goto out;
			}
			if (nlh->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(nlh);

				err = e->error ? -e->error : EPROTO;
				goto out;
			}
			/* Read the dump to its end even after @cb is done. */
			if (!stop)
				stop = cb(nlh, arg);
		}
	}
out:
	if (!err)
		err = errno;
	if (sk >= 0)
		close(sk);
	free(buf);
	if (ret)
		errno = err;
	return ret;
}

/*
 * The walk over attributes, as the kernel's nla_ok() and nla_next(): @a
 * fits in the @rem bytes left; the attribute after @a, @rem counted down.
 */
static inline bool nla_ok(const struct nlattr *a, int rem)
{
	return rem >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	       a->nla_len <= rem;
}

static inline struct nlattr *nla_next(struct nlattr *a, int *rem)
{
	*rem -= NLA_ALIGN(a->nla_len);
	return (void *)a + NLA_ALIGN(a->nla_len);
}

/* Index the attributes in @data by type; later ones of a type win. */
static inline void nldev_parse(struct nlattr **tb, void *data, int len)
{
	struct nlattr *a;
	uint16_t type;

	memset(tb, 0, RDMA_NLDEV_ATTR_MAX * sizeof(*tb));
	for (a = data; nla_ok(a, len); a = nla_next(a, &len)) {
		type = a->nla_type & NLA_TYPE_MASK;
		if (type < RDMA_NLDEV_ATTR_MAX)
			tb[type] = a;
	}
}

static inline void *nla_payload(struct nlattr *a)
{
	return (void *)a + NLA_HDRLEN;
}

static inline int nla_payload_len(struct nlattr *a)
{
	return a->nla_len - NLA_HDRLEN;
}

static inline uint32_t nla_u32(struct nlattr *a)
{
	uint32_t v;

	memcpy(&v, nla_payload(a), sizeof(v));
	return v;
}

struct nldev_dev_lookup {
	const char *name;
	uint32_t index;
};

static inline int nldev_dev_cb(struct nlmsghdr *nlh, void *arg)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	struct nldev_dev_lookup *l = arg;
	struct nlattr *name;

	nldev_parse(tb, NLMSG_DATA(nlh), nlh->nlmsg_len - NLMSG_HDRLEN);
	name = tb[RDMA_NLDEV_ATTR_DEV_NAME];
	if (!tb[RDMA_NLDEV_ATTR_DEV_INDEX] || !name ||
	    strnlen(nla_payload(name), nla_payload_len(name)) !=
	    strlen(l->name) || strcmp(nla_payload(name), l->name))
		return 0;
	l->index = nla_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
	return 1;
}

/* The nldev index of RDMA device @name, or UINT32_MAX with errno set. */
static inline uint32_t nldev_dev_index(const char *name)
{
	struct nldev_dev_lookup l = { .name = name, .index = UINT32_MAX };

	if (nldev_request(RDMA_NLDEV_CMD_GET, UINT32_MAX, nldev_dev_cb, &l))
		return UINT32_MAX;
	if (l.index == UINT32_MAX)
		errno = ENODEV;
	return l.index;
}

/* An MR as RDMA_NLDEV_CMD_RES_MR_GET shows it; -1: attribute absent. */
struct nldev_mr {
	uint32_t lkey;
	uint32_t rkey;
	int found;		/* entries with these keys */
	uint32_t mrn;		/* RDMA_NLDEV_ATTR_RES_MRN, the restrack id */
	int dmabuf;		/* RDMA_NLDEV_ATTR_RES_MR_DMABUF */
	int revoked;		/* RDMA_NLDEV_ATTR_RES_MR_REVOKED */
};

static inline int nla_u8_or(struct nlattr *a, int absent)
{
	return a ? *(uint8_t *)nla_payload(a) : absent;
}

static inline int nldev_mr_cb(struct nlmsghdr *nlh, void *arg)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX], *table, *entry;
	struct nldev_mr *mr = arg;
	int rem;

	nldev_parse(tb, NLMSG_DATA(nlh), nlh->nlmsg_len - NLMSG_HDRLEN);
	table = tb[RDMA_NLDEV_ATTR_RES_MR];
	if (!table)
		return 0;
	rem = nla_payload_len(table);
	for (entry = nla_payload(table); nla_ok(entry, rem);
	     entry = nla_next(entry, &rem)) {
		nldev_parse(tb, nla_payload(entry), nla_payload_len(entry));
		if (tb[RDMA_NLDEV_ATTR_RES_LKEY] && tb[RDMA_NLDEV_ATTR_RES_RKEY] &&
		    nla_u32(tb[RDMA_NLDEV_ATTR_RES_LKEY]) == mr->lkey &&
		    nla_u32(tb[RDMA_NLDEV_ATTR_RES_RKEY]) == mr->rkey) {
			mr->found++;
			mr->mrn = tb[RDMA_NLDEV_ATTR_RES_MRN] ?
				  nla_u32(tb[RDMA_NLDEV_ATTR_RES_MRN]) :
				  UINT32_MAX;
			mr->dmabuf = nla_u8_or(tb[RDMA_NLDEV_ATTR_RES_MR_DMABUF],
					       -1);
			mr->revoked =
				nla_u8_or(tb[RDMA_NLDEV_ATTR_RES_MR_REVOKED], -1);
		}
	}
	return 0;
}

/*
 * The MRs of device @dev_index with keys @lkey and @rkey, from a full dump
 * (the keys need CAP_NET_ADMIN: run as root). 0, or -1 with errno set.
 */
static inline int nldev_mr_get(uint32_t dev_index, uint32_t lkey,
			       uint32_t rkey, struct nldev_mr *mr)
{
	*mr = (struct nldev_mr){ .lkey = lkey, .rkey = rkey, .dmabuf = -1,
				 .revoked = -1, .mrn = UINT32_MAX };
	return nldev_request(RDMA_NLDEV_CMD_RES_MR_GET, dev_index,
			     nldev_mr_cb, mr);
}

static inline int nldev_mr_count_cb(struct nlmsghdr *nlh, void *arg)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX], *table, *entry;
	int *count = arg, rem;

	nldev_parse(tb, NLMSG_DATA(nlh), nlh->nlmsg_len - NLMSG_HDRLEN);
	table = tb[RDMA_NLDEV_ATTR_RES_MR];
	if (!table)
		return 0;
	rem = nla_payload_len(table);
	for (entry = nla_payload(table); nla_ok(entry, rem);
	     entry = nla_next(entry, &rem))
		(*count)++;
	return 0;
}

/* How many MRs device @dev_index has, as `rdma resource show mr` lists. */
static inline int nldev_mr_count(uint32_t dev_index)
{
	int count = 0;

	if (nldev_request(RDMA_NLDEV_CMD_RES_MR_GET, dev_index,
			  nldev_mr_count_cb, &count))
		return -1;
	return count;
}

/*
 * A trace instance of its own (instances/NAME under tracefs) with one
 * event enabled, so that the global tracing state is left as it was.
 * The top of tracefs: /sys/kernel/tracing, or under debugfs.
 */
struct trace_inst {
	char dir[256];		/* empty until created */
	char enable[320];
};

static inline const char *tracefs_root(void)
{
	static const char *const roots[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
	};
	char path[64];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(roots); i++) {
		snprintf(path, sizeof(path), "%s/instances", roots[i]);
		if (!access(path, W_OK))
			return roots[i];
	}
	return NULL;
}

static inline int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -1;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		ret = -1;
	close(fd);
	return ret;
}

/* Create instance @name of tracefs @root with @event ("system/name") on. */
static inline int trace_inst_start(struct trace_inst *t, const char *root,
				   const char *name, const char *event)
{
	int err;

	if (snprintf(t->enable, sizeof(t->enable),
		     "%s/instances/%s/events/%s/enable", root, name,
		     event) >= (int)sizeof(t->enable) ||
	    snprintf(t->dir, sizeof(t->dir), "%s/instances/%s", root,
		     name) >= (int)sizeof(t->dir)) {
		t->dir[0] = 0;
		errno = ENAMETOOLONG;
		return -1;
	}
	if (mkdir(t->dir, 0700)) {
		t->dir[0] = 0;
		return -1;
	}
	if (!write_str(t->enable, "1"))
		return 0;
	err = errno;
	rmdir(t->dir);
	t->dir[0] = 0;
	errno = err;
	return -1;
}

static inline int trace_inst_stop(struct trace_inst *t)
{
	int ret;

	if (!t->dir[0])
		return 0;
	write_str(t->enable, "0");
	ret = rmdir(t->dir);
	t->dir[0] = 0;
	return ret;
}

/* The whole (non-consuming) trace of the instance, NUL-terminated. */
static inline char *trace_inst_read(struct trace_inst *t)
{
	size_t len = 0, cap = 65536;
	char path[300], *buf = malloc(cap);
	int fd = -1;
	ssize_t n;

	if (!buf || snprintf(path, sizeof(path), "%s/trace", t->dir) >=
		    (int)sizeof(path))
		goto err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto err;
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len < 4096) {
			char *bigger = realloc(buf, cap * 2);

			if (!bigger)
				goto err;
			buf = bigger;
			cap *= 2;
		}
	}
	if (n < 0)
		goto err;
	close(fd);
	buf[len] = 0;
	return buf;
err:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* One rdma_core:mr_revoke line, as its TP_printk() writes it. */
struct mr_revoke_trace {
	char device[IBV_SYSFS_NAME_MAX];
	uint32_t id;
	uint32_t lkey;
	uint32_t rkey;
	char by[16];
	long long duration_ns;
};

/*
 * The mr_revoke lines of @trace for @device and @lkey: how many, and the
 * last one in @out. *@unparsed counts the mr_revoke lines (of any MR)
 * that do not have the expected format.
 */
static inline int trace_mr_revoke_find(const char *trace, const char *device,
				       uint32_t lkey,
				       struct mr_revoke_trace *out,
				       int *unparsed)
{
	const char *line = trace, *tag;
	struct mr_revoke_trace r;
	int found = 0;

	*unparsed = 0;

	while (line && *line) {
		tag = strstr(line, " mr_revoke: ");
		line = strchr(line, '\n');
		if (!tag || (line && tag > line))
			goto next;
		if (sscanf(tag,
			   " mr_revoke: device=%63s mr.id=%u lkey=0x%x rkey=0x%x by=%15s duration_ns=%lld",
			   r.device, &r.id, &r.lkey, &r.rkey, r.by,
			   &r.duration_ns) != 6) {
			(*unparsed)++;
			goto next;
		}
		if (!strcmp(r.device, device) && r.lkey == lkey) {
			found++;
			*out = r;
		}
next:
		if (line)
			line++;
	}
	return found;
}

#endif
