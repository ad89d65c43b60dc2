// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// testgen: a traffic generator and a receiver for the switch benchmarks. Run in
// BPF_PROG_RUN live-frames mode, it sends every frame unchanged out of the
// interface in devmap slot 0, after restoring its first GEN_HDR_LEN bytes
// (Ethernet + outer IPv6) from gen_hdr. Live-frames mode recycles pages with
// their contents, and a veth peer receives the very same page, so whatever
// the router downstream rewrote in place (DA shift, hop limit, MACs) would
// otherwise come back in the next frame. Test-only: its Go binding is
// generated into a _test.go file.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} gen_tx SEC(".maps");

#define GEN_HDR_LEN 64

struct gen_hdr {
	__u8 b[GEN_HDR_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_hdr);
} gen_hdr SEC(".maps");

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct gen_hdr *h = bpf_map_lookup_elem(&gen_hdr, &zero);

	if (!h || data + GEN_HDR_LEN > data_end)
		return XDP_DROP;
	__builtin_memcpy(data, h->b, GEN_HDR_LEN);
	return bpf_redirect_map(&gen_tx, 0, XDP_DROP);
}

/*
 * xdp_sink is the benchmark's receiver: it counts and drops every frame, at
 * the lowest cost an XDP program can have, so that the CPU it shares with the
 * generator is spent on offering traffic.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink_count SEC(".maps");

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&sink_count, &zero);

	if (n)
		(*n)++;
	return XDP_DROP;
}
