package server

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

// testServer is an in-process server on 127.0.0.1:0.
type testServer struct {
	*Server
	addr string
	dir  string
}

func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("SLUICE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// startServer starts a server on dir (a fresh temp dir when "").
func startServer(t testing.TB, dir string, mutate func(*config.Broker)) *testServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := config.Default()
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(Options{DataDir: dir, Config: cfg, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: addr.String(), dir: dir}
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

func (ts *testServer) stop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil && err != ErrClosed {
		t.Errorf("shutdown: %v", err)
	}
}

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// makeBatch builds a RecordBatch v2 of n uncompressed records whose values
// are prefix+index.
func makeBatch(producerID int64, epoch int16, baseSeq int32, n int, prefix string) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		var r []byte
		r = append(r, 0)                    // attributes
		r = kbin.AppendVarlong(r, int64(i)) // timestamp delta
		r = kbin.AppendVarint(r, int32(i))  // offset delta
		r = kbin.AppendVarint(r, -1)        // key: null
		v := []byte(prefix + string(rune('a'+i%26)))
		r = kbin.AppendVarint(r, int32(len(v)))
		r = append(r, v...)
		r = kbin.AppendVarint(r, 0) // headers
		recs = kbin.AppendVarint(recs, int32(len(r)))
		recs = append(recs, r...)
	}
	now := time.Now().UnixMilli()
	b := kbin.AppendInt64(nil, 0)
	b = kbin.AppendInt32(b, 0) // length, patched below
	b = kbin.AppendInt32(b, -1)
	b = append(b, 2)
	b = kbin.AppendInt32(b, 0) // crc, patched below
	b = kbin.AppendInt16(b, 0)
	b = kbin.AppendInt32(b, int32(n-1))
	b = kbin.AppendInt64(b, now)
	b = kbin.AppendInt64(b, now+int64(n-1))
	b = kbin.AppendInt64(b, producerID)
	b = kbin.AppendInt16(b, epoch)
	b = kbin.AppendInt32(b, baseSeq)
	b = kbin.AppendInt32(b, int32(n))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceRaw sends one Produce request for one partition and returns that
// partition's answer.
func produceRaw(t testing.TB, cl *kgo.Client, topic string, partition int32, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl.Broker(0))
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce answer shape: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// rawConn is a plain TCP connection for hand-made frames.
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc}
}

// send writes a frame: size prefix + body.
func (r *rawConn) send(body []byte) {
	r.t.Helper()
	frame := kbin.AppendInt32(nil, int32(len(body)))
	if _, err := r.nc.Write(append(frame, body...)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// request encodes a request with a v1/v2 header.
func encodeRequest(req kmsg.Request, corrID int32) []byte {
	b := kbin.AppendInt16(nil, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, corrID)
	b = kbin.AppendNullableString(b, kmsg.StringPtr("raw-test"))
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// recv reads one response frame; ok is false when the connection was closed.
func (r *rawConn) recv() ([]byte, bool) {
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil {
		return nil, false
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.nc, buf); err != nil {
		return nil, false
	}
	return buf, true
}

// expectClosed asserts that the server closes the connection.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	if b, ok := r.recv(); ok {
		r.t.Fatalf("connection still open; got a %d-byte answer", len(b))
	}
}

// roundTrip sends req on a fresh raw connection and decodes the answer.
func roundTrip(t testing.TB, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	rc := dialRaw(t, addr)
	rc.send(encodeRequest(req, 42))
	b, ok := rc.recv()
	if !ok {
		t.Fatalf("%T v%d: connection closed", req, req.GetVersion())
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	r := kbin.Reader{Src: b}
	if r.Int32() != 42 {
		t.Fatalf("correlation id mismatch")
	}
	body := r.Src
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %T: %v", resp, err)
	}
	return resp
}
