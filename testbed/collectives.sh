#!/usr/bin/env bash
# Collectives on the clos-2p testbed: bring it up, start mrc-nicd on every
# host, run mrc-allreduce-perf and mrc-alltoall-perf on all four hosts at
# once with `mrc-testbed exec hosts -- ...` (each host gets its rank, the
# group size, rank 0's management address and its NIC socket in the
# environment), print rank 0's tables, and tear everything down (also on
# failure or Ctrl-C). Exits non-zero when anything fails or an element is
# wrong.
#
# Environment: MRC_BIN (binaries; default ./bin), COLL_ARGS (tool options;
# default "-b 8 -e 16M -f 4 -n 5 -w 1"), COLL_HOSTS (the group; default
# hosts = h0..h3), COLL_BASELINE=1 also runs mrc-write-bw h0 -> h3 first (the
# same run's point-to-point reference), COLL_KEEP=1 keeps the run folder.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MRC_BIN:-$root/bin}
args=${COLL_ARGS:--b 8 -e 16M -f 4 -n 5 -w 1}
group=${COLL_HOSTS:-hosts}
for b in mrc-testbed mrc-switchd mrc-nicd mrc-allreduce-perf mrc-alltoall-perf mrc-write-bw mrcctl; do
	[ -x "$bin/$b" ] || { echo "collectives: $bin/$b missing: run 'make build' (or set MRC_BIN)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "collectives: needs root (network namespaces, XDP, AF_XDP)" >&2; exit 1; }

prefix=co$(printf '%04x' $((RANDOM % 65536)))
dir=$(mktemp -d /tmp/mrc-coll.XXXXXX)
pids=()
hosts=(h0 h1 h2 h3)

cleanup() {
	status=$?
	trap - EXIT INT TERM
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	"$bin/mrc-testbed" down --dir "$dir" >/dev/null 2>&1 || echo "collectives: teardown of $dir reported an error" >&2
	if [ "$status" != 0 ]; then
		echo "collectives: FAILED (exit $status); NIC logs:" >&2
		tail -n 20 "$dir"/log/*.nicd.log 2>/dev/null >&2 || true
	fi
	[ -n "${COLL_KEEP:-}" ] || rm -rf "$dir"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== mrc-testbed up --preset clos-2p (prefix $prefix, run folder $dir)"
"$bin/mrc-testbed" up --preset clos-2p --prefix "$prefix" --dir "$dir" --bin "$bin"
mkdir -p "$dir/log"
hostkey() { awk -v h="$1" -v k="$2:" '$1=="-" && $2=="name:" {cur=$3} cur==h && $1==k {split($2,a,"/"); print a[1]; exit}' "$dir/plan.yaml"; }
sock() { "$bin/mrc-nicd" -config "$dir/host/$1.nic.yaml" -show-socket; }
for h in "${hosts[@]}"; do
	if ! "$bin/mrcctl" -d "$(sock "$h")" ports >/dev/null 2>&1; then
		ip netns exec "$(hostkey "$h" ns)" "$bin/mrc-nicd" -config "$dir/host/$h.nic.yaml" >"$dir/log/$h.nicd.log" 2>&1 &
		pids+=($!)
	fi
done
for h in "${hosts[@]}"; do
	for i in $(seq 100); do
		"$bin/mrcctl" -d "$(sock "$h")" ports >/dev/null 2>&1 && break
		[ "$i" = 100 ] && { echo "collectives: mrc-nicd on $h did not come up" >&2; exit 1; }
		sleep 0.1
	done
done

if [ -n "${COLL_BASELINE:-}" ]; then
	echo "== baseline: mrc-write-bw -s 65536 -D 3 h0 -> h3 (one QP, across a T1)"
	ip netns exec "$(hostkey h3 ns)" timeout 120 "$bin/mrc-write-bw" -d "$(sock h3)" >"$dir/log/bw-server.out" 2>&1 &
	server=$!
	ip netns exec "$(hostkey h0 ns)" timeout 120 "$bin/mrc-write-bw" -d "$(sock h0)" -s 65536 -D 3 "$(hostkey h3 mgmt_addr)" | grep -A1 '#bytes'
	wait "$server"
fi
for tool in mrc-allreduce-perf mrc-alltoall-perf; do
	echo "== mrc-testbed exec $group -- $tool $args"
	# shellcheck disable=SC2086
	"$bin/mrc-testbed" exec --dir "$dir" "$group" -- "$bin/$tool" $args
done
echo "collectives: OK"
