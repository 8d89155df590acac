package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

// discardConn is a net.Conn that accepts every write and never has data.
type discardConn struct{}

func (discardConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (discardConn) Write(b []byte) (int, error)      { return len(b), nil }
func (discardConn) Close() error                     { return nil }
func (discardConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (discardConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (discardConn) SetDeadline(time.Time) error      { return nil }
func (discardConn) SetReadDeadline(time.Time) error  { return nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// seedRequests returns one encoded request frame (without size prefix) per
// served API and version, with a topic and a partition filled in where the
// API has them, so the fuzzer starts from every decoder path.
func seedRequests() [][]byte {
	var out [][]byte
	records := makeBatch(-1, -1, -1, 2, "seed")
	for _, a := range apis {
		for v := a.advertisedMin; v <= a.max; v++ {
			req := kmsg.RequestForKey(a.key)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.ProduceRequest:
				r.Acks = -1
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "fuzz"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = records
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
			case *kmsg.FetchRequest:
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = "fuzz"
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.PartitionMaxBytes = 1 << 20
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				r.MaxBytes = 1 << 20
			case *kmsg.ListOffsetsRequest:
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = "fuzz"
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
			case *kmsg.MetadataRequest:
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr("fuzz")
				r.Topics = append(r.Topics, rt)
				r.AllowAutoTopicCreation = true
			case *kmsg.CreateTopicsRequest:
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fuzz-created", 2, 1
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
				rt.Configs = append(rt.Configs, c)
				r.Topics = append(r.Topics, rt)
			case *kmsg.DeleteTopicsRequest:
				r.TopicNames = []string{"fuzz-created"}
				dt := kmsg.NewDeleteTopicsRequestTopic()
				dt.Topic = kmsg.StringPtr("fuzz-created")
				r.Topics = append(r.Topics, dt)
			case *kmsg.DescribeConfigsRequest:
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "fuzz"
				r.Resources = append(r.Resources, rr)
			}
			out = append(out, encodeRequest(req, int32(a.key)*100+int32(v)))
		}
	}
	return out
}

// FuzzRequest feeds arbitrary frames to the request handler of a real
// server: whatever the bytes, the handler answers or asks to close the
// connection, and never panics.
func FuzzRequest(f *testing.F) {
	for _, seed := range seedRequests() {
		f.Add(seed)
		if len(seed) > 12 {
			f.Add(seed[:len(seed)/2]) // truncated body
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	s, err := New(Options{DataDir: f.TempDir(), Config: func() config.Broker {
		c := config.Default()
		c.LogRetentionCheckIntervalMs = 1 << 40
		return c
	}(), Logger: testLogger(f)})
	if err != nil {
		f.Fatal(err)
	}
	s.partitionLimit = 4
	f.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	f.Fuzz(func(t *testing.T, frameBytes []byte) {
		s.onPanic = func(r any) { t.Fatalf("handler panicked: %v", r) }
		c := newConn(s, discardConn{})
		c.cancel() // long polls return at once
		_ = c.handle(frame{buf: frameBytes, arrived: time.Now()})
	})
}
