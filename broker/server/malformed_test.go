package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

func TestMalformedFramesCloseOnlyTheirConnection(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.SocketRequestMaxBytes = 1 << 20 })
	// A healthy client on its own connection, used between every case.
	healthy := kadm.NewClient(newClient(t, ts.addr))
	check := func(stage string) {
		t.Helper()
		if _, err := healthy.ListTopics(testCtx(t)); err != nil {
			t.Fatalf("after %s another connection broke: %v", stage, err)
		}
		rc := dialRaw(t, ts.addr)
		rc.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
		if _, ok := rc.recv(); !ok {
			t.Fatalf("after %s a new connection is not served", stage)
		}
	}
	check("start")
	header := func(key, version int16) []byte {
		b := kbin.AppendInt16(nil, key)
		b = kbin.AppendInt16(b, version)
		b = kbin.AppendInt32(b, 7)
		return kbin.AppendNullableString(b, nil)
	}
	cases := []struct {
		name  string
		write func(rc *rawConn)
	}{
		{"oversized frame", func(rc *rawConn) { rc.nc.Write(kbin.AppendInt32(nil, 2<<20)) }},
		{"negative size", func(rc *rawConn) { rc.nc.Write(kbin.AppendInt32(nil, -5)) }},
		{"size below a header", func(rc *rawConn) { rc.nc.Write(append(kbin.AppendInt32(nil, 3), 1, 2, 3)) }},
		{"truncated header", func(rc *rawConn) { rc.send([]byte{0, 3, 0, 1, 0, 0, 0, 9, 0xff}) }},
		{"unknown api key", func(rc *rawConn) { rc.send(header(999, 0)) }},
		{"group api not served yet", func(rc *rawConn) { rc.send(header(10, 3)) }},
		{"produce version too new", func(rc *rawConn) { rc.send(header(0, 13)) }},
		{"fetch version too old", func(rc *rawConn) { rc.send(header(1, 2)) }},
		{"metadata with a garbage body", func(rc *rawConn) {
			rc.send(append(header(3, 1), 0x7f, 0xff, 0xff, 0xff, 1, 2))
		}},
		{"produce with a truncated body", func(rc *rawConn) {
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(7)
			req.Acks = -1
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "x"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = makeBatch(-1, -1, -1, 2, "v")
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			full := encodeRequest(req, 3)
			rc.send(full[:len(full)-30])
		}},
	}
	for _, c := range cases {
		rc := dialRaw(t, ts.addr)
		c.write(rc)
		rc.expectClosed()
		check(c.name)
	}
	// A frame that promises more than it sends, then the client hangs up.
	rc := dialRaw(t, ts.addr)
	rc.nc.Write(append(kbin.AppendInt32(nil, 500), header(3, 1)...))
	rc.nc.Close()
	check("a truncated frame")
}

func TestApiVersions(t *testing.T) {
	ts := startServer(t, "", nil)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := roundTrip(t, ts.addr, req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apis) {
			t.Fatalf("v%d: error %d, %d keys", v, resp.ErrorCode, len(resp.ApiKeys))
		}
	}
	// Too new: a v0 answer with UNSUPPORTED_VERSION and the key list.
	rc := dialRaw(t, ts.addr)
	b := kbin.AppendInt16(nil, 18)
	b = kbin.AppendInt16(b, 99)
	b = kbin.AppendInt32(b, 5)
	b = kbin.AppendNullableString(b, nil)
	rc.send(append(b, 0, 1, 2, 3))
	frame, ok := rc.recv()
	if !ok {
		t.Fatal("closed instead of answering a too-new ApiVersions")
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(frame[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("too-new ApiVersions: %+v", resp)
	}
	var produce kmsg.ApiVersionsResponseApiKey
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 0 {
			produce = k
		}
	}
	if produce.MinVersion != 0 || produce.MaxVersion != 12 {
		t.Fatalf("produce advertised %d-%d, want 0-12", produce.MinVersion, produce.MaxVersion)
	}
}

func TestPipelinedAnswersInOrder(t *testing.T) {
	ts := startServer(t, "", nil)
	rc := dialRaw(t, ts.addr)
	var all bytes.Buffer
	for i := int32(0); i < 20; i++ {
		var req kmsg.Request = kmsg.NewPtrApiVersionsRequest()
		if i%2 == 1 {
			m := kmsg.NewPtrMetadataRequest()
			m.SetVersion(int16(i % 13))
			req = m
		}
		body := encodeRequest(req, 1000+i)
		all.Write(kbin.AppendInt32(nil, int32(len(body))))
		all.Write(body)
	}
	if _, err := rc.nc.Write(all.Bytes()); err != nil {
		t.Fatal(err)
	}
	for i := int32(0); i < 20; i++ {
		frame, ok := rc.recv()
		if !ok {
			t.Fatalf("closed after %d answers", i)
		}
		r := kbin.Reader{Src: frame}
		if got := r.Int32(); got != 1000+i {
			t.Fatalf("answer %d has correlation id %d, want %d", i, got, 1000+i)
		}
	}
}

func TestProduceOldVersionsRejected(t *testing.T) {
	ts := startServer(t, "", nil)
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks = 1
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "old"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = []byte{0, 0, 0, 0}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := roundTrip(t, ts.addr, req).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnsupportedVersion.Code {
			t.Fatalf("produce v%d: error %d, want UNSUPPORTED_VERSION", v, code)
		}
	}
}

func TestIdleConnectionClosed(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.ConnectionsMaxIdleMs = 200 })
	rc := dialRaw(t, ts.addr)
	rc.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
	if _, ok := rc.recv(); !ok {
		t.Fatal("not served")
	}
	start := time.Now()
	rc.expectClosed() // blocks until the server closes the idle connection
	if time.Since(start) < 150*time.Millisecond {
		t.Fatalf("closed after %v, before connections.max.idle.ms", time.Since(start))
	}
}
