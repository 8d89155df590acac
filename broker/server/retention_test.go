package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/config"
)

// TestRetentionFromTopicConfig checks the wiring from CreateTopics configs
// (segment.bytes, retention.ms) through the partition log config to the
// server's retention loop: old segments go, the log start offset moves, and
// a fetch below it is OFFSET_OUT_OF_RANGE.
func TestRetentionFromTopicConfig(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.LogRetentionCheckIntervalMs = 20 })
	cl := newClient(t, ts.addr)
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"segment.bytes": kadmStr("1024"), "retention.ms": kadmStr("1"),
	}, "short"); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, ts.addr, kgo.DefaultProduceTopic("short"), kgo.ProducerLinger(0))
	for i := 0; i < 30; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%0200d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	var start int64
	for start == 0 && time.Now().Before(deadline) {
		if tt, ok := ts.topics.get("short"); ok {
			start = tt.parts[0].log.LogStartOffset()
		}
		if start == 0 {
			time.Sleep(10 * time.Millisecond) // polling the log's state with a deadline
		}
	}
	if start == 0 {
		t.Fatal("retention never advanced the log start offset")
	}
	res, err := adm.ListStartOffsets(ctx, "short")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := res.Lookup("short", 0); o.Offset < start {
		t.Fatalf("ListOffsets earliest %d, log start %d", o.Offset, start)
	}
	req := fetchOne("short", 0, 0)
	resp := roundTrip(t, ts.addr, req)
	if code := fetchCode(resp); code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the log start: error %d, want OFFSET_OUT_OF_RANGE", code)
	}
}

func TestCompactTopicIsNotTrimmed(t *testing.T) {
	c := config.Default().ResolveTopic(map[string]string{"cleanup.policy": "compact", "retention.ms": "1"})
	if lc := logConfig(c); lc.RetentionMs >= 0 || lc.RetentionBytes >= 0 {
		t.Fatalf("compact topic log config %+v: retention must be off", lc)
	}
	d := config.Default().ResolveTopic(map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "1"})
	if lc := logConfig(d); lc.RetentionMs != time.Millisecond {
		t.Fatalf("compact,delete topic: retention %v, want 1ms", lc.RetentionMs)
	}
}
