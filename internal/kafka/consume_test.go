package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/kafka"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// failingWriter refuses every write, as a full disk does.
type failingWriter struct{}

var errDiskFull = errors.New("no space left on device")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// TestConsumeGroupCommitsOnlyWhatWasWritten: a group consume whose output
// fails commits nothing it did not write out, so the group's next consume
// gets those records again.
func TestConsumeGroupCommitsOnlyWhatWasWritten(t *testing.T) {
	addr := sluice.StartBroker(t, sluice.BrokerOptions{}).Addr
	sluice.CreateTopic(t, addr, "pv", 1)
	sluice.Produce(t, addr, "pv", 1, 0, 50, time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), time.Second)
	opts := kafka.ConsumeOptions{Bootstrap: addr, Topic: "pv", Group: "g", From: "earliest", ExitAtEnd: true}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := kafka.Consume(ctx, opts, failingWriter{}); !errors.Is(err, errDiskFull) {
		t.Fatalf("consume into a failing output: %v, want %v", err, errDiskFull)
	}
	var out bytes.Buffer
	n, err := kafka.Consume(ctx, opts, &out)
	if err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(out.Bytes(), []byte("\n")); n != 50 || lines != 50 {
		t.Fatalf("the group's next consume wrote %d records (%d lines), want the 50 never written out", n, lines)
	}
}
