package server

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

// Hostile input to the transaction APIs: every request gets a Kafka error
// code, the work and memory of a request are bounded by its size and by
// the coordinator's bounds (transaction.max.partitions, the 32,767-byte
// transactional id), nothing a refused request named is kept, and no
// handler panics (a panic fails the test through Server.onPanic).

// liveHeap is the heap in use after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// failOnPanic makes a handler panic fail t.
func failOnPanic(t *testing.T, ts *testServer) {
	var panics atomic.Int64
	ts.onPanic = func(r any) { panics.Add(1); t.Errorf("handler panicked: %v", r) }
	t.Cleanup(func() {
		if n := panics.Load(); n > 0 {
			t.Errorf("%d handler panics", n)
		}
	})
}

// call sends req on rc and decodes the answer (rc is used by one goroutine).
func (r *rawConn) call(req kmsg.Request) (kmsg.Response, error) {
	body := encodeRequest(req, 7)
	frame := append(kbin.AppendInt32(nil, int32(len(body))), body...)
	if _, err := r.nc.Write(frame); err != nil {
		return nil, err
	}
	b, ok := r.recv()
	if !ok {
		return nil, fmt.Errorf("%T v%d: connection closed", req, req.GetVersion())
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	rd := kbin.Reader{Src: b}
	if rd.Int32() != 7 {
		return nil, fmt.Errorf("correlation id mismatch")
	}
	rest := rd.Src
	if resp.IsFlexible() {
		rest = rest[1:]
	}
	return resp, resp.ReadFrom(rest)
}

// measuredCall sends req on a fresh connection and decodes the answer; alloc
// is what the process allocated from the request's send to the answer's
// last byte (the server's work; the request is encoded before and the
// answer decoded after).
func measuredCall(t *testing.T, addr string, req kmsg.Request) (kmsg.Response, uint64) {
	t.Helper()
	rc := dialRaw(t, addr)
	body := encodeRequest(req, 7)
	frame := append(kbin.AppendInt32(nil, int32(len(body))), body...)
	var answer []byte
	var ok bool
	alloc := allocatedDuring(func() {
		if _, err := rc.nc.Write(frame); err != nil {
			t.Fatalf("write: %v", err)
		}
		answer, ok = rc.recv()
	})
	if !ok {
		t.Fatalf("%T v%d: connection closed", req, req.GetVersion())
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	rd := kbin.Reader{Src: answer}
	_ = rd.Int32()
	rest := rd.Src
	if resp.IsFlexible() {
		rest = rest[1:]
	}
	if err := resp.ReadFrom(rest); err != nil {
		t.Fatalf("decode %T: %v", resp, err)
	}
	return resp, alloc
}

// initTxnProducer runs InitProducerId for a transactional id.
func initTxnProducer(t *testing.T, ts *testServer, id string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
	resp := roundTrip(t, ts.addr, req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("init producer id %q: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// addPartitionsReq is an AddPartitionsToTxn v3 (what clients send).
func addPartitionsReq(id string, pid int64, epoch int16, topic string, partitions []int32) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	return req
}

// addPartitionCodes maps an AddPartitionsToTxn v0-3 answer to a count per code.
func addPartitionCodes(resp *kmsg.AddPartitionsToTxnResponse) (map[int16]int, int) {
	codes, n := map[int16]int{}, 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[rp.ErrorCode]++
			n++
		}
	}
	return codes, n
}

func endTxnReq(id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnRequest {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return req
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return fmt.Sprint("error ", code)
}

// produceTxn sends one Produce with a transactional id and returns the
// partition's answer.
func produceTxn(t *testing.T, ts *testServer, id, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := roundTrip(t, ts.addr, req).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

// TestTxnHostileHugeTransactionalID sends a 1 MiB transactional id to every
// API that takes one (flexible versions: the id's length is a varint). The
// coordinator refuses ids over 32,767 bytes with INVALID_REQUEST
// (DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND); bound: at most 48 MiB allocated by
// the process per 1 MiB request (client encoding included), and no id kept
// (live heap within 4 MiB of where it was, no transactional id held).
func TestTxnHostileHugeTransactionalID(t *testing.T) {
	ts := startServer(t, "", nil)
	failOnPanic(t, ts)
	createTopic(t, newClient(t, ts.addr), "huge-id", 1)
	id := strings.Repeat("x", 1<<20)

	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.SetVersion(4)
	initReq.TransactionalID, initReq.TransactionTimeoutMillis = &id, 60000
	addV4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	addV4.SetVersion(4)
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = id, 1, true
	tx.Topics = append(tx.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: "huge-id", Partitions: []int32{0}})
	addV4.Transactions = append(addV4.Transactions, tx)
	offsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	offsets.SetVersion(3)
	offsets.TransactionalID, offsets.ProducerID, offsets.Group = id, 1, "g"
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.SetVersion(3)
	commit.TransactionalID, commit.ProducerID, commit.Group = id, 1, "g"
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "huge-id"
	ct.Partitions = append(ct.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
	commit.Topics = append(commit.Topics, ct)
	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = []string{id}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.SetVersion(4)
	find.CoordinatorType, find.CoordinatorKeys = 1, []string{id}

	cases := []struct {
		req  kmsg.Request
		want func(kmsg.Response) int16
		code int16
	}{
		{initReq, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, kerr.InvalidRequest.Code},
		{addPartitionsReq(id, 1, 0, "huge-id", []int32{0}), func(r kmsg.Response) int16 {
			return r.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
		}, kerr.InvalidRequest.Code},
		{addV4, func(r kmsg.Response) int16 {
			return r.(*kmsg.AddPartitionsToTxnResponse).Transactions[0].Topics[0].Partitions[0].ErrorCode
		}, kerr.InvalidRequest.Code},
		{offsets, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }, kerr.InvalidRequest.Code},
		{endTxnReq(id, 1, 0, true), func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode }, kerr.InvalidRequest.Code},
		{commit, func(r kmsg.Response) int16 {
			return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}, kerr.InvalidRequest.Code},
		{describe, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
		}, kerr.TransactionalIDNotFound.Code},
		{find, func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode }, kerr.InvalidRequest.Code},
	}
	const allocBound = 48 << 20
	before := liveHeap()
	for _, c := range cases {
		name := fmt.Sprintf("%T v%d", c.req, c.req.GetVersion())
		resp, alloc := measuredCall(t, ts.addr, c.req)
		if got := c.want(resp); got != c.code {
			t.Errorf("%s with a 1 MiB transactional id: %s, want %s", name, codeName(got), codeName(c.code))
		}
		if alloc > allocBound {
			t.Errorf("%s with a 1 MiB transactional id: %d bytes allocated, bound %d", name, alloc, allocBound)
		}
		t.Logf("%s: %s, %d KiB allocated", name, codeName(c.want(resp)), alloc>>10)
	}
	if grew := int64(liveHeap()) - int64(before); grew > 4<<20 {
		t.Errorf("live heap grew by %d bytes after the 1 MiB ids (bound 4 MiB)", grew)
	}
	if st := ts.txn.Stats(); st.TransactionalIDs != 0 {
		t.Errorf("the coordinator holds %d transactional ids after refusing every request", st.TransactionalIDs)
	}
	stillServes(t, ts.addr, "1 MiB transactional ids")
}

