// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * dma-buf memory regions for soft-RoCE, revocable by the exporter.
 *
 * rxe moves data with the CPU, so it never DMA-maps a dma-buf: the core
 * attaches for the ib_device's own struct device and pins without mapping
 * (ib_umem_dmabuf_get_revocable_and_lock() without a DMA device), and
 * rxe takes a kernel address with dma_buf_vmap(). An exporter without
 * vmap, or whose vmap is I/O memory, cannot be copied from with memcpy()
 * and is refused with -EOPNOTSUPP; memory only a peer device can reach is
 * refused at attach (no allow_peer2peer).
 *
 * Revoke: every CPU access to the MR's memory (the requester reading a
 * SEND or WRITE payload, the responder writing WRITE and SEND data, reading
 * for READ responses, ATOMIC and ATOMIC WRITE, the completer writing READ
 * and ATOMIC results) goes through rxe_dmabuf_mr_begin()/_end(), which
 * hold dmabuf_sem for read and hand out the address only while the MR still
 * has its mapping. The revoke callback takes dmabuf_sem for write, so it
 * waits for a copy in progress; it then marks the MR invalid and forgets the
 * address before it drops the vmap. When it returns no CPU access to the
 * memory can follow.
 *
 * Why a lock and not a drain of the MR's reference count: every packet
 * looks its keys up again and drops its reference when done, so a drain,
 * as rxe_cleanup() does at deregistration, would work; but it waits for
 * every holder of a reference, with the reservation lock held. The lock
 * bounds what a revoke waits for by one packet's copy, whatever the peer or
 * the QP does, and makes the address check and the vunmap one critical
 * section.
 *
 * dma-buf asks CPU importers to bracket their access with
 * dma_buf_begin_cpu_access() and dma_buf_end_cpu_access(): begin waits for
 * the buffer's implicit fences and lets an exporter of memory that is not
 * coherent with the CPU make it so, end hands it back. rxe brackets once per
 * registration, in both directions: begin when the import is pinned and
 * vmapped, in the registering task, end at deregistration. That is what a
 * NIC's pinned mapping sees: it is not synchronised with the buffer's
 * fences either, user space orders its accesses with its GPU work. Per
 * copy it would make every packet wait for whatever fence anyone with the
 * buffer adds (DMA_BUF_IOCTL_IMPORT_SYNC_FILE takes any sync_file), with
 * the QP's task holding a reference to the MR that deregistration, QP
 * destruction and device removal then wait for; an exporter that takes the
 * reservation lock in begin would take it per packet too.
 *
 * The data path therefore waits for nothing but a revoke in progress.
 *
 * The bracket stays open while peers write, and that is only right where
 * the exporter's CPU sync moves no data. Where every streaming DMA mapping
 * bounces (swiotlb=force, a confidential-computing guest), an exporter that
 * syncs CPU access copies the bounce buffer of its own or another
 * importer's mapping over the pages at the owner's next begin (udmabuf
 * does), and what a peer wrote through rxe is lost. A bracket per copy
 * would keep the data but wait for fences in the data path, and bounce
 * the whole buffer for every packet. rxe cannot see what an exporter's
 * sync does, only that it has one, so there it refuses the import with
 * -EOPNOTSUPP, as ib_umem_get() refuses user memory to a device whose DMA
 * bounces.
 * Deregistration releases the import once rxe_cleanup() has waited for the
 * MR's references, which the data path takes per packet or per copy.
 *
 * The MR keeps its pool index, and with it its key, until it is
 * deregistered, so no new MR can be handed the revoked key.
 *
 * REG_DMABUF_MR does not pass IB_ACCESS_MW_BIND, IB_ACCESS_FLUSH_GLOBAL or
 * IB_ACCESS_FLUSH_PERSISTENT, so memory windows and FLUSH cannot reach a
 * dma-buf MR; should they ever, an MW's access resolves to its MR and takes
 * the same path, and a global FLUSH touches no memory.
 */

#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/swiotlb.h>

