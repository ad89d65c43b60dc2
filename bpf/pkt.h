/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * The switch's packet descriptor: one parse of the frame's headers at the top
 * of xdp_switch, shared by forwarding (outer IPv6), ECMP hashing (UDP source
 * port) and trimming (BTH and the header lengths). Before it, the outer
 * headers were parsed once per use: up to four times for a trimmed frame.
 *
 * The pointers stay valid for the whole run except across
 * bpf_xdp_adjust_tail (trimming), which re-derives them from the layout
 * recorded here rather than parsing again.
 */
#ifndef SOFTMRC_PKT_H
#define SOFTMRC_PKT_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "consts.h"
#include "parsing.h"

/* Results of parse_pkt. */
enum pkt_kind {
	PKT_MALFORMED = -1, /* short Ethernet or IPv6 header, IPv6 version != 6 */
	PKT_NOT_IPV6 = 0,   /* another EtherType: for the kernel */
	PKT_IPV6 = 1,
};

struct sw_pkt {
	struct ethhdr *eth;
	struct ipv6hdr *ip6;   /* outermost IPv6 header: forwarding acts on it */
	struct ipv6hdr *inner; /* IPv6-in-IPv6 inner header, or NULL */
	struct udphdr *udp;    /* UDP after ip6 or inner, or NULL */
	__u8 *bth;             /* RoCEv2 BTH (UDP 4791/4971, 12 bytes present), or NULL */
	__u32 len;             /* frame length */
};

/*
 * parse_pkt fills p from the frame [data, data_end). Headers after the
 * outer IPv6 one are optional: a short or foreign inner header leaves the
 * later pointers NULL (the frame is still routed on its outer header).
 */
static __always_inline int parse_pkt(struct sw_pkt *p, void *data, void *data_end)
{
	struct hdr_cursor c = { .pos = data };
	int nh;

	p->inner = NULL;
	p->udp = NULL;
	p->bth = NULL;
	p->len = (__u32)(data_end - data);
	nh = parse_ethhdr(&c, data_end, &p->eth);
	if (nh < 0)
		return PKT_MALFORMED;
	if (nh != SW_ETH_P_IPV6)
		return PKT_NOT_IPV6;
	nh = parse_ip6hdr(&c, data_end, &p->ip6);
	if (nh < 0)
		return PKT_MALFORMED;
	if (nh == SW_IPPROTO_IPV6) {
		nh = parse_ip6hdr(&c, data_end, &p->inner); /* sets inner only on success */
		if (nh < 0)
			return PKT_IPV6;
	}
	if (nh != SW_IPPROTO_UDP)
		return PKT_IPV6;
	int dport = parse_udphdr(&c, data_end, &p->udp); /* likewise */
	if (dport != ROCE_UDP_PORT && dport != ROCE_UDP_PORT_ALIAS)
		return PKT_IPV6;
	__u8 *bth = c.pos;
	if ((void *)(bth + BTH_LEN) <= data_end)
		p->bth = bth;
	return PKT_IPV6;
}

/* The UDP source port (host order), 0 without a UDP header: part of the ECMP key. */
static __always_inline __u16 pkt_sport(const struct sw_pkt *p)
{
	return p->udp ? bpf_ntohs(p->udp->source) : 0;
}

#endif
