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
# files to DuckDB as Arrow batches through it. arrow_json_stdlib makes
# arrow-go encode its (unused here) JSON forms with encoding/json instead of
# goccy/go-json, whose 18 packages were 8% of a first build's compile time. Tags are
# comma-separated.
GOTAGS    ?= duckdb_arrow,arrow_json_stdlib
# Tests start real JVMs and brokers; 2 cores is the reference machine.
TESTFLAGS ?= -race -count=1 -timeout 30m -p 2 -tags $(GOTAGS)

.PHONY: all build test vet fmt-check unit deps bench fuzz quickstart clean

all: build

# A first build (empty Go cache) compiles about 550 packages: the standard
# library (a quarter of the time), arrow-go's Parquet writer and its compute
# kernels (a fifth), franz-go, gRPC/protobuf (which arrow-go's pqarrow and the
# HDFS client import) and DuckDB's cgo bindings (DuckDB itself is a prebuilt
# static library, only linked). Later builds take seconds. The line saying
# so is printed only when many packages are out of date (go list's Stale:
# the main package alone is always stale, since it is not installed).
build:
	@stale=$$($(GO) list -tags $(GOTAGS) -deps -f '{{if .Stale}}x{{end}}' ./cmd/sluice | grep -c x); \
	if [ "$$stale" -gt 50 ]; then echo "build: $(BIN) (go build -tags $(GOTAGS)): $$stale packages to compile (Go's standard library, Apache Arrow's Parquet writer, franz-go, DuckDB's bindings); a first build takes 3 to 5 minutes on 2 cores"; fi; \
	start=$$(date +%s); $(GO) build -tags $(GOTAGS) -o $(BIN) ./cmd/sluice && echo "build: $(BIN) ready in $$(( $$(date +%s) - start ))s"

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
