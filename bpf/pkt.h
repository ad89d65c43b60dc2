/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * The switch's packet descriptor: one parse of the frame's headers at the top
 * of xdp_switch, shared by forwarding (outer IPv6), ECMP hashing (UDP source
 * port) and trimming (BTH and the header lengths). Before it, the outer
 * headers were parsed once per use: up to four times for a trimmed frame.
 *
 * Each header is parsed at most once: the outer ones up front, the upper ones
 * (inner IPv6, UDP, BTH) on first use. The pointers stay valid for the whole
 * run except across bpf_xdp_adjust_tail (trimming), which re-derives them
 * from the layout recorded here rather than parsing again.
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
	/* Filled by pkt_upper, on first use: */
	struct ipv6hdr *inner; /* IPv6-in-IPv6 inner header, or NULL */
	struct udphdr *udp;    /* UDP after ip6 or inner, or NULL */
	__u8 *bth;             /* RoCEv2 BTH (UDP 4791/4971, 12 bytes present), or NULL */
	void *data_end;
	__u32 len;        /* frame length */
	__u32 upper_done; /* pkt_upper has run */
};

/*
 * parse_pkt parses the Ethernet and the outermost IPv6 header into p: all
 * that forwarding needs. The headers after it are parsed by pkt_upper when
 * hashing or trimming first asks for them, so a frame that is neither hashed
 * nor trimmed (most of a uSID fabric's traffic) does not pay for them.
 */
static __always_inline int parse_pkt(struct sw_pkt *p, void *data, void *data_end)
{
	struct hdr_cursor c = { .pos = data };
	int nh;

	/*
	 * NULL before pkt_upper, not unset: clang keeps the descriptor in
	 * registers and the verifier may not follow the flag's value, so
	 * every path must hold NULL or a checked pointer.
	 */
	p->inner = NULL;
	p->udp = NULL;
	p->bth = NULL;
	p->data_end = data_end;
	p->len = (__u32)(data_end - data);
	p->upper_done = 0;
	nh = parse_ethhdr(&c, data_end, &p->eth);
	if (nh < 0)
		return PKT_MALFORMED;
	if (nh != SW_ETH_P_IPV6)
		return PKT_NOT_IPV6;
	if (parse_ip6hdr(&c, data_end, &p->ip6) < 0)
		return PKT_MALFORMED;
	return PKT_IPV6;
}

/*
 * pkt_upper parses, once, what follows the outer IPv6 header: an inner IPv6
 * header, UDP and, for RoCEv2 ports, the BTH. A short or foreign header
 * leaves the later pointers NULL (the frame is still routed on its outer
 * header). Only for a parse_pkt result of PKT_IPV6.
 */
static __always_inline void pkt_upper(struct sw_pkt *p)
{
	void *data_end = p->data_end;
	struct hdr_cursor c = { .pos = p->ip6 + 1 };
	int nh = p->ip6->nexthdr;

	if (p->upper_done)
		return;
	p->upper_done = 1;
	if (nh == SW_IPPROTO_IPV6) {
		nh = parse_ip6hdr(&c, data_end, &p->inner); /* sets inner only on success */
		if (nh < 0)
			return;
	}
	if (nh != SW_IPPROTO_UDP)
		return;
	int dport = parse_udphdr(&c, data_end, &p->udp); /* likewise */
	if (dport != ROCE_UDP_PORT && dport != ROCE_UDP_PORT_ALIAS)
		return;
	__u8 *bth = c.pos;
	if ((void *)(bth + BTH_LEN) <= data_end)
		p->bth = bth;
}

/* The UDP source port (host order), 0 without a UDP header: part of the ECMP key. */
static __always_inline __u16 pkt_sport(struct sw_pkt *p)
{
	pkt_upper(p);
	return p->udp ? bpf_ntohs(p->udp->source) : 0;
}

#endif
