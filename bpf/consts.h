/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * Constants of the softmrc XDP switch. Values shared with other components
 * follow docs/conventions.md (DSCP classes, MRC opcodes, UDP ports); sizes are
 * mirrored in switchd/dataplane (api.go) and checked there at load time.
 */
#ifndef SOFTMRC_CONSTS_H
#define SOFTMRC_CONSTS_H

/* Map sizes. */
#define SW_MAX_PORTS 64
#define SW_COUNTER_SLOTS (SW_MAX_PORTS + 1) /* last slot: unmapped ingress */
#define SW_UNMAPPED_PORT SW_MAX_PORTS
#define SW_MAX_GROUPS 256
#define SW_MAX_GROUP_MEMBERS 16
#define SW_MAX_ROUTES 4096
#define SW_MAX_OWN_SIDS 16 /* policy limit, enforced by user space; own_sids holds any number */
#define SW_MAX_LOCAL_ADDRS 64
#define SW_USID_SPACE 65536 /* 16-bit CSIDs: entries of the own-uSID table */

/*
 * Bound on uN executions per packet: a 128-bit F3216 container holds at most
 * 6 uSIDs, so 6 is enough for any block length >= 32; with a 16-bit block the
 * container holds 7 and a longer run of the node's own uSID is dropped as
 * hop-limit/loop abuse (docs/switch.md).
 */
#define SW_MAX_USID_SHIFTS 7

/* Switch modes (struct sw_config.mode). */
#define SW_MODE_SRV6 0
#define SW_MODE_ECMP 1

/* Port roles (struct sw_port.role). */
#define SW_ROLE_FABRIC 0
#define SW_ROLE_HOST 1

/*
 * sw_port.flags. SW_PORT_F_HOST_ECN: a host-facing port marks CE as well
 * (commodity switches mark on any congested egress; DCQCN needs the marks of a
 * last-hop incast). Without it a host port only trims (MRC's design).
 */
#define SW_PORT_F_HOST_ECN 1

/* Next-hop kinds (struct sw_nexthop.kind). */
#define SW_NH_PORT 0
#define SW_NH_GROUP 1

/* Own-SID kinds (entries of own_sids; 0 = not an own SID). */
#define SW_SID_UN 1

/* DSCP classes (6-bit), docs/conventions.md. */
#define DSCP_TRIMMABLE 10
#define DSCP_TRIMMABLE_RETX 12
#define DSCP_NO_TRIM 14
#define DSCP_CONTROL 46
#define DSCP_TRIMMED 40
#define DSCP_TRIMMED_LASTHOP 41

/* ECN codepoints (low 2 bits of the traffic class). */
#define ECN_NOT_ECT 0
#define ECN_CE 3

/* RoCEv2 UDP destination port and its receive alias. */
#define ROCE_UDP_PORT 4791
#define ROCE_UDP_PORT_ALIAS 4971

/* MRC header sizes and the data opcodes that may be trimmed. */
#define BTH_LEN 12
#define METH_LEN 4
#define TSETH_LEN 4
#define RETH_LEN 16
#define IMMDT_LEN 4
#define BTH_FLAGS_OFF 8     /* byte 8: A | R | rtx | ts | reserved */
#define BTH_FLAG_TS 0x10    /* a TSETH follows the METH */
#define OP_WRITE_FIRST 0xC6
#define OP_WRITE_LAST_IMM 0xC9
#define OP_WRITE_ONLY 0xCA
#define OP_WRITE_ONLY_IMM 0xCB

/* Protocol numbers not always in the UAPI headers we include. */
#define SW_ETH_P_IPV6 0x86DD
#define SW_IPPROTO_IPV6 41
#define SW_IPPROTO_UDP 17
#define SW_IPPROTO_ICMPV6 58

#define NSEC_PER_SEC 1000000000ULL

#endif
