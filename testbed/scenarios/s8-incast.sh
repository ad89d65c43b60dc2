#!/usr/bin/env bash
# S8 (issue 11): an N:1 incast (default 7 senders) plus a victim flow to another host
# under the receiver's T0, MRC against the RoCE baseline with DCQCN, on one testbed.
#
#   T0-0: h0 .. h(N-1) incast senders, hN victim sender
#   T0-1: h(N+1) incast receiver, h(N+2) victim receiver
#
# One plane, one T1, ECMP mode. Every NIC port is paced (S8_NIC_BPS); the fabric
# links (T0-T1) and host links have port models with ECN, trim and drop thresholds.
# For each transport: the victim alone for S8_DURATION seconds, then the victim and
# the N incast flows together (every flow -s 65536 -D S8_DURATION --verify). It reports
# the victim's rate with the incast as a share of its rate alone, and Jain's fairness
# index of the N incast flows.
#
# There is no PFC in mrc-switchd: the RoCE runs are lossy RoCE with DCQCN. The switch
# marks CE only on fabric ports (not on the receivers' downlinks), so the incast at
# the last hop shows up to RoCE as trims (losses), and only the shared T1->T0 link
# produces CNPs. RoCE QPs run DCQCN slowed by S8_DCQCN_SCALE (default: 100 Gb/s
# divided by S8_NIC_BPS; docs/roce.md).
#
# Output: a Markdown table and a CSV under S8_OUT (default docs/results/s8), plus the
# per-flow outputs. Needs root, `make build` (or MRC_BIN). Every process it starts and
# the testbed are removed on exit, also on failure or Ctrl-C.
#
# Environment: S8_SENDERS (7), S8_DURATION (5), S8_NIC_BPS (100000000),
# S8_FABRIC (400Mbit), S8_HOST (100Mbit), S8_DCQCN_SCALE, S8_TRANSPORTS ("mrc roce"),
# S8_OUT, MRC_BIN.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${MRC_BIN:-$root/bin}
n=${S8_SENDERS:-7}
dur=${S8_DURATION:-5}
nic_bps=${S8_NIC_BPS:-100000000}
fabric=${S8_FABRIC:-400Mbit}
hostcap=${S8_HOST:-100Mbit}
scale=${S8_DCQCN_SCALE:-$(awk -v b="$nic_bps" 'BEGIN{printf "%g", 100e9/b}')}
transports=${S8_TRANSPORTS:-mrc roce}
out=${S8_OUT:-$root/docs/results/s8}