// TestTxnHostileManyPartitions adds 100,000 partitions in one
// AddPartitionsToTxn (v3 from a client, and v4 as a broker would): over
// transaction.max.partitions (10,000) every partition is answered
// INVALID_REQUEST and the transaction is untouched. Within the bound,
// 10,000 partitions of a topic that does not exist are answered
// UNKNOWN_TOPIC_OR_PARTITION and nothing is added. Bounds (the server's
// allocations from the request's arrival to its answer, which has an entry
// per partition named): 16 MiB for 100,000 partitions, 128 MiB for the
// 1,000,000 of a 4 MB request (the frame bound of the API); it was 310 MB
// before the handler refused over-long requests ahead of the coordinator.
// Live heap within 8 MiB afterwards.
func TestTxnHostileManyPartitions(t *testing.T) {
	ts := startServer(t, "", nil)
	failOnPanic(t, ts)
	createTopic(t, newClient(t, ts.addr), "many", 4)
	pid, epoch := initTxnProducer(t, ts, "many-parts")
	many := make([]int32, 100_000)
	for i := range many {
		many[i] = int32(i)
	}
	dups := make([]int32, 100_000) // partition 0, 100,000 times
	within := many[:10_000]

	v4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v4.SetVersion(4)
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = "many-parts", pid, epoch
	tx.Topics = append(tx.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: "many", Partitions: many})
	v4.Transactions = append(v4.Transactions, tx)

	before := liveHeap()
	for _, c := range []struct {
		name       string
		req        *kmsg.AddPartitionsToTxnRequest
		code       int16
		answered   int
		allocBound uint64
	}{
		{"100,000 partitions", addPartitionsReq("many-parts", pid, epoch, "many", many), kerr.InvalidRequest.Code, 100_000, 16 << 20},
		{"partition 0 named 100,000 times", addPartitionsReq("many-parts", pid, epoch, "many", dups), kerr.InvalidRequest.Code, 100_000, 16 << 20},
		{"10,000 partitions of a missing topic", addPartitionsReq("many-parts", pid, epoch, "missing", within), kerr.UnknownTopicOrPartition.Code, 10_000, 16 << 20},
		{"v4, 100,000 partitions", v4, kerr.InvalidRequest.Code, 100_000, 16 << 20},
		{"1,000,000 partitions (a 4 MB request)", addPartitionsReq("many-parts", pid, epoch, "many", make([]int32, 1_000_000)), kerr.InvalidRequest.Code, 1_000_000, 128 << 20},
	} {
		answer, alloc := measuredCall(t, ts.addr, c.req)
		r := answer.(*kmsg.AddPartitionsToTxnResponse)
		codes, n := addPartitionCodes(r)
		for _, tr := range r.Transactions {
			for _, rt := range tr.Topics {
				for _, rp := range rt.Partitions {
					codes[rp.ErrorCode]++
					n++
				}
			}
		}
		if n != c.answered || codes[c.code] != n {
			t.Errorf("%s: %d answers %v, want %d of %s", c.name, n, codes, c.answered, codeName(c.code))
		}
		if alloc > c.allocBound {
			t.Errorf("%s: %d bytes allocated, bound %d", c.name, alloc, c.allocBound)
		}
		t.Logf("%s: %d answers %s, %d KiB allocated", c.name, n, codeName(c.code), alloc>>10)
	}
	if grew := int64(liveHeap()) - int64(before); grew > 8<<20 {
		t.Errorf("live heap grew by %d bytes after the requests (bound 8 MiB)", grew)
	}
	if st := describeTxn(t, ts.addr, "many-parts"); st.State != "Empty" || len(st.Topics) != 0 {
		t.Errorf("after refused AddPartitionsToTxn: state %s with %d topics, want Empty with none", st.State, len(st.Topics))
	}
	// The producer still works: a real transaction over the 4 partitions.
	r := roundTrip(t, ts.addr, addPartitionsReq("many-parts", pid, epoch, "many", []int32{0, 1, 2, 3})).(*kmsg.AddPartitionsToTxnResponse)
	if codes, n := addPartitionCodes(r); n != 4 || codes[0] != 4 {
		t.Fatalf("adding 4 partitions after the refusals: %v", codes)
	}
	if code := roundTrip(t, ts.addr, endTxnReq("many-parts", pid, epoch, false)).(*kmsg.EndTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("abort: %s", codeName(code))
	}
}

