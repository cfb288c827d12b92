// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer, for upstream rxe with the distribution's rdma-core: an RC QP
 * whose receive CQ overflows keeps a reference to the MR that the
 * overflowing WRITE WITH IMMEDIATE targeted, and ibv_dereg_mr() of that MR
 * then waits 50 s in rxe's __rxe_cleanup() and WARNs.
 *
 * Two RC QPs on one device, connected to each other. The receiving QP's
 * receive CQ holds one completion and is never polled; it has two receives
 * posted. The other QP posts two RDMA WRITE WITH IMMEDIATE into an MR of
 * 4 KiB. The second completion finds the CQ full and the QP goes to the
 * error state. Then the MR is deregistered, and the time it took printed.
 *
 * In C, not C++ as the project's own tools: it goes to linux-rdma with the
 * fix. Plain libibverbs, nothing of this project's.
 *
 * usage: rxe_cq_overflow DEVICE GID_INDEX   (e.g. rxe0 1: a RoCE v2 GID)
 * Exit: 0 when dereg returned within 10 s, 1 when it took longer, 2 when
 * the setup failed.
 */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define CHECK(x)							\
	do {								\
		if (!(x)) {						\
			perror(#x);					\
			exit(2);					\
		}							\
	} while (0)

static struct ibv_qp *qp_init(struct ibv_pd *pd, struct ibv_cq *scq,
			      struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq,
		.recv_cq = rcq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	CHECK(qp);
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
	return qp;
}

static void qp_connect(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid,
		       int gid_index)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.port_num = 1,
			.grh = { .dgid = *gid, .sgid_index = gid_index,
				 .hop_limit = 64 },
		},
	};

	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
			     IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			     IBV_QP_MIN_RNR_TIMER));
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 1,
	};
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_cq *scq, *rcq, *tcq;
	struct ibv_qp *rx, *tx;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_mr *mr, *src;
	struct ibv_pd *pd;
	union ibv_gid gid;
	static char buf[4096], data[64];
	double t0;
	int i, gid_index;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX\n", argv[0]);
		return 2;
	}
	gid_index = atoi(argv[2]);
	list = ibv_get_device_list(NULL);
	CHECK(list);
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	CHECK(ctx);
	CHECK(!ibv_query_gid(ctx, 1, gid_index, &gid));

	CHECK(pd = ibv_alloc_pd(ctx));
	CHECK(scq = ibv_create_cq(ctx, 16, NULL, NULL, 0));
	CHECK(tcq = ibv_create_cq(ctx, 16, NULL, NULL, 0));
	CHECK(rcq = ibv_create_cq(ctx, 1, NULL, NULL, 0));
	CHECK(mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE));
	CHECK(src = ibv_reg_mr(pd, data, sizeof(data), 0));
	rx = qp_init(pd, scq, rcq);
	tx = qp_init(pd, tcq, tcq);
	qp_connect(rx, tx->qp_num, &gid, gid_index);
	qp_connect(tx, rx->qp_num, &gid, gid_index);

	for (i = 0; i < 2; i++) {
		struct ibv_recv_wr rwr = { .wr_id = i }, *bad_rwr;

		CHECK(!ibv_post_recv(rx, &rwr, &bad_rwr));
	}
	for (i = 0; i < 2; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)data,
			.length = sizeof(data),
			.lkey = src->lkey,
		};
		struct ibv_send_wr wr = {
			.wr_id = i,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = (uintptr_t)buf,
				     .rkey = mr->rkey },
		}, *bad;

		CHECK(!ibv_post_send(tx, &wr, &bad));
	}
	/* The second completion overflows rcq: rx goes to the error state. */
	t0 = now();
	do {
		CHECK(!ibv_query_qp(rx, &a, IBV_QP_STATE, &ia));
	} while (a.qp_state != IBV_QPS_ERR && now() - t0 < 30);
	if (a.qp_state != IBV_QPS_ERR) {
		fprintf(stderr, "the receive CQ did not overflow\n");
		return 2;
	}
	t0 = now();
	CHECK(!ibv_dereg_mr(mr));
	t0 = now() - t0;
	printf("ibv_dereg_mr() after the receive CQ overflowed: %.3f s\n", t0);

	ibv_destroy_qp(tx);
	ibv_destroy_qp(rx);
	ibv_dereg_mr(src);
	ibv_destroy_cq(rcq);
	ibv_destroy_cq(tcq);
	ibv_destroy_cq(scq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return t0 < 10 ? 0 : 1;
}