#include "rxe.h"
#include "rxe_loc.h"

MODULE_IMPORT_NS("DMA_BUF");

static void rxe_dmabuf_mr_revoke(void *priv)
{
	struct rxe_mr *mr = priv;
	struct dma_buf *dmabuf = to_ib_umem_dmabuf(mr->umem)->attach->dmabuf;

	dma_resv_assert_held(dmabuf->resv);

	/* Wait for a copy in progress */
	down_write(&mr->dmabuf_sem);
	/* Read without the lock by key lookups (lookup_mr()) */
	WRITE_ONCE(mr->state, RXE_MR_STATE_INVALID);
	mr->dmabuf_vaddr = NULL;
	up_write(&mr->dmabuf_sem);

	dma_buf_vunmap(dmabuf, &mr->dmabuf_map);
	iosys_map_clear(&mr->dmabuf_map);
}

static struct dma_buf *rxe_dmabuf_mr_dmabuf(struct rxe_mr *mr)
{
	return to_ib_umem_dmabuf(mr->umem)->attach->dmabuf;
}

int rxe_dmabuf_mr_init_user(struct rxe_dev *rxe, u64 offset, u64 length,
			    u64 iova, int fd, int access, struct rxe_mr *mr)
{
	struct ib_umem_dmabuf *umem_dmabuf;
	struct dma_buf *dmabuf;
	struct iosys_map map;
	int err;

	/*
	 * Neither paged on demand nor persistent memory (uverbs does not pass
	 * these for dma-buf MRs; a kernel caller must not either).
	 */
	if (access & (IB_ACCESS_ON_DEMAND | IB_ACCESS_FLUSH_PERSISTENT))
		return -EOPNOTSUPP;

	rxe_mr_init(access, mr);
	init_rwsem(&mr->dmabuf_sem);

	umem_dmabuf = ib_umem_dmabuf_get_revocable_and_lock(&rxe->ib_dev, NULL,
							    offset, length, fd,
							    access);
	if (IS_ERR(umem_dmabuf)) {
		err = PTR_ERR(umem_dmabuf);
		rxe_dbg_mr(mr, "dma-buf import failed, err = %d\n", err);
		return err;
	}
	dmabuf = umem_dmabuf->attach->dmabuf;

	/*
	 * An exporter without vmap cannot be copied from. Ask its ops: the
	 * -EINVAL dma_buf_vmap() gives for it is also what some exporters
	 * return when their vmap fails, and those errors pass through.
	 */
	if (!dmabuf->ops->vmap) {
		rxe_dbg_mr(mr, "dma-buf exporter has no vmap\n");
		err = -EOPNOTSUPP;
		goto err_unlock;
	}
	/* Where DMA bounces, a CPU sync can undo a peer's writes: above */
	if (is_swiotlb_force_bounce(&rxe->ib_dev.dev) &&
	    (dmabuf->ops->begin_cpu_access || dmabuf->ops->end_cpu_access)) {
		rxe_dbg_mr(mr, "dma-buf syncs CPU access and DMA bounces\n");
		err = -EOPNOTSUPP;
		goto err_unlock;
	}
	err = dma_buf_vmap(dmabuf, &map);
	if (err) {
		rxe_dbg_mr(mr, "dma-buf vmap failed, err = %d\n", err);
		goto err_unlock;
	}
	if (map.is_iomem) {
		rxe_dbg_mr(mr, "dma-buf is I/O memory, not copyable\n");
		err = -EOPNOTSUPP;
		goto err_vunmap;
	}
	/*
	 * The exporter may have invalidated inside its vmap (a move it
	 * started there). The import is pinned, so the core took that for
	 * a revoke and unpinned it, before rxe's callback was installed:
	 * nothing would ever drop this vmap, and the memory is no longer
	 * held for the MR.
	 */
	if (umem_dmabuf->revoked) {
		rxe_dbg_mr(mr, "dma-buf revoked during its vmap\n");
		err = -ENODEV;
		goto err_vunmap;
	}

	mr->dmabuf_map = map;
	mr->dmabuf_vaddr = map.vaddr + offset;
	mr->umem = &umem_dmabuf->umem;
	mr->ibmr.type = IB_MR_TYPE_USER;
	mr->ibmr.length = length;
	mr->ibmr.iova = iova;
	mr->state = RXE_MR_STATE_VALID;

	ib_umem_dmabuf_set_revoke_locked(umem_dmabuf, rxe_dmabuf_mr_revoke, mr);
	dma_resv_unlock(dmabuf->resv);

	/*
	 * Once, for as long as the MR is registered: this waits for the
	 * buffer's fences here, in the registering task, interruptibly, and
	 * never in the data path. Outside the reservation lock, which
	 * exporters may take in it. A revoke may come first, and the
	 * exporter then refuse: the MR is registered revoked, as if the
	 * revoke had come just after. Any other refusal fails the
	 * registration, whose cleanup releases the import.
	 */
	err = dma_buf_begin_cpu_access(dmabuf, DMA_BIDIRECTIONAL);
	if (err) {
		down_read(&mr->dmabuf_sem);
		if (mr->dmabuf_vaddr) {
			rxe_dbg_mr(mr, "dma-buf CPU access refused, err = %d\n",
				   err);
		} else {
			err = 0;
		}
		up_read(&mr->dmabuf_sem);
		return err;
	}
	mr->dmabuf_cpu_access = true;
	return 0;

err_vunmap:
	dma_buf_vunmap(dmabuf, &map);
err_unlock:
	dma_resv_unlock(dmabuf->resv);
	ib_umem_release(&umem_dmabuf->umem);
	return err;
}

