# sluice — build, test, benchmark.
#
# `make test` is what CI runs (.ci/run). It installs and starts everything the
# tests need on a fresh machine: each integration area adds its install step to
# `deps` from a fragment in testdata/mk/*.mk, and its tests start the real
# services (ZooKeeper, MiniDFSCluster, Apache Kafka) through testdata/harness.

GO        ?= go
BIN       ?= bin/sluice
PKGS      ?= ./...
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
# duckdb_arrow compiles duckdb-go's Arrow interface: sluice query hands Avro
# files to DuckDB as Arrow batches through it.
GOTAGS    ?= duckdb_arrow
# Tests start real JVMs and brokers; 2 cores is the reference machine.
TESTFLAGS ?= -race -count=1 -timeout 30m -p 2 -tags $(GOTAGS)

.PHONY: all build test vet fmt-check unit deps bench fuzz quickstart clean

all: build

build:
	$(GO) build -tags $(GOTAGS) -o $(BIN) ./cmd/sluice

vet: fmt-check
	$(GO) vet -tags $(GOTAGS) $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null; git ls-files --others --exclude-standard '*.go' 2>/dev/null)); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# deps installs what the integration tests need; fragments add prerequisites.
deps:
	@echo "deps: ready"

# The unit tests, the integration tests and every fuzz target's seed corpus
# (go test runs Fuzz* seeds as ordinary tests).
test: vet deps
	$(GO) test $(TESTFLAGS) $(PKGS)

unit:
	$(GO) test -race -count=1 -short -tags $(GOTAGS) $(PKGS)

bench:
	$(GO) test -tags $(GOTAGS) -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

# Runs every fuzz target for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -tags $(GOTAGS) -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# The pipeline on one machine with embedded defaults (a broker on a temp dir, a topic,
# records in and out, a short benchmark).
quickstart: build
	bash testdata/quickstart.sh

clean:
	rm -rf bin testdata/.cache

include $(wildcard testdata/mk/*.mk)
