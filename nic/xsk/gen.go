package xsk

//go:generate go tool bpf2go -target bpfel NicSteer ../../bpf/nicsteer.bpf.c -- -I../../bpf -I/usr/include/x86_64-linux-gnu -Wall -Werror
