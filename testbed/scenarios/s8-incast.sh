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
# There is no PFC in mrc-switchd: the RoCE runs are lossy RoCE with DCQCN. The host
# links get `host_ecn: true` (S8_HOST_ECN=1, the default): the T0 downlinks mark CE
# above ecn_threshold as commodity switches do on any congested egress, so the
# last-hop incast reaches DCQCN as CNPs, not only as trims (losses). MRC's NSCC sees
# those marks too, besides the last-hop trims. S8_HOST_ECN=0 gives the switch's
# default (a host port only trims). RoCE QPs run DCQCN slowed by
# S8_DCQCN_SCALE (default: 100 Gb/s divided by S8_NIC_BPS; docs/roce.md).
#
# The CPU: every NIC, switch and tool is a process on this machine. The emulated
# capacities must stay far below what the CPUs carry, or the numbers measure the
# CPU. The report therefore gives the receiver downlink's utilisation (incast sum /
# host link capacity) and its switch counters (marked, trimmed, dropped): a
# saturated downlink with marks and trims means the emulated link, not the CPU, is
# the bottleneck.
#
# Output: a Markdown table and a CSV under S8_OUT (default docs/results/s8), plus the
# per-flow outputs. Needs root, `make build` (or MRC_BIN). Every process it starts and
# the testbed are removed on exit, also on failure or Ctrl-C.
#
# Environment: S8_SENDERS (7), S8_DURATION (5), S8_NIC_BPS (100000000),
# S8_FABRIC (400Mbit), S8_HOST (100Mbit), S8_DCQCN_SCALE, S8_TRANSPORTS ("mrc roce"),
# S8_HOST_ECN (1), S8_OUT, MRC_BIN.
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
host_ecn=${S8_HOST_ECN:-1}
case $host_ecn in 1) hecn=", host_ecn: true" ;; 0) hecn="" ;; *) echo "s8: S8_HOST_ECN=$host_ecn: want 0 or 1" >&2; exit 1 ;; esac
out=${S8_OUT:-$root/docs/results/s8}

command -v jq >/dev/null || { echo "s8: jq not found (reads the switch port counters): apt-get install jq" >&2; exit 1; }
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
  host: {capacity: $hostcap, buffer: 128KiB, ecn_threshold: 16KiB, trim_threshold: 64KiB$hecn}
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

# portdelta PREFIX PORT: tx_bytes, ecn_marked, trimmed, buffer drops of PORT
# between PREFIX.before.json and PREFIX.after.json (mrc-switchd stats --json).
portdelta() {
	local q='.ports[] | select(.name==$p) | .counters | [.tx_bytes, .ecn_marked, .trimmed, .drops.buffer] | @tsv'
	paste <(jq -r --arg p "$2" "$q" "$1.before.json" | tr '\t' '\n') <(jq -r --arg p "$2" "$q" "$1.after.json" | tr '\t' '\n') |
		awk '{printf "%d ", $2-$1} END {print ""}'
}
t0s=$dir/switch/p0-t0-0.sock # the senders' T0
t0r=$dir/switch/p0-t0-1.sock # the receivers' T0
recv_port=d0                 # h(N+1) is the first host under T0-1
host_bps=$(awk -v c="$hostcap" 'BEGIN{n=c+0; if (c ~ /[Gg]bit$/) n*=1e9; else if (c ~ /[Mm]bit$/) n*=1e6; else if (c ~ /[Kk]bit$/) n*=1e3; printf "%d", n}')
declare -A load cnpv cnpi util dl upmk
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
	ci0=0
	for i in $(seq 0 $((n - 1))); do ci0=$((ci0 + $(cnps "h$i"))); done
	"$bin/mrc-switchd" stats --ctl "$t0r" --json >"$dir/$tr.t0r.before.json"
	"$bin/mrc-switchd" stats --ctl "$t0s" --json >"$dir/$tr.t0s.before.json"
	load0=$(cut -d' ' -f1 /proc/loadavg)
	t0=$(date +%s.%N)
	waitlist=()
	flow "$victim_src" "$victim_dst" 19001 "$tr" "$dir/$tr.with.victim"
	for i in $(seq 0 $((n - 1))); do
		flow "h$i" "$recv" $((19100 + i)) "$tr" "$dir/$tr.with.h$i"
	done
	# A flow that fails (RoCE: RETRY_EXCEEDED under the incast) is a
	# result, counted, with rate 0; its last line says why.
	for p in "${waitlist[@]}"; do wait "$p" || true; done
	with[$tr]=$(avg "$dir/$tr.with.victim")
	[ -n "${with[$tr]}" ] || echo "   victim: $(grep -h 'mrc-write-bw:' "$dir/$tr.with.victim" | tail -n 1)"
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
	t1=$(date +%s.%N)
	"$bin/mrc-switchd" stats --ctl "$t0r" --json >"$dir/$tr.t0r.after.json"
	"$bin/mrc-switchd" stats --ctl "$t0s" --json >"$dir/$tr.t0s.after.json"
	load[$tr]="$load0 / $(cut -d' ' -f1 /proc/loadavg)"
	cnpv[$tr]=$(($(cnps "$victim_src") - c0))
	ci1=0
	for i in $(seq 0 $((n - 1))); do ci1=$((ci1 + $(cnps "h$i"))); done
	cnpi[$tr]=$((ci1 - ci0))
	# The receiver's downlink: bytes sent (as a share of its capacity over the
	# run), CE marks, trims and buffer drops; the senders' T0 uplink's marks.
	read -r tx mk tm dr < <(portdelta "$dir/$tr.t0r" "$recv_port")
	# Over the whole window between the counter reads (setup and
	# rendezvous included): a lower bound of the utilisation while busy.
	util[$tr]=$(awk -v b="$tx" -v t0="$t0" -v t1="$t1" -v c="$host_bps" 'BEGIN{printf "%.0f %% of %.1f s", 100*b*8/((t1-t0)*c), t1-t0}')
	dl[$tr]="$mk / $tm / $dr"
	read -r _ umk _ _ < <(portdelta "$dir/$tr.t0s" u0)
	upmk[$tr]=$umk
	echo "   victim with incast: ${with[$tr]:-FAILED} MiB/s; incast flows ${xs[*]} MiB/s (sum ${sumin[$tr]}, Jain ${jain[$tr]}); CNPs at the victim sender ${cnpv[$tr]}, at the incast senders ${cnpi[$tr]}; receiver downlink ${util[$tr]} of capacity, marked/trimmed/dropped ${dl[$tr]}; load average ${load[$tr]}"
