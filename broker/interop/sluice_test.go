package interop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// These tests run real clients against a real sluice broker process.

var sluiceShared struct {
	sync.Mutex
	s *kafka.Sluice
}

// sharedSluice is one broker for the read-only-ish scenarios (each uses its
// own topics); tests that kill or restart a broker start their own.
func sharedSluice(t *testing.T) *kafka.Sluice {
	t.Helper()
	sluiceShared.Lock()
	defer sluiceShared.Unlock()
	if sluiceShared.s == nil || sluiceShared.s.ExitError() != nil {
		bin := kafka.SluiceBinary(t)
		dir, err := kafka.SharedTempDir("sluice-data-")
		if err != nil {
			t.Fatal(err)
		}
		s, err := kafka.StartSluiceProcess(bin, dir)
		if err != nil {
			t.Fatal(err)
		}
		kafka.OnExit(s.Stop) // runs before the data dir's removal
		sluiceShared.s = s
	}
	return sluiceShared.s
}

func TestFranzGoAgainstSluice(t *testing.T) {
	s := sharedSluice(t)
	for _, c := range franzCodecs {
		t.Run(c.name, func(t *testing.T) { franzRoundTrip(t, s.Addr, c.opts...) })
	}
}

func TestKcatAgainstSluice(t *testing.T) {
	kcatRoundTrip(t, sharedSluice(t).Addr)
}

func TestJavaConsoleAgainstSluice(t *testing.T) {
	javaConsoleRoundTrip(t, sharedSluice(t).Addr)
}

func TestCLIAgainstSluice(t *testing.T) {
	cliRoundTrip(t, sharedSluice(t).Addr)
}

func endOffsets(t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	m := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset %s[%d]: %v", o.Topic, o.Partition, o.Err)
		}
		m[o.Partition] = o.Offset
	})
	return m
}
