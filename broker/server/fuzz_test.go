package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/txn"
)

// discardConn is a net.Conn that counts and drops every write and never has
// data.
type discardConn struct{ written *int64 }

func (discardConn) Read([]byte) (int, error) { return 0, net.ErrClosed }
func (c discardConn) Write(b []byte) (int, error) {
	*c.written += int64(len(b))
	return len(b), nil
}
func (discardConn) Close() error                     { return nil }
func (discardConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (discardConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (discardConn) SetDeadline(time.Time) error      { return nil }
func (discardConn) SetReadDeadline(time.Time) error  { return nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// seedRequests returns one encoded request frame (without size prefix) per
// served API and version, with a topic and a partition filled in where the
// API has them, so the fuzzer starts from every decoder path.
func seedRequests() [][]byte { return seedRequestsFor(0, 0) }

// seedRequestsFor is seedRequests with the transaction APIs' requests
// naming producer pid at epoch (the fuzz server's transactional producer),
// and a transactional Produce of theirs.
func seedRequestsFor(pid int64, epoch int16) [][]byte {
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
				if v >= 3 {
					// The same partition again, transactional (the seeds
					// are fuzzed, not checked: a repeated partition is
					// one more path).
					tx := kmsg.NewProduceRequestTopicPartition()
					tx.Records = withAttributes(makeBatch(pid, epoch, 0, 2, "txn"), attrTransactionalBit)
					rt2 := kmsg.NewProduceRequestTopic()
					rt2.Topic, rt2.Partitions = "fuzz", []kmsg.ProduceRequestTopicPartition{tx}
					r.Topics = append(r.Topics, rt2)
					r.TransactionID = kmsg.StringPtr(fuzzTxnID)
				}
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
			default:
				seedTxnRequest(req, pid, epoch)
			}
			out = append(out, encodeRequest(req, int32(a.key)*100+int32(v)))
		}
	}
	return out
}

// fuzzTxnID is the fuzz server's transactional id, with a transaction open
// on topic "fuzz" partition 0 when fuzzing starts.
const fuzzTxnID = "fuzz-txn"

// seedTxnRequest fills the transaction APIs' requests with the fuzz
// transactional id, its producer id and epoch, topic "fuzz" partition 0 and
// group "fuzz-group", so the fuzzer starts from requests the coordinator
// acts on rather than refuses at the first field.
func seedTxnRequest(req kmsg.Request, pid int64, epoch int16) {
	const id, group = fuzzTxnID, "fuzz-group"
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		r.TransactionalID = kmsg.StringPtr(id)
		r.TransactionTimeoutMillis = 60000
	case *kmsg.AddPartitionsToTxnRequest:
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "fuzz", []int32{0}
		if r.Version < 4 {
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = id, pid, epoch
			r.Topics = append(r.Topics, rt)
			return
		}
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
		tx.Topics = append(tx.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: "fuzz", Partitions: []int32{0}})
		r.Transactions = append(r.Transactions, tx)
	case *kmsg.AddOffsetsToTxnRequest:
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = id, pid, epoch, group
	case *kmsg.EndTxnRequest:
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = id, pid, epoch, true
	case *kmsg.WriteTxnMarkersRequest:
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, true
		m.Topics = append(m.Topics, kmsg.WriteTxnMarkersRequestMarkerTopic{Topic: "fuzz", Partitions: []int32{0}})
		r.Markers = append(r.Markers, m)
	case *kmsg.TxnOffsetCommitRequest:
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = id, pid, epoch, group
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "fuzz"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
	case *kmsg.DescribeTransactionsRequest:
		r.TransactionalIDs = []string{id, "fuzz-missing"}
	case *kmsg.ListTransactionsRequest:
		r.StateFilters = []string{"Ongoing"}
	case *kmsg.DescribeProducersRequest:
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = "fuzz", []int32{0}
		r.Topics = append(r.Topics, rt)
	}
}

