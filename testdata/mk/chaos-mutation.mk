# The mutation checks: the workload tests built with the sluice_mutation tag,
# where each TestMutation* turns one safety mechanism off (SLUICE_MUTATE) and
# shows the history checker catches it, and passes with it on. (The workload
# package's ordinary tests run in chaos-short, testdata/mk/chaos.mk.)

.PHONY: test-chaos-mutation

test: test-chaos-mutation

test-chaos-mutation:
	$(GO) test -race -count=1 -timeout 10m -tags '$(GOTAGS),sluice_mutation' -run 'TestMutation' ./testdata/chaos/workload/ ./internal/mutate/
