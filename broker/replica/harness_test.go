package replica_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/replica"
	"github.com/sluicehq/sluice/broker/server"
)

// testCluster is a few in-process servers (single-node mode each, the same
// topic created on each) with a replica.Manager each, wired by real TCP. A
// small in-memory controller stands in for ZooKeeper: it holds each
// partition's state with a version, refuses stale AlterISR writes and
// delivers every new state to every live broker's Manager, as the watch of
// broker/cluster does.
type testCluster struct {
	t      *testing.T
	topic  string
	parts  int32
	minISR int
	opts   replica.Options // template: timings

	mu    sync.Mutex
	nodes map[int32]*testNode
	dirs  map[int32]string
	state map[int32]replica.State // by partition

	deliverMu sync.Mutex // one delivery at a time, in version order per partition

	hwMu sync.Mutex
	hws  map[string]int64 // "node/partition" -> highest HW seen
	bad  []string         // HW went backwards
}

type testNode struct {
	id   int32
	srv  *server.Server
	mgr  *replica.Manager
	addr string
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

// newCluster starts brokers 1..n, creates topic with parts partitions on
// each and leaves them without roles.
func newCluster(t *testing.T, n int, parts int32, minISR int, lagTimeMax time.Duration) *testCluster {
	return newClusterWith(t, n, parts, minISR, lagTimeMax, nil)
}

// newClusterWith is newCluster with the Options template changed by tweak.
func newClusterWith(t *testing.T, n int, parts int32, minISR int, lagTimeMax time.Duration, tweak func(*replica.Options)) *testCluster {
	c := &testCluster{t: t, topic: "replicated", parts: parts, minISR: minISR,
		opts: replica.Options{LagTimeMax: lagTimeMax, FetchWaitMax: 100 * time.Millisecond, FetchBackoff: 20 * time.Millisecond,
			RequestTimeout: 5 * time.Second},
		nodes: map[int32]*testNode{}, dirs: map[int32]string{}, state: map[int32]replica.State{}, hws: map[string]int64{}}
	if tweak != nil {
		tweak(&c.opts)
	}
	for id := int32(1); id <= int32(n); id++ {
		c.dirs[id] = t.TempDir()
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range c.live() {
			c.stop(id)
		}
	})
	return c
}

// start starts broker id on its data directory and applies the current states.
func (c *testCluster) start(id int32) {
	t := c.t
	cfg := config.Default()
	cfg.NodeID = id
	srv, err := server.New(server.Options{DataDir: c.dirs[id], Config: cfg, Replicated: true, Logger: testLogger(t).With("node", id)})
	if err != nil {
		t.Fatalf("start broker %d: %v", id, err)
	}
	opts := c.opts
	opts.BrokerID = id
	opts.Log = srv.PartitionLog
	opts.Addr = c.addr
	opts.AlterISR = c.alterISR
	opts.MinInSync = func(string) int { return c.minISR }
	opts.Logger = testLogger(t).With("node", id)
	mgr := replica.New(opts)
	srv.SetReplicas(mgr)
	addr, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node := &testNode{id: id, srv: srv, mgr: mgr, addr: addr.String()}
	adm := kadm.NewClient(c.client(node.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, c.parts, 1, nil, c.topic); err != nil && !errors.Is(err, kerrTopicExists) {
		t.Fatalf("create topic on broker %d: %v", id, err)
	}
	adm.Close()
	c.mu.Lock()
	c.nodes[id] = node
	states := c.statesLocked()
	c.mu.Unlock()
	c.deliverMu.Lock()
	mgr.Apply(states)
	c.deliverMu.Unlock()
}

// stop shuts broker id down cleanly (its Manager first).
func (c *testCluster) stop(id int32) {
	c.mu.Lock()
	node := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if node == nil {
		return
	}
	c.sampleHW()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := node.srv.Shutdown(ctx); err != nil {
		c.t.Errorf("shutdown broker %d: %v", id, err)
	}
}

func (c *testCluster) client(addr string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *testCluster) addr(id int32) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[id]
	if n == nil {
		return "", false
	}
	return n.addr, true
}