// TestTxnEndTxnStorm: 20 rounds, each opening a transaction with one
// record and then sending it 200 concurrent EndTxn from 16 connections
// (commits and aborts mixed, some with a stale epoch or an unknown
// producer id): 4,000 EndTxn. Invariants per round: each answer is one of
// NONE, INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED,
// INVALID_PRODUCER_ID_MAPPING; the answers NONE all name one outcome (the
// one that won; a retry of it is NONE, the other INVALID_TXN_STATE);
// stale and unknown producers never get NONE; the transaction ends
// (last stable offset = high watermark). At the end read_committed shows
// exactly the records of the rounds whose commit won and read_uncommitted
// every record; live heap within 16 MiB of the start.
func TestTxnEndTxnStorm(t *testing.T) {
	ts := startServer(t, "", nil)
	failOnPanic(t, ts)
	cl := newClient(t, ts.addr)
	createTopic(t, cl, "storm", 1)
	const id, rounds, perRound, conns = "storm", 20, 200, 16
	initTxnProducer(t, ts, id)
	pid, epoch := initTxnProducer(t, ts, id) // epoch 1: epoch 0 is a stale one
	rcs := make([]*rawConn, conns)
	for i := range rcs {
		rcs[i] = dialRaw(t, ts.addr)
	}
	allowed := map[int16]bool{0: true, kerr.InvalidTxnState.Code: true, kerr.ConcurrentTransactions.Code: true,
		kerr.ProducerFenced.Code: true, kerr.InvalidProducerIDMapping.Code: true}
	h := newTxnHistory()
	before := liveHeap()
	for round := 0; round < rounds; round++ {
		if r := roundTrip(t, ts.addr, addPartitionsReq(id, pid, epoch, "storm", []int32{0})).(*kmsg.AddPartitionsToTxnResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("round %d: add partition: %s", round, codeName(r.Topics[0].Partitions[0].ErrorCode))
		}
		value := fmt.Sprintf("storm-%d", round)
		if sp := produceTxn(t, ts, id, "storm", withAttributes(makeBatch(pid, epoch, int32(round), 1, value), 0x10)); sp.ErrorCode != 0 {
			t.Fatalf("round %d: transactional produce: %s", round, codeName(sp.ErrorCode))
		}
		value += "a" // makeBatch's first record
		var (
			mu                  sync.Mutex
			commitOK, abortOK   int
			codes               = map[int16]int{}
			wg                  sync.WaitGroup
			strangerOK, callErr error
		)
		for c := 0; c < conns; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := c; i < perRound; i += conns {
					commit := i%2 == 0
					reqPID, reqEpoch, stranger := pid, epoch, false
					switch i % 10 {
					case 3:
						reqEpoch, stranger = epoch-1, true // a stale epoch (a zombie)
					case 7:
						reqPID, stranger = pid+1000, true // a producer id the coordinator never gave
					}
					r, err := rcs[c].call(endTxnReq(id, reqPID, reqEpoch, commit))
					mu.Lock()
					if err != nil {
						callErr = err
					} else {
						code := r.(*kmsg.EndTxnResponse).ErrorCode
						codes[code]++
						switch {
						case code == 0 && stranger:
							strangerOK = fmt.Errorf("EndTxn with producer %d epoch %d answered NONE", reqPID, reqEpoch)
						case code == 0 && commit:
							commitOK++
						case code == 0:
							abortOK++
						}
					}
					mu.Unlock()
				}
			}(c)
		}
		wg.Wait()
		if callErr != nil {
			t.Fatalf("round %d: %v", round, callErr)
		}
		if strangerOK != nil {
			t.Errorf("round %d: %v", round, strangerOK)
		}
		for code, n := range codes {
			if !allowed[code] {
				t.Errorf("round %d: %d answers %s", round, n, codeName(code))
			}
		}
		switch {
		case commitOK > 0 && abortOK > 0:
			t.Errorf("round %d: %d commits and %d aborts answered NONE", round, commitOK, abortOK)
		case commitOK > 0:
			h.committed[value] = true
		case abortOK > 0:
			h.aborted[value] = true
		default:
			t.Errorf("round %d: no EndTxn answered NONE: %v", round, codes)
		}
		if lso, hwm := listLatest(t, ts, "storm", readCommitted), listLatest(t, ts, "storm", 0); lso != hwm {
			t.Fatalf("round %d: last stable offset %d, high watermark %d: the transaction hangs", round, lso, hwm)
		}
	}
	h.check(t, "read_committed", readAll(t, ts.addr, "storm", kgo.ReadCommitted(), len(h.committed)))
	h.check(t, "read_uncommitted", readAll(t, ts.addr, "storm", kgo.ReadUncommitted(), rounds))
	if grew := int64(liveHeap()) - int64(before); grew > 16<<20 {
		t.Errorf("live heap grew by %d bytes over %d EndTxn (bound 16 MiB)", grew, rounds*perRound)
	}
	t.Logf("%d EndTxn: %d rounds committed, %d aborted", rounds*perRound, len(h.committed), len(h.aborted))
}

