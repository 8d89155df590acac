package interop

import (
	"testing"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The scenarios against Apache Kafka are the reference: they show that what
// the sluice tests expect is what a real Kafka broker does.

func TestReferenceFranzGoAgainstApacheKafka(t *testing.T) {
	k := kafka.SharedKafka(t)
	for _, c := range franzCodecs {
		t.Run(c.name, func(t *testing.T) { franzRoundTrip(t, k.Addr, c.opts...) })
	}
}

func TestReferenceKcatAgainstApacheKafka(t *testing.T) {
	kcatRoundTrip(t, kafka.SharedKafka(t).Addr)
}

func TestReferenceJavaConsoleAgainstApacheKafka(t *testing.T) {
	javaConsoleRoundTrip(t, kafka.SharedKafka(t).Addr)
}