/* The end of a CPU access that the exporter refused to a killed task */
struct rxe_dmabuf_cpu_end {
	struct work_struct work;
	struct dma_buf *dmabuf;
};

static void rxe_dmabuf_cpu_end_work(struct work_struct *work)
{
	struct rxe_dmabuf_cpu_end *end =
		container_of(work, struct rxe_dmabuf_cpu_end, work);
	int err;

	err = dma_buf_end_cpu_access(end->dmabuf, DMA_BIDIRECTIONAL);
	if (err)
		pr_warn_ratelimited("rxe: dma-buf CPU access not ended, err = %d\n",
				    err);
	dma_buf_put(end->dmabuf);
	kfree(end);
}

static void rxe_dmabuf_mr_end_cpu_access(struct rxe_mr *mr)
{
	struct dma_buf *dmabuf = rxe_dmabuf_mr_dmabuf(mr);
	struct rxe_dmabuf_cpu_end *end;
	int err;

	err = dma_buf_end_cpu_access(dmabuf, DMA_BIDIRECTIONAL);
	if (err != -EINTR && err != -ERESTARTSYS) {
		if (err)
			rxe_dbg_mr(mr, "dma-buf CPU access end failed, err = %d\n",
				   err);
		return;
	}
	/*
	 * An exporter whose end waits interruptibly (udmabuf and i915 take a
	 * lock there) fails it while this task has a signal pending, as a
	 * killed process has when its files are closed. A worker has no
	 * signals: end the access there, holding the buffer until then.
	 * rxe_wq is drained before the module goes.
	 */
	end = kmalloc(sizeof(*end), GFP_KERNEL);
	if (!end) {
		rxe_dbg_mr(mr, "dma-buf CPU access not ended, err = %d\n", err);
		return;
	}
	INIT_WORK(&end->work, rxe_dmabuf_cpu_end_work);
	get_dma_buf(dmabuf);
	end->dmabuf = dmabuf;
	queue_work(rxe_wq, &end->work);
}

/*
 * Deregistration, from rxe_mr_cleanup(): ends the CPU access that
 * registration began, then releases the import, which revokes the MR if
 * the exporter has not. Nothing is kept: should a reference to the MR
 * still be held, the revoke waits for a copy in progress under dmabuf_sem
 * and leaves no address for a later one.
 */
