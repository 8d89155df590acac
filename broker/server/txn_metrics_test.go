package server

import (
	"errors"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/txn"
	"github.com/sluicehq/sluice/internal/clock"
)

// scrapeTxn reads the transaction coordinator's metrics from the broker's
// /metrics; a missing metric fails t.
func scrapeTxn(t *testing.T, ts *testServer) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	out := map[string]float64{}
	for _, name := range []string{"sluice_txn_open_transactions", "sluice_txn_oldest_open_transaction_seconds",
		"sluice_txn_timed_out_aborts_total", "sluice_txn_transactional_ids"} {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics lacks %s:\n%s", name, body)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = v
	}
	return out
}

// wantTxnMetrics compares a scrape with open transactions, the oldest's
// age in seconds, aborts by timeout and transactional ids.
func wantTxnMetrics(t *testing.T, stage string, got map[string]float64, open, oldest, timedOut, ids float64) {
	t.Helper()
	want := map[string]float64{"sluice_txn_open_transactions": open, "sluice_txn_oldest_open_transaction_seconds": oldest,
		"sluice_txn_timed_out_aborts_total": timedOut, "sluice_txn_transactional_ids": ids}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s = %v, want %v", stage, name, got[name], w)
		}
	}
}

// TestTxnMetrics scrapes the broker's registry while the coordinator's
// (manual) clock moves: two transactions opened 30 s apart show as 2 open,
// the oldest 30 s old; past the first one's 60 s timeout the coordinator
// aborts it (1 abort by timeout, 1 open, the oldest 40 s old); committing
// the second leaves none open.
func TestTxnMetrics(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	cfg := mustProps(t, map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
	s, err := New(Options{DataDir: t.TempDir(), Config: cfg, Clock: clk, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: a.String()}
	t.Cleanup(func() { ts.stop(t) })
	createTopic(t, newClient(t, ts.addr), "metered", 1)
	wantTxnMetrics(t, "at start", scrapeTxn(t, ts), 0, 0, 0, 0)

	open := func(id string, timeoutMs int32) (int64, int16) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.TransactionalID, req.TransactionTimeoutMillis = &id, timeoutMs
		resp := roundTrip(t, ts.addr, req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("init %s: %s", id, codeName(resp.ErrorCode))
		}
		r := roundTrip(t, ts.addr, addPartitionsReq(id, resp.ProducerID, resp.ProducerEpoch, "metered", []int32{0})).(*kmsg.AddPartitionsToTxnResponse)
		if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("add partition for %s: %s", id, codeName(code))
		}
		return resp.ProducerID, resp.ProducerEpoch
	}
	open("slow", 60_000)
	clk.Advance(30 * time.Second) // below every timeout: the abort check finds nothing
	pid, epoch := open("quick", 600_000)
	wantTxnMetrics(t, "two open, 30 s apart", scrapeTxn(t, ts), 2, 30, 0, 2)

	clk.Advance(40 * time.Second) // "slow" is 70 s old, past its 60 s timeout
	waitFor(t, "the abort of the timed-out transaction", func() bool { return ts.txn.Stats().TimedOut == 1 })
	wantTxnMetrics(t, "after the timeout", scrapeTxn(t, ts), 1, 40, 1, 2)
	if st := describeTxn(t, ts.addr, "slow"); st.State != "CompleteAbort" {
		t.Errorf("the timed-out transaction is %s, want CompleteAbort", st.State)
	}

	if code := roundTrip(t, ts.addr, endTxnReq("quick", pid, epoch, true)).(*kmsg.EndTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("commit: %s", codeName(code))
	}
	wantTxnMetrics(t, "after the commit", scrapeTxn(t, ts), 0, 0, 1, 2)
}

// failingMarkers fails the first n marker writes (a full disk, say), then
// writes them to the real partition logs.
type failingMarkers struct {
	txnMarkers
	n *atomic.Int64
}

func (m failingMarkers) WriteMarker(tp txn.TopicPartition, pid int64, epoch int16, commit bool, coordEpoch int32) error {
	if m.n.Add(-1) >= 0 {
		return errors.New("injected: marker write failed")
	}
	return m.txnMarkers.WriteMarker(tp, pid, epoch, commit, coordEpoch)
}

// TestTxnTimedOutAbortCountedOnce: a timed-out transaction whose ABORT
// markers fail at first is aborted by a later tick (from PrepareAbort); it
// counts once in sluice_txn_timed_out_aborts_total, scraped from a
// registry holding the coordinator's collector. The coordinator runs over
// a real broker's __transaction_state and partition logs; only the first
// marker writes fail.
func TestTxnTimedOutAbortCountedOnce(t *testing.T) {
	ts := startServer(t, "", nil)
	createTopic(t, newClient(t, ts.addr), "faulty", 1)
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	var fail atomic.Int64
	fail.Store(2)
	c, err := txn.New(txn.Options{
		StateLog:           txnStateStorage{internalTopic{reg: ts.topics, name: txn.StateTopic, partitions: 4}},
		Markers:            failingMarkers{txnMarkers{reg: ts.topics, groups: ts.groups}, &fail},
		AllocateProducerID: ts.pids.allocate,
		Clock:              clk,
		Logger:             testLogger(t),
		StatePartitions:    4,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collector())
	timedOut := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "sluice_txn_timed_out_aborts_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no sluice_txn_timed_out_aborts_total")
		return 0
	}
	init := c.InitProducerID("faulty-txn", 10_000, -1, -1)
	tp := txn.TopicPartition{Topic: "faulty", Partition: 0}
	if init.ErrorCode != 0 || c.AddPartitions("faulty-txn", init.ProducerID, init.Epoch, []txn.TopicPartition{tp})[tp] != 0 {
		t.Fatalf("open the transaction: %+v", init)
	}
	clk.Advance(11 * time.Second)
	for tick := 1; tick <= 3; tick++ {
		c.Tick() // 1: PrepareAbort written, the marker fails; 2: the marker fails again; 3: aborted
		if got := timedOut(); got != 1 {
			t.Errorf("after tick %d: %v aborts by timeout, want 1 (decided at the first)", tick, got)
		}
	}
	if d, ok, err := c.Describe("faulty-txn"); !ok || err != nil || d.State != kmsg.TransactionStateCompleteAbort {
		t.Fatalf("after three ticks: %+v %v %v", d, ok, err)
	}
	if st := c.Stats(); st.Open != 0 || st.TimedOut != 1 {
		t.Fatalf("stats %+v", st)
	}
}
