/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * Maps of the softmrc XDP switch. User space (switchd/dataplane) fills every
 * map except vq and counters; it pins them so that a restarted daemon adopts
 * them with their state.
 */
#ifndef SOFTMRC_MAPS_H
#define SOFTMRC_MAPS_H

#include <linux/bpf.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>

#include "consts.h"
#include "structs.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sw_config);
} config SEC(".maps");

/* The node's own uSIDs in config.block (key 0): kind by uSID. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sw_usid_table);
} own_sids SEC(".maps");

/* Destinations handed to the kernel (the switch's own addresses). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SW_MAX_LOCAL_ADDRS);
	__type(key, struct in6_addr);
	__type(value, __u32);
} local_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SW_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sw_lpm_key);
	__type(value, struct sw_nexthop);
} fib SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SW_MAX_GROUPS);
	__type(key, __u32);
	__type(value, struct sw_ecmp_group);
} ecmp_groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SW_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct sw_port);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SW_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct sw_fault);
} faults SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SW_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct sw_vq);
} vqs SEC(".maps");

/* ifindex -> port index, to attribute ingress counters and faults. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SW_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} ifindex_port SEC(".maps");

/* Egress: port index -> ifindex (bulk-flushed redirect). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, SW_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SW_COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, struct sw_counters);
} counters SEC(".maps");

#endif
