package interop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/history"
)

// The process-level cluster scenarios record what their clients did in a
// history (internal/history) and check it: no acknowledged record lost, no
// value at two offsets, no offset holding two values, polls in order, no
// committed offset going backwards. Replicas' logs are compared batch by
// batch (base offset, leader epoch, CRC) from their segment files.

// clusterLong reports whether the long variants run (more kills, more
// rounds): SLUICE_CLUSTER_LONG=1.
func clusterLong() bool { return os.Getenv("SLUICE_CLUSTER_LONG") == "1" }

// clusterHistory is a scenario's history recorder.
type clusterHistory struct {
	t    *testing.T
	rec  *history.Recorder
	proc atomic.Int64 // next process id
}

func newClusterHistory(t *testing.T) *clusterHistory {
	h := &clusterHistory{t: t, rec: history.NewRecorder(nil)}
	h.proc.Store(100)
	return h
}

func (h *clusterHistory) process() int { return int(h.proc.Add(1)) }

// produce produces value to topic (any partition) synchronously as process
// proc and records the outcome: ok with the acknowledged offset, unknown on
// any error (a produce the client gave up on may still have landed).
func (h *clusterHistory) produce(ctx context.Context, cl *kgo.Client, proc int, topic, value string) error {
	p := h.rec.Invoke(proc, history.Produce)
	r := &kgo.Record{Topic: topic, Value: []byte(value)}
	err := cl.ProduceSync(ctx, r).FirstErr()
	op := history.Op{Outcome: history.OK, Topic: topic, Partition: r.Partition, Offset: r.Offset, Value: value}
	if err != nil {
		op.Outcome, op.Partition, op.Offset, op.Error = history.Unknown, -1, -1, err.Error()
	}
	p.Complete(op)
	return err
}

// producerGroup is a set of producer processes running until stopped.
type producerGroup struct {
	h         *clusterHistory
	stop      chan struct{}
	wg        sync.WaitGroup
	ok, bad   atomic.Int64
	stopped   bool
	acked     int
	unacked   int
	lastError atomic.Value // string
}

// producers runs n producer processes on cl, each producing its own
// numbered values to topic one at a time, until stopped.
func (h *clusterHistory) producers(cl *kgo.Client, topic string, n int) *producerGroup {
	g := &producerGroup{h: h, stop: make(chan struct{})}
	for range n {
		proc := h.process()
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-g.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := h.produce(ctx, cl, proc, topic, fmt.Sprintf("p%d-%06d", proc, i))
				cancel()
				if err != nil {
					g.bad.Add(1)
					g.lastError.Store(err.Error())
					time.Sleep(50 * time.Millisecond)
				} else {
					g.ok.Add(1)
				}
			}
		}()
	}
	return g
}

// awaitAcked waits until n more produces were acknowledged (the cluster
// takes writes): a scenario's faults hit a running workload.
func (g *producerGroup) awaitAcked(n int, what string) {
	g.h.t.Helper()
	from := g.ok.Load()
	eventually(g.h.t, 60*time.Second, fmt.Sprintf("%d more produces acknowledged (%s)", n, what), func() error {
		if got := g.ok.Load() - from; got < int64(n) {
			last, _ := g.lastError.Load().(string)
			return fmt.Errorf("%d acknowledged; last error %q", got, last)
		}
		return nil
	})
}

// halt stops the producers and waits for them.
func (g *producerGroup) halt() {
	if g.stopped {
		return
	}
	g.stopped = true
	close(g.stop)
	g.wg.Wait()
	g.acked, g.unacked = int(g.ok.Load()), int(g.bad.Load())
}

