// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// switch: the softmrc XDP soft switch (one object per switch).
//
// Per frame, on the outermost IPv6 header (docs/switch.md has the details),
// after one parse of the headers into a descriptor (bpf/pkt.h) that the
// steps below share:
//   1. not IPv6, or to a multicast, link-local or local address -> XDP_PASS;
//      malformed (short Ethernet/IPv6, version != 6, payload length longer
//      than the frame) -> counted drop;
//   2. switch hung, or ingress port down/blackholed/flapped off -> counted drop;
//   3. SRv6 mode: a block length in the config map other than 16, 32 or 48
//      -> counted drop (no route); while the destination is one of the node's own uN SIDs:
//      argument zero -> counted drop (end of container); hop limit <= 1 ->
//      counted drop; else shift the CSIDs left by 16 bits keeping the block and
//      decrement the hop limit (RFC 9800 NEXT-CSID, bounded loop).
//      Without a uN match (or in ECMP mode) the frame is routed as plain IPv6:
//      hop limit <= 1 -> counted drop, else decrement;
//   4. FIB (LPM) on the destination -> port or ECMP group (FNV-1a flow hash);
//      miss -> counted drop;
//   5. egress faults (down, blackhole, flap, random loss) -> counted drop;
//   6. egress port model (when the port has a capacity): mark / trim / drop;
//   7. rewrite MACs and redirect through the devmap.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "consts.h"
#include "structs.h"
#include "maps.h"
#include "parsing.h"
#include "pkt.h"
#include "srv6.h"
#include "qmodel.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

static __always_inline struct sw_counters *counters_of(__u32 port)
{
	return bpf_map_lookup_elem(&counters, &port);
}

/*
 * count_reason adds one to the counter of reason r: the reasons are the
 * indices of their fields in struct sw_counters (structs.h checks that at
 * compile time), so every reason, R_FORWARDED included, has its counter and
 * none can be missed by a forgotten case.
 */
static __always_inline void count_reason(struct sw_counters *c, enum sw_reason r)
{
	__u32 i = r;

	if (i < SW_COUNTER_FIELDS)
		((__u64 *)c)[i]++;
}

/*
 * verdict counts a pass or a drop for reason r on port and returns the XDP
 * action. Forwarded frames are counted where they are redirected.
 */
static __always_inline int verdict(__u32 port, enum sw_reason r)
{
	struct sw_counters *c = counters_of(port);

	if (c)
		count_reason(c, r);
	return r == R_PASS ? XDP_PASS : XDP_DROP;
}

/*
 * fault_blocks reports whether the port's fault state drops all traffic now.
 * The clock is read only for a flapping port: bpf_ktime_get_ns costs tens of
 * nanoseconds in a VM, a large share of the whole program.
 */
static __always_inline int fault_blocks(const struct sw_fault *f)
{
	if (f->down || f->blackhole)
		return 1;
	if (f->flap_on_ns && f->flap_off_ns) {
		__u64 now = bpf_ktime_get_ns();
		if (now >= f->flap_start_ns) {
			__u64 period = f->flap_on_ns + f->flap_off_ns;
			__u64 phase = (now - f->flap_start_ns) % period;
			if (phase >= f->flap_on_ns)
				return 1;
		}
	}
	return 0;
}

static __always_inline int fault_loses(const struct sw_fault *f)
{
	if (f->loss_all)
		return 1;
	return f->loss_thresh && bpf_get_prandom_u32() < f->loss_thresh;
}

/* Multicast (incl. NDP) and link-local destinations always go to the kernel. */
static __always_inline int is_link_scope_da(const struct ipv6hdr *ip6)
{
	const __u8 *d = ip6->daddr.in6_u.u6_addr8;

	if (d[0] == 0xff)                        /* multicast, incl. NDP */
		return 1;
	return d[0] == 0xfe && (d[1] & 0xc0) == 0x80; /* fe80::/10 */
}

/*
 * is_local_addr: the destination is one of the switch's own addresses. A hash
 * lookup, so it is asked only where the answer matters: never for a frame
 * whose destination is an own uN with a non-zero argument (a uSID container
 * passing through), which is the common case of a fabric switch.
 */
static __always_inline int is_local_addr(const struct ipv6hdr *ip6)
{
	return bpf_map_lookup_elem(&local_addrs, &ip6->daddr) != NULL;
}

/* drop_unless_local: frames for the switch itself pass even when the data plane drops. */
static __always_inline int drop_unless_local(__u32 port, const struct ipv6hdr *ip6,
					     enum sw_reason r)
{
	return verdict(port, is_local_addr(ip6) ? R_PASS : r);
}

/*
 * apply_trim cuts the frame to cut bytes and fixes every length field and the
 * DSCP. Returns 0 on success, -1 if the frame could not be trimmed (then the
 * caller drops it: its headers may no longer match its length).
 * On a multi-buffer frame bpf_xdp_adjust_tail frees the fragments first and
 * then cuts the linear part, so the trimmed frame (headers only) is linear.
 * bpf_xdp_adjust_tail invalidates every packet pointer, so the headers are
 * found again at the offsets parse_pkt recorded (the layout, not a re-parse):
 * outer IPv6 after Ethernet, then the inner IPv6 if there was one, then UDP.
 */