void rxe_dmabuf_mr_release(struct rxe_mr *mr)
{
	if (mr->dmabuf_cpu_access)
		rxe_dmabuf_mr_end_cpu_access(mr);
	ib_umem_release(mr->umem);
	mr->umem = NULL;
}

/*
 * The one way to the memory of a dma-buf MR: the kernel address of @iova
 * with dmabuf_sem held for read, or NULL once the MR is revoked. Either
 * way the caller, who has checked the range, calls rxe_dmabuf_mr_end().
 * Nothing here waits for anything but a revoke in progress.
 */
static void *rxe_dmabuf_mr_begin(struct rxe_mr *mr, u64 iova)
	__acquires(&mr->dmabuf_sem)
{
	down_read(&mr->dmabuf_sem);
	if (unlikely(!mr->dmabuf_vaddr))
		return NULL;
	return mr->dmabuf_vaddr + (iova - mr->ibmr.iova);
}

static void rxe_dmabuf_mr_end(struct rxe_mr *mr)
	__releases(&mr->dmabuf_sem)
{
	up_read(&mr->dmabuf_sem);
}

int rxe_dmabuf_mr_copy(struct rxe_mr *mr, u64 iova, void *addr,
		       unsigned int length, enum rxe_mr_copy_dir dir)
{
	u8 *va = rxe_dmabuf_mr_begin(mr, iova);
	int err = 0;

	if (unlikely(!va)) {
		/*
		 * The errno of a failed lookup in copy_data(): a revoke that
		 * comes between the lookup and the copy completes the work
		 * request as one that came before the lookup.
		 */
		rxe_dbg_mr(mr, "access after revoke\n");
		err = -EINVAL;
	} else if (dir == RXE_TO_MR_OBJ) {
		memcpy(va, addr, length);
	} else {
		memcpy(addr, va, length);
	}
	rxe_dmabuf_mr_end(mr);
	return err;
}

/*
 * As rxe_dmabuf_mr_begin(), for the aligned 8 bytes an atomic works on:
 * RESPST_NONE with *va set, or the error to answer. Either way the caller
 * calls rxe_dmabuf_mr_end().
 */
static enum resp_states rxe_dmabuf_mr_begin_atomic(struct rxe_mr *mr,
						   u64 iova, u64 **va)
	__acquires(&mr->dmabuf_sem)
{
	*va = rxe_dmabuf_mr_begin(mr, iova);
	/* See IBA oA19-28 */
	if (unlikely(!*va) || mr_check_range(mr, iova, sizeof(**va)))
		return RESPST_ERR_RKEY_VIOLATION;
	/* See IBA A19.4.2 */
	if (unlikely((uintptr_t)*va & 7))
		return RESPST_ERR_MISALIGNED_ATOMIC;
	return RESPST_NONE;
}

enum resp_states rxe_dmabuf_mr_atomic_op(struct rxe_mr *mr, u64 iova,
					 int opcode, u64 compare,
					 u64 swap_add, u64 *orig_val)
{
	enum resp_states ret;
	u64 value;
	u64 *va;

	ret = rxe_dmabuf_mr_begin_atomic(mr, iova, &va);
	if (ret == RESPST_NONE) {
		spin_lock_bh(&atomic_ops_lock);
		value = *va;
		*orig_val = value;
		if (opcode == IB_OPCODE_RC_COMPARE_SWAP) {
			if (value == compare)
				*va = swap_add;
		} else {
			*va = value + swap_add;
		}
		spin_unlock_bh(&atomic_ops_lock);
	}
	rxe_dmabuf_mr_end(mr);
	return ret;
}

enum resp_states rxe_dmabuf_mr_atomic_write(struct rxe_mr *mr, u64 iova,
					    u64 value)
{
	enum resp_states ret;
	u64 *va;

	ret = rxe_dmabuf_mr_begin_atomic(mr, iova, &va);
	if (ret != RESPST_NONE)
		goto out;
	/* Do atomic write after all prior operations have completed */
	smp_store_release(va, value);
out:
	rxe_dmabuf_mr_end(mr);
	return ret;
}
