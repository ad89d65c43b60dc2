// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// nicsteer: the NIC-side XDP program of a softmrc soft NIC port.
//
// It redirects MRC frames into the port's AF_XDP socket and passes every other
// frame (NDP, ICMPv6, management traffic) to the kernel untouched. A frame is
// an MRC frame when either
//   - it is IPv6-in-IPv6 (outer next header 41) and the outer destination
//     matches one of the prefixes in usid_prefixes (the port's downlink uSID
//     as the active uSID, i.e. the /48 block:uSID for F3216), or
//   - it is plain IPv6/UDP to destination port 4791 (or the 4971 alias) and
//     the IPv6 destination is one of the port's addresses in local_addrs.
// Both maps are filled from user space (nic/xsk), so one object serves any
// uSID format and any address plan. The socket is looked up by the receive
// queue index; with no socket on that queue the frame is passed, never dropped.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "nicsteer.h"
#include "parsing.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, NICSTEER_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, NICSTEER_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nicsteer_lpm_key);
	__type(value, __u32);
} usid_prefixes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NICSTEER_MAX_ADDRS);
	__type(key, struct in6_addr);
	__type(value, __u32);
} local_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NICSTEER_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline int redirect(struct xdp_md *ctx, __u32 cnt)
{
	// The low bits of the flags are the action when the queue has no
	// socket: pass, so a port that is not open never blackholes frames.
	int act = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);

	count(act == XDP_REDIRECT ? cnt : NICSTEER_CNT_NO_SOCKET);
	return act;
}

/*
 * xdp.frags: loaded with BPF_F_XDP_HAS_FRAGS, so a veth carrying it may have
 * an MTU above 3506 (a 4096-byte RoCE MTU) and multi-buffer frames reach the
 * socket (bound with XDP_USE_SG). Only headers are read, and veth keeps the
 * first ~3.5 KB of a frame linear, so data_end bounds them as before.
 */
SEC("xdp.frags")
int nicsteer(struct xdp_md *ctx)
{
	void *end = (void *)(long)ctx->data_end;
	struct hdr_cursor c = { .pos = (void *)(long)ctx->data };
	struct ethhdr *eth;
	struct ipv6hdr *ip6;
	struct udphdr *udp;
	int nh;

	/* Short or foreign frames (-1 or another EtherType) go to the kernel. */
	if (parse_ethhdr(&c, end, &eth) != ETH_P_IPV6)
		goto pass;
	nh = parse_ip6hdr(&c, end, &ip6);
	if (nh == IPPROTO_IPV6) {
		struct nicsteer_lpm_key key = { .prefixlen = 128 };

		__builtin_memcpy(key.addr, &ip6->daddr, sizeof(key.addr));
		if (bpf_map_lookup_elem(&usid_prefixes, &key))
			return redirect(ctx, NICSTEER_CNT_USID);
		goto pass;
	}
	if (nh == IPPROTO_UDP) {
		int dport = parse_udphdr(&c, end, &udp);

		if (dport != NICSTEER_UDP_PORT && dport != NICSTEER_UDP_PORT_ALIAS)
			goto pass;
		if (bpf_map_lookup_elem(&local_addrs, &ip6->daddr))
			return redirect(ctx, NICSTEER_CNT_UDP);
	}
pass:
	count(NICSTEER_CNT_PASS);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
