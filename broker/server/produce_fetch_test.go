package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

// consumeAll reads n records of topic from the start of every partition.
func consumeAll(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testCtx(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	if len(out) != n {
		t.Fatalf("consumed %d records, want %d", len(out), n)
	}
	return out
}

func TestProduceConsumeByteExact(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.NumPartitions = 3 })
	codecs := []struct {
		name string
		opts []kgo.Opt
	}{
		{"defaults-idempotent-snappy", nil},
		{"gzip", []kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())}},
		{"lz4", []kgo.Opt{kgo.ProducerBatchCompression(kgo.Lz4Compression())}},
		{"zstd", []kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression())}},
		{"none-acks1", []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
	}
	for _, codec := range codecs {
		t.Run(codec.name, func(t *testing.T) {
			topic := "bytes-" + codec.name
			prod := newClient(t, ts.addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation()}, codec.opts...)...)
			const n = 600
			var sent []*kgo.Record
			for i := 0; i < n; i++ {
				r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", i%37)), Value: bytes.Repeat([]byte{byte(i)}, i%300),
					Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}}
				if i%50 == 0 {
					r.Key = nil
				}
				sent = append(sent, r)
			}
			if err := prod.ProduceSync(testCtx(t), sent...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			got := consumeAll(t, ts.addr, topic, n)
			want := map[string]*kgo.Record{}
			perPartition := map[int32][]int64{}
			for _, r := range sent {
				want[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = r
			}
			for _, r := range got {
				w, ok := want[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]
				if !ok {
					t.Fatalf("consumed unknown record %d/%d", r.Partition, r.Offset)
				}
				if !bytes.Equal(w.Key, r.Key) || !bytes.Equal(w.Value, r.Value) || len(r.Headers) != 1 ||
					!bytes.Equal(r.Headers[0].Value, w.Headers[0].Value) || (w.Key == nil) != (r.Key == nil) {
					t.Fatalf("record %d/%d differs: sent %q=%q, got %q=%q", r.Partition, r.Offset, w.Key, w.Value, r.Key, r.Value)
				}
				perPartition[r.Partition] = append(perPartition[r.Partition], r.Offset)
			}
			if len(perPartition) < 2 {
				t.Fatalf("records landed in %d partitions, want several", len(perPartition))
			}
			for p, offs := range perPartition {
				sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
				for i, o := range offs {
					if o != int64(i) {
						t.Fatalf("partition %d: offsets not contiguous from 0: %v", p, offs[:i+1])
					}
				}
			}
		})
	}
}

func TestAcksZeroOneAll(t *testing.T) {
	ts := startServer(t, "", nil)
	for _, acks := range []struct {
		name string
		acks kgo.Acks
	}{{"0", kgo.NoAck()}, {"1", kgo.LeaderAck()}, {"all", kgo.AllISRAcks()}} {
		t.Run(acks.name, func(t *testing.T) {
			topic := "acks-" + acks.name
			opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(acks.acks), kgo.AllowAutoTopicCreation()}
			if acks.name != "all" {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl := newClient(t, ts.addr, opts...)
			for i := 0; i < 100; i++ {
				if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
					t.Fatalf("produce %d: %v", i, err)
				}
			}
			got := consumeAll(t, ts.addr, topic, 100)
			for i, r := range got {
				if string(r.Value) != fmt.Sprint(i) || r.Offset != int64(i) {
					t.Fatalf("record %d: offset %d value %q", i, r.Offset, r.Value)
				}
			}
		})
	}
	// Invalid acks (on a raw connection: kgo rewrites acks) and an unknown partition.
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = 2
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "acks-1"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = makeBatch(-1, -1, -1, 1, "x")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := roundTrip(t, ts.addr, req).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: error %d, want INVALID_REQUIRED_ACKS", code)
	}
	cl := newClient(t, ts.addr)
	if p := produceRaw(t, cl, "acks-1", 7, 1, makeBatch(-1, -1, -1, 1, "x")); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partition 7: error %d, want UNKNOWN_TOPIC_OR_PARTITION", p.ErrorCode)
	}
}

