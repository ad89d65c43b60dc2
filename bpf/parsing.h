/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * Bounds-checked header parsing for XDP programs. Self-contained (only UAPI
 * and libbpf headers) so that any program in bpf/ may include it.
 *
 * Every helper takes a cursor and data_end, checks that the whole header lies
 * inside the packet before returning a pointer to it, and advances the cursor.
 * On a short packet it returns -1 and leaves the cursor where it was.
 */
#ifndef SOFTMRC_PARSING_H
#define SOFTMRC_PARSING_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct hdr_cursor {
	void *pos;
};

/* Returns the EtherType in host order, or -1 if the frame is too short. */
static __always_inline int parse_ethhdr(struct hdr_cursor *c, void *data_end,
					struct ethhdr **eth)
{
	struct ethhdr *h = c->pos;

	if ((void *)(h + 1) > data_end)
		return -1;
	c->pos = h + 1;
	*eth = h;
	return bpf_ntohs(h->h_proto);
}

/*
 * Returns the next-header value, or -1 if the header is short or not
 * version 6. Extension headers are not walked: callers that need the upper
 * layer check the returned value themselves.
 */
static __always_inline int parse_ip6hdr(struct hdr_cursor *c, void *data_end,
					struct ipv6hdr **ip6)
{
	struct ipv6hdr *h = c->pos;

	if ((void *)(h + 1) > data_end)
		return -1;
	if (h->version != 6)
		return -1;
	c->pos = h + 1;
	*ip6 = h;
	return h->nexthdr;
}

/* Returns the UDP destination port in host order, or -1 if short. */
static __always_inline int parse_udphdr(struct hdr_cursor *c, void *data_end,
					struct udphdr **udp)
{
	struct udphdr *h = c->pos;

	if ((void *)(h + 1) > data_end)
		return -1;
	c->pos = h + 1;
	*udp = h;
	return bpf_ntohs(h->dest);
}

/*
 * Traffic class helpers. The IPv6 first word is version(4) | TC(8) | FL(20):
 * the DSCP is TC[7:2] = low nibble of byte 0 and the top two bits of byte 1,
 * the ECN field is TC[1:0] = bits 5..4 of byte 1.
 */
static __always_inline __u8 ip6_tclass(const struct ipv6hdr *h)
{
	const __u8 *b = (const __u8 *)h;

	return (__u8)((b[0] << 4) | (b[1] >> 4));
}

static __always_inline __u8 ip6_dscp(const struct ipv6hdr *h)
{
	return ip6_tclass(h) >> 2;
}

static __always_inline __u8 ip6_ecn(const struct ipv6hdr *h)
{
	return ip6_tclass(h) & 3;
}

/* Sets the DSCP and keeps the ECN bits and the flow label. */
static __always_inline void ip6_set_dscp(struct ipv6hdr *h, __u8 dscp)
{
	__u8 *b = (__u8 *)h;

	b[0] = (__u8)(0x60 | ((dscp >> 2) & 0x0f));
	b[1] = (__u8)(((dscp & 3) << 6) | (b[1] & 0x3f));
}

/* Sets ECN to CE (11). No checksum covers the IPv6 header. */
static __always_inline void ip6_set_ce(struct ipv6hdr *h)
{
	((__u8 *)h)[1] |= 0x30;
}

/* The 20-bit flow label in host order. */
static __always_inline __u32 ip6_flowlabel(const struct ipv6hdr *h)
{
	const __u8 *b = (const __u8 *)h;

	return ((__u32)(b[1] & 0x0f) << 16) | ((__u32)b[2] << 8) | b[3];
}

#endif