for b in mrc-testbed mrc-switchd mrc-nicd mrc-write-bw mrcctl; do
	[ -x "$bin/$b" ] || { echo "s8: $bin/$b missing: run 'make build' (or set MRC_BIN)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "s8: needs root (network namespaces, XDP, AF_XDP)" >&2; exit 1; }
[ "$n" -ge 1 ] && [ "$n" -le 30 ] || { echo "s8: S8_SENDERS=$n: want 1..30" >&2; exit 1; }

prefix=s8$(printf '%04x' $((RANDOM % 65536)))
dir=$(mktemp -d /tmp/mrc-s8.XXXXXX)
pids=()
cleanup() {
	status=$?
	trap - EXIT INT TERM
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	"$bin/mrc-testbed" down --dir "$dir" >/dev/null 2>&1 || echo "s8: teardown of $dir reported an error" >&2
	[ "$status" = 0 ] || echo "s8: FAILED (exit $status); run folder $dir" >&2
	[ "$status" != 0 ] || rm -rf "$dir"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

victim_src=h$n
recv=h$((n + 1))
victim_dst=h$((n + 2))
cat >"$dir/s8.yaml" <<EOF
mode: ecmp
dataplane: xdp
planes: 1
t0_per_plane: 2
t1_per_plane: 1
hosts_per_t0: $((n + 1))
mtu: 3500
links:
  fabric: {capacity: $fabric, buffer: 128KiB, ecn_threshold: 16KiB, trim_threshold: 64KiB}
  host: {capacity: $hostcap, buffer: 128KiB, ecn_threshold: 16KiB, trim_threshold: 64KiB}
EOF
echo "== s8: $n:1 incast + victim; NIC ports $nic_bps b/s, fabric $fabric, host links $hostcap; RoCE dcqcn_scale $scale; run folder $dir"
"$bin/mrc-testbed" up "$dir/s8.yaml" --prefix "$prefix" --dir "$dir" --bin "$bin" >"$dir/up.log" 2>&1

hostkey() { awk -v h="$1" -v k="$2:" '$1=="-" && $2=="name:" {cur=$3} cur==h && $1==k {split($2,a,"/"); print a[1]; exit}' "$dir/plan.yaml"; }
sock() { echo "$dir/host/$1.sock"; }

hosts=()
for i in $(seq 0 $((n + 2))); do hosts+=("h$i"); done
for h in "${hosts[@]}"; do
	f=$dir/host/$h.nic.yaml
	if grep -q 'pacing_bps:' "$f"; then # the testbed paces NICs at their host link's capacity
		sed -i "s/pacing_bps: .*/pacing_bps: $nic_bps/" "$f"
	else
		sed -i "s/^\(\s*\)interface: \(.*\)/\1interface: \2\n\1pacing_bps: $nic_bps/" "$f"
	fi
	if grep -q '^roce:' "$f"; then # written with defaults (2-space indent, nic/config Marshal)
		sed -i "/^roce:/a\\  dcqcn_scale: $scale" "$f"
	else
		printf 'roce:\n  dcqcn_scale: %s\n' "$scale" >>"$f"
	fi
	ip netns exec "$(hostkey "$h" ns)" "$bin/mrc-nicd" -config "$f" >"$dir/log/$h.nicd.log" 2>&1 &
	pids+=($!)
done
for h in "${hosts[@]}"; do
	for i in $(seq 100); do
		"$bin/mrcctl" -d "$(sock "$h")" ports >/dev/null 2>&1 && break
		[ "$i" = 100 ] && { echo "s8: mrc-nicd on $h did not come up" >&2; exit 1; }
		sleep 0.1
	done
done

# flow SRC DST PORT TRANSPORT OUTFILE: start server and client of one flow in the
# background; the client's output goes to OUTFILE.
flow() {
	local src=$1 dst=$2 port=$3 tr=$4 of=$5
	ip netns exec "$(hostkey "$dst" ns)" timeout $((dur + 60)) "$bin/mrc-write-bw" -d "$(sock "$dst")" -p "$port" \
		--transport "$tr" >"$of.server" 2>&1 &
	pids+=($!)
	ip netns exec "$(hostkey "$src" ns)" timeout $((dur + 60)) "$bin/mrc-write-bw" -d "$(sock "$src")" -p "$port" \
		--transport "$tr" -s 65536 -D "$dur" --verify "$(hostkey "$dst" mgmt_addr)" >"$of" 2>&1 &
	pids+=($!)
	waitlist+=($!)
}
# avg OUTFILE: the BW average column of the result row (empty if the run failed).
avg() { awk '$1=="65536" && NF>=5 {print $4}' "$1"; }
cnps() { "$bin/mrcctl" -d "$(sock "$1")" -json counters | tr ',{}' '\n\n\n' | awk -F: '/"RxCNP"/ {print $2+0}'; }

mkdir -p "$out"
csv=$out/s8.csv
echo "transport,phase,flow,src,dst,MiB_s" >"$csv"
declare -A alone with jain sumin failed
setup_fail=0
for tr in $transports; do
	echo "== $tr: victim $victim_src -> $victim_dst alone, ${dur}s"
	waitlist=()
	flow "$victim_src" "$victim_dst" 19000 "$tr" "$dir/$tr.alone.victim"
	for p in "${waitlist[@]}"; do wait "$p" || true; done
	alone[$tr]=$(avg "$dir/$tr.alone.victim")
	[ -n "${alone[$tr]}" ] || setup_fail=1
	echo "$tr,alone,victim,$victim_src,$victim_dst,${alone[$tr]}" >>"$csv"
	echo "   victim alone: ${alone[$tr]:-FAILED} MiB/s"

	echo "== $tr: victim + $n:1 incast into $recv, ${dur}s"
	c0=$(cnps "$victim_src")
	waitlist=()
	flow "$victim_src" "$victim_dst" 19001 "$tr" "$dir/$tr.with.victim"
	for i in $(seq 0 $((n - 1))); do
		flow "h$i" "$recv" $((19100 + i)) "$tr" "$dir/$tr.with.h$i"
	done
	# A flow that fails (RoCE: RETRY_EXCEEDED under the incast) is a
	# result, counted, with rate 0; its last line says why.
	for p in "${waitlist[@]}"; do wait "$p" || true; done
	with[$tr]=$(avg "$dir/$tr.with.victim")
	echo "$tr,incast,victim,$victim_src,$victim_dst,${with[$tr]}" >>"$csv"
	xs=()
	failed[$tr]=0
	for i in $(seq 0 $((n - 1))); do
		x=$(avg "$dir/$tr.with.h$i")
		if [ -z "$x" ]; then
			failed[$tr]=$((failed[$tr] + 1))
			echo "   h$i: $(grep -h 'mrc-write-bw:' "$dir/$tr.with.h$i" | tail -n 1)"
		fi
		xs+=("${x:-0}")
		echo "$tr,incast,incast$i,h$i,$recv,${x:-0}" >>"$csv"
	done
	jain[$tr]=$(printf '%s\n' "${xs[@]}" | awk '{s+=$1; q+=$1*$1; k++} END {if (q>0) printf "%.3f", s*s/(k*q); else print "n/a"}')
	sumin[$tr]=$(printf '%s\n' "${xs[@]}" | awk '{s+=$1} END {printf "%.2f", s}')
	echo "   victim with incast: ${with[$tr]:-FAILED} MiB/s; incast flows ${xs[*]} MiB/s (sum ${sumin[$tr]}, Jain ${jain[$tr]}); CNPs at the victim sender during the run: $(($(cnps "$victim_src") - c0))"
done

md=$out/s8.md
{
	echo "# S8: $n:1 incast and a victim flow, MRC vs RoCE + DCQCN"
	echo
	echo "Generated by \`testbed/scenarios/s8-incast.sh\` on $(date -u +%Y-%m-%dT%H:%MZ) ($(nproc) CPUs, shared)."
	echo "One plane, 2 T0, 1 T1, ECMP; NIC ports paced at $nic_bps b/s; fabric links $fabric,"
	echo "host links $hostcap (port models: buffer 128 KiB, ECN 16 KiB, trim 64 KiB); every flow"
	echo "\`mrc-write-bw -s 65536 -D $dur --verify\`. RoCE: go-back-N, DCQCN with \`dcqcn_scale: $scale\`."
	echo "**No PFC** exists in the XDP switch: RoCE here is lossy RoCE with DCQCN. The switch marks"
	echo "CE only on fabric ports, so the last-hop incast reaches RoCE as trims (losses)."
	echo
	echo "| transport | victim alone MiB/s | victim with incast MiB/s | victim share | incast sum MiB/s | Jain (incast) | incast flows failed |"
	echo "|---|---|---|---|---|---|---|"
	for tr in $transports; do
		share=$(awk -v a="${alone[$tr]:-0}" -v b="${with[$tr]:-0}" 'BEGIN{if (a>0) printf "%.1f %%", 100*b/a; else print "n/a"}')
		echo "| $tr | ${alone[$tr]:-failed} | ${with[$tr]:-failed} | $share | ${sumin[$tr]} | ${jain[$tr]} | ${failed[$tr]} of $n |"
	done
	echo
	echo "Per-flow rates: \`s8.csv\`. A failed flow (RoCE: transport retry exceeded, i.e. its QP"
	echo "went to error under the incast) counts as rate 0 in the sum and in Jain's index."
	echo "Expected (issue 11): MRC victim ≥ 95 % of alone; the seed reports a 25 % victim loss"
	echo "for RoCE + DCQCN (with PFC, on hardware)."
} >"$md"
cat "$md"
[ "$setup_fail" = 0 ] || { echo "s8: a victim-alone run failed: the setup is broken; outputs in $dir" >&2; exit 1; }
