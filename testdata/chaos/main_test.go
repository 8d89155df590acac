package chaos

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/testdata/chaos/harness"
)

// The test binary doubles as the program of workload nodes: with
// CHAOS_MEMBER set it runs a consumer-group member (groups_test.go) instead
// of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("CHAOS_MEMBER") != "" {
		os.Exit(groupMember())
	}
	os.Exit(harness.Main(m))
}
