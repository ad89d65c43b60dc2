/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * RFC 9800 NEXT-CSID (uN) helpers with 16-bit CSIDs and a locator block of
 * 16, 32 or 48 bits. They work in place on the destination address of the
 * outermost IPv6 header, viewed as eight 16-bit words (network order; only
 * moved and compared with zero, never interpreted, so byte order does not
 * matter). The word loops have constant bounds and constant indices, which
 * keeps every packet access at a fixed, verifier-checked offset.
 */
#ifndef SOFTMRC_SRV6_H
#define SOFTMRC_SRV6_H

#include <linux/types.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "consts.h"
#include "parsing.h"
#include "structs.h"

/*
 * usid_arg_is_zero reports whether the whole argument, the words after the
 * block and the active CSID (DA bits [LBL+16 .. 127]), is zero. RFC 9800 and
 * SRV6-XDP-FACTS pitfall 3: test the entire argument, not only the next CSID.
 */
static __always_inline int usid_arg_is_zero(const struct ipv6hdr *ip6,
					    __u32 block_words)
{
	const __u16 *w = ip6->daddr.in6_u.u6_addr16;
	__u16 acc = 0;

#pragma unroll
	for (__u32 i = 2; i < 8; i++) {
		if (i > block_words)
			acc |= w[i];
	}
	return acc == 0;
}

/*
 * usid_shift shifts everything after the block left by one CSID and zero
 * fills the last word: the block is never modified (RFC 9800 End with
 * NEXT-CSID, steps 2-3).
 */
static __always_inline void usid_shift(struct ipv6hdr *ip6, __u32 block_words)
{
	__u16 *w = ip6->daddr.in6_u.u6_addr16;

#pragma unroll
	for (__u32 i = 1; i < 7; i++) {
		if (i >= block_words)
			w[i] = w[i + 1];
	}
	w[7] = 0;
}

/*
 * own_usid_kind returns the SW_SID_* kind of the active CSID of the
 * destination when the destination is in the configured block, else 0: the
 * same answer as an LPM lookup of the DA in block:uSID::/(LBL+16) entries,
 * at the cost of a few compares and one byte load.
 */
static __always_inline __u32 own_usid_kind(const struct sw_usid_table *t,
					   const struct sw_config *cfg,
					   const struct ipv6hdr *ip6,
					   __u32 block_words)
{
	const __u16 *w = ip6->daddr.in6_u.u6_addr16;
	const __u16 *b = (const __u16 *)cfg->block;
	__u16 u;

	if (w[0] != b[0])
		return 0;
	if (block_words == 1) {
		u = w[1];
	} else {
		if (w[1] != b[1])
			return 0;
		if (block_words == 2) {
			u = w[2];
		} else {
			if (w[2] != b[2])
				return 0;
			u = w[3];
		}
	}
	return t->kind[bpf_ntohs(u)];
}

/* Fills an LPM key for a lookup of the full destination address. */
static __always_inline void lpm_key_from_da(struct sw_lpm_key *k,
					    const struct ipv6hdr *ip6)
{
	k->prefixlen = 128;
	__builtin_memcpy(k->addr, &ip6->daddr, 16);
}

/*
 * FNV-1a (32 bit) of the ECMP flow key: source address, destination address
 * (after any uSID shift), the 20-bit flow label as 3 big-endian bytes and the
 * UDP source port as 2 big-endian bytes (0 when there is no UDP header),
 * then murmur3's fmix32 finaliser: FNV keeps the low bit a parity of the
 * input bytes' low bits, and with two members `h % 2` was that one bit (the
 * 16 RoCE QPs of one peer all took one uplink). internal/flowhash.Sum is the
 * Go definition; the switch tests hold the two together.
 */
#define FNV32_OFFSET 2166136261U
#define FNV32_PRIME 16777619U

static __always_inline __u32 fnv1a_byte(__u32 h, __u8 b)
{
	return (h ^ b) * FNV32_PRIME;
}

static __always_inline __u32 ecmp_hash(const struct ipv6hdr *ip6, __u16 sport)
{
	const __u8 *s = ip6->saddr.in6_u.u6_addr8;
	const __u8 *d = ip6->daddr.in6_u.u6_addr8;
	__u32 fl = ip6_flowlabel(ip6);
	__u32 h = FNV32_OFFSET;

#pragma unroll
	for (int i = 0; i < 16; i++)
		h = fnv1a_byte(h, s[i]);
#pragma unroll
	for (int i = 0; i < 16; i++)
		h = fnv1a_byte(h, d[i]);
	h = fnv1a_byte(h, (__u8)(fl >> 16));
	h = fnv1a_byte(h, (__u8)(fl >> 8));
	h = fnv1a_byte(h, (__u8)fl);
	h = fnv1a_byte(h, (__u8)(sport >> 8));
	h = fnv1a_byte(h, (__u8)sport);
	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h;
}

#endif