func (c *testCluster) node(id int32) *testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *testCluster) live() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []int32
	for id := range c.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (c *testCluster) statesLocked() []replica.State {
	var out []replica.State
	for p := int32(0); p < c.parts; p++ {
		if st, ok := c.state[p]; ok {
			out = append(out, cloneState(st))
		}
	}
	return out
}

func cloneState(st replica.State) replica.State {
	st.ISR = slices.Clone(st.ISR)
	st.Replicas = slices.Clone(st.Replicas)
	return st
}

// deliver hands a state to every live broker's Manager.
func (c *testCluster) deliver(st replica.State) {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.mu.Lock()
	var mgrs []*replica.Manager
	for _, n := range c.nodes {
		mgrs = append(mgrs, n.mgr)
	}
	c.mu.Unlock()
	for _, m := range mgrs {
		m.Apply([]replica.State{cloneState(st)})
	}
}

// elect makes leader lead partition p in a new epoch (a clean election: the
// leader must be in the ISR, as broker/cluster's controller decides),
// dropping the brokers in drop from the ISR.
func (c *testCluster) elect(p, leader int32, replicas []int32, drop ...int32) replica.State {
	c.mu.Lock()
	st, ok := c.state[p]
	if !ok {
		st = replica.State{Topic: c.topic, Partition: p, LeaderEpoch: -1, ISR: slices.Clone(replicas), Replicas: slices.Clone(replicas), Version: -1}
	}
	isr := slices.DeleteFunc(slices.Clone(st.ISR), func(id int32) bool { return slices.Contains(drop, id) })
	if !slices.Contains(isr, leader) {
		c.mu.Unlock()
		c.t.Fatalf("unclean election: broker %d is not in the ISR %v of partition %d", leader, isr, p)
	}
	st.Leader, st.LeaderEpoch, st.ISR, st.Version = leader, st.LeaderEpoch+1, isr, st.Version+1
	c.state[p] = cloneState(st)
	c.mu.Unlock()
	c.deliver(st)
	return st
}

// alterISR is the conditional ISR write of broker/cluster's Node.AlterISR.
func (c *testCluster) alterISR(_ context.Context, topic string, p, leaderEpoch int32, isr []int32, version int32) (int32, error) {
	c.mu.Lock()
	st := c.state[p]
	if topic != c.topic || st.Version != version || st.LeaderEpoch != leaderEpoch {
		c.mu.Unlock()
		return 0, fmt.Errorf("%w: version %d epoch %d, asked %d/%d", replica.ErrStaleState, st.Version, st.LeaderEpoch, version, leaderEpoch)
	}
	st.ISR, st.Version = slices.Clone(isr), st.Version+1
	c.state[p] = cloneState(st)
	c.mu.Unlock()
	go c.deliver(st) // as a ZooKeeper watch: after the write returns
	return st.Version, nil
}

func (c *testCluster) current(p int32) replica.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneState(c.state[p])
}

// waitFor polls cond (sampling the HWs each time) until it holds or 20 s pass.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		c.sampleHW()
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.sampleHW()
}

// sampleHW records each live replica's high watermark; one that is lower
// than an earlier sample of the same broker's log is a violation.
func (c *testCluster) sampleHW() {
	for _, id := range c.live() {
		n := c.node(id)
		if n == nil {
			continue
		}
		for p := int32(0); p < c.parts; p++ {
			l, err := n.srv.PartitionLog(c.topic, p)
			if err != nil {
				continue
			}
			hw := l.HighWatermark()
			key := fmt.Sprintf("%d/%d", id, p)
			c.hwMu.Lock()
			if prev, ok := c.hws[key]; ok && hw < prev {
				c.bad = append(c.bad, fmt.Sprintf("broker %d partition %d: high watermark %d after %d", id, p, hw, prev))
			}
			c.hws[key] = max(c.hws[key], hw)
			c.hwMu.Unlock()
		}
	}
}