done

md=$out/s8.md
{
	echo "# S8: $n:1 incast and a victim flow, MRC vs RoCE + DCQCN"
	echo
	echo "Generated by \`testbed/scenarios/s8-incast.sh\` on $(date -u +%Y-%m-%dT%H:%MZ) ($(nproc) CPUs, shared)."
	echo "One plane, 2 T0, 1 T1, ECMP; NIC ports paced at $nic_bps b/s; fabric links $fabric,"
	echo "host links $hostcap (port models: buffer 128 KiB, ECN 16 KiB, trim 64 KiB); every flow"
	echo "\`mrc-write-bw -s 65536 -D $dur --verify\`. RoCE: go-back-N, DCQCN with \`dcqcn_scale: $scale\`."
	echo "**No PFC** exists in the XDP switch: RoCE here is lossy RoCE with DCQCN."
	if [ "$host_ecn" = 1 ]; then
		echo "The host links have \`host_ecn: true\`: the T0 downlinks mark CE above 16 KiB as the fabric"
		echo "ports do, so the last-hop incast reaches DCQCN as CNPs (and MRC's NSCC as marks and trims)."
	else
		echo "\`S8_HOST_ECN=0\`: the T0 downlinks do not mark, so the last-hop incast reaches RoCE as"
		echo "trims (losses) only."
	fi
	echo
	echo "| transport | victim alone MiB/s | victim with incast MiB/s | victim share | incast sum MiB/s | Jain (incast) | incast flows failed |"
	echo "|---|---|---|---|---|---|---|"
	for tr in $transports; do
		share=$(awk -v a="${alone[$tr]:-0}" -v b="${with[$tr]:-0}" 'BEGIN{if (a>0) printf "%.1f %%", 100*b/a; else print "n/a"}')
		echo "| $tr | ${alone[$tr]:-failed} | ${with[$tr]:-failed} | $share | ${sumin[$tr]} | ${jain[$tr]} | ${failed[$tr]} of $n |"
	done
	echo
	echo "Where the bottleneck was, during the incast phase (switch port counters, NIC counters):"
	echo
	echo "| transport | receiver downlink: tx bytes / (capacity × window) | marked / trimmed / dropped there | CE marks on the senders' T0 uplink | CNPs at incast senders / victim sender | load average start / end |"
	echo "|---|---|---|---|---|---|"
	for tr in $transports; do
		echo "| $tr | ${util[$tr]} | ${dl[$tr]} | ${upmk[$tr]} | ${cnpi[$tr]} / ${cnpv[$tr]} | ${load[$tr]} |"
	done
	echo
	echo "The receiver downlink near 100 % of its capacity (the window includes the flows' setup, so"
	echo "this is a lower bound while busy) means the emulated link, not the CPU, limited the incast. The victim alone below its link's capacity, and a load average far"
	echo "above the $(nproc) CPUs, mean the CPU (shared with other work) limited the victim: its"
	echo "share then mixes CPU contention from the 7 extra flows' processes with the fabric's effect."
	echo
	echo "Per-flow rates: \`s8.csv\`. A failed flow (RoCE: transport retry exceeded, i.e. its QP"
	echo "went to error under the incast) counts as rate 0 in the sum and in Jain's index."
	echo "Expected (issue 11): MRC victim ≥ 95 % of alone; the seed reports a 25 % victim loss"
	echo "for RoCE + DCQCN (with PFC, on hardware)."
} >"$md"
cat "$md"
if command -v go >/dev/null; then
	(cd "$root" && go run ./testbed/scenarios/scenarioreport s8 "$csv" "$out/s8.png") || echo "s8: the figure failed (go run ./testbed/scenarios/scenarioreport)" >&2
fi
[ "$setup_fail" = 0 ] || { echo "s8: a victim-alone run failed: the setup is broken; outputs in $dir" >&2; exit 1; }
