/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * Per-egress-port model: a virtual queue drained at the port's capacity, with
 * ECN marking, MRC trimming and drop thresholds (docs/switch.md,
 * docs/conventions.md). XDP cannot delay frames, so the model only decides
 * admit / mark / trim / drop; it does not add latency.
 */
#ifndef SOFTMRC_QMODEL_H
#define SOFTMRC_QMODEL_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "consts.h"
#include "structs.h"
#include "maps.h"
#include "parsing.h"
#include "pkt.h"

enum qm_verdict {
	QM_SEND = 0,
	QM_MARK = 1, /* send with CE (caller checks ECT and port role) */
	QM_TRIM = 2, /* trim to the MRC headers, then send */
	QM_DROP = 3,
};

/* Traffic classes as far as the port model is concerned. */
static __always_inline int dscp_is_priority(__u8 dscp)
{
	return dscp == DSCP_CONTROL || dscp == DSCP_TRIMMED ||
	       dscp == DSCP_TRIMMED_LASTHOP;
}

static __always_inline int dscp_is_trimmable(__u8 dscp)
{
	return dscp == DSCP_TRIMMABLE || dscp == DSCP_TRIMMABLE_RETX;
}

/*
 * mrc_trim_len returns the frame length (from the start of the Ethernet
 * header) that a trimmed copy of this frame keeps: everything up to the end of
 * RETH, or of ImmDt for the *_IMM opcodes, with TSETH counted when BTH.ts is
 * set. It returns 0 when the frame is not a trimmable MRC data packet:
 * not Eth | IPv6 [| IPv6] | UDP 4791 | BTH with a data opcode (pkt_upper
 * found no BTH), or nothing left to cut.
 */
static __always_inline __u32 mrc_trim_len(struct sw_pkt *p)
{
	pkt_upper(p);
	__u8 *bth = p->bth;

	if (!bth)
		return 0;
	__u8 op = bth[0];
	if (op < OP_WRITE_FIRST || op > OP_WRITE_ONLY_IMM)
		return 0;
	__u32 hdrs = BTH_LEN + METH_LEN + RETH_LEN;
	if (bth[BTH_FLAGS_OFF] & BTH_FLAG_TS)
		hdrs += TSETH_LEN;
	if (op == OP_WRITE_LAST_IMM || op == OP_WRITE_ONLY_IMM)
		hdrs += IMMDT_LEN;

	__u32 cut = (__u32)((void *)bth - (void *)p->eth) + hdrs;
	if (cut >= p->len)
		return 0;
	return cut;
}

/*
 * vq_drain removes what the port sent since the last packet. backlog is in
 * bytes * 1e9, so elapsed_ns * rate_Bps subtracts exactly. Whole idle seconds
 * are handled first in byte units, so no product overflows however long the
 * port was idle (rate_Bps <= 1.25e10 and buf_bytes < 2^32 are enforced by
 * user space).
 */
static __always_inline void vq_drain(struct sw_vq *q, __u64 rate_Bps, __u64 now)
{
	if (q->last_ns == 0 || now < q->last_ns) {
		q->last_ns = now;
		return;
	}
	__u64 elapsed = now - q->last_ns;
	q->last_ns = now;
	if (q->backlog == 0)
		return;
	if (elapsed >= NSEC_PER_SEC) {
		__u64 secs = elapsed / NSEC_PER_SEC;
		__u64 bytes = q->backlog / NSEC_PER_SEC;

		/* secs*rate_Bps: both bounded (secs is clamped) -> no overflow */
		if (secs > (1ULL << 20) || secs * rate_Bps >= bytes + 1) {
			q->backlog = 0;
			return;
		}
		q->backlog -= secs * rate_Bps * NSEC_PER_SEC;
		elapsed -= secs * NSEC_PER_SEC;
	}
	__u64 d = elapsed * rate_Bps;
	q->backlog = q->backlog > d ? q->backlog - d : 0;
}

/*
 * vq_admit decides what happens to a frame of len bytes (trim_len bytes if
 * trimmed; 0 = not trimmable) on port p and accounts it in the queue.
 *
 * Priority frames (CONTROL, TRIMMED, TRIMMED_LASTHOP) bypass the data
 * thresholds and are dropped only above the buffer. A data frame that would
 * take the backlog above the trim threshold is trimmed when trimmable (and
 * the trimmed frame fits the buffer), dropped otherwise. A data frame that
 * fits is marked when the backlog including it exceeds the marking threshold:
 * always (step marking), or with a probability that rises linearly to
 * mark_pmax at mark_max_bytes and is 1 above it (RED, sw_port).
 */
static __always_inline enum qm_verdict vq_admit(__u32 port, const struct sw_port *p,
						__u32 len, __u32 trim_len,
						int priority, __u64 now)
{
	struct sw_vq *q = bpf_map_lookup_elem(&vqs, &port);
	enum qm_verdict v;

	if (!q)
		return QM_SEND;

	__u64 buf = (__u64)p->buf_bytes * NSEC_PER_SEC;
	__u64 trim = (__u64)(p->trim_bytes ? p->trim_bytes : p->buf_bytes) * NSEC_PER_SEC;
	__u64 mark = (__u64)p->mark_bytes * NSEC_PER_SEC;
	__u64 add = (__u64)len * NSEC_PER_SEC;
	__u64 tadd = (__u64)trim_len * NSEC_PER_SEC;
	/* Drawn outside the lock: no helper may run while it is held. */
	__u32 rnd = p->mark_max_bytes > p->mark_bytes ? bpf_get_prandom_u32() : 0;

	bpf_spin_lock(&q->lock);
	vq_drain(q, p->rate_Bps, now);
	__u64 b = q->backlog;
	if (priority) {
		if (b + add > buf) {
			v = QM_DROP;
		} else {
			q->backlog = b + add;
			v = QM_SEND;
		}
	} else if (b + add > trim) {
		if (trim_len && b + tadd <= buf) {
			q->backlog = b + tadd;
			v = QM_TRIM;
		} else {
			v = QM_DROP;
		}
	} else {
		q->backlog = b + add;
		v = (p->mark_bytes && b + add > mark) ? QM_MARK : QM_SEND;
	}
	if (v == QM_MARK && p->mark_max_bytes > p->mark_bytes) {
		/* RED between the thresholds, in bytes: both differences fit in
		 * 32 bits (thresholds are __u32), so the product fits in 64. */
		__u64 qb = (b + add) / NSEC_PER_SEC;
		if (qb < p->mark_max_bytes) {
			__u64 span = p->mark_max_bytes - p->mark_bytes;
			__u64 over = qb > p->mark_bytes ? qb - p->mark_bytes : 0;
			if ((__u64)rnd * span >= (__u64)p->mark_pmax * over)
				v = QM_SEND;
		}
	}
	bpf_spin_unlock(&q->lock);
	return v;
}

#endif