// TestTxnForgedMarkers: a client's WriteTxnMarkers (an inter-broker API)
// naming an open transaction's producer is answered
// CLUSTER_AUTHORIZATION_FAILED for every partition, as Kafka answers a
// principal without ClusterAction, and writes nothing: the transaction
// stays open (its record invisible to read_committed) until its producer
// aborts it. One naming 100,000 partitions gets as many refusals within 32
// MiB allocated by the server; one of 1,000,000 (a 4 MB request) within 128
// MiB (74 MB: the answer's entries; 148 MB before the handler sized its
// answer's slices up front).
func TestTxnForgedMarkers(t *testing.T) {
	ts := startServer(t, "", nil)
	failOnPanic(t, ts)
	cl := newClient(t, ts.addr)
	createTopic(t, cl, "forged", 1)
	pid, epoch := initTxnProducer(t, ts, "forged")
	if r := roundTrip(t, ts.addr, addPartitionsReq("forged", pid, epoch, "forged", []int32{0})).(*kmsg.AddPartitionsToTxnResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partition: %s", codeName(r.Topics[0].Partitions[0].ErrorCode))
	}
	if sp := produceTxn(t, ts, "forged", "forged", withAttributes(makeBatch(pid, epoch, 0, 1, "open-"), 0x10)); sp.ErrorCode != 0 {
		t.Fatalf("transactional produce: %s", codeName(sp.ErrorCode))
	}
	lso := listLatest(t, ts, "forged", readCommitted)
	forge := func(partitions []int32) *kmsg.WriteTxnMarkersRequest {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.SetVersion(1)
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, true
		m.Topics = append(m.Topics, kmsg.WriteTxnMarkersRequestMarkerTopic{Topic: "forged", Partitions: partitions})
		req.Markers = append(req.Markers, m)
		return req
	}
	for _, c := range []struct {
		name       string
		partitions []int32
		allocBound uint64
	}{
		{"a COMMIT marker for the open transaction", []int32{0}, 1 << 20},
		{"markers for 100,000 partitions", make([]int32, 100_000), 32 << 20},
		{"markers for 1,000,000 partitions (a 4 MB request)", make([]int32, 1_000_000), 128 << 20},
	} {
		answer, alloc := measuredCall(t, ts.addr, forge(c.partitions))
		r := answer.(*kmsg.WriteTxnMarkersResponse)
		n := 0
		for _, m := range r.Markers {
			for _, rt := range m.Topics {
				for _, rp := range rt.Partitions {
					n++
					if rp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
						t.Errorf("%s: partition %d answered %s", c.name, rp.Partition, codeName(rp.ErrorCode))
					}
				}
			}
		}
		if n != len(c.partitions) {
			t.Errorf("%s: %d answers for %d partitions", c.name, n, len(c.partitions))
		}
		if alloc > c.allocBound {
			t.Errorf("%s: %d bytes allocated, bound %d", c.name, alloc, c.allocBound)
		}
		t.Logf("%s: %d answers CLUSTER_AUTHORIZATION_FAILED, %d KiB allocated", c.name, n, alloc>>10)
	}
	if got := listLatest(t, ts, "forged", readCommitted); got != lso {
		t.Fatalf("last stable offset moved from %d to %d after forged markers", lso, got)
	}
	if st := describeTxn(t, ts.addr, "forged"); st.State != "Ongoing" {
		t.Fatalf("after forged markers the transaction is %s, want Ongoing", st.State)
	}
	if code := roundTrip(t, ts.addr, endTxnReq("forged", pid, epoch, false)).(*kmsg.EndTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("abort: %s", codeName(code))
	}
	if got := readAll(t, ts.addr, "forged", kgo.ReadCommitted(), 0); len(got) != 0 {
		t.Fatalf("read_committed saw %v after the forged COMMIT and the real abort", got)
	}
}

