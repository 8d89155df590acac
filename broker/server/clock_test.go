package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/internal/clock"
)

// waitFor polls cond until it holds or 20 s pass (the state it waits for is
// reached by other goroutines, not by time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestClockDrivesLongPollAndRetention: the fetch long poll and the
// retention loop run on the injected clock: a Fetch with a 60 s max wait
// returns when the clock (not the wall) has moved 60 s, and the retention
// pass runs when the clock passes log.retention.check.interval.ms.
func TestClockDrivesLongPollAndRetention(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	cfg := config.Default()
	cfg.LogRetentionCheckIntervalMs = 60_000
	s, err := New(Options{DataDir: t.TempDir(), Config: cfg, Clock: clk, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: a.String()}
	t.Cleanup(func() { ts.stop(t) })
	adm := kadm.NewClient(newClient(t, ts.addr))
	if _, err := adm.CreateTopic(testCtx(t), 1, 1, map[string]*string{
		"segment.bytes": kadmStr("1024"), "retention.bytes": kadmStr("0"),
	}, "ticks"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retention loop's timer", func() bool { return clk.Waiters() >= 1 })

	// Long poll: nothing to read, MinBytes 1, MaxWait 60 s.
	req := fetchOne("ticks", 0, 0)
	req.MaxWaitMillis, req.MinBytes = 60_000, 1
	rc := dialRaw(t, ts.addr)
	rc.send(encodeRequest(req, 42))
	answered := make(chan bool, 1)
	go func() { _, ok := rc.recv(); answered <- ok }()
	waitFor(t, "the fetch to park", func() bool { return parked(ts) && clk.Waiters() >= 2 })
	select {
	case <-answered:
		t.Fatal("the long poll returned before its max wait passed on the clock")
	default:
	}
	clk.Advance(60 * time.Second) // also due: the retention pass (nothing to delete yet)
	select {
	case ok := <-answered:
		if !ok {
			t.Fatal("connection closed instead of an answer")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not return when the clock passed its max wait")
	}

	// Retention: retention.bytes=0 deletes every segment, on the next pass.
	prod := newClient(t, ts.addr, kgo.DefaultProduceTopic("ticks"), kgo.ProducerLinger(0))
	for i := 0; i < 20; i++ {
		if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(fmt.Sprintf("%0200d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tt, _ := ts.topics.get("ticks")
	l := tt.parts[0].log
	if l.LogStartOffset() != 0 || l.LogEndOffset() != 20 {
		t.Fatalf("before the pass: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	waitFor(t, "the retention loop's next timer", func() bool { return clk.Waiters() >= 1 })
	clk.Advance(60 * time.Second)
	waitFor(t, "retention.bytes=0 to empty the log", func() bool { return l.LogStartOffset() == 20 })
}