// settled: every live replica of every partition has the leader's log end
// and the leader's high watermark is its log end.
func (c *testCluster) settled() bool {
	for p := int32(0); p < c.parts; p++ {
		st := c.current(p)
		ln := c.node(st.Leader)
		if ln == nil {
			return false
		}
		ll, err := ln.srv.PartitionLog(c.topic, p)
		if err != nil {
			return false
		}
		leo := ll.LogEndOffset()
		if ll.HighWatermark() != leo {
			return false
		}
		for _, id := range st.Replicas {
			n := c.node(id)
			if n == nil {
				continue
			}
			l, err := n.srv.PartitionLog(c.topic, p)
			if err != nil || l.LogEndOffset() != leo || l.HighWatermark() != leo {
				return false
			}
		}
	}
	return true
}

// history is what producers were told: acknowledged records by partition.
type history struct {
	mu    sync.Mutex
	acked map[int32]map[int64]string // partition -> offset -> value
	dups  []string                   // an offset acknowledged for two values
}

func newHistory() *history { return &history{acked: map[int32]map[int64]string{}} }

func (h *history) ack(p int32, offset int64, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.acked[p]
	if m == nil {
		m = map[int64]string{}
		h.acked[p] = m
	}
	if old, ok := m[offset]; ok && old != value {
		h.dups = append(h.dups, fmt.Sprintf("partition %d offset %d acknowledged for %q and %q", p, offset, old, value))
	}
	m[offset] = value
}

func (h *history) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.acked {
		n += len(m)
	}
	return n
}

// batchInfo identifies one stored batch.
type batchInfo struct {
	Base, Last int64
	Epoch      int32
	CRC        uint32
}

// readLog returns a log's batches and its records (offset -> value) up to its end.
func readLog(t *testing.T, l *plog.Log) ([]batchInfo, map[int64]string) {
	t.Helper()
	var batches []batchInfo
	records := map[int64]string{}
	off, end := l.LogStartOffset(), l.LogEndOffset()
	for off < end {
		reg, err := l.Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("read %v at %d: %v", l.TopicPartition(), off, err)
		}
		b, err := reg.Bytes()
		_ = reg.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			n := int(binary.BigEndian.Uint32(b[8:12])) + 12
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b[:n]); err != nil {
				t.Fatalf("decode batch at %d: %v", off, err)
			}
			bi := batchInfo{Base: rb.FirstOffset, Last: rb.FirstOffset + int64(rb.LastOffsetDelta), Epoch: rb.PartitionLeaderEpoch, CRC: uint32(rb.CRC)}
			if crc32.Checksum(b[21:n], crc32.MakeTable(crc32.Castagnoli)) != bi.CRC {
				t.Fatalf("batch at %d: bad CRC", bi.Base)
			}
			batches = append(batches, bi)
			r := kbin.Reader{Src: rb.Records}
			for range rb.NumRecords {
				before := r.Src
				ln := int(r.Varint())
				head := len(before) - len(r.Src)
				r.Span(ln)
				var rec kmsg.Record
				if err := rec.ReadFrom(before[:head+ln]); err != nil {
					t.Fatalf("decode record in batch %d: %v", bi.Base, err)
				}
				records[bi.Base+int64(rec.OffsetDelta)] = string(rec.Value)
			}
			b = b[n:]
			off = bi.Last + 1
		}
	}
	return batches, records
}

