#!/usr/bin/env bash
# S7 (issue 11): all-reduce and all-to-all bus bandwidth, MRC with 1 QP per peer
# against the RoCE baseline (go-back-N + DCQCN, no PFC) with 1 and 16 QPs per peer,
# without and with 1 % random loss on one fabric link per plane.
#
# The seed's setup at this machine's scale: MRC on P planes of capacity C, RoCE on
# one plane whose links have P x C, the same 4 hosts, the same tools:
#
#   MRC:  P planes x (2 T0, 2 T1), every link C      (S7_PLANES, S7_CAP)
#   RoCE: 1 plane  x (2 T0, 2 T1), every link P x C
#
# h0,h1 sit under T0-0 and h2,h3 under T0-1; the ring is h0,h2,h1,h3 so that every
# ring hop crosses the fabric (as rings across racks do), and each T0 sends two
# ring flows (all-to-all: four flows) over its two uplinks. ECMP hashes each RoCE
# QP onto one uplink for its life: two QPs on one uplink halve both. The run
# records every T0 uplink's tx bytes (switch port counters) to report how evenly
# the traffic spread (ECMP collisions).
#
# Why the numbers are small: every NIC, switch and tool is a process on this
# machine (2 shared CPUs). The emulated capacities (switch port models, NIC pacing)
# are set far below what the CPUs carry, so that the emulated links, not the CPUs,
# are the bottleneck; the report gives each run's busbw as a share of the
# per-host capacity P x C to show it. DCQCN runs slowed by S7_DCQCN_SCALE
# (default 100 Gb/s / (P x C); docs/roce.md) so that it reacts at this timescale
# as it does at 100 Gb/s.
#
# Loss: `mrc-testbed fault p<p>-t0-0--p<p>-t1-0 loss=1%` on every plane (both
# directions of that link), cleared after the run.
#
# Last hop: the host links get `host_ecn: true` (S7_HOST_ECN=1, the default), so
# the T0 downlinks mark CE like the fabric ports. All-to-all is an incast at every
# receiver (3 senders at line rate into one host link). Without marks there, the
# downlink only trims, RoCE takes every trim as a loss and goes back N with no CNP
# to slow it: in the run of 2026-12-03 10:14 that was 6470 trims against 107
# injected losses, and a RoCE 1 QP all-to-all QP retransmitted 6642 of 7383 packets
# and failed with RETRY_EXCEEDED. S7_HOST_ECN=0 gives that behaviour.
#
# Output under S7_OUT (default docs/results/s7): s7.md (table, verdicts), s7.json,
# s7.csv, s7.png, computed by `go run ./testbed/scenarios/scenarioreport s7`
# from the raw tool JSON and switch counters kept in S7_OUT/raw. Needs root,
# `make build` (or MRC_BIN) and Go. Everything it starts is removed on exit, also
# on failure or Ctrl-C.
#
# Environment: S7_PLANES (2), S7_CAP (40Mbit; C), S7_BYTES (2M; message size),
# S7_ITERS (5), S7_LOSS (1%), S7_DCQCN_SCALE, S7_TIMEOUT (120s; per run), S7_HOST_ECN (1),
# S7_OUT, MRC_BIN.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${MRC_BIN:-$root/bin}
planes=${S7_PLANES:-2}
cap=${S7_CAP:-40Mbit}
bytes=${S7_BYTES:-2M}
iters=${S7_ITERS:-5}
loss=${S7_LOSS:-1%}
tmo=${S7_TIMEOUT:-120s}
host_ecn=${S7_HOST_ECN:-1}
case $host_ecn in 1) hecn=", host_ecn: true" hecn_json=true ;; 0) hecn="" hecn_json=false ;; *) echo "s7: S7_HOST_ECN=$host_ecn: want 0 or 1" >&2; exit 1 ;; esac
out=${S7_OUT:-$root/docs/results/s7}