static __always_inline int apply_trim(struct xdp_md *ctx, const struct sw_pkt *p,
				      __u32 cut, __u8 dscp)
{
	__u32 len = p->len;
	int encap = p->inner != NULL;

	/* Plain integers: keep clang from turning this into pointer math. */
	asm volatile("" : "+r"(cut), "+r"(len));
	if (cut >= len || cut > 0xffff)
		return -1;
	if (bpf_xdp_adjust_tail(ctx, -(int)(len - cut)))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;

	struct ipv6hdr *outer = data + sizeof(struct ethhdr);
	struct udphdr *udp;
	__u32 l3 = cut - sizeof(struct ethhdr);
	if (encap) {
		struct ipv6hdr *inner = (void *)(outer + 1);

		udp = (void *)(inner + 1);
		if ((void *)(udp + 1) > data_end)
			return -1;
		inner->payload_len = bpf_htons((__u16)(l3 - 2 * sizeof(struct ipv6hdr)));
	} else {
		udp = (void *)(outer + 1);
		if ((void *)(udp + 1) > data_end)
			return -1;
	}
	outer->payload_len = bpf_htons((__u16)(l3 - sizeof(struct ipv6hdr)));
	ip6_set_dscp(outer, dscp);
	/* From the lengths, not data_end: right whether or not frags are left. */
	udp->len = bpf_htons((__u16)(cut - (__u32)((void *)udp - data)));
	return 0;
}

