#!/usr/bin/env bash
# make demo: bring up the clos-2p testbed (2 planes x 2 T0 x 2 T1, XDP switches),
# start mrc-nicd on h0 (under T0 0) and h3 (under T0 1), run mrc-write-bw from
# h0 to h3 -- every packet crosses a T1, sprayed over both planes -- with
# --verify, print the table and the per-port counters, and tear everything
# down again (also on failure or Ctrl-C). Exits non-zero when anything fails.
#
# Environment: MRC_BIN (binaries; default ./bin), DEMO_ARGS (mrc-write-bw
# options; default "-a -n 200 --verify"), DEMO_KEEP=1 keeps the run folder.
# 200 iterations, not 20: with 20 the 16 KiB-256 KiB rows measured the QP's
# first milliseconds, its window still growing (averages of 61-98 MiB/s
# against 159-418 with 200; 8.8 s for the whole table here, 2026-12-05).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MRC_BIN:-$root/bin}
args=${DEMO_ARGS:--a -n 200 --verify}
for b in mrc-testbed mrc-switchd mrc-nicd mrc-write-bw mrcctl; do
	[ -x "$bin/$b" ] || { echo "demo: $bin/$b missing: run 'make build' (or set MRC_BIN)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "demo: needs root (network namespaces, XDP, AF_XDP)" >&2; exit 1; }

prefix=dm$(printf '%04x' $((RANDOM % 65536)))
dir=$(mktemp -d /tmp/mrc-demo.XXXXXX)
pids=()
src=h0 dst=h3

cleanup() {
	status=$?
	trap - EXIT INT TERM
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	"$bin/mrc-testbed" down --dir "$dir" >/dev/null 2>&1 || echo "demo: teardown of $dir reported an error" >&2
	if [ "$status" != 0 ]; then
		echo "demo: FAILED (exit $status); logs:" >&2
		tail -n 20 "$dir"/log/*.nicd.log 2>/dev/null >&2 || true
	fi
	[ -n "${DEMO_KEEP:-}" ] || rm -rf "$dir"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== mrc-testbed up --preset clos-2p (prefix $prefix, run folder $dir)"
"$bin/mrc-testbed" up --preset clos-2p --prefix "$prefix" --dir "$dir" --bin "$bin"

# mgmt_addr of a host from the plan (the out-of-band exchange runs over the
# management network).
hostkey() { awk -v h="$1" -v k="$2:" '$1=="-" && $2=="name:" {cur=$3} cur==h && $1==k {split($2,a,"/"); print a[1]; exit}' "$dir/plan.yaml"; }
mgmt() { hostkey "$1" mgmt_addr; }
sock() { "$bin/mrc-nicd" -config "$dir/host/$1.nic.yaml" -show-socket; }

for h in $src $dst; do
	if ! "$bin/mrcctl" -d "$(sock $h)" ports >/dev/null 2>&1; then
		# ip netns exec execs mrc-nicd, so $! is the daemon itself and the
		# trap's kill reaches it.
		ns=$(hostkey "$h" ns)
		[ -n "$ns" ] || { echo "demo: no namespace for $h in $dir/plan.yaml" >&2; exit 1; }
		ip netns exec "$ns" "$bin/mrc-nicd" -config "$dir/host/$h.nic.yaml" >"$dir/log/$h.nicd.log" 2>&1 &
		pids+=($!)
	fi
done
for h in $src $dst; do
	for i in $(seq 100); do
		"$bin/mrcctl" -d "$(sock $h)" ports >/dev/null 2>&1 && break
		[ "$i" = 100 ] && { echo "demo: mrc-nicd on $h did not come up" >&2; exit 1; }
		sleep 0.1
	done
done
dst_mgmt=$(mgmt $dst)
[ -n "$dst_mgmt" ] || { echo "demo: no mgmt_addr for $dst in $dir/plan.yaml" >&2; exit 1; }

echo "== mrc-write-bw $args: $src -> $dst (across a T1, both planes)"
ip netns exec "$(hostkey $dst ns)" timeout 600 "$bin/mrc-write-bw" -d "$(sock $dst)" >"$dir/log/server.out" 2>&1 &
server=$!
pids+=($server)
# shellcheck disable=SC2086
ip netns exec "$(hostkey $src ns)" timeout 600 "$bin/mrc-write-bw" -d "$(sock $src)" $args "$dst_mgmt"
wait "$server"

echo "== $src NIC ports after the run"
"$bin/mrcctl" -d "$(sock $src)" ports
echo "demo: OK"
