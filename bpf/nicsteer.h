/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/* Private to bpf/nicsteer.bpf.c and nic/xsk: map sizes, counter indices. */
#ifndef NICSTEER_H
#define NICSTEER_H

#include <linux/types.h>

#define NICSTEER_MAX_QUEUES 64
#define NICSTEER_MAX_PREFIXES 64
#define NICSTEER_MAX_ADDRS 64

/* RoCEv2 UDP destination port and the alias accepted on receive (conventions.md). */
#define NICSTEER_UDP_PORT 4791
#define NICSTEER_UDP_PORT_ALIAS 4971

/* Indices into the counters map; nic/xsk mirrors them as SteerCounters fields. */
enum nicsteer_counter {
	NICSTEER_CNT_USID = 0,      /* IPv6-in-IPv6 to a uSID prefix, redirected */
	NICSTEER_CNT_UDP = 1,       /* plain IPv6/UDP 4791 to a local address, redirected */
	NICSTEER_CNT_PASS = 2,      /* not ours: passed to the kernel */
	NICSTEER_CNT_NO_SOCKET = 3, /* ours, but no socket on the rx queue: passed */
	NICSTEER_CNT_MAX = 4,
};

struct nicsteer_lpm_key {
	__u32 prefixlen;
	__u8 addr[16];
};

#endif