SEC("xdp.frags")
int xdp_switch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct sw_pkt pkt;

	/* Ingress port: attributes rx counters and ingress faults. */
	__u32 in_port = SW_UNMAPPED_PORT;
	__u32 ifidx = ctx->ingress_ifindex;
	__u32 *pp = bpf_map_lookup_elem(&ifindex_port, &ifidx);
	if (pp && *pp < SW_MAX_PORTS)
		in_port = *pp;
	/*
	 * Multi-buffer (xdp.frags): data..data_end is only the linear part;
	 * the frame's length includes the fragments. veth keeps at least the
	 * first ~3.5 KB linear (a page less headroom and skb_shared_info), so
	 * every header this program reads or writes is in the linear part, and
	 * a frame too short for them is short, not fragmented.
	 */
	__u32 flen = bpf_xdp_get_buff_len(ctx);
	struct sw_counters *cin = counters_of(in_port);
	if (cin) {
		cin->rx_packets++;
		cin->rx_bytes += flen;
	}

	int kind = parse_pkt(&pkt, data, data_end);
	pkt.len = flen;
	if (kind == PKT_MALFORMED)
		return verdict(in_port, R_DROP_MALFORMED);
	if (kind == PKT_NOT_IPV6)
		return verdict(in_port, R_PASS);
	struct ipv6hdr *ip6 = pkt.ip6;
	/* A payload length longer than the frame means a lying or cut header. */
	if ((__u32)bpf_ntohs(ip6->payload_len) + sizeof(struct ipv6hdr) >
	    pkt.len - sizeof(struct ethhdr))
		return verdict(in_port, R_DROP_MALFORMED);
	if (is_link_scope_da(ip6))
		return verdict(in_port, R_PASS);

	struct sw_config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return drop_unless_local(in_port, ip6, R_DROP_NO_ROUTE);
	/* A hung or faulty switch still lets its control plane answer. */
	if (cfg->hang)
		return drop_unless_local(in_port, ip6, R_DROP_FAULT);
	if (in_port != SW_UNMAPPED_PORT) {
		struct sw_fault *f = bpf_map_lookup_elem(&faults, &in_port);
		if (f && fault_blocks(f))
			return drop_unless_local(in_port, ip6, R_DROP_FAULT);
	}

	/* uN processing (RFC 9800 End with NEXT-CSID), bounded. */
	int executed = 0;
	if (cfg->mode == SW_MODE_SRV6) {
		__u32 bits = cfg->block_bits;
		/*
		 * The map is writable by anything with the pin: a block length
		 * the uSID helpers were not written for (they would shift the
		 * block itself) is a switch without a usable uSID plan.
		 */
		if (bits != 16 && bits != 32 && bits != 48)
			return drop_unless_local(in_port, ip6, R_DROP_NO_ROUTE);
		__u32 bw = bits / 16;
		struct sw_usid_table *own = bpf_map_lookup_elem(&own_sids, &zero);
		int done = 0;

		if (!own)
			return verdict(in_port, R_DROP_NO_ROUTE);
		for (int i = 0; i < SW_MAX_USID_SHIFTS + 1; i++) {
			if (own_usid_kind(own, cfg, ip6, bw) != SW_SID_UN) {
				done = 1;
				break;
			}
			/* End of container: e.g. block:uSID:: may be a local address. */
			if (usid_arg_is_zero(ip6, bw))
				return executed ? verdict(in_port, R_DROP_EOC) :
						  drop_unless_local(in_port, ip6, R_DROP_EOC);
			if (ip6->hop_limit <= 1)
				return verdict(in_port, R_DROP_HOP_LIMIT);
			usid_shift(ip6, bw);
			ip6->hop_limit--;
			executed = 1;
		}
		/* Unreachable for valid own SIDs (uSID 0 is refused by user space). */
		if (!done)
			return verdict(in_port, R_DROP_MALFORMED);
	}
	if (!executed) {
		if (is_local_addr(ip6))
			return verdict(in_port, R_PASS);
		if (ip6->hop_limit <= 1)
			return verdict(in_port, R_DROP_HOP_LIMIT);
		ip6->hop_limit--;
	}

	/* FIB. */
	struct sw_lpm_key fk;
	lpm_key_from_da(&fk, ip6);
	struct sw_nexthop *nh = bpf_map_lookup_elem(&fib, &fk);
	if (!nh)
		return verdict(in_port, R_DROP_NO_ROUTE);
	__u32 out = nh->id;
	if (nh->kind == SW_NH_GROUP) {
		__u32 gid = nh->id;
		struct sw_ecmp_group *g = bpf_map_lookup_elem(&ecmp_groups, &gid);
		if (!g || g->n == 0 || g->n > SW_MAX_GROUP_MEMBERS)
			return verdict(in_port, R_DROP_NO_ROUTE);
		__u32 h = ecmp_hash(ip6, pkt_sport(&pkt));
		__u32 idx = h % g->n;
		/* Opaque to clang, so the bound the verifier needs is not optimised away. */
		asm volatile("" : "+r"(idx));
		if (idx >= SW_MAX_GROUP_MEMBERS)
			return verdict(in_port, R_DROP_NO_ROUTE);
		out = g->members[idx];
	}
	if (out >= SW_MAX_PORTS)
		return verdict(in_port, R_DROP_NO_ROUTE);
	struct sw_port *port = bpf_map_lookup_elem(&ports, &out);
	if (!port || !port->enabled)
		return verdict(in_port, R_DROP_NO_ROUTE);

	/* Egress faults. */
	struct sw_fault *ef = bpf_map_lookup_elem(&faults, &out);
	if (ef && (fault_blocks(ef) || fault_loses(ef)))
		return verdict(out, R_DROP_FAULT);

	/* Egress port model. */
	int marked = 0, trimmed = 0;
	__u32 len = pkt.len;
	struct ethhdr *eth = pkt.eth;
	if (port->rate_Bps) {
		__u8 dscp = ip6_dscp(ip6);
		int prio = dscp_is_priority(dscp);
		__u32 tlen = 0;
		if (!prio && dscp_is_trimmable(dscp))
			tlen = mrc_trim_len(&pkt);
		enum qm_verdict v = vq_admit(out, port, len, tlen, prio, bpf_ktime_get_ns());
		if (v == QM_DROP)
			return verdict(out, R_DROP_BUFFER);
		if (v == QM_MARK &&
		    (port->role != SW_ROLE_HOST || (port->flags & SW_PORT_F_HOST_ECN)) &&
		    ip6_ecn(ip6) != ECN_NOT_ECT && ip6_ecn(ip6) != ECN_CE) {
			ip6_set_ce(ip6);
			marked = 1;
		}
		if (v == QM_TRIM) {
			__u8 td = port->role == SW_ROLE_HOST ? DSCP_TRIMMED_LASTHOP :
							       DSCP_TRIMMED;
			if (apply_trim(ctx, &pkt, tlen, td) < 0)
				return verdict(out, R_DROP_MALFORMED);
			trimmed = 1;
			data = (void *)(long)ctx->data;
			data_end = (void *)(long)ctx->data_end;
			len = bpf_xdp_get_buff_len(ctx);
			eth = data;
			if ((void *)(eth + 1) > data_end)
				return verdict(out, R_DROP_MALFORMED);
		}
	}

	/* Rewrite MACs and send. */
	__builtin_memcpy(eth->h_dest, port->neigh_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, port->own_mac, ETH_ALEN);

	int act = bpf_redirect_map(&tx_ports, out, XDP_DROP);
	if (act != XDP_REDIRECT)
		return verdict(out, R_DROP_NO_ROUTE);
	struct sw_counters *cout = counters_of(out);
	if (cout) {
		cout->tx_packets++;
		cout->tx_bytes += len;
		cout->ecn_marked += marked;
		cout->trimmed += trimmed;
		count_reason(cout, R_FORWARDED);
	}
	return act;
}

/*
 * xdp_pass is attached to the far end of every veth the switch redirects into:
 * veth drops redirected frames silently when its peer has no XDP program
 * (SRV6-XDP-FACTS §3).
 */
SEC("xdp.frags")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
