package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

func TestCreateDescribeDeleteTopics(t *testing.T) {
	ts := startServer(t, "", nil)
	adm := kadm.NewClient(newClient(t, ts.addr))
	ctx := testCtx(t)
	res, err := adm.CreateTopic(ctx, 4, 1, map[string]*string{"retention.ms": kadmStr("60000")}, "orders")
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); !isKerr(err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "replicated"); !isKerr(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf=3: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": kadmStr("1")}, "cfg"); !isKerr(err, kerr.InvalidConfig) {
		t.Fatalf("bad config: %v, want INVALID_CONFIG", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bad/name"); !isKerr(err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := td["orders"]; !ok || len(d.Partitions) != 4 || d.ID == [16]byte{} {
		t.Fatalf("metadata: %+v", td)
	}
	for _, p := range td["orders"].Partitions {
		if p.Leader != 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Fatalf("partition %+v", p)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("orders", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe: %v %v", err, rc.Err)
	}
	found := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		found[c.Key] = c
	}
	if c := found["retention.ms"]; c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms: %+v", c)
	}
	if c := found["segment.bytes"]; c.MaybeValue() != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes: %+v", c)
	}
	bcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil || len(bcs) != 1 || len(bcs[0].Configs) == 0 {
		t.Fatalf("broker configs: %v %+v", err, bcs)
	}
	dr, err := adm.DeleteTopics(ctx, "orders", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if dr["orders"].Err != nil || !isKerr(dr["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %+v", dr)
	}
	if _, ok := ts.topics.get("orders"); ok {
		t.Fatal("orders is still registered")
	}
	adm = kadm.NewClient(newClient(t, ts.addr)) // kgo caches metadata for a few seconds
	if td, _ := adm.ListTopics(ctx); len(td) != 0 {
		t.Fatalf("topics after delete: %v", td.Names())
	}
	// The name can be reused, starting from offset 0 again.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("orders", 0); o.Offset != 0 {
		t.Fatalf("recreated topic end offset %d", o.Offset)
	}
}

func isKerr(err error, want *kerr.Error) bool { return containsErr(err, want) }

func containsErr(err error, want *kerr.Error) bool {
	type unwrapper interface{ Unwrap() error }
	for err != nil {
		if ke, ok := err.(*kerr.Error); ok && ke.Code == want.Code {
			return true
		}
		u, ok := err.(unwrapper)
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func TestAutoCreateDisabled(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.AutoCreateTopics = false })
	cl := newClient(t, ts.addr, kgo.DefaultProduceTopic("nope"), kgo.RecordDeliveryTimeout(2*time.Second))
	err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).FirstErr()
	if err == nil {
		t.Fatal("produce to a missing topic succeeded with auto-create off")
	}
	if _, ok := ts.topics.get("nope"); ok {
		t.Fatal("topic was created")
	}
}

func TestListOffsets(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr, kgo.DefaultProduceTopic("times"), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	start, err := adm.ListStartOffsets(ctx, "times")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "times")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("times", 0); o.Offset != 0 {
		t.Fatalf("earliest %d", o.Offset)
	}
	if o, _ := end.Lookup("times", 0); o.Offset != 10 {
		t.Fatalf("latest %d", o.Offset)
	}
	at, err := adm.ListOffsetsAfterMilli(ctx, base.Add(4*time.Minute+time.Second).UnixMilli(), "times")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := at.Lookup("times", 0); o.Offset != 5 {
		t.Fatalf("by time: offset %d, want 5", o.Offset)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, base.Add(time.Hour).UnixMilli(), "times")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup("times", 0); o.Offset != 10 && o.Offset != -1 {
		t.Fatalf("after the last timestamp: offset %d, want the end (kadm maps -1 to the end)", o.Offset)
	}
	// Max timestamp (v7, -3).
	p := listOffsetsOne(t, ts, 7, 0, "times", -3)
	if p.ErrorCode != 0 || p.Offset != 9 || p.Timestamp != base.Add(9*time.Minute).UnixMilli() {
		t.Fatalf("max timestamp: %+v", p)
	}
}

// TestListOffsetsInsideACompressedBatch: the answer by timestamp is the
// exact record, not the start of its batch.
func TestListOffsetsInsideACompressedBatch(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr, kgo.DefaultProduceTopic("inbatch"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(50*time.Millisecond))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if recs[0].Offset != 0 || recs[9].Offset != 9 {
		t.Fatalf("offsets %d..%d", recs[0].Offset, recs[9].Offset)
	}
	at, err := kadm.NewClient(cl).ListOffsetsAfterMilli(testCtx(t), base.Add(6500*time.Millisecond).UnixMilli(), "inbatch")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := at.Lookup("inbatch", 0); o.Offset != 7 || o.Timestamp != base.Add(7*time.Second).UnixMilli() {
		t.Fatalf("by time inside a batch: offset %d ts %d, want 7 at %d", o.Offset, o.Timestamp, base.Add(7*time.Second).UnixMilli())
	}
}
