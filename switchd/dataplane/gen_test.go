package dataplane

//go:generate go tool bpf2go -target bpfel Testgen ../../bpf/testgen.bpf.c -- -I../../bpf -I/usr/include/x86_64-linux-gnu -Wall -Werror
