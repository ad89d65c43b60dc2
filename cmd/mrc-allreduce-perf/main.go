// Command mrc-allreduce-perf is nccl-tests' all_reduce_perf for the softmrc soft NIC:
// start one process per host (rank), e.g. with
// `mrc-testbed exec h0,h1,h2,h3 -- mrc-allreduce-perf -b 8 -e 64M -f 2`;
// rank 0 prints nccl-tests' table. See docs/collectives.md.
package main

import "github.com/softmrc/softmrc/nic/collperf"

func main() { collperf.Main(collperf.AllReduce, "mrc-allreduce-perf") }
