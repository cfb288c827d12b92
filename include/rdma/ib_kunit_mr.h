/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * The dma-buf MR scenarios every driver's KUnit suite runs: register, the
 * exporter's revoke, dereg, a fence the device refuses or never answers, a
 * registration the device fails, an exporter's revoke racing a dereg. A
 * driver supplies an ops table (how to register and deregister, how its
 * stubbed device answers the fence) and reports from its stubs each fence
 * command that reaches the device and each last resort (reset or stop) it
 * takes; the scenarios assert the contract of
 * Documentation/infiniband/dmabuf_revoke.rst on those counts, on the
 * exporter's counts and on the async events.
 */

#ifndef IB_KUNIT_MR_H
#define IB_KUNIT_MR_H

#include <kunit/test.h>
#include <rdma/ib_kunit_helpers.h>

struct dma_buf;
struct ib_mr;
struct ib_udata;
struct ib_umem;

/**
 * enum ib_kunit_fence - How the stubbed device answers the next fences
 * @IB_KUNIT_FENCE_DONE: it completes them: the MR no longer reaches memory
 * @IB_KUNIT_FENCE_REFUSED: it answers with an error and runs on; the MR
 *	still reaches its memory (a status a user can provoke)
 * @IB_KUNIT_FENCE_GONE: it never answers (a timeout) or is gone
 */
enum ib_kunit_fence {
	IB_KUNIT_FENCE_DONE,
	IB_KUNIT_FENCE_REFUSED,
	IB_KUNIT_FENCE_GONE,
};

/**
 * struct ib_kunit_mr_ops - What a driver's suite tells the scenarios
 * @mr_bytes: the length of the MRs the scenarios register
 * @try_reg: register a dma-buf MR of @mr_bytes on @fd; return it or an
 *	ERR_PTR. The scenarios track what it returns (ib_kunit_mr_track()).
 * @dereg: the driver's dereg verb; 0 means the MR is gone
 * @umem: the MR's dma-buf umem
 * @fence_key: the key (or handle) the fence command of @mr names
 * @answer_fence: how the device answers the fences from now on
 * @fail_reg: make the device fail the next registration
 * @key_in_use: optional: whether no new MR can get @key. A driver that
 *	frees the key at the fence and keeps it from new MRs otherwise
 *	(EFA's and mana's PD refusal) has its own cases for that.
 * @recover: optional: what the owner's recovery does after a last resort
 *	that the driver's own commands wait for (bnxt_en's firmware reset)
 * @reg_fails_errno: what a registration the device failed returns
 * @dereg_refused_errno: what a dereg the device refused returns
 * @dereg_gone_errno: what a dereg the device never answered returns: 0 if
 *	the MR goes, else it stays until @recover
 * @stop_keeps_device: the last resort stops another function than the
 *	device the fences go to (mlx5's data-direct function, which every
 *	mlx5_ib device of its VUID shares): the device raises no
 *	IB_EVENT_DEVICE_FATAL, and a dereg after the stop may still fence
 * @fatal_from_owner: the last resort asks the function's owner for a reset
 *	that happens later (irdma's request to ice, i40e or idpf): the driver
 *	raises no IB_EVENT_DEVICE_FATAL itself; the unregistration that the
 *	reset brings does
 */
struct ib_kunit_mr_ops {
	u64 mr_bytes;
	struct ib_mr *(*try_reg)(struct kunit *test, int fd);
	int (*dereg)(struct ib_mr *mr, struct ib_udata *udata);
	struct ib_umem *(*umem)(struct ib_mr *mr);
	u64 (*fence_key)(struct ib_mr *mr);
	void (*answer_fence)(struct kunit *test, enum ib_kunit_fence answer);
	void (*fail_reg)(struct kunit *test);
	bool (*key_in_use)(struct kunit *test, u64 key);
	void (*recover)(struct kunit *test);
	int reg_fails_errno;
	int dereg_refused_errno;
	int dereg_gone_errno;
	bool stop_keeps_device;
	bool fatal_from_owner;
};

#define IB_KUNIT_MR_FENCE_KEYS 8

/**
 * struct ib_kunit_mr_fixture - What the scenarios count
 * @ops: the driver's
 * @events: the async events of the device
 * @mr: the MR tracked last (ib_kunit_mr_track()), while registered
 * @fences: fence commands that reached the device
 * @fence_keys: the keys of the first of them
 * @last_resorts: the driver's resets or stops of the device
 * @mapped_at_last_resort: whether @mr's memory was still mapped at the
 *	last of them
 * @race_revoke: at the next fence, revoke this buffer from another thread
 * @revoker: that revoke
 * @watch: where @mr's revoke callback ran
 *
 * The first member of the driver's test->priv.
 */
struct ib_kunit_mr_fixture {
	const struct ib_kunit_mr_ops *ops;
	struct ib_kunit_events *events;
	struct ib_mr *mr;
	unsigned int fences;
	u64 fence_keys[IB_KUNIT_MR_FENCE_KEYS];
	unsigned int last_resorts;
	bool mapped_at_last_resort;
	struct dma_buf *race_revoke;
	struct ib_kunit_revoker *revoker;
	struct ib_kunit_revoke_watch watch;
};

void ib_kunit_mr_init(struct kunit *test, struct ib_kunit_mr_fixture *fx,
		      const struct ib_kunit_mr_ops *ops,
		      struct ib_device *ibdev);
void ib_kunit_mr_track(struct kunit *test, struct ib_mr *mr);
int ib_kunit_mr_dereg(struct kunit *test, struct ib_mr *mr);
void ib_kunit_mr_expect_reg_error(struct kunit *test, struct ib_mr *mr,
				  int err);
void ib_kunit_mr_fence_seen(struct kunit *test, u64 key);
void ib_kunit_mr_last_resort_seen(struct kunit *test);

const void *ib_kunit_mr_unfenced_params(struct kunit *test, const void *prev,
					char *desc);

void ib_kunit_mr_revoke_then_dereg(struct kunit *test);
void ib_kunit_mr_dereg_disarms(struct kunit *test);
void ib_kunit_mr_revoke_fence_fails(struct kunit *test);
void ib_kunit_mr_dereg_fence_fails(struct kunit *test);
void ib_kunit_mr_dereg_refused_keeps_mr(struct kunit *test);
void ib_kunit_mr_reg_fails(struct kunit *test);
void ib_kunit_mr_dereg_races_revoke(struct kunit *test);

/*
 * One scenario as a case of the driver's suite, named test_<scenario>: the
 * case array is the suite's own, as KUnit keeps each case's result in it.
 */
#define IB_KUNIT_MR_CASE(scenario)					\
	{ .run_case = ib_kunit_mr_##scenario, .name = "test_" #scenario }

/* The same, once for each answer but done: refused, then gone */
#define IB_KUNIT_MR_CASE_UNFENCED(scenario)				\
	{ .run_case = ib_kunit_mr_##scenario, .name = "test_" #scenario,	\
	  .generate_params = ib_kunit_mr_unfenced_params }

#endif /* IB_KUNIT_MR_H */