for b in mrc-testbed mrc-switchd mrc-nicd mrc-allreduce-perf mrc-alltoall-perf mrcctl; do
	[ -x "$bin/$b" ] || { echo "s7: $bin/$b missing: run 'make build' (or set MRC_BIN)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "s7: needs root (network namespaces, XDP, AF_XDP)" >&2; exit 1; }
[ "$planes" -ge 1 ] && [ "$planes" -le 8 ] || { echo "s7: S7_PLANES=$planes: want 1..8" >&2; exit 1; }
command -v go >/dev/null || { echo "s7: go not found: the report is computed by go run ./testbed/scenarios/scenarioreport" >&2; exit 1; }

# Capacity in bit/s (accepts Mbit, Gbit, kbit suffixes or plain bit/s).
cap_bps=$(awk -v c="$cap" 'BEGIN{n=c+0; if (c ~ /[Gg]bit$/) n*=1e9; else if (c ~ /[Mm]bit$/) n*=1e6; else if (c ~ /[Kk]bit$/) n*=1e3; printf "%d", n}')
[ "$cap_bps" -gt 0 ] || { echo "s7: S7_CAP=$cap: want a rate such as 40Mbit" >&2; exit 1; }
roce_bps=$((cap_bps * planes))
scale=${S7_DCQCN_SCALE:-$(awk -v b="$roce_bps" 'BEGIN{printf "%g", 100e9/b}')}

run=$(mktemp -d /tmp/mrc-s7.XXXXXX)
raw=$out/raw
mkdir -p "$raw"
rm -f "$raw"/*.json "$raw"/*.log
pids=()
dir=""
down() {
	[ -n "$dir" ] || return 0
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
	"$bin/mrc-testbed" down --dir "$dir" >/dev/null 2>&1 || echo "s7: teardown of $dir reported an error" >&2
	dir=""
}
cleanup() {
	status=$?
	trap - EXIT INT TERM
	down
	[ "$status" = 0 ] || echo "s7: FAILED (exit $status); run folder $run" >&2
	[ "$status" != 0 ] || rm -rf "$run"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hostkey() { awk -v h="$1" -v k="$2:" '$1=="-" && $2=="name:" {cur=$3} cur==h && $1==k {split($2,a,"/"); print a[1]; exit}' "$dir/plan.yaml"; }
sock() { echo "$dir/host/$1.sock"; }

# up NAME PLANES CAPACITY: a testbed with mrc-nicd on every host.
up() {
	local name=$1 np=$2 c=$3
	dir=$run/$name
	mkdir -p "$dir"
	cat >"$dir/s7.yaml" <<EOF
mode: ecmp
dataplane: xdp
planes: $np
t0_per_plane: 2
t1_per_plane: 2
hosts_per_t0: 2
mtu: 3500
links:
  fabric: {capacity: $c, buffer: 128KiB, ecn_threshold: 16KiB, trim_threshold: 64KiB}
  host: {capacity: $c, buffer: 128KiB, ecn_threshold: 16KiB, trim_threshold: 64KiB$hecn}
EOF
	echo "== s7: $name fabric: $np plane(s), every link $c bit/s (run folder $dir)"
	"$bin/mrc-testbed" up "$dir/s7.yaml" --prefix "s7$(printf '%04x' $((RANDOM % 65536)))" --dir "$dir" --bin "$bin" >"$dir/up.log" 2>&1
	for h in h0 h1 h2 h3; do
		f=$dir/host/$h.nic.yaml
		if grep -q '^roce:' "$f"; then
			sed -i "/^roce:/a\\  dcqcn_scale: $scale" "$f"
		else
			printf 'roce:\n  dcqcn_scale: %s\n' "$scale" >>"$f"
		fi
		ip netns exec "$(hostkey "$h" ns)" "$bin/mrc-nicd" -config "$f" >"$dir/$h.nicd.log" 2>&1 &
		pids+=($!)
	done
	for h in h0 h1 h2 h3; do
		for i in $(seq 100); do
			"$bin/mrcctl" -d "$(sock "$h")" ports >/dev/null 2>&1 && break
			[ "$i" = 100 ] && { echo "s7: mrc-nicd on $h did not come up" >&2; exit 1; }
			sleep 0.1
		done
	done
}

# t0stats FILE: every T0's port counters as one JSON object {"switch": stats, ...}.
t0stats() {
	local first=1 s
	{
		echo "{"
		for s in "$dir"/switch/p*-t0-*.sock; do
			[ "$first" = 1 ] || echo ","
			first=0
			printf '"%s": ' "$(basename "$s" .sock)"
			"$bin/mrc-switchd" stats --ctl "$s" --json
		done
		echo "}"
	} >"$1"
}

# measure KEY TRANSPORT QPS TOOL LOSSY: one collective run on the current testbed.
measure() {
	local key=$1 tr=$2 qps=$3 tool=$4 lossy=$5 p
	if [ "$lossy" = 1 ]; then
		for p in $(seq 0 $((np_cur - 1))); do
			"$bin/mrc-testbed" fault --dir "$dir" "p$p-t0-0--p$p-t1-0" "loss=$loss" >/dev/null
		done
	fi
	t0stats "$raw/$key.before.json"
	local note=""
	[ "$lossy" = 0 ] || note=" (loss $loss on p*-t0-0--p*-t1-0)"
	echo "   $key: $tool --transport $tr --qps $qps -b $bytes -e $bytes -n $iters -w 1$note"
	# Rank 0 (h0) prints the JSON report on stdout; mrc-testbed exec prefixes
	# every line with "HOST: ". A run that fails leaves no JSON: rate 0.
	"$bin/mrc-testbed" exec --dir "$dir" h0,h2,h1,h3 -- "$bin/$tool" --json --transport "$tr" --qps "$qps" \
		-b "$bytes" -e "$bytes" -n "$iters" -w 1 -c 1 --timeout "$tmo" --stall 30s >"$raw/$key.log" 2>&1 || echo "   $key: FAILED: $(grep -v '^h0: *[{}"\[]' "$raw/$key.log" | tail -n 2 | tr '\n' ' ')"
	t0stats "$raw/$key.after.json"
	sed -n 's/^h0: //p' "$raw/$key.log" | awk '$0=="{" {on=1} on {print} $0=="}" {on=0}' >"$raw/$key.json"
	[ -s "$raw/$key.json" ] || rm -f "$raw/$key.json"
	if [ "$lossy" = 1 ]; then
		for p in $(seq 0 $((np_cur - 1))); do
			"$bin/mrc-testbed" fault --dir "$dir" "p$p-t0-0--p$p-t1-0" clear >/dev/null
		done
	fi
}

cat >"$raw/setup.json" <<EOF
{"planes": $planes, "cap_bps": $cap_bps, "roce_cap_bps": $roce_bps, "bytes": "$bytes", "iters": $iters,
 "loss": "$loss", "dcqcn_scale": $scale, "host_ecn": $hecn_json, "cpus": $(nproc), "date": "$(date -u +%Y-%m-%dT%H:%MZ)"}
EOF

np_cur=$planes
up mrc "$planes" "$cap_bps"
for lossy in 0 1; do
	for tool in mrc-allreduce-perf mrc-alltoall-perf; do
		measure "$tool.mrc1.loss$lossy" mrc 1 "$tool" "$lossy"
	done
done
down

np_cur=1
up roce 1 "$roce_bps"
for lossy in 0 1; do
	for qps in 1 16; do
		for tool in mrc-allreduce-perf mrc-alltoall-perf; do
			measure "$tool.roce$qps.loss$lossy" roce "$qps" "$tool" "$lossy"
		done
	done
done
down

st=0
(cd "$root" && go run ./testbed/scenarios/scenarioreport s7 "$raw" "$out") || st=$?
cat "$out/s7.md" 2>/dev/null || true
case $st in
0) echo "s7: every verdict passed; report in $out" ;;
1) echo "s7: some verdicts FAILED (measured, see $out/s7.md)" >&2; exit 1 ;;
*) echo "s7: the report could not be computed from $raw" >&2; exit "$st" ;;
esac
