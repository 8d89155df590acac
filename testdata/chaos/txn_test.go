package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/chaos/workload"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// txnTimeout is the producers' transaction.timeout.ms: a transaction a
// producer left open (its EndTxn lost to a kill or a pause) is aborted by
// the coordinator within it, so the final read's wait for the last stable
// offset is short.
const txnTimeout = 5 * time.Second

// TestTxnKillPause: one broker killed (kill -9) and paused (SIGSTOP/SIGCONT)
// while three franz-go transactional producers run transactions of one to
// four unique values over three partitions, committing them or, every third,
// aborting them on purpose, and two consumers read with read_committed. The
// history is checked with history.TxnCheck: no value of an aborted
// transaction read, no value of a transaction whose commit the client saw
// succeed missing from the final read (itself read_committed, once no
// transaction is open), none read twice, and the values of one transaction
// all or none.
//
// The read-uncommitted variant runs the same with read_uncommitted readers
// and must make the checker report aborted reads: the check can fail.
func TestTxnKillPause(t *testing.T) {
	for _, v := range []struct {
		name string
		iso  kgo.IsolationLevel
	}{{"read-committed", kgo.ReadCommitted()}, {"read-uncommitted", kgo.ReadUncommitted()}} {
		t.Run(v.name, func(t *testing.T) {
			name := "txn-kill-pause-" + v.name
			r := harness.NewRun(t, name, 8*time.Second)
			b := startBroker(t, r, "broker", "num.partitions=3\ntransaction.abort.timed.out.transaction.cleanup.interval.ms=500\n")
			sluice.CreateTopic(t, b.HostPort, "txn", 3)
			rec, closeHistory := newHistory(t, r)
			st := newStamps(rec)
			sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
				Steps:   harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "kill", "pause"),
				Nemeses: []harness.Nemesis{&harness.Kill{Nodes: []*harness.Node{b.Node}}, &harness.Pause{Nodes: []*harness.Node{b.Node}}}}
			ctx, cancel := context.WithTimeout(context.Background(), r.Duration+30*time.Second)
			defer cancel()
			txns := runTxnProducers(ctx, t, rec, b.HostPort, "txn", 3, 1, 3, r.Seed)
			cons := consumeIsolated(ctx, rec, b.HostPort, "txn", 3, 11, 2, v.iso)
			waitTxnCommitted(t, rec, 10)
			if err := sched.Play(ctx); err != nil {
				t.Error(err)
			}
			txns.stop()
			time.Sleep(time.Second) // the consumers catch up
			cons.stop()
			fctx, fcancel := context.WithTimeout(context.Background(), time.Minute+txnTimeout)
			_, err := workload.FinalReadIsolated(fctx, rec, 0, []string{b.HostPort}, "txn", v.iso)
			fcancel()
			if err != nil {
				t.Error(err)
			}
			st.close()
			closeHistory()
			h := rec.History()
			res := history.TxnCheck(h)
			notes := []string{"transactional producers, every third transaction aborted; readers " + v.name,
				fmt.Sprintf("transactions: %d committed, %d aborted, %d unknown", countTxn(h, history.OK), countTxn(h, history.Fail), countTxn(h, history.Unknown))}
			if v.iso == kgo.ReadUncommitted() {
				// the aborted reads are the point; anything else is not
				aborted := res.Of(history.AbortedRead)
				if len(aborted) == 0 {
					t.Errorf("read_uncommitted readers over %d aborted transactions, and the checker reported no aborted read: it cannot tell", countTxn(h, history.Fail))
				} else {
					t.Logf("the checker reports %d aborted reads by read_uncommitted readers, the first: %s", len(aborted), aborted[0].Detail)
				}
				var rest []history.Anomaly
				for _, a := range res.Anomalies {
					if a.Kind != history.AbortedRead {
						rest = append(rest, a)
					}
				}
				res.Anomalies = rest
				notes = append(notes, fmt.Sprintf("%d aborted reads expected and found", len(aborted)))
			}
			report(t, r, sched, h, res, st, harness.Report{History: historyPath(r), Notes: notes})
			if n := countTxn(h, history.Fail); n == 0 {
				t.Errorf("no transaction was aborted: the run checked no aborted data")
			}
		})
	}
}

// runTxnProducers starts n workload.TxnProducers, processes first,
// first+1, ..., each running transactions until ctx ends or stop.
func runTxnProducers(ctx context.Context, t *testing.T, rec *history.Recorder, addr, topic string, parts int32, first, n int, seed int64) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	l := &running{cancel: cancel}
	for proc := first; proc < first+n; proc++ {
		p, err := workload.NewTxnProducer(rec, workload.TxnProducerConfig{Bootstrap: []string{addr}, Topic: topic, Partitions: parts,
			Process: proc, AbortEvery: 3, Timeout: 4 * time.Second, Seed: seed + int64(proc),
			// a request to a killed or paused broker gives up within seconds
			Options: []kgo.Opt{kgo.TransactionTimeout(txnTimeout), kgo.ProduceRequestTimeout(2 * time.Second),
				kgo.RequestTimeoutOverhead(time.Second), kgo.RetryTimeout(4 * time.Second)}})
		if err != nil {
			cancel()
			l.wg.Wait()
			t.Fatal(err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer p.Close()
			for ctx.Err() == nil {
				p.Transaction(ctx)
			}
		}()
	}
	return l
}

// consumeIsolated starts n consumers of every partition of topic from
// offset 0 with isolation level iso, processes first, first+1, ....
func consumeIsolated(ctx context.Context, rec *history.Recorder, addr, topic string, parts int32, first, n int, iso kgo.IsolationLevel) *running {
	ctx, cancel := context.WithCancel(ctx)
	l := &running{cancel: cancel}
	var ps []int32
	for p := int32(0); p < parts; p++ {
		ps = append(ps, p)
	}
	for proc := first; proc < first+n; proc++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			workload.Consume(ctx, rec, workload.ConsumerConfig{Bootstrap: []string{addr}, Topic: topic, Partitions: ps, Process: proc,
				Options: []kgo.Opt{kgo.FetchIsolationLevel(iso)}})
		}()
	}
	return l
}

func countTxn(h history.History, out history.Outcome) int {
	n := 0
	for _, op := range h {
		if op.Kind == history.Txn && op.Outcome == out {
			n++
		}
	}
	return n
}

// waitTxnCommitted waits (up to 30 s) until n transactions committed, so
// the faults hit a workload that is running.
func waitTxnCommitted(t *testing.T, rec *history.Recorder, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for countTxn(rec.History(), history.OK) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d transactions committed in 30 s before any fault: the broker does not take transactions", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
