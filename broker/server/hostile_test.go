package server

// Hostile input, sent as raw frames no client library would send: each test
// checks the refusal and then that the broker still serves a normal produce
// and consume (stillServes).

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

var healthyTopics atomic.Int64

// stillServes produces one record to a new topic with franz-go and consumes
// it back.
func stillServes(t *testing.T, addr, stage string) {
	t.Helper()
	topic := fmt.Sprintf("healthy-%d", healthyTopics.Add(1))
	cl := newClient(t, addr, kgo.AllowAutoTopicCreation())
	value := "still serving after " + stage
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("after %s: produce: %v", stage, err)
	}
	recs := consumeAll(t, addr, topic, 1)
	if string(recs[0].Value) != value {
		t.Fatalf("after %s: consumed %q", stage, recs[0].Value)
	}
	cl.Close()
}

// rawBatch is a RecordBatch v2 with a valid header and CRC whose records area
// is payload, under the given codec and record count.
func rawBatch(codec int16, count int32, payload []byte) []byte {
	b := makeBatch(-1, -1, -1, 1, "x")[:61]
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint16(b[21:23], uint16(codec))
	binary.BigEndian.PutUint32(b[23:27], uint32(count-1))
	binary.BigEndian.PutUint32(b[57:61], uint32(count))
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceFrame is a raw Produce v7 frame for one partition.
func produceFrame(topic string, partition int32, records []byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return encodeRequest(req, 9)
}

// TestCompressedGarbageRefused: a batch whose header says gzip or zstd but
// whose payload is garbage, or which claims 2^31-1 records, was acknowledged
// and poisoned the partition for every consumer. It is CORRUPT_MESSAGE now,
// and the log end does not move.
func TestCompressedGarbageRefused(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 1, nil, "victim"); err != nil {
		t.Fatal(err)
	}
	garbage := []byte(strings.Repeat("not compressed at all \x00\xff", 4))
	cases := map[string][]byte{
		"gzip garbage":        rawBatch(1, 1, garbage),
		"zstd garbage":        rawBatch(4, 1, garbage),
		"lz4 garbage":         rawBatch(3, 1, garbage),
		"snappy garbage":      rawBatch(2, 1, garbage),
		"gzip 2^31-1 records": rawBatch(1, math.MaxInt32, garbage[:20]),
		"none 2^31-1 records": rawBatch(0, math.MaxInt32, garbage[:20]),
	}
	for name, batch := range cases {
		p := produceRaw(t, cl, "victim", 0, -1, batch)
		if p.ErrorCode != kerr.CorruptMessage.Code {
			t.Errorf("%s (%d bytes): error %v, want CORRUPT_MESSAGE", name, len(batch), kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if leo := ts.topics.list()[0].parts[0].log.LogEndOffset(); leo != 0 {
		t.Fatalf("log end offset %d after refused batches, want 0", leo)
	}
	// The partition is not poisoned: a valid batch goes in and reads back.
	if p := produceRaw(t, cl, "victim", 0, -1, makeBatch(-1, -1, -1, 3, "ok")); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("valid batch: base %d error %v", p.BaseOffset, kerr.ErrorForCode(p.ErrorCode))
	}
	consumeAll(t, ts.addr, "victim", 3)
	stillServes(t, ts.addr, "garbage compressed batches")
}

// metadataFrame builds a Metadata v4 frame naming each of names (no
// auto-creation).
func metadataFrame(names []string) []byte {
	b := kbin.AppendInt16(nil, 3)
	b = kbin.AppendInt16(b, 4)
	b = kbin.AppendInt32(b, 5)
	b = kbin.AppendNullableString(b, nil)
	b = kbin.AppendInt32(b, int32(len(names)))
	for _, n := range names {
		b = kbin.AppendString(b, n)
	}
	return append(b, 0) // AllowAutoTopicCreation false
}

// metadataAnswer decodes a Metadata v4 answer frame.
func metadataAnswer(t *testing.T, b []byte) *kmsg.MetadataResponse {
	t.Helper()
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(4)
	if err := resp.ReadFrom(b[4:]); err != nil {
		t.Fatal(err)
	}
	return resp
}

// allocatedDuring is the bytes the process allocated while fn ran.
func allocatedDuring(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestMetadataRepeatedTopics: a topic named 1,000 times is answered once
// (its partitions were listed 1,000 times), 10 MB of empty names cost one
// entry, and a request naming more than maxMetadataTopics distinct topics is
// refused.
func TestMetadataRepeatedTopics(t *testing.T) {
	ts := startServer(t, "", nil)
	if _, err := kadm.NewClient(newClient(t, ts.addr)).CreateTopic(testCtx(t), 512, 1, nil, "wide"); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, ts.addr)
	names := make([]string, 1000)
	for i := range names {
		names[i] = "wide"
	}
	rc.send(metadataFrame(names))
	b, ok := rc.recv()
	if !ok {
		t.Fatal("connection closed")
	}
	if resp := metadataAnswer(t, b); len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 512 || len(b) > 64<<10 {
		t.Fatalf("1,000 mentions of a 512-partition topic: %d topics, %d-byte answer", len(resp.Topics), len(b))
	}

	empty := make([]string, 5<<20) // 10 MB of 2-byte empty names
	frame := metadataFrame(empty)
	var answer []byte
	alloc := allocatedDuring(func() {
		rc.send(frame)
		answer, ok = rc.recv()
	})
	if !ok {
		t.Fatal("connection closed")
	}
	resp := metadataAnswer(t, answer)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("10 MB of empty names: %d topics answered", len(resp.Topics))
	}
	// The frame (10 MB, read into buffers doubling up to 16 MiB) and the
	// test's own encoding are most of it; decoding an entry per name would
	// be 240 MB more and answering each another 100 MB.
	if alloc > 120<<20 {
		t.Fatalf("10 MB of empty names allocated %d MiB", alloc>>20)
	}

	distinct := make([]string, maxMetadataTopics+1)
	for i := range distinct {
		distinct[i] = fmt.Sprintf("t%d", i)
	}
	rc2 := dialRaw(t, ts.addr)
	rc2.send(metadataFrame(distinct))
	rc2.expectClosed()
	stillServes(t, ts.addr, "repeated Metadata topics")
}

// TestFetchRepeatedPartition: a Fetch v4 naming one partition 1,900 times
// with max_bytes 0 built an answer of 1,900 copies of the partition's data
// (past 2 GiB its size prefix went negative). It answers the partition once
// and at most one batch; fetch.max.bytes bounds a fetch of many partitions.
func TestFetchRepeatedPartition(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.FetchMaxBytes = 100 << 10 })
	cl := newClient(t, ts.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 8, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("v", 1000)
	for p := int32(0); p < 8; p++ {
		for i := 0; i < 4; i++ {
			if r := produceRaw(t, cl, "data", p, -1, makeBatch(-1, -1, -1, 30, value)); r.ErrorCode != 0 {
				t.Fatal(kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	fetch := func(maxBytes int32, parts []int32) (*kmsg.FetchResponse, int) {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(4)
		req.MaxBytes = maxBytes
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "data"
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		rc := dialRaw(t, ts.addr)
		rc.send(encodeRequest(req, 1))
		b, ok := rc.recv()
		if !ok {
			t.Fatal("connection closed")
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(4)
		if err := resp.ReadFrom(b[4:]); err != nil {
			t.Fatal(err)
		}
		return resp, len(b)
	}
	same := make([]int32, 1900)
	resp, size := fetch(0, same)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || size > 64<<10 {
		t.Fatalf("partition named 1,900 times: %d partitions in a %d-byte answer", len(resp.Topics[0].Partitions), size)
	}
	all := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	resp, size = fetch(1<<30, all)
	records := 0
	for _, p := range resp.Topics[0].Partitions {
		records += len(p.RecordBatches)
	}
	batch := len(makeBatch(-1, -1, -1, 30, value))
	if records > 100<<10+batch || records < 100<<10-batch {
		t.Fatalf("fetch.max.bytes 100 KiB: %d record bytes answered (%d-byte frame)", records, size)
	}
	stillServes(t, ts.addr, "repeated Fetch partitions")
}

// TestLyingFrameSizes: ten connections each announce a 100 MiB frame and send
// 1 MiB of it. A frame buffer follows the bytes that arrived (it was
// allocated in full after the first MiB: 1 GB).
func TestLyingFrameSizes(t *testing.T) {
	ts := startServer(t, "", nil)
	chunk := make([]byte, 1<<20)
	alloc := allocatedDuring(func() {
		for range 10 {
			rc := dialRaw(t, ts.addr)
			if _, err := rc.nc.Write(append(kbin.AppendInt32(nil, 100<<20), chunk...)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "the ten partial frames read", func() bool { return ts.reqMem.inUse() >= 10*(2<<20) })
	})
	if alloc > 100<<20 {
		t.Fatalf("ten 1 MiB starts of 100 MiB frames allocated %d MiB", alloc>>20)
	}
	stillServes(t, ts.addr, "lying frame sizes")
}

// TestRequestMemoryBackPressure: with queued.max.request.bytes used up by
// connections that stalled mid-frame, a new request waits (reading is held
// back) rather than adding memory, and goes through once they leave.
func TestRequestMemoryBackPressure(t *testing.T) {
	const limit = 4 << 20
	ts := startServer(t, "", func(c *config.Broker) { c.QueuedMaxRequestBytes = limit })
	var stalled []*rawConn
	chunk := make([]byte, 2<<20)
	for range 4 {
		rc := dialRaw(t, ts.addr)
		rc.nc.Write(append(kbin.AppendInt32(nil, 50<<20), chunk...))
		stalled = append(stalled, rc)
	}
	// Some of the four got their memory, the others wait; never more than
	// the bound plus one frame's overflow.
	waitFor(t, "readers waiting for request memory", func() bool {
		return metricValue(ts.metrics.readWaits) > 0 && ts.reqMem.inUse() >= limit
	})
	if used := ts.reqMem.inUse(); used > limit+8<<20 {
		t.Fatalf("%d bytes reserved with queued.max.request.bytes %d", used, limit)
	}
	done := make(chan error, 1)
	go func() {
		rc := dialRaw(t, ts.addr)
		rc.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
		_, ok := rc.recv()
		if !ok {
			done <- io.EOF
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		t.Fatalf("a request was read while the request memory was used up (%v)", err)
	case <-time.After(200 * time.Millisecond): // a bound on an absence, not a wait for an event
	}
	for _, rc := range stalled {
		rc.nc.Close()
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting request was not served after the memory was released")
	}
	waitFor(t, "request memory released", func() bool { return ts.reqMem.inUse() == 0 })
	stillServes(t, ts.addr, "request memory exhaustion")
}

// TestConnectionLimits: beyond max.connections.per.ip (and max.connections)
// a new connection is closed as it arrives and counted; one leaving makes room.
func TestConnectionLimits(t *testing.T) {
	for _, limit := range []string{"max.connections", "max.connections.per.ip"} {
		t.Run(limit, func(t *testing.T) {
			ts := startServer(t, "", func(c *config.Broker) {
				if limit == "max.connections" {
					c.MaxConnections = 3
				} else {
					c.MaxConnectionsPerIP = 3
				}
			})
			var held []*rawConn
			for range 3 {
				rc := dialRaw(t, ts.addr)
				rc.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
				if _, ok := rc.recv(); !ok {
					t.Fatal("connection within the limit not served")
				}
				held = append(held, rc)
			}
			extra := dialRaw(t, ts.addr)
			extra.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
			extra.expectClosed()
			if n := metricValue(ts.metrics.connsRefused.WithLabelValues(limit)); n != 1 {
				t.Fatalf("refused connections counted: %v", n)
			}
			held[0].nc.Close()
			waitFor(t, "a connection slot freed", func() bool {
				ts.mu.Lock()
				defer ts.mu.Unlock()
				return len(ts.conns) == 2
			})
			rc := dialRaw(t, ts.addr)
			rc.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
			if _, ok := rc.recv(); !ok {
				t.Fatal("no room made by a connection that left")
			}
			for _, h := range append(held, rc) {
				h.nc.Close()
			}
			// franz-go opens several connections per client: lift the limit
			// for the normal produce and consume.
			ts.setConnectionLimits(math.MaxInt32, math.MaxInt32)
			stillServes(t, ts.addr, limit)
		})
	}
}

// TestAcceptErrorsRetried: an accept error other than a closed listener
// (EMFILE when descriptors run out) is retried, not the end of Serve.
func TestAcceptErrorsRetried(t *testing.T) {
	ts := startServer(t, "", nil)
	real, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: real, failures: 3}
	served := make(chan error, 1)
	go func() { served <- ts.Serve(ln) }()
	rc := dialRaw(t, real.Addr().String())
	rc.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
	if _, ok := rc.recv(); !ok {
		select {
		case err := <-served:
			t.Fatalf("Serve returned after accept errors: %v", err)
		default:
			t.Fatal("connection not served after accept errors")
		}
	}
	if n := metricValue(ts.metrics.acceptErrors); n != 3 {
		t.Fatalf("accept errors counted: %v", n)
	}
	stillServes(t, ts.addr, "accept errors")
}

var errEMFILE error = syscall.EMFILE

// failingListener fails its first Accepts with EMFILE.
type failingListener struct {
	net.Listener
	failures int
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.failures > 0 {
		l.failures--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: errEMFILE}
	}
	return l.Listener.Accept()
}

// metricValue reads a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return math.NaN()
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// TestListOffsetsDecompressionBudget: the timestamp search decompresses at
// most the request's budget over all its partitions (it had no bound across
// partitions or requests); beyond it the answer is the batch holding the
// first record at or after the timestamp.
func TestListOffsetsDecompressionBudget(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr, kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(time.Second))
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 1, nil, "times"); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range 500 {
		recs = append(recs, &kgo.Record{Topic: "times", Value: []byte(strings.Repeat(fmt.Sprint(i), 100)), Timestamp: base.Add(time.Duration(i) * time.Millisecond)})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	list := func(times int) *kmsg.ListOffsetsResponse {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(4)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "times"
		for range times {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = base.Add(250 * time.Millisecond).UnixMilli()
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return roundTrip(t, ts.addr, req).(*kmsg.ListOffsetsResponse)
	}
	offset := func() int64 {
		p := list(1).Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(p.ErrorCode))
		}
		return p.Offset
	}
	if off := offset(); off != 250 {
		t.Fatalf("within the budget: offset %d, want the exact record 250", off)
	}
	ts.listOffsetsBudget.Store(4 << 10) // less than the batch decompresses to
	if off := offset(); off != 0 {
		t.Fatalf("beyond the budget: offset %d, want the batch's base offset 0", off)
	}
	// A partition named 1,000 times is not searched 1,000 times (Kafka: INVALID_REQUEST).
	for _, p := range list(1000).Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("repeated partition: %v", kerr.ErrorForCode(p.ErrorCode))
		}
	}
	stillServes(t, ts.addr, "ListOffsets beyond its budget")
}

// TestDecodeMetadataMatchesKmsg: the de-duplicating decoder reads every
// version as kmsg does, minus the repeats.
func TestDecodeMetadataMatchesKmsg(t *testing.T) {
	for v := int16(0); v <= 12; v++ {
		for _, names := range [][]string{nil, {}, {"a"}, {"a", "b", "a", "", "c", "b"}} {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			if names != nil {
				req.Topics = []kmsg.MetadataRequestTopic{}
			}
			for _, n := range names {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(n)
				req.Topics = append(req.Topics, rt)
			}
			if v >= 10 { // one topic by id only, twice
				for range 2 {
					rt := kmsg.NewMetadataRequestTopic()
					rt.TopicID = [16]byte{1, 2, 3}
					req.Topics = append(req.Topics, rt)
				}
			}
			req.AllowAutoTopicCreation, req.IncludeTopicAuthorizedOperations = true, v >= 8
			body := req.AppendTo(nil)
			want := kmsg.NewPtrMetadataRequest()
			want.SetVersion(v)
			if err := want.ReadFrom(body); err != nil {
				t.Fatal(err)
			}
			got, err := decodeMetadata(v, body)
			if err != nil {
				t.Fatalf("v%d %q: %v", v, names, err)
			}
			g := got.(*kmsg.MetadataRequest)
			seen := map[string]bool{}
			var unique []kmsg.MetadataRequestTopic
			for _, rt := range want.Topics {
				key := fmt.Sprint(rt.TopicID)
				if rt.Topic != nil {
					key = *rt.Topic
				}
				if !seen[key] {
					seen[key] = true
					unique = append(unique, rt)
				}
			}
			if (want.Topics == nil) != (g.Topics == nil) || len(unique) != len(g.Topics) ||
				g.AllowAutoTopicCreation != want.AllowAutoTopicCreation || g.IncludeTopicAuthorizedOperations != want.IncludeTopicAuthorizedOperations {
				t.Fatalf("v%d %q: decoded %+v, kmsg %+v", v, names, g, want)
			}
			for i, w := range unique {
				gt := g.Topics[i]
				if w.TopicID != gt.TopicID || (w.Topic == nil) != (gt.Topic == nil) || (w.Topic != nil && *w.Topic != *gt.Topic) {
					t.Fatalf("v%d: topic %d is %+v, kmsg %+v", v, i, gt, w)
				}
			}
			if _, err := decodeMetadata(v, body[:len(body)-1]); err == nil && len(body) > 1 && v > 0 {
				t.Fatalf("v%d: truncated body decoded", v)
			}
		}
	}
}

// TestMetadataAutoCreateBounded: one Metadata request auto-creates at most
// maxAutoCreates topics (it created every name it carried: up to 100,000);
// the rest are LEADER_NOT_AVAILABLE and created when asked again.
func TestMetadataAutoCreateBounded(t *testing.T) {
	ts := startServer(t, "", nil)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	req.AllowAutoTopicCreation = true
	for i := range maxAutoCreates + 20 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("auto-%03d", i))
		req.Topics = append(req.Topics, rt)
	}
	count := func(resp *kmsg.MetadataResponse) (ok, waiting int) {
		for _, mt := range resp.Topics {
			switch mt.ErrorCode {
			case 0:
				ok++
			case kerr.LeaderNotAvailable.Code:
				waiting++
			default:
				t.Fatalf("topic %s: %v", *mt.Topic, kerr.ErrorForCode(mt.ErrorCode))
			}
		}
		return ok, waiting
	}
	if ok, waiting := count(roundTrip(t, ts.addr, req).(*kmsg.MetadataResponse)); ok != maxAutoCreates || waiting != 20 {
		t.Fatalf("first request: %d created, %d waiting", ok, waiting)
	}
	if ok, waiting := count(roundTrip(t, ts.addr, req).(*kmsg.MetadataResponse)); ok != maxAutoCreates+20 || waiting != 0 {
		t.Fatalf("second request: %d created, %d waiting", ok, waiting)
	}
	stillServes(t, ts.addr, "a Metadata request auto-creating many topics")
}

