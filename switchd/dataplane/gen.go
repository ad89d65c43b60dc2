package dataplane

//go:generate go tool bpf2go -target bpfel -type sw_lpm_key -type sw_config -type sw_usid_table -type sw_nexthop -type sw_ecmp_group -type sw_port -type sw_fault -type sw_vq -type sw_counters Switch ../../bpf/switch.bpf.c -- -I../../bpf -I/usr/include/x86_64-linux-gnu -Wall -Werror
