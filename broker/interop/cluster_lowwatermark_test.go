package interop

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterDeleteRecordsLowWatermark: in cluster mode DeleteRecords is
// answered with the low watermark, the smallest log start over the leader
// and its in-sync followers, only once it reached the offset (Kafka's
// delayed DeleteRecords). With one in-sync follower paused (SIGSTOP, within
// replica.lag.time.max.ms so it stays in the ISR) the request times out
// (REQUEST_TIMED_OUT, low watermark -1); once it resumes, a DeleteRecords is
// answered with the offset, and the leader killed at once after the answer
// leaves a new leader whose log already starts there (the followers moved
// theirs before the answer).
func TestClusterDeleteRecordsLowWatermark(t *testing.T) {
	const records, firstCut, cut = 300, 100, 200
	c := startBrokerCluster(t, 3)
	topic := faultTopic(t, c, "lowwatermark", map[string]string{"segment.bytes": "1024"})
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range records {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%04d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	view := c.fullISR(topic, 1, c.ids()[0], c.ids()...)[0]
	followers := others(c.ids(), view.Leader)
	deleteRecords := func(offset int64, timeout time.Duration) (int64, int16, time.Duration) {
		t.Helper()
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = int32(timeout.Milliseconds())
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp, err := c.request(view.Leader, req)
		if err != nil {
			t.Fatalf("DeleteRecords before %d: %v", offset, err)
		}
		sp := resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
		return sp.LowWatermark, sp.ErrorCode, time.Since(start)
	}

	c.signal(syscall.SIGSTOP, followers[0])
	lw, code, took := deleteRecords(firstCut, 1500*time.Millisecond)
	c.signal(syscall.SIGCONT, followers[0])
	t.Logf("with follower %d paused: low watermark %d, %v after %v", followers[0], lw, kerr.ErrorForCode(code), took)
	if code != kerr.RequestTimedOut.Code || lw != -1 || took < 1400*time.Millisecond {
		t.Errorf("DeleteRecords with an in-sync follower paused: low watermark %d, code %v after %v; want -1, REQUEST_TIMED_OUT after the 1.5 s timeout",
			lw, kerr.ErrorForCode(code), took)
	}
	c.fullISR(topic, 1, view.Leader, c.ids()...)

	lw, code, took = deleteRecords(cut, 20*time.Second)
	t.Logf("all followers running: low watermark %d, %v after %v", lw, kerr.ErrorForCode(code), took)
	if code != 0 || lw != cut {
		t.Fatalf("DeleteRecords before %d: low watermark %d, %v", cut, lw, kerr.ErrorForCode(code))
	}
	c.brokers[view.Leader].Kill()
	next := c.waitLeaders(topic, 1, followers...)[0]
	adm := kadm.NewClient(c.clientOf(followers))
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != cut {
		t.Errorf("new leader %d, right after the old one answered low watermark %d and was killed: earliest offset %d", next.Leader, cut, o.Offset)
	}
}
