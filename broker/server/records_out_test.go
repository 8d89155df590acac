package server

import (
	"encoding/binary"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRecordsOutCountsZeroCopy checks sluice_broker_records_out_total
// against the records of the batches that went out, for answers copied into
// the frame (< zeroCopyMin) and sent with sendfile, and for fetches that
// start inside a batch (the whole batch goes out, as in Kafka).
func TestRecordsOutCountsZeroCopy(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr)
	const topic = "rout" // auto-created by the first produce
	prefix := strings.Repeat("v", 300)
	var leo int64
	for i := 0; i < 12; i++ {
		n := 5 // ~1.6 KB: copied when fetched alone
		if i%3 == 0 {
			n = 100 // ~31 KB: above zeroCopyMin
		}
		if sp := produceRaw(t, cl, topic, 0, -1, makeBatch(-1, -1, -1, n, prefix)); sp.ErrorCode != 0 {
			t.Fatalf("produce: error %d", sp.ErrorCode)
		}
		leo += int64(n)
	}
	var sent int64
	fetch := func(offset int64, maxBytes int32) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.MaxBytes = maxBytes
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset = offset
		rp.PartitionMaxBytes = maxBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl.Broker(0))
		if err != nil {
			t.Fatal(err)
		}
		b := resp.Topics[0].Partitions[0].RecordBatches
		if len(b) == 0 {
			t.Fatalf("fetch at %d returned no records", offset)
		}
		for len(b) >= 61 {
			size := 12 + int(binary.BigEndian.Uint32(b[8:12]))
			sent += int64(int32(binary.BigEndian.Uint32(b[23:27]))) + 1
			b = b[size:]
		}
	}
	for off := int64(0); off < leo; off += 37 { // mid-batch starts, one batch each
		fetch(off, 1)
	}
	fetch(0, 1<<20)   // the whole log: one sendfile region
	fetch(103, 8<<10) // small batches only: copied
	var zc dto.Metric
	if err := ts.metrics.zeroCopyBytes.Write(&zc); err != nil || zc.GetCounter().GetValue() == 0 {
		t.Fatalf("no answer went out with sendfile (%v)", err)
	}
	got := counterValue(t, ts, topic)
	if got != float64(sent) || sent == 0 {
		t.Fatalf("records_out_total = %v, the answers carried %d records", got, sent)
	}
}

func counterValue(t *testing.T, ts *testServer, topic string) float64 {
	t.Helper()
	var m dto.Metric
	if err := ts.metrics.recordsOut.WithLabelValues(topic).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