// finalRead reads every partition of topic from its log start to its high
// watermark (as the listed brokers answer) and records one final-read.
func (h *clusterHistory) finalRead(c *brokerCluster, topic string, live ...int32) int {
	h.t.Helper()
	adm := kadm.NewClient(c.clientOf(live))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ends kadm.ListedOffsets
	eventually(h.t, 30*time.Second, "list the end offsets of "+topic, func() error {
		var err error
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		return err
	})
	pend := h.rec.Invoke(h.process(), history.FinalRead)
	want := map[int32]int64{}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p, lo := range ends[topic] {
		want[p] = lo.Offset
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cl := c.clientOf(live, kgo.ConsumePartitions(offsets), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	var recs []history.Record
	got := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if got[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("final read of %s: read up to %v, high watermarks %v", topic, got, want)
		}
		fs.EachError(func(topic string, p int32, err error) { h.t.Logf("final read %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < want[r.Partition] {
				recs = append(recs, history.Record{Topic: topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
			got[r.Partition] = max(got[r.Partition], r.Offset+1)
		})
	}
	var ranges []history.Range
	for p, end := range want {
		ranges = append(ranges, history.Range{Topic: topic, Partition: p, Start: 0, End: end})
	}
	pend.Complete(history.Op{Outcome: history.OK, Records: recs, Ranges: ranges})
	return len(recs)
}

// check checks the history and fails the test with a report of each anomaly.
func (h *clusterHistory) check() history.Stats {
	h.t.Helper()
	hist := h.rec.History()
	res := history.Check(hist)
	if !res.OK() {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d.history.jsonl", strings.ReplaceAll(h.t.Name(), "/", "_"), time.Now().UnixNano()))
		if err := history.WriteFile(path, hist); err == nil {
			h.t.Logf("history kept at %s", path)
		}
		h.t.Errorf("history anomalies %v:\n%s", res.Kinds(), res.Report(hist, 2))
	}
	return res.Stats
}

// clientOf is a franz-go client bootstrapped with the listed brokers (all
// when none is listed).
func (c *brokerCluster) clientOf(ids []int32, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	var seeds []string
	for _, id := range c.ids() {
		if len(ids) == 0 || slices.Contains(ids, id) {
			seeds = append(seeds, c.brokers[id].Addr)
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// batchInfo is one batch of a replica's log as its segment files hold it.
type batchInfo struct {
	Base  int64
	Last  int64
	Epoch int32
	CRC   uint32
}

// replicaBatches reads the batches of topic-partition from broker id's
// segment files, in offset order.
func (c *brokerCluster) replicaBatches(id int32, topic string, p int32) ([]batchInfo, error) {
	var out []batchInfo
	err := c.eachBatch(id, topic, p, func(b []byte) {
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		out = append(out, batchInfo{Base: base, Last: base + int64(int32(binary.BigEndian.Uint32(b[23:27]))),
			Epoch: int32(binary.BigEndian.Uint32(b[12:16])), CRC: binary.BigEndian.Uint32(b[17:21])})
	})
	return out, err
}

// eachBatch calls fn with each whole batch of broker id's segment files of
// topic-partition, in file order, up to the end of what was written.
func (c *brokerCluster) eachBatch(id int32, topic string, p int32, fn func(batch []byte)) error {
	dir := filepath.Join(c.brokers[id].DataDir, fmt.Sprintf("%s-%d", topic, p))
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		for len(b) >= 61 {
			n := int(int32(binary.BigEndian.Uint32(b[8:12])))
			if n < 49 || 12+n > len(b) {
				break // the end of what was written (a preallocated or torn tail)
			}
			fn(b[:12+n])
			b = b[12+n:]
		}
	}
	return nil
}

// checkReplicasIdentical compares, for each partition of topic, the
// batches of every replica up to the high watermark end: the same base
// offsets, last offsets, leader epochs and CRCs. It returns the batches
// compared.
func (c *brokerCluster) checkReplicasIdentical(topic string, partitions int32, ends map[int32]int64, ids ...int32) int {
	c.t.Helper()
	compared := 0
	for p := range partitions {
		var first []batchInfo
		for i, id := range ids {
			bs, err := c.replicaBatches(id, topic, p)
			if err != nil {
				c.t.Fatalf("broker %d: %s-%d: %v", id, topic, p, err)
			}
			var upTo []batchInfo
			for _, b := range bs {
				if b.Base < ends[p] {
					upTo = append(upTo, b)
				}
			}
			if len(upTo) == 0 || upTo[len(upTo)-1].Last+1 < ends[p] {
				c.t.Errorf("broker %d: %s-%d holds batches up to %v, the high watermark is %d", id, topic, p, lastOf(upTo), ends[p])
				continue
			}
			if i == 0 {
				first = upTo
				compared += len(upTo)
				continue
			}
			if !slices.Equal(first, upTo) {
				c.t.Errorf("%s-%d: broker %d's batches differ from broker %d's: %s", topic, p, id, ids[0], firstDiff(first, upTo))
			}
		}
	}
	return compared
}

func lastOf(bs []batchInfo) any {
	if len(bs) == 0 {
		return "nothing"
	}
	return bs[len(bs)-1]
}

func firstDiff(a, b []batchInfo) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("batch %d: %+v vs %+v", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("%d vs %d batches", len(a), len(b))
}

// endOffsets lists topic's high watermarks as the listed brokers answer.
func (c *brokerCluster) endOffsets(topic string, live ...int32) map[int32]int64 {
	c.t.Helper()
	adm := kadm.NewClient(c.clientOf(live))
	out := map[int32]int64{}
	eventually(c.t, 30*time.Second, "list the end offsets of "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return err
		}
		for p, lo := range ends[topic] {
			out[p] = lo.Offset
		}
		return nil
	})
	return out
}

// fullISR waits until broker asked lists every partition of topic with
// all of ids in its ISR and a leader.
func (c *brokerCluster) fullISR(topic string, partitions int, asked int32, ids ...int32) map[int32]partitionView {
	c.t.Helper()
	var got map[int32]partitionView
	eventually(c.t, 60*time.Second, fmt.Sprintf("ISR %v on every partition of %s", ids, topic), func() error {
		v, err := c.topicView(asked, topic)
		if err != nil {
			return err
		}
		if len(v) != partitions {
			return fmt.Errorf("%d partitions", len(v))
		}
		for p, pv := range v {
			if pv.Leader < 0 || !slices.Equal(pv.ISR, sorted(ids)) {
				return fmt.Errorf("partition %d: leader %d ISR %v", p, pv.Leader, pv.ISR)
			}
		}
		got = v
		return nil
	})
	return got
}

var errNoCoordinator = errors.New("no coordinator")