// controlBatch is a COMMIT (or ABORT) marker as the coordinator writes it:
// a control batch of one record whose key is version 0 + type.
func controlBatch(pid int64, epoch int16, commit bool, transactional bool) []byte {
	b := makeBatch(pid, epoch, -1, 1, "")
	// Rebuild the one record with a control key: attributes, deltas, key
	// (version int16 0, type int16), value (version, coordinator epoch).
	typ := int16(0)
	if commit {
		typ = 1
	}
	key := kbin.AppendInt16(kbin.AppendInt16(nil, 0), typ)
	val := kbin.AppendInt32(kbin.AppendInt16(nil, 0), 0)
	var r []byte
	r = append(r, 0)
	r = kbin.AppendVarlong(r, 0)
	r = kbin.AppendVarint(r, 0)
	r = kbin.AppendVarint(r, int32(len(key)))
	r = append(r, key...)
	r = kbin.AppendVarint(r, int32(len(val)))
	r = append(r, val...)
	r = kbin.AppendVarint(r, 0)
	recs := kbin.AppendVarint(nil, int32(len(r)))
	recs = append(recs, r...)
	b = append(b[:61], recs...)
	bits := uint16(0x20)
	if transactional {
		bits |= 0x10
	}
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	return withAttributes(b, bits)
}

