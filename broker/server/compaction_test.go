package server

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedTopicEndToEnd: franz-go produces updates of a few keys to a
// cleanup.policy=compact topic, the cleaner runs, and a consumer reading from
// the start sees each key's newest value at its original offset.
func TestCompactedTopicEndToEnd(t *testing.T) {
	ts := startServer(t, "", groupProps(t, nil))
	ctx := testCtx(t)
	cl := newClient(t, ts.addr, kgo.DefaultProduceTopic("table"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	adm := kadm.NewClient(cl)
	cfg := map[string]*string{"cleanup.policy": kadmStr("compact"), "segment.bytes": kadmStr("1024")}
	if _, err := adm.CreateTopic(ctx, 1, 1, cfg, "table"); err != nil {
		t.Fatal(err)
	}
	newest := map[string]int64{}
	values := map[int64]string{}
	for i := 0; i < 300; i++ {
		k, v := fmt.Sprintf("key-%d", i%7), fmt.Sprintf("value-%d", i)
		r, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}).First()
		if err != nil {
			t.Fatal(err)
		}
		newest[k], values[r.Offset] = r.Offset, v
	}
	before := ts.topics.list()[0].parts[0].log.Size()
	if err := ts.mgr.RunCompaction(); err != nil {
		t.Fatal(err)
	}
	after := ts.topics.list()[0].parts[0].log.Size()
	if after >= before/2 {
		t.Fatalf("compaction kept %d of %d bytes", after, before)
	}
	cons := newClient(t, ts.addr, kgo.ConsumeTopics("table"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int64{}
	n := 0
	for seen["key-0"] != newest["key-0"] || len(seen) < 7 || seen[fmt.Sprintf("key-%d", 299%7)] != 299 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if values[r.Offset] != string(r.Value) {
				t.Fatalf("offset %d holds %q, was produced as %q", r.Offset, r.Value, values[r.Offset])
			}
			seen[string(r.Key)] = r.Offset
		})
	}
	for k, off := range newest {
		if seen[k] != off {
			t.Errorf("key %s: last read at %d, newest written at %d", k, seen[k], off)
		}
	}
	if n >= 300 {
		t.Errorf("read %d records: nothing was compacted away", n)
	}
}