// check is the checker: after settling, every acknowledged record is at its
// offset in every live replica, the replicas' batches are identical
// (offsets, epochs, CRCs), no offset holds two acknowledged values and no
// high watermark went backwards.
func (c *testCluster) check(h *history) {
	c.t.Helper()
	c.waitFor("replicas to settle", c.settled)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.dups {
		c.t.Error(d)
	}
	c.hwMu.Lock()
	for _, b := range c.bad {
		c.t.Error(b)
	}
	c.hwMu.Unlock()
	for p := int32(0); p < c.parts; p++ {
		st := c.current(p)
		ll, _ := c.node(st.Leader).srv.PartitionLog(c.topic, p)
		want, records := readLog(c.t, ll)
		for off, v := range h.acked[p] {
			if got, ok := records[off]; !ok {
				c.t.Errorf("partition %d: acknowledged %q at offset %d is lost", p, v, off)
			} else if got != v {
				c.t.Errorf("partition %d: offset %d holds %q, acknowledged as %q", p, off, got, v)
			}
		}
		for _, id := range st.Replicas {
			n := c.node(id)
			if n == nil || id == st.Leader {
				continue
			}
			l, _ := n.srv.PartitionLog(c.topic, p)
			got, _ := readLog(c.t, l)
			if !slices.Equal(got, want) {
				c.t.Errorf("partition %d: broker %d's batches differ from leader %d's:\n got %v\nwant %v", p, id, st.Leader, got, want)
			}
		}
	}
}

// produce sends values to partition p through a franz-go producer on the
// leader's address with acks=all, recording what is acknowledged.
func (c *testCluster) produce(h *history, leader, p int32, prefix string, n int) error {
	node := c.node(leader)
	if node == nil {
		return fmt.Errorf("broker %d not running", leader)
	}
	cl := c.client(node.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(10*time.Second),
		// Each server of this harness hands out producer ids from a store of
		// its own, so two leaders may give the same id to two producers (cluster
		// mode allocates the blocks in ZooKeeper). Idempotent retries across a
		// failover are tested with raw batches (TestIdempotentRetryAfterFailover).
		kgo.DisableIdempotentWrite())
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: c.topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
				return
			}
			h.ack(p, r.Offset, v)
		})
	}
	wg.Wait()
	return firstErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// produceRaw sends one batch of values (no producer id) with acks and
// returns the partition's error code and base offset.
func (c *testCluster) produceRaw(leader, p int32, acks int16, values ...string) (int16, int64) {
	c.t.Helper()
	return c.produceBatch(leader, p, acks, makeBatch(-1, -1, -1, values))
}

// produceBatch sends one prepared batch with acks.
func (c *testCluster) produceBatch(leader, p int32, acks int16, batch []byte) (int16, int64) {
	c.t.Helper()
	node := c.node(leader)
	ackOpt := kgo.AllISRAcks() // the client puts its own acks in every Produce it sends
	if acks == 1 {
		ackOpt = kgo.LeaderAck()
	}
	cl := c.client(node.addr, kgo.RequiredAcks(ackOpt), kgo.DisableIdempotentWrite())
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = c.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		c.t.Fatalf("produce to broker %d: %v", leader, err)
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.ErrorCode, sp.BaseOffset
}

// makeBatch builds an uncompressed RecordBatch v2 of values.
func makeBatch(producerID int64, epoch int16, baseSeq int32, values []string) []byte {
	var recs []byte
	for i, v := range values {
		var r []byte
		r = append(r, 0)
		r = kbin.AppendVarlong(r, 0)
		r = kbin.AppendVarint(r, int32(i))
		r = kbin.AppendVarint(r, -1)
		r = kbin.AppendVarint(r, int32(len(v)))
		r = append(r, v...)
		r = kbin.AppendVarint(r, 0)
		recs = kbin.AppendVarint(recs, int32(len(r)))
		recs = append(recs, r...)
	}
	now := time.Now().UnixMilli()
	b := kbin.AppendInt64(nil, 0)
	b = kbin.AppendInt32(b, 0)
	b = kbin.AppendInt32(b, -1)
	b = append(b, 2)
	b = kbin.AppendInt32(b, 0)
	b = kbin.AppendInt16(b, 0)
	b = kbin.AppendInt32(b, int32(len(values)-1))
	b = kbin.AppendInt64(b, now)
	b = kbin.AppendInt64(b, now)
	b = kbin.AppendInt64(b, producerID)
	b = kbin.AppendInt16(b, epoch)
	b = kbin.AppendInt32(b, baseSeq)
	b = kbin.AppendInt32(b, int32(len(values)))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