func TestProduceValidationErrors(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(testCtx(t), 1, 1, map[string]*string{"max.message.bytes": kadmStr("2000")}, "small"); err != nil {
		t.Fatal(err)
	}
	bad := makeBatch(-1, -1, -1, 3, "corrupt")
	bad[len(bad)-1] ^= 0xff
	if p := produceRaw(t, cl, "small", 0, -1, bad); p.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("bad crc: error %d, want CORRUPT_MESSAGE", p.ErrorCode)
	}
	if p := produceRaw(t, cl, "small", 0, -1, makeBatch(-1, -1, -1, 1, string(make([]byte, 3000)))); p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("large batch: error %d, want MESSAGE_TOO_LARGE", p.ErrorCode)
	}
	if p := produceRaw(t, cl, "small", 0, -1, makeBatch(-1, -1, -1, 2, "ok")); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("good batch after bad ones: error %d base %d", p.ErrorCode, p.BaseOffset)
	}
	// Fetch beyond the end.
	fcl := newClient(t, ts.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"small": {0: kgo.NewOffset().At(50)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var gotErr error
	for gotErr == nil && ctx.Err() == nil {
		fcl.PollFetches(ctx).EachError(func(_ string, _ int32, err error) { gotErr = err })
	}
	if gotErr != kerr.OffsetOutOfRange {
		t.Fatalf("fetch at 50 of 2: %v, want OFFSET_OUT_OF_RANGE", gotErr)
	}
}

func kadmStr(s string) *string { return &s }

func TestFetchLongPollWakesOnAppend(t *testing.T) {
	ts := startServer(t, "", nil)
	prod := newClient(t, ts.addr, kgo.DefaultProduceTopic("poll"), kgo.AllowAutoTopicCreation())
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := newClient(t, ts.addr, kgo.ConsumeTopics("poll"), kgo.FetchMaxWait(20*time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	_ = consumeFrom(t, cons, 1)
	// The consumer now long-polls with a 20 s max wait; an append must wake it.
	done := make(chan []byte, 1)
	go func() {
		r := consumeFrom(t, cons, 1)
		done <- r[0].Value
	}()
	start := time.Now()
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("second")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-done:
		if string(v) != "second" {
			t.Fatalf("got %q", v)
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("long poll was not woken by the append")
		}
	case <-time.After(19 * time.Second):
		t.Fatal("long poll was not woken by the append")
	}
}

func consumeFrom(t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	ctx := testCtx(t)
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		out = append(out, fs.Records()...)
	}
	return out
}

func TestZeroCopyFetchAndMetrics(t *testing.T) {
	ts := startServer(t, "", nil)
	prod := newClient(t, ts.addr, kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(256<<10))
	var sent []*kgo.Record
	for i := 0; i < 64; i++ {
		sent = append(sent, &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 32<<10)})
	}
	if err := prod.ProduceSync(testCtx(t), sent...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, ts.addr, "big", len(sent))
	for i, r := range got {
		if !bytes.Equal(r.Value, sent[i].Value) {
			t.Fatalf("record %d differs", i)
		}
	}
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`sluice_broker_bytes_in_total{topic="big"}`,
		`sluice_broker_bytes_out_total{topic="big"}`,
		`sluice_broker_records_in_total{topic="big"} 64`,
		`sluice_broker_requests_total{api="Produce"}`,
		`sluice_broker_request_seconds_bucket{api="Fetch"`,
		`sluice_broker_log_end_offset{partition="0",topic="big"} 64`,
		"sluice_broker_connections ",
		"sluice_broker_fetch_zero_copy_bytes_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var v float64
	if m := regexp.MustCompile(`(?m)^sluice_broker_fetch_zero_copy_bytes_total (\S+)$`).FindStringSubmatch(body); m != nil {
		v, _ = strconv.ParseFloat(m[1], 64)
	}
	if v < 1<<20 {
		t.Fatalf("only %v bytes went out through Region.WriteTo; want the 2 MiB of records", v)
	}
}
