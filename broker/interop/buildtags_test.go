package interop

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The sluice binaries the harnesses build for these tests take the test
// binary's tags (kafka.BuildTags), so they reuse what make test compiled
// instead of compiling arrow-go and DuckDB's bindings again under others.
func TestSluiceBinaryTakesTheTestTags(t *testing.T) {
	if tags := kafka.BuildTags(); !strings.Contains(tags, "duckdb_arrow") {
		t.Fatalf("kafka.BuildTags() = %q; under make test's GOTAGS it must name duckdb_arrow", tags)
	}
}