// fuzzServer is a real server on a temp dir for fuzzing the handler, with
// topic "fuzz" (1 partition) and a transaction of fuzzTxnID open on it; it
// returns the transaction's producer id and epoch.
func fuzzServer(f *testing.F) (*Server, int64, int16) {
	// __transaction_state gets 4 partitions (Kafka's default 50 would make
	// the first transactional request create 50 logs inside one target's
	// allocation budget), so the transaction handlers are reached.
	cfg, err := config.FromProperties(map[string]string{"transaction.state.log.num.partitions": "4"})
	if err != nil {
		f.Fatal(err)
	}
	cfg.LogRetentionCheckIntervalMs = 1 << 40
	cfg.FetchMaxBytes = 256 << 10
	// A handler's log line would reach f.Log from inside the fuzz target,
	// which the testing package forbids: the fuzz server's logs are dropped
	// (the target checks answers and panics, not log lines).
	s, err := New(Options{DataDir: f.TempDir(), Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	s.partitionLimit = 4
	f.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(5)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fuzz", 1, 1
	create.Topics = append(create.Topics, rt)
	var written int64
	if err := newConn(s, discardConn{&written}).handle(frame{buf: encodeRequest(create, 1), arrived: time.Now()}); err != nil {
		f.Fatalf("create topic fuzz: %v", err)
	}
	init := s.txn.InitProducerID(fuzzTxnID, 60_000, -1, -1)
	if init.ErrorCode != 0 {
		f.Fatalf("init producer id: error %d", init.ErrorCode)
	}
	codes := s.txn.AddPartitions(fuzzTxnID, init.ProducerID, init.Epoch, []txn.TopicPartition{{Topic: "fuzz", Partition: 0}})
	if code := codes[txn.TopicPartition{Topic: "fuzz", Partition: 0}]; code != 0 {
		f.Fatalf("open the fuzz transaction on fuzz[0]: error %d", code)
	}
	return s, init.ProducerID, init.Epoch
}

// fuzzHangAfter is how long one request may take in a fuzz target.
const fuzzHangAfter = 10 * time.Second

// handleFrame runs one frame through a connection's handler, failing t on a
// handler panic, or on an answer or allocations out of proportion with the
// request: every request is hostile until bounded. (The fuzz server's
// topics have at most 4 partitions and its fetch.max.bytes is 256 KiB.)
func handleFrame(t *testing.T, s *Server, frameBytes []byte) {
	s.onPanic = func(r any) { t.Fatalf("handler panicked: %v", r) }
	var written int64
	c := newConn(s, discardConn{&written})
	c.cancel() // long polls return at once
	answerMax := int64(2<<20 + 64*len(frameBytes))
	allocMax := uint64(64<<20 + 256*len(frameBytes))
	// A handler that never answers is a hang the fuzzer would only see as
	// executions stopping: crash the worker so the input is kept.
	hang := time.AfterFunc(fuzzHangAfter, func() {
		panic(fmt.Sprintf("the handler did not answer a %d-byte request in %v", len(frameBytes), fuzzHangAfter))
	})
	alloc := allocatedDuring(func() { _ = c.handle(frame{buf: frameBytes, arrived: time.Now()}) })
	hang.Stop()
	if written > answerMax {
		t.Fatalf("a %d-byte request got a %d-byte answer", len(frameBytes), written)
	}
	if alloc > allocMax {
		t.Fatalf("a %d-byte request allocated %d bytes", len(frameBytes), alloc)
	}
}

// fuzzAPI fuzzes one API's decoder and handler: the first input byte picks
// the version among those served, the rest is the request body.
func fuzzAPI(f *testing.F, key int16) {
	a := lookupAPI(key)
	s, pid, epoch := fuzzServer(f)
	for _, seed := range seedRequestsFor(pid, epoch) {
		r := kbin.Reader{Src: seed}
		if k, v := r.Int16(), r.Int16(); k == key {
			_ = r.Int32()
			_ = r.NullableString()
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			body := r.Src
			if req.IsFlexible() {
				body = body[1:]
			}
			f.Add(append([]byte{byte(v - a.advertisedMin)}, body...))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		v := a.advertisedMin + int16(data[0])%(a.max-a.advertisedMin+1)
		req := kmsg.RequestForKey(key)
		req.SetVersion(v)
		hdr := kbin.AppendInt16(nil, key)
		hdr = kbin.AppendInt16(hdr, v)
		hdr = kbin.AppendInt32(hdr, 1)
		hdr = kbin.AppendNullableString(hdr, nil)
		if req.IsFlexible() {
			hdr = append(hdr, 0)
		}
		handleFrame(t, s, append(hdr, data[1:]...))
	})
}

func FuzzProduce(f *testing.F)         { fuzzAPI(f, 0) }
func FuzzFetch(f *testing.F)           { fuzzAPI(f, 1) }
func FuzzListOffsets(f *testing.F)     { fuzzAPI(f, 2) }
func FuzzMetadata(f *testing.F)        { fuzzAPI(f, 3) }
func FuzzApiVersions(f *testing.F)     { fuzzAPI(f, 18) }
func FuzzCreateTopics(f *testing.F)    { fuzzAPI(f, 19) }
func FuzzDeleteTopics(f *testing.F)    { fuzzAPI(f, 20) }
func FuzzInitProducerID(f *testing.F)  { fuzzAPI(f, 22) }
func FuzzDescribeConfigs(f *testing.F) { fuzzAPI(f, 32) }

// The transaction APIs.
func FuzzAddPartitionsToTxn(f *testing.F)   { fuzzAPI(f, 24) }
func FuzzAddOffsetsToTxn(f *testing.F)      { fuzzAPI(f, 25) }
func FuzzEndTxn(f *testing.F)               { fuzzAPI(f, 26) }
func FuzzWriteTxnMarkers(f *testing.F)      { fuzzAPI(f, 27) }
func FuzzTxnOffsetCommit(f *testing.F)      { fuzzAPI(f, 28) }
func FuzzDescribeProducers(f *testing.F)    { fuzzAPI(f, 61) }
func FuzzDescribeTransactions(f *testing.F) { fuzzAPI(f, 65) }
func FuzzListTransactions(f *testing.F)     { fuzzAPI(f, 66) }

// FuzzRequest feeds arbitrary frames (header included) to the request
// handler of a real server: whatever the bytes, the handler answers or asks
// to close the connection, and never panics.
func FuzzRequest(f *testing.F) {
	s, pid, epoch := fuzzServer(f)
	for _, seed := range seedRequestsFor(pid, epoch) {
		f.Add(seed)
		if len(seed) > 12 {
			f.Add(seed[:len(seed)/2]) // truncated body
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, frameBytes []byte) { handleFrame(t, s, frameBytes) })
}