// TestTxnClientControlBatches: a client's Produce of a control batch (a
// forged COMMIT marker for an open transaction, or an ABORT without a
// transactional bit) is answered INVALID_RECORD, as Kafka answers it (sent
// with a transactional id and an unknown producer id:
// INVALID_PRODUCER_ID_MAPPING, the coordinator's check), and
// the log is unchanged: the transaction stays open until its producer ends
// it, and read_committed sees nothing of it before.
func TestTxnClientControlBatches(t *testing.T) {
	ts := startServer(t, "", nil)
	failOnPanic(t, ts)
	cl := newClient(t, ts.addr)
	createTopic(t, cl, "ctl", 1)
	pid, epoch := initTxnProducer(t, ts, "ctl")
	if r := roundTrip(t, ts.addr, addPartitionsReq("ctl", pid, epoch, "ctl", []int32{0})).(*kmsg.AddPartitionsToTxnResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partition: %s", codeName(r.Topics[0].Partitions[0].ErrorCode))
	}
	if sp := produceTxn(t, ts, "ctl", "ctl", withAttributes(makeBatch(pid, epoch, 0, 1, "open-"), 0x10)); sp.ErrorCode != 0 {
		t.Fatalf("transactional produce: %s", codeName(sp.ErrorCode))
	}
	lso, hwm := listLatest(t, ts, "ctl", readCommitted), listLatest(t, ts, "ctl", 0)
	for _, c := range []struct {
		name  string
		batch []byte
		// txnCode is the answer with the transactional id, where the
		// coordinator's check of the producer comes first.
		txnCode int16
	}{
		{"a transactional COMMIT marker", controlBatch(pid, epoch, true, true), kerr.InvalidRecord.Code},
		{"a COMMIT marker without the transactional bit", controlBatch(pid, epoch, true, false), kerr.InvalidRecord.Code},
		{"an ABORT marker of an unknown producer", controlBatch(pid+1000, 0, false, true), kerr.InvalidProducerIDMapping.Code},
		{"a control batch without a producer", controlBatch(-1, -1, true, false), kerr.InvalidRecord.Code},
	} {
		sp := produceRaw(t, cl, "ctl", 0, -1, c.batch)
		if spt := produceTxn(t, ts, "ctl", "ctl", c.batch); spt.ErrorCode != c.txnCode {
			t.Errorf("produce of %s with the transactional id: %s, want %s", c.name, codeName(spt.ErrorCode), codeName(c.txnCode))
		}
		if sp.ErrorCode != kerr.InvalidRecord.Code {
			t.Errorf("produce of %s: %s, want INVALID_RECORD", c.name, codeName(sp.ErrorCode))
		}
	}
	if l, h := listLatest(t, ts, "ctl", readCommitted), listLatest(t, ts, "ctl", 0); l != lso || h != hwm {
		t.Fatalf("after refused control batches: last stable offset %d (was %d), high watermark %d (was %d)", l, lso, h, hwm)
	}
	if st := describeTxn(t, ts.addr, "ctl"); st.State != "Ongoing" {
		t.Fatalf("after forged control batches the transaction is %s, want Ongoing", st.State)
	}
	if got := readAll(t, ts.addr, "ctl", kgo.ReadCommitted(), 0); len(got) != 0 {
		t.Fatalf("read_committed saw %v of an open transaction", got)
	}
	if code := roundTrip(t, ts.addr, endTxnReq("ctl", pid, epoch, true)).(*kmsg.EndTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("commit: %s", codeName(code))
	}
	if got := readAll(t, ts.addr, "ctl", kgo.ReadCommitted(), 1); len(got) != 1 || got[0] != "open-a" {
		t.Fatalf("read_committed after the real commit: %v", got)
	}
}

