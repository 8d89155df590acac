package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/internal/clock"
)

// txnHistory is what transactional producers were told: the values of
// committed and of aborted transactions.
type txnHistory struct {
	committed, aborted map[string]bool
}

func newTxnHistory() *txnHistory {
	return &txnHistory{committed: map[string]bool{}, aborted: map[string]bool{}}
}

// check holds a read against the history: read_committed sees every
// committed value once and nothing else; read_uncommitted sees every value
// produced once.
func (h *txnHistory) check(t *testing.T, level string, got []string) {
	t.Helper()
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for v, n := range seen {
		if n > 1 {
			t.Errorf("%s: %q read %d times", level, v, n)
		}
		if !h.committed[v] && (level == "read_committed" || !h.aborted[v]) {
			t.Errorf("%s: %q read, produced in no transaction it may see (aborted: %v)", level, v, h.aborted[v])
		}
	}
	for v := range h.committed {
		if seen[v] == 0 {
			t.Errorf("%s: committed %q not read", level, v)
		}
	}
	if level == "read_uncommitted" {
		for v := range h.aborted {
			if seen[v] == 0 {
				t.Errorf("%s: aborted %q not read", level, v)
			}
		}
	}
}

// readAll consumes topic from the start at an isolation level until want
// records arrived and no more come within a short quiet period.
func readAll(t *testing.T, addr, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond))
	var out []string
	deadline := time.Now().Add(20 * time.Second)
	quiet := 0
	for time.Now().Before(deadline) && (len(out) < want || quiet < 2) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)); n++ })
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s[%d]: %v", e.Topic, e.Partition, e.Err)
			}
		}
		if n == 0 && len(out) >= want {
			quiet++
		}
	}
	return out
}

func createTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// TestTxnCommitAndAbort runs transactions that commit and abort over three
// partitions with franz-go, and checks both isolation levels against the
// history; then again after a restart (the markers, the index and the
// coordinator's state are replayed).
func TestTxnCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, nil)
	admin := newClient(t, ts.addr)
	createTopic(t, admin, "txn", 3)
	h := newTxnHistory()
	cl := newClient(t, ts.addr, kgo.TransactionalID("tx-commit-abort"), kgo.DefaultProduceTopic("txn"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx := testCtx(t)
	for txn := 0; txn < 6; txn++ {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := txn%3 != 1
		var vals []string
		for i := 0; i < 20; i++ {
			v := fmt.Sprintf("t%d-r%d", txn, i)
			vals = append(vals, v)
			if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatalf("txn %d: produce: %v", txn, err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("txn %d: end: %v", txn, err)
		}
		for _, v := range vals {
			if commit {
				h.committed[v] = true
			} else {
				h.aborted[v] = true
			}
		}
	}
	h.check(t, "read_committed", readAll(t, ts.addr, "txn", kgo.ReadCommitted(), len(h.committed)))
	h.check(t, "read_uncommitted", readAll(t, ts.addr, "txn", kgo.ReadUncommitted(), len(h.committed)+len(h.aborted)))

	d := describeTxn(t, ts.addr, "tx-commit-abort")
	if d.ErrorCode != 0 || d.State != "CompleteCommit" {
		t.Fatalf("describe: %v state %s", kerr.ErrorForCode(d.ErrorCode), d.State)
	}
	cl.Close()
	ts.stop(t)
	ts = startServer(t, dir, nil)
	h.check(t, "read_committed after restart", readAll(t, ts.addr, "txn", kgo.ReadCommitted(), len(h.committed)))
	if d2 := describeTxn(t, ts.addr, "tx-commit-abort"); d2.ProducerID != d.ProducerID || d2.ProducerEpoch != d.ProducerEpoch || d2.State != d.State {
		t.Fatalf("after restart: %+v, before %+v", d2, d)
	}
	// The producer comes back with a bumped epoch and works.
	cl = newClient(t, ts.addr, kgo.TransactionalID("tx-commit-abort"), kgo.DefaultProduceTopic("txn"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("after-restart")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	h.committed["after-restart"] = true
	h.check(t, "read_committed after restart and a new transaction", readAll(t, ts.addr, "txn", kgo.ReadCommitted(), len(h.committed)))
	if d3 := describeTxn(t, ts.addr, "tx-commit-abort"); d3.ProducerEpoch <= d.ProducerEpoch {
		t.Fatalf("epoch after re-init %d, before %d", d3.ProducerEpoch, d.ProducerEpoch)
	}
}

func describeTxn(t *testing.T, addr, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp := roundTrip(t, addr, req).(*kmsg.DescribeTransactionsResponse)
	if len(resp.TransactionStates) != 1 {
		t.Fatalf("describe: %d states", len(resp.TransactionStates))
	}
	return resp.TransactionStates[0]
}

// TestTxnZombieFenced: a second producer with the same transactional id
// fences the first; the first's open transaction is aborted and its later
// produce and commit fail.
func TestTxnZombieFenced(t *testing.T) {
	ts := startServer(t, "", nil)
	createTopic(t, newClient(t, ts.addr), "zombie", 2)
	ctx := testCtx(t)
	opts := []kgo.Opt{kgo.TransactionalID("tx-zombie"), kgo.DefaultProduceTopic("zombie")}
	zombie := newClient(t, ts.addr, opts...)
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := newClient(t, ts.addr, opts...)
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ProduceSync(ctx, kgo.StringRecord("fresh-1")).FirstErr(); err != nil {
		t.Fatalf("fresh producer: %v", err)
	}
	zerr := zombie.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr()
	cerr := zombie.EndTransaction(ctx, kgo.TryCommit)
	if zerr == nil && cerr == nil {
		t.Fatal("the fenced producer produced and committed")
	}
	if cerr == nil || !(errors.Is(cerr, kerr.ProducerFenced) || errors.Is(cerr, kerr.InvalidProducerEpoch) || errors.Is(zerr, kerr.InvalidProducerEpoch) || errors.Is(zerr, kerr.ProducerFenced)) {
		t.Logf("zombie errors: produce %v, commit %v", zerr, cerr)
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	h := newTxnHistory()
	h.committed["fresh-1"] = true
	h.aborted["zombie-1"] = true
	got := readAll(t, ts.addr, "zombie", kgo.ReadCommitted(), 1)
	h.check(t, "read_committed", got)
}

// TestTxnTimeout: a transaction left open past its timeout is aborted by
// the coordinator's clock (a clock.Manual: the test moves it, nothing
// sleeps for the timeout); its producer is fenced.
func TestTxnTimeout(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	cfg := mustProps(t, map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"})
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
	createTopic(t, newClient(t, ts.addr), "slow", 1)
	ctx := testCtx(t)
	cl := newClient(t, ts.addr, kgo.TransactionalID("tx-slow"), kgo.DefaultProduceTopic("slow"), kgo.TransactionTimeout(500*time.Millisecond))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("late")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// At the timeout exactly the transaction is still open.
	clk.Advance(500 * time.Millisecond)
	ts.txn.Tick()
	if st := describeTxn(t, ts.addr, "tx-slow").State; st != "Ongoing" {
		t.Fatalf("at its timeout the transaction is %s, want Ongoing", st)
	}
	// Past it, the coordinator's loop (its timer on the clock) aborts it;
	// each step moves the clock by one cleanup interval.
	waitFor(t, "the timed-out transaction to be aborted", func() bool {
		clk.Advance(50 * time.Millisecond)
		return describeTxn(t, ts.addr, "tx-slow").State == "CompleteAbort"
	})
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("commit of a timed-out transaction succeeded")
	}
	if st := ts.txn.Stats(); st.TimedOut != 1 || st.Open != 0 {
		t.Fatalf("stats %+v", st)
	}
	if lso := listLatest(t, ts, "slow", readCommitted); lso != 2 { // the record and the ABORT marker
		t.Fatalf("last stable offset %d, want 2", lso)
	}
	// A read_committed fetch with nothing to answer waits on the clock:
	// keep it moving while reading.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				clk.Advance(100 * time.Millisecond)
			}
		}
	}()
	got := readAll(t, ts.addr, "slow", kgo.ReadCommitted(), 0)
	all := readAll(t, ts.addr, "slow", kgo.ReadUncommitted(), 1)
	close(stop)
	<-done
	if len(got) != 0 {
		t.Fatalf("read_committed saw %v", got)
	}
	if len(all) != 1 || all[0] != "late" {
		t.Fatalf("read_uncommitted saw %v, want [late]", all)
	}
}

func mustProps(t *testing.T, props map[string]string) config.Broker {
	t.Helper()
	c, err := config.FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTxnGroupOffsets runs franz-go's GroupTransactSession copying a topic:
// offsets are committed with each transaction; the output holds each input
// record exactly once under read_committed, and the group's committed
// offsets equal the input's end.
func TestTxnGroupOffsets(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) {
		*c = mustProps(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	})
	admin := newClient(t, ts.addr)
	createTopic(t, admin, "in", 2)
	createTopic(t, admin, "out", 2)
	ctx := testCtx(t)
	const n = 300
	for i := 0; i < n; i++ {
		if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(ts.addr), kgo.TransactionalID("tx-etl"), kgo.ConsumerGroup("etl"),
		kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequireStableFetchOffsets())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied := 0
	for copied < n {
		fs := sess.PollRecords(ctx, 50)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		k := 0
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, kgo.SliceRecord(r.Value), func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
			k++
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			copied += k
		}
	}
	h := newTxnHistory()
	for i := 0; i < n; i++ {
		h.committed[strconv.Itoa(i)] = true
	}
	h.check(t, "read_committed", readAll(t, ts.addr, "out", kgo.ReadCommitted(), n))
	offs, err := kadm.NewClient(admin).FetchOffsets(ctx, "etl")
	if err != nil {
		t.Fatal(err)
	}
	// The committed offsets are the input partitions' ends: together n.
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != n {
		t.Fatalf("committed offsets sum to %d, want %d (%v)", sum, n, offs)
	}
}
