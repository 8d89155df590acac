package audit_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// A Reader read again after more counts were published holds what a
// whole read of the topic holds (the latest count per key), and when the
// topic is deleted and created again it starts over: the old topic's
// counts are gone, the new one's are there.
func TestReaderIncrementalAndRecreated(t *testing.T) {
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addr)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := audit.EnsureTopic(ctx, cl); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC).UnixMilli()
	count := func(origin string, start, n int64) audit.Count {
		return audit.Count{Version: 1, Tier: audit.TierProducer, Topic: "pv", WindowStart: start, WindowMs: 600_000, Origin: origin, Messages: n}
	}
	publish := func(cs ...audit.Count) {
		t.Helper()
		if err := audit.Publish(ctx, cl, cs); err != nil {
			t.Fatal(err)
		}
	}
	var r audit.Reader
	read := func(want ...audit.Count) {
		t.Helper()
		got, err := r.Read(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := audit.ReadCounts(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Counts, want) || !reflect.DeepEqual(whole.Counts, want) {
			t.Fatalf("incremental %+v\nwhole %+v\nwant %+v", got.Counts, whole.Counts, want)
		}
	}
	publish(count("a", at, 5), count("b", at, 2))
	read(count("a", at, 5), count("b", at, 2))
	publish(count("a", at, 9), count("a", at+600_000, 1)) // a's window grew, and a new one
	read(count("a", at, 9), count("b", at, 2), count("a", at+600_000, 1))
	read(count("a", at, 9), count("b", at, 2), count("a", at+600_000, 1)) // nothing new

	if _, err := kadm.NewClient(cl).DeleteTopics(ctx, audit.Topic); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := audit.EnsureTopic(ctx, cl)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl.Close() // its metadata names the old topic's id
	if cl, err = kgo.NewClient(opts...); err != nil {
		t.Fatal(err)
	}
	publish(count("c", at, 1), count("c", at+600_000, 4), count("c", at+1_200_000, 6), count("c", at+1_800_000, 2))
	read(count("c", at, 1), count("c", at+600_000, 4), count("c", at+1_200_000, 6), count("c", at+1_800_000, 2))
}
