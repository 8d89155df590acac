// Package interop holds the Kafka-protocol interoperability tests: real
// clients (franz-go, kcat, the Java console tools of Apache Kafka 4.1, the
// sluice CLI) against a real sluice broker process, and the sluice CLI
// against a real Apache Kafka broker. The harness is
// testdata/harness/kafka; `make deps-kafka` installs what it needs.
package interop

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

func TestMain(m *testing.M) { os.Exit(kafka.Main(m)) }
