package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// auditProduce produces n records per partition of topic through a
// franz-go client with the audit Hook (the producer tier), timestamps at,
// at+step, ..., and publishes the counts to _audit.
func auditProduce(t *testing.T, addr, topic string, partitions int32, n int, at time.Time, step time.Duration) {
	t.Helper()
	p, err := audit.StartProducer([]kgo.Opt{kgo.SeedBrokers(addr)}, audit.DefaultWindow, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithHooks(p.Hook))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for part := range partitions {
		for i := range n {
			v, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%d-%s-%d", part, at.Format("15"), i)})
			recs = append(recs, &kgo.Record{Topic: topic, Partition: part, Value: v, Timestamp: at.Add(time.Duration(i) * step)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// claim publishes, through a Reporter of its own origin, producer-tier
// counts of n records of topic at..at+n-1 s that were never produced (a
// producer whose records are not in the log yet).
func claim(t *testing.T, addr, topic string, n int, at time.Time) {
	t.Helper()
	counter, err := audit.NewCounter(audit.TierProducer, "", audit.DefaultWindow)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		counter.Add(topic, at.Add(time.Duration(i)*time.Second), 20)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := audit.NewReporter(counter, cl, 0, nil).Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCompleteWhenAudit: with complete_when: audit, an hour whose producer
// tier claims more records than were loaded gets no _SUCCESS while the
// hours around it get theirs; once the records arrive and are loaded, it
// balances and gets its marker with every record counted. The audit
// metrics follow: one unbalanced window, then none, and the latest
// balanced window's end moves on.
func TestCompleteWhenAudit(t *testing.T) {
	h := newHarness(t)
	auditProduce(t, h.addr, "pv", 2, 30, time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC), time.Minute)
	auditProduce(t, h.addr, "pv", 2, 30, time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), time.Minute)
	late := time.Date(2026, 12, 1, 8, 40, 0, 0, time.UTC)
	claim(t, h.addr, "pv", 5, late) // hour 08: 65 acknowledged, 60 in the log
	writeSpec(t, h.jobs, "pv", h.addr, "pv", h.out, "@hourly", "complete_when: audit\n")
	h.start()
	defer h.stop()

	h.clock.Set(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	runs := h.ended("pv", 1)
	if r := runs[0]; r.State != scheduler.StateSucceeded || r.Records != 120 {
		t.Fatalf("first run: %+v", r)
	}
	if r, ok := h.success("dt=2026-12-01/hr=07"); !ok || r.Records != 60 {
		t.Fatalf("hour 07: marked %v, %d records; want marked with 60", ok, r.Records)
	}
	if _, ok := h.success("dt=2026-12-01/hr=08"); ok {
		t.Fatalf("hour 08 is marked, but its producers acknowledged 65 records and 60 were loaded")
	}
	if r, ok := h.success("dt=2026-12-01/hr=09"); !ok || r.Records != 0 {
		t.Fatalf("hour 09 (empty, balanced): marked %v, %d records; want marked with 0", ok, r.Records)
	}
	labels := map[string]string{"job": "pv", "topic": "pv"}
	if n := h.metric("sluice_audit_unbalanced_windows", labels); n != 1 {
		t.Errorf("unbalanced windows %v, want 1 (08:40)", n)
	}
	if got, want := h.metric("sluice_audit_latest_balanced_window_seconds", labels), float64(time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC).Unix()); got != want {
		t.Errorf("latest balanced window ends %v, want %v (08:20's end)", time.Unix(int64(got), 0).UTC(), time.Unix(int64(want), 0).UTC())
	}

	// The five records arrive (a producer not counting them): the next
	// run loads them, hour 08 balances and is marked with all 65.
	sluice.Produce(t, h.addr, "pv", 1, 100, 5, late, time.Second)
	h.clock.Set(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	runs = h.ended("pv", 2)
	if r := runs[1]; r.State != scheduler.StateSucceeded || r.Records != 5 {
		t.Fatalf("second run: %+v", r)
	}
	if r, ok := h.success("dt=2026-12-01/hr=08"); !ok || r.Records != 65 {
		t.Fatalf("hour 08 after the records arrived: marked %v, %d records; want marked with 65", ok, r.Records)
	}
	if _, ok := h.success("dt=2026-12-01/hr=10"); !ok {
		t.Fatalf("hour 10 (empty, balanced) is not marked")
	}
	if n := h.metric("sluice_audit_unbalanced_windows", labels); n != 0 {
		t.Errorf("unbalanced windows %v after balancing, want 0", n)
	}
	if got, want := h.metric("sluice_audit_latest_balanced_window_seconds", labels), float64(late.Add(10*time.Minute).Unix()); got != want {
		t.Errorf("latest balanced window ends %v, want %v", time.Unix(int64(got), 0).UTC(), late.Add(10*time.Minute))
	}
}
