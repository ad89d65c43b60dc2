/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * The only definition of the switch's map layouts. bpf2go -type generates the
 * Go twins in switchd/dataplane (switch_bpfel.go); keep fields naturally
 * aligned and padded explicitly so both sides agree byte for byte.
 */
#ifndef SOFTMRC_STRUCTS_H
#define SOFTMRC_STRUCTS_H

#include <linux/types.h>
#include <linux/bpf.h>

#include "consts.h"

/* LPM trie key: prefix length, then the IPv6 address in network order. */
struct sw_lpm_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* Switch-wide configuration (config map, key 0). */
struct sw_config {
	__u32 block_bits; /* uSID locator block length: 16, 32 or 48 */
	__u32 mode;       /* SW_MODE_* */
	__u32 hang;       /* non-zero: data plane hung, nothing is forwarded */
	__u32 pad;
	__u8 block[16];   /* uSID block, network order; bits past block_bits zero */
};

/*
 * The node's own uSIDs in the configured block: kind[uSID] is SW_SID_* or 0.
 * One array lookup (inlined by the verifier) and one byte load replace an LPM
 * trie walk per uN iteration.
 */
struct sw_usid_table {
	__u8 kind[SW_USID_SPACE];
};

/* FIB value. */
struct sw_nexthop {
	__u32 kind; /* SW_NH_* */
	__u32 id;   /* port index or group index */
};

struct sw_ecmp_group {
	__u32 n; /* members in use, 0..SW_MAX_GROUP_MEMBERS */
	__u32 members[SW_MAX_GROUP_MEMBERS];
};

/*
 * Port configuration. rate_Bps = 0 disables the virtual queue. Thresholds are
 * bytes of backlog.
 */
struct sw_port {
	__u32 ifindex;
	__u32 enabled;
	__u32 role; /* SW_ROLE_* */
	__u8 neigh_mac[6];
	__u8 own_mac[6];
	__u64 rate_Bps; /* capacity in bytes per second */
	__u32 mark_bytes;
	__u32 trim_bytes;
	__u32 buf_bytes;
	__u32 flags; /* SW_PORT_F_* */
	/*
	 * RED-style marking (WRED ECN, as DCQCN's paper configures it): with
	 * mark_max_bytes > mark_bytes, a frame that takes the backlog to q
	 * between the two is marked with probability
	 * mark_pmax / 2^32 * (q - mark_bytes) / (mark_max_bytes - mark_bytes),
	 * and always above mark_max_bytes. 0 = step marking above mark_bytes.
	 */
	__u32 mark_max_bytes;
	__u32 mark_pmax;
};

/* Injected faults of a port. */
struct sw_fault {
	__u32 down;
	__u32 blackhole;
	__u32 loss_thresh; /* drop when bpf_get_prandom_u32() < loss_thresh */
	__u32 loss_all;    /* loss probability 1: drop everything */
	__u64 flap_on_ns;
	__u64 flap_off_ns;
	__u64 flap_start_ns; /* bpf_ktime_get_ns() clock (CLOCK_MONOTONIC) */
};

/*
 * Virtual queue of an egress port. backlog is in byte-nanoseconds per second
 * (bytes * 1e9), so draining (elapsed_ns * rate_Bps) is exact integer math
 * with no rounding loss at low rates.
 */
struct sw_vq {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 backlog; /* bytes * NSEC_PER_SEC */
	__u64 last_ns;
};

/* Per-port counters (per-CPU array). Order mirrors dataplane.PortCounters. */
struct sw_counters {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 tx_bytes;
	__u64 forwarded;
	__u64 ecn_marked;
	__u64 trimmed;
	__u64 drop_no_route;
	__u64 drop_hop_limit;
	__u64 drop_fault;
	__u64 drop_buffer;
	__u64 drop_malformed;
	__u64 drop_end_of_container;
	__u64 pass;
};

/*
 * Why a frame left the program: the value is the index of the reason's
 * counter in struct sw_counters viewed as an array of __u64, so counting a
 * reason is one indexed increment (switch.bpf.c count_reason) and a new
 * reason cannot be left uncounted. The asserts below hold the two together.
 */
enum sw_reason {
	R_FORWARDED = 4,
	R_DROP_NO_ROUTE = 7,
	R_DROP_HOP_LIMIT = 8,
	R_DROP_FAULT = 9,
	R_DROP_BUFFER = 10,
	R_DROP_MALFORMED = 11,
	R_DROP_EOC = 12,
	R_PASS = 13,
};

#define SW_COUNTER_FIELDS (sizeof(struct sw_counters) / sizeof(__u64))

#define SW_REASON_IS_FIELD(r, f) \
	_Static_assert(__builtin_offsetof(struct sw_counters, f) == (r) * sizeof(__u64), \
		       #r " is not the index of " #f)
SW_REASON_IS_FIELD(R_FORWARDED, forwarded);
SW_REASON_IS_FIELD(R_DROP_NO_ROUTE, drop_no_route);
SW_REASON_IS_FIELD(R_DROP_HOP_LIMIT, drop_hop_limit);
SW_REASON_IS_FIELD(R_DROP_FAULT, drop_fault);
SW_REASON_IS_FIELD(R_DROP_BUFFER, drop_buffer);
SW_REASON_IS_FIELD(R_DROP_MALFORMED, drop_malformed);
SW_REASON_IS_FIELD(R_DROP_EOC, drop_end_of_container);
SW_REASON_IS_FIELD(R_PASS, pass);

#endif