// TestOversizedLookupRequests: a DeleteTopics of 5 MiB of empty names decoded
// into 2.6 million entries and as many answers (~40 bytes of memory per byte
// sent); APIs whose requests are small in practice now refuse frames above
// 4 MiB (Fetch above 8 MiB, the group APIs above 16 MiB) before decoding them.
func TestOversizedLookupRequests(t *testing.T) {
	ts := startServer(t, "", nil)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(3) // 2 bytes per empty name
	del.TopicNames = make([]string, 5<<20/2)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(4)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "x"
	rt.Partitions = make([]kmsg.FetchRequestTopicPartition, 9<<20/16)
	for i := range rt.Partitions {
		rt.Partitions[i].Partition = int32(i)
	}
	fetch.Topics = append(fetch.Topics, rt)
	// OffsetCommit v2: 17 MiB of partition entries (12 bytes each with a
	// null metadata), above the group APIs' 16 MiB bound.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(2)
	commit.Group, commit.MemberID, commit.Generation = "g", "m", 1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "x"
	ct.Partitions = make([]kmsg.OffsetCommitRequestTopicPartition, 17<<20/12)
	commit.Topics = append(commit.Topics, ct)
	for _, req := range []kmsg.Request{del, fetch, commit} {
		rc := dialRaw(t, ts.addr)
		rc.send(encodeRequest(req, 1))
		rc.expectClosed()
	}
	stillServes(t, ts.addr, "oversized lookup requests")
}

// TestProduceManyPartitionEntries: a Produce of 150,000 partition entries
// with null records (8 bytes each) decoded into as many entries and answers;
// beyond maxProducePartitions it is refused before decoding. Within the
// bound, a normal request decodes as before (every test here produces).
func TestProduceManyPartitionEntries(t *testing.T) {
	ts := startServer(t, "", nil)
	for _, v := range []int16{7, 9} { // classic and flexible layouts
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks = 1
		for _, name := range []string{"x", "y"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = name
			rt.Partitions = make([]kmsg.ProduceRequestTopicPartition, (maxProducePartitions+50_000)/2)
			req.Topics = append(req.Topics, rt)
		}
		rc := dialRaw(t, ts.addr)
		rc.send(encodeRequest(req, 1))
		rc.expectClosed()
	}
	stillServes(t, ts.addr, "a Produce of 150,000 partition entries")
}
