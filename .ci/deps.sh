#!/usr/bin/env bash
# Installs what the tests and `make generate` need on Debian 12 when it is
# missing, and mounts bpffs. Idempotent: a machine that has everything is
# left alone (no apt-get call). `make deps` runs it; `make test` and .ci/run
# run `make deps` first, so a fresh machine gets zero skipped tests.
set -euo pipefail

# clang-14/llvm: make generate (bpf2go); libbpf-dev: the BPF headers;
# tshark: the pcap/dissector checks; iproute2, ethtool, util-linux
# (nsenter): the netns tests; jq: the scenario scripts (testbed/scenarios/*.sh).
pkgs=(clang-14 llvm libbpf-dev tshark iproute2 ethtool util-linux jq)

need=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done

if ((${#need[@]})); then
	if ((EUID != 0)); then
		echo "deps: missing ${need[*]}; run as root (make deps) or: apt-get install ${need[*]}" >&2
		echo "deps: continuing without them: the tests that need them will skip and say why" >&2
	elif ! command -v apt-get >/dev/null; then
		echo "deps: missing ${need[*]} and no apt-get (not Debian?): install them with your package manager" >&2
		exit 1
	else
		echo "deps: installing ${need[*]}"
		apt-get update -q
		# tshark asks whether non-root users may capture: keep the default.
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
	fi
fi

# bpffs for pinned maps and links (mrc-switchd restart tests).
if ((EUID == 0)) && ! mountpoint -q /sys/fs/bpf; then
	echo "deps: mounting bpffs at /sys/fs/bpf"
	mount -t bpf bpf /sys/fs/bpf
fi
