# The history checker, the chaos workloads and the mutation checks
# (internal/history, internal/mutate, testdata/chaos/workload). ./... skips
# testdata/, so `test` names the workload package itself, then runs the
# mutation tests: a build with the sluice_mutation tag, where each test
# turns one safety mechanism off (SLUICE_MUTATE) and shows the checker
# catches it, and passes with it on.

.PHONY: test-chaos-mutation

# (the workload package's own tests run in chaos-short, testdata/mk/chaos.mk)
test: test-chaos-mutation

test-chaos-mutation:
	$(GO) test -race -count=1 -timeout 10m -tags '$(GOTAGS),sluice_mutation' -run 'TestMutation' ./testdata/chaos/workload/ ./internal/mutate/
