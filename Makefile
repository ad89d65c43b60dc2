# softmrc — build, test and demo. Every target runs as root on Debian 12 with Go.
GO      ?= go
BIN     := bin
# bpf2go compiles with this clang; the version is pinned so that regenerated
# objects are byte-identical to the committed ones (CI checks that).
CLANG   ?= clang-14
CLANG_VERSION := 14.0.6
# staticcheck is pinned (a release that knows the go directive's version) and
# run with 'go run pkg@version': the module proxy and the checksum database
# fetch exactly that release, and nothing is installed on the machine.
STATICCHECK_VERSION := v0.8.2
CMDS    := $(notdir $(wildcard cmd/*))
PKGS    := ./...

.PHONY: all build deps test test-short generate check-generate bench bench-nic bench-threads sweep lint demo reproduce clean help

all: build

help:
	@echo "make build    - build every binary into $(BIN)/"
	@echo "make deps     - install missing test tools (clang-14 llvm libbpf-dev tshark iproute2 ethtool) via apt, mount bpffs"
	@echo "make test     - make deps, then all tests with the race detector (root: netns and XDP tests run)"
	@echo "make demo     - bring up the clos-2p testbed, run mrc-write-bw across it, tear down"
	@echo "make reproduce - run every mrc-lab scenario (testbed/scenarios) RUNS times; report in docs/results/lab/"
	@echo "make generate - regenerate the BPF objects with $(CLANG) $(CLANG_VERSION)"
	@echo "make bench    - run the benchmarks"
	@echo "make bench-nic - mrc-nicd against raw AF_XDP and kernel TCP/MPTCP/UDP on a veth pair and clos-2p, ROUNDS alternating rounds (default 5, ~5 min), RoCE MTU ROCE_MTU (default 2048); writes docs/performance.md"
	@echo "make bench-threads - mrc-nicd -threads 1 against -threads THREADS (default 2): that many mrc-write-bw sessions at once on one veth pair, ROUNDS alternating rounds (~1 min); prints a table"
	@echo "make sweep    - the simulator's scenario tests over SEEDS seeds (default 10; docs/engine.md 'Scenarios over seeds')"
	@echo "make lint     - gofmt, go vet, staticcheck $(STATICCHECK_VERSION), one definition per fact (.ci/conventions.sh, docs/conventions.md)"
	@echo "make clean    - remove $(BIN)/ and test leftovers"

build:
	@mkdir -p $(BIN)
	@for c in $(CMDS); do echo "go build -o $(BIN)/$$c ./cmd/$$c"; $(GO) build -o $(BIN)/$$c ./cmd/$$c || exit 1; done

# Idempotent: apt-get runs only when a package is missing (.ci/deps.sh).
deps:
	@.ci/deps.sh

# The tools the tests use are installed first (a fresh machine skips
# nothing), and the binaries built: netns tests start them as real processes.
test: deps build
	$(GO) vet $(PKGS)
	MRC_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 40m $(PKGS)

test-short:
	$(GO) test -short -count=1 $(PKGS)

generate:
	@command -v $(CLANG) >/dev/null || { echo "$(CLANG) not found: apt-get install clang-14 llvm (Debian 12)"; exit 1; }
	@$(CLANG) --version | grep -q "version $(CLANG_VERSION)" || { echo "$(CLANG) is not $(CLANG_VERSION); generated objects would differ from the committed ones"; exit 1; }
	BPF2GO_CC=$(CLANG) BPF2GO_STRIP=llvm-strip $(GO) generate ./nic/... ./switchd/...

# Fails when the committed generated files differ from a fresh generation.
check-generate: generate
	@git diff --exit-code -- '*.o' '*_bpfel.go' '*_bpfel_test.go' || { echo "generated BPF files are stale: run 'make generate' and commit"; exit 1; }

bench: build
	MRC_BIN=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench . -benchmem -count=1 $(PKGS)

# The soft NIC against this machine's floor (raw AF_XDP) and the kernel
# (TCP, MPTCP, UDP) on the same paths, ROUNDS alternating rounds; the ratio
# table replaces the generated section of docs/performance.md. A benchmark,
# not a test: nothing asserts a speed. Knobs: docs/performance.md.
# ROCE_MTU=4096 runs every path at that RoCE MTU (links sized for it, the
# kernel's packets too) and writes a section of its own.
ROUNDS ?= 5
ROCE_MTU ?= 2048
bench-nic: build
	@mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
	MRC_BIN=$(CURDIR)/$(BIN) MRC_BENCH_ROUNDS=$(ROUNDS) MRC_BENCH_ROCE_MTU=$(ROCE_MTU) MRC_BENCH_OUT=$(CURDIR)/docs/performance.md \
	  MRC_BENCH_CMD="make bench-nic ROUNDS=$(ROUNDS) ROCE_MTU=$(ROCE_MTU)" \
	  $(GO) test -run '^$$' -bench '^BenchmarkNICCompare$$' -benchtime 1x -count 1 -timeout 30m ./nic/e2e/

THREADS ?= 2
bench-threads: build
	@mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
	MRC_BIN=$(CURDIR)/$(BIN) MRC_BENCH_ROUNDS=$(ROUNDS) MRC_BENCH_THREADS=$(THREADS) \
	  $(GO) test -run '^$$' -bench '^BenchmarkThreads$$' -benchtime 1x -count 1 -timeout 30m ./nic/e2e/

# The scenario tests over more seeds than a plain `go test` runs (3): the
# distributions docs/engine.md's sensitivity table comes from.
SEEDS ?= 10
sweep:
	MRC_SEEDS=$(SEEDS) $(GO) test -count=1 -v -timeout 60m -run Scenario ./internal/fabricsim/mrcsim/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	@.ci/conventions.sh

# Every shipped scenario on the real testbed, RUNS times in a row; the
# combined report and the figures go to docs/results/lab/ (docs/lab.md).
RUNS ?= 3
# The runs write outside the tree and replace docs/results/lab/ at the end; the
# raw samples (megabytes per run) are dropped, series.csv keeps the data.
reproduce: build
	@mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
	out=$$(mktemp -d /tmp/mrc-reproduce.XXXXXX); \
	  $(BIN)/mrc-lab run --bin $(BIN) --times $(RUNS) --out $$out --readme README.md all; status=$$?; \
	  find $$out -name samples.jsonl -delete; \
	  rm -rf docs/results/lab && mkdir -p docs/results && cp -r $$out docs/results/lab && rm -rf $$out; exit $$status

demo: build
	@test -x testbed/demo.sh || { echo "make demo: the end-to-end demo is not built yet (needs mrc-nicd and mrc-write-bw; see README 'Status')"; exit 1; }
	MRC_BIN=$(CURDIR)/$(BIN) testbed/demo.sh

clean:
	rm -rf $(BIN)
