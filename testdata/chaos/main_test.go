package chaos

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/testdata/chaos/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
