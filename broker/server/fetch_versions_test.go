package server

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchEncodingEveryVersion decodes the hand-encoded Fetch answer of
// every served version with kmsg and checks each field, for a small record
// range (copied into the frame) and a large one (sent with Region.WriteTo),
// plus an unknown partition and an out-of-range offset in the same answer.
func TestFetchEncodingEveryVersion(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 2, 1, nil, "enc"); err != nil {
		t.Fatal(err)
	}
	small := makeBatch(-1, -1, -1, 3, "small")
	large := makeBatch(-1, -1, -1, 40, string(bytes.Repeat([]byte("L"), 1000)))
	if p := produceRaw(t, cl, "enc", 0, -1, small); p.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(p.ErrorCode))
	}
	if p := produceRaw(t, cl, "enc", 1, -1, large); p.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(p.ErrorCode))
	}
	// As stored: the partition leader epoch (bytes 12-15, outside the CRC)
	// is stamped with the leader's epoch, 0; the base offset is 0 anyway.
	stamp := func(b []byte) []byte {
		out := append([]byte(nil), b...)
		copy(out[12:16], []byte{0, 0, 0, 0})
		return out
	}
	small, large = stamp(small), stamp(large)
	for v := int16(4); v <= 12; v++ {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
		req.SessionEpoch = -1
		var add func(topic string, partition int32, offset int64)
		add = func(topic string, partition int32, offset int64) {
			for i := range req.Topics {
				if req.Topics[i].Topic == topic {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
					req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
					return
				}
			}
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			add(topic, partition, offset)
		}
		// enc-0 is named twice: answered once, at its first place, for the
		// last mention's offset (as Kafka does).
		add("enc", 0, 99)
		add("enc", 1, 0)
		add("enc", 5, 0)
		add("missing", 0, 0)
		add("enc", 0, 0)
		add("enc", 2, 0)
		resp := roundTrip(t, ts.addr, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 4 {
			t.Fatalf("v%d: shape %+v", v, resp)
		}
		ps := resp.Topics[0].Partitions
		// Records come back exactly as produced, with the assigned base offset (0).
		if ps[0].ErrorCode != 0 || ps[0].HighWatermark != 3 || !bytes.Equal(ps[0].RecordBatches, small) {
			t.Fatalf("v%d: small partition: err %d hw %d %d bytes", v, ps[0].ErrorCode, ps[0].HighWatermark, len(ps[0].RecordBatches))
		}
		if ps[1].ErrorCode != 0 || ps[1].HighWatermark != 40 || !bytes.Equal(ps[1].RecordBatches, large) {
			t.Fatalf("v%d: large partition: err %d hw %d %d bytes", v, ps[1].ErrorCode, ps[1].HighWatermark, len(ps[1].RecordBatches))
		}
		if v >= 5 && ps[1].LogStartOffset != 0 {
			t.Fatalf("v%d: log start %d", v, ps[1].LogStartOffset)
		}
		if ps[1].LastStableOffset != 40 {
			t.Fatalf("v%d: last stable %d", v, ps[1].LastStableOffset)
		}
		if ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: unknown partitions: %d %d", v, ps[2].ErrorCode, resp.Topics[1].Partitions[0].ErrorCode)
		}
		if ps[3].Partition != 2 || ps[3].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: partition %d error %d", v, ps[3].Partition, ps[3].ErrorCode)
		}
	}
}

// TestEveryServedVersionAnswers sends a typical request of every served API
// and version on one connection and decodes each answer with kmsg.
func TestEveryServedVersionAnswers(t *testing.T) {
	ts := startServer(t, "", nil)
	rc := dialRaw(t, ts.addr)
	for _, seed := range seedRequests() {
		r := kbin.Reader{Src: seed}
		key, version, corr := r.Int16(), r.Int16(), r.Int32()
		rc.send(seed)
		b, ok := rc.recv()
		if !ok {
			t.Fatalf("key %d v%d: connection closed", key, version)
		}
		resp := kmsg.ResponseForKey(key)
		resp.SetVersion(version)
		rr := kbin.Reader{Src: b}
		if got := rr.Int32(); got != corr {
			t.Fatalf("key %d v%d: correlation id %d, want %d", key, version, got, corr)
		}
		body := rr.Src
		if resp.IsFlexible() && key != apiVersionsKey {
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("key %d v%d: answer does not decode: %v", key, version, err)
		}
	}
}

// fetchOne builds a v12 Fetch of one partition that does not wait.
func fetchOne(topic string, partition int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxBytes, req.SessionEpoch = 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchCode is the error code of the first partition of a Fetch answer.
func fetchCode(resp kmsg.Response) int16 {
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
}