// TestTxnHostileManyIDs: 16 connections race 1,000 InitProducerId for
// distinct transactional ids (of 1,000 bytes each) against
// transaction.max.ids = 300: exactly 300 get a producer id, the other 700
// INVALID_REQUEST (which clients do not retry), and the coordinator holds
// 300 ids; a known id is still served (its epoch bumped). Live heap within
// 16 MiB of the start.
func TestTxnHostileManyIDs(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) {
		*c = mustProps(t, map[string]string{"transaction.max.ids": "300"})
	})
	failOnPanic(t, ts)
	const conns, ids = 16, 1000
	before := liveHeap()
	var (
		mu    sync.Mutex
		codes = map[int16]int{}
		first string
		wg    sync.WaitGroup
		fail  error
	)
	for c := 0; c < conns; c++ {
		rc := dialRaw(t, ts.addr)
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < ids; i += conns {
				id := fmt.Sprintf("%04d-%s", i, strings.Repeat("i", 995))
				req := kmsg.NewPtrInitProducerIDRequest()
				req.SetVersion(4)
				req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
				r, err := rc.call(req)
				mu.Lock()
				if err != nil {
					fail = err
				} else {
					code := r.(*kmsg.InitProducerIDResponse).ErrorCode
					codes[code]++
					if code == 0 && first == "" {
						first = id
					}
				}
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	if fail != nil {
		t.Fatal(fail)
	}
	if codes[0] != 300 || codes[kerr.InvalidRequest.Code] != ids-300 {
		t.Errorf("InitProducerId answers %v, want 300 NONE and %d INVALID_REQUEST", codes, ids-300)
	}
	if st := ts.txn.Stats(); st.TransactionalIDs != 300 {
		t.Errorf("the coordinator holds %d transactional ids, want 300", st.TransactionalIDs)
	}
	if _, epoch := initTxnProducer(t, ts, first); epoch != 1 {
		t.Errorf("a held id after the refusals: epoch %d, want 1", epoch)
	}
	if grew := int64(liveHeap()) - int64(before); grew > 16<<20 {
		t.Errorf("live heap grew by %d bytes for 300 ids of 1,000 bytes (bound 16 MiB)", grew)
	}
	t.Logf("InitProducerId answers: %v", codes)
}

// TestTxnHostileAdminLists: the transaction admin APIs with 4 MB requests
// of tiny entries (frame bound: 4 MiB). Bounds, of the server's
// allocations: 128 MiB per request (~32 bytes per request byte; kmsg's
// decoding alone is 16 bytes per 1-byte string). ListTransactions with
// 3,900,000 unknown state names allocated 650 MB (an error value per name,
// and every name answered back): each distinct unknown name is now
// answered once.
func TestTxnHostileAdminLists(t *testing.T) {
	ts := startServer(t, "", nil)
	failOnPanic(t, ts)
	createTopic(t, newClient(t, ts.addr), "admin-lists", 1)
	pid, epoch := initTxnProducer(t, ts, "listed")
	if r := roundTrip(t, ts.addr, addPartitionsReq("listed", pid, epoch, "admin-lists", []int32{0})).(*kmsg.AddPartitionsToTxnResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partition: %s", codeName(r.Topics[0].Partitions[0].ErrorCode))
	}
	const bound = 128 << 20
	check := func(name string, alloc uint64) {
		t.Helper()
		if alloc > bound {
			t.Errorf("%s: %d bytes allocated, bound %d", name, alloc, bound)
		}
		t.Logf("%s: %d KiB allocated", name, alloc>>10)
	}

	list := kmsg.NewPtrListTransactionsRequest()
	list.SetVersion(1)
	list.StateFilters = append(make([]string, 3_900_000), "Ongoing", "nonsense")
	answer, alloc := measuredCall(t, ts.addr, list)
	check("ListTransactions, 3,900,000 empty state names and Ongoing", alloc)
	lr := answer.(*kmsg.ListTransactionsResponse)
	if lr.ErrorCode != 0 || strings.Join(lr.UnknownStateFilters, ",") != ",nonsense" || len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionalID != "listed" {
		t.Errorf("ListTransactions: error %s, %d unknown state names (first %q), %d states, want [\"\" nonsense] and listed",
			codeName(lr.ErrorCode), len(lr.UnknownStateFilters), lr.UnknownStateFilters[:min(3, len(lr.UnknownStateFilters))], len(lr.TransactionStates))
	}

	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = append(make([]string, 3_900_000), "listed")
	answer, alloc = measuredCall(t, ts.addr, describe)
	check("DescribeTransactions, 3,900,000 empty ids and one known", alloc)
	found := 0
	for _, st := range answer.(*kmsg.DescribeTransactionsResponse).TransactionStates {
		if st.ErrorCode == 0 {
			found++
			if st.TransactionalID != "listed" || st.State != "Ongoing" {
				t.Errorf("DescribeTransactions answered %+v", st)
			}
		}
	}
	if found != 1 {
		t.Errorf("DescribeTransactions: %d ids found, want 1", found)
	}

	producers := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "admin-lists", make([]int32, 1_000_000)
	producers.Topics = append(producers.Topics, rt)
	_, alloc = measuredCall(t, ts.addr, producers)
	check("DescribeProducers, partition 0 named 1,000,000 times", alloc)
	stillServes(t, ts.addr, "4 MB transaction admin requests")
}
