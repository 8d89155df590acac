# Transactions (issue 21): franz-go's own transaction tests against sluice.
#
# `make test-txn-franz` compiles franz-go's pkg/kgo tests at the version go.mod
# requires (from the Go module cache, fetched by the go command if absent),
# starts `sluice broker` on a temporary data directory, and runs the kgo tests
# with "Txn" in their name against it through franz-go's own variables
# (KGO_SEEDS, KGO_TEST_RF=1 for a single node, KGO_TEST_RECORDS,
# KGO_TEST_UNSAFE=1 so TestTxnEtl also ends transactions with
# EndBeginTxnUnsafe). TestTxnEtl is the one that talks to the broker: a
# transactional producer, then a chain of GroupTransactSession-style consumers
# copying the topic three times under read_committed while members leave and
# join, checking every record arrives exactly once. Its KIP-848 variants
# (range/848, sticky/848, sticky/848/static) are skipped by franz-go itself:
# sluice does not serve ConsumerGroupHeartbeat (key 68). The target fails if
# TestTxnEtl did not run and pass.
#
#   make test-txn-franz                            50,000 records (about 20 s on 2 cores)
#   make test-txn-franz TXN_FRANZ_RECORDS=500000   franz-go's default size
#   GOFLAGS=-race make test-txn-franz BIN=/tmp/sluice-race
#                                                  the broker built with -race (a race it reports fails the target)

TXN_FRANZ_RECORDS ?= 50000
TXN_FRANZ_RUN     ?= Txn
TXN_FRANZ_TIMEOUT ?= 300

.PHONY: test-txn-franz

test: test-txn-franz

test-txn-franz: build
	@set -u; tmp=$$(mktemp -d /tmp/sluice-txn-franz.XXXXXX); pid=; \
	trap 'if [ -n "$$pid" ]; then kill $$pid 2>/dev/null; wait $$pid 2>/dev/null; fi; rm -rf "$$tmp"' EXIT; \
	start=$$(date +%s); \
	echo "test-txn-franz: compiling franz-go's pkg/kgo tests ($$($(GO) list -m -f '{{.Version}}' github.com/twmb/franz-go))"; \
	$(GO) test -c -o "$$tmp/kgo.test" github.com/twmb/franz-go/pkg/kgo || exit 1; \
	$(BIN) broker --data-dir "$$tmp/data" --listen 127.0.0.1:0 >"$$tmp/broker.log" 2>&1 & pid=$$!; \
	addr=; for i in $$(seq 1 600); do \
	  addr=$$(sed -n 's/.*msg=listening .*[ ]addr=\([^ ]*\).*/\1/p' "$$tmp/broker.log" | head -1); \
	  [ -n "$$addr" ] && break; \
	  kill -0 $$pid 2>/dev/null || break; sleep 0.1; \
	done; \
	if [ -z "$$addr" ]; then echo "test-txn-franz: sluice broker did not start listening:"; tail -50 "$$tmp/broker.log"; exit 1; fi; \
	echo "test-txn-franz: sluice broker on $$addr; running kgo tests matching '$(TXN_FRANZ_RUN)' with $(TXN_FRANZ_RECORDS) records"; \
	cd "$$tmp" && KGO_SEEDS=$$addr KGO_TEST_RF=1 KGO_TEST_RECORDS=$(TXN_FRANZ_RECORDS) KGO_TEST_UNSAFE=1 KGO_LOG_LEVEL=none \
	  timeout $(TXN_FRANZ_TIMEOUT) ./kgo.test -test.run '$(TXN_FRANZ_RUN)' -test.v -test.count 1 -test.timeout $$(( $(TXN_FRANZ_TIMEOUT) - 10 ))s >"$$tmp/kgo.log" 2>&1; rc=$$?; \
	grep -E '^ *--- (PASS|FAIL|SKIP)' "$$tmp/kgo.log"; \
	if grep -q 'WARNING: DATA RACE' "$$tmp/broker.log"; then \
	  echo "test-txn-franz: the broker (built with -race) reported a data race:"; grep -A40 'WARNING: DATA RACE' "$$tmp/broker.log" | head -120; exit 1; \
	fi; \
	if [ $$rc -ne 0 ] || ! grep -q -- '^--- PASS: TestTxnEtl ' "$$tmp/kgo.log"; then \
	  echo "test-txn-franz: FAILED (exit $$rc) after $$(( $$(date +%s) - start ))s; the kgo output's end:"; tail -80 "$$tmp/kgo.log"; \
	  echo "test-txn-franz: the broker's log's end:"; tail -30 "$$tmp/broker.log"; exit 1; \
	fi; \
	echo "test-txn-franz: passed in $$(( $$(date +%s) - start ))s"
