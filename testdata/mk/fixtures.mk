# testdata/fixtures checks its projections of the shared page view; go test
# ./... skips directories named testdata, so make test names it.
test: test-fixtures

.PHONY: test-fixtures

test-fixtures:
	$(GO) test $(TESTFLAGS) ./testdata/fixtures/
