# The chaos scenarios (testdata/chaos): real processes on their own loopback
# addresses, faults from testdata/chaos/harness, histories checked by
# internal/history. `go test ./...` skips testdata, so they are named here.
#
#   make chaos                     every scenario for CHAOS_TIME (random seed, logged)
#   make chaos CHAOS_SEED=N        replays the run of seed N
#   make test                      also runs chaos-short: each scenario briefly, fixed seed
#
# Reports: testdata/.cache/chaos/<scenario>-<seed>/ (or $CHAOS_REPORT_DIR).
# Needs root (nft, cgroups, tmpfs and loop mounts), Debian's nftables, faketime,
# e2fsprogs (mkfs.ext4) and mount (losetup).

CHAOS_TIME ?= 3m
# The scenarios; the harness and the workload packages are unit-tested with -race.
CHAOS_SCENARIOS = ./testdata/chaos/
CHAOS_UNITS     = $$($(GO) list ./testdata/chaos/... | grep -v '/testdata/chaos$$')
CHAOS_FLAGS     = -count=1 -tags $(GOTAGS)

.PHONY: deps-chaos chaos chaos-short

deps: deps-chaos

deps-chaos:
	@missing=; \
	command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	[ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || missing="$$missing faketime"; \
	command -v mkfs.ext4 >/dev/null 2>&1 || missing="$$missing e2fsprogs"; \
	command -v losetup >/dev/null 2>&1 || missing="$$missing mount"; \
	if [ -n "$$missing" ]; then \
	  echo "deps-chaos: installing$$missing"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# Each scenario for CHAOS_TIME; the harness's own tests with -race first.
chaos: deps
	$(GO) test -race $(CHAOS_FLAGS) $(CHAOS_UNITS)
	CHAOS_TIME=$(CHAOS_TIME) $(GO) test $(CHAOS_FLAGS) -timeout 0 -v $(CHAOS_SCENARIOS)

# The short fixed-seed runs (CHAOS_TIME unset) that `make test` makes.
chaos-short: deps
	$(GO) test -race $(CHAOS_FLAGS) $(CHAOS_UNITS)
	env -u CHAOS_TIME $(GO) test $(CHAOS_FLAGS) -timeout 15m $(CHAOS_SCENARIOS)

test: chaos-short
