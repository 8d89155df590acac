package txn

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
)

// TestCommitPath walks Empty -> Ongoing -> PrepareCommit -> CompleteCommit:
// each transition is a record of the state log, the markers are COMMIT at
// the producer's epoch on every partition, and a retried EndTxn is answered
// as the first was.
func TestCommitPath(t *testing.T) {
	f := newFixture(t, nil)
	r := f.init("tx", 60_000)
	if r.Epoch != 0 || r.ProducerID <= 0 {
		t.Fatalf("init: %+v", r)
	}
	f.wantState("tx", kmsg.TransactionStateEmpty)
	wantCode(t, "end with nothing begun", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), kerr.InvalidTxnState)

	f.add("tx", r, a0, b1)
	f.add("tx", r, a0, a2) // a0 again: no change but a2
	d := f.wantState("tx", kmsg.TransactionStateOngoing)
	if want := []TopicPartition{a0, a2, b1}; !reflect.DeepEqual(d.Partitions, want) {
		t.Fatalf("partitions %v, want %v", d.Partitions, want)
	}
	if d.StartMs != f.clock.Now().UnixMilli() {
		t.Fatalf("start %d, want %d", d.StartMs, f.clock.Now().UnixMilli())
	}
	wantCode(t, "end", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), nil)
	f.wantState("tx", kmsg.TransactionStateCompleteCommit)
	got := f.markers.take()
	want := []marker{{a0, r.ProducerID, 0, true}, {a2, r.ProducerID, 0, true}, {b1, r.ProducerID, 0, true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}
	wantCode(t, "retried commit", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), nil)
	wantCode(t, "abort after commit", f.c.EndTxn("tx", r.ProducerID, r.Epoch, false), kerr.InvalidTxnState)
	if m := f.markers.take(); len(m) != 0 {
		t.Fatalf("a retried EndTxn wrote markers %v", m)
	}
	recs := f.log.records(t, "tx")
	wantStates := []kmsg.TransactionState{kmsg.TransactionStateEmpty, kmsg.TransactionStateOngoing, kmsg.TransactionStateOngoing,
		kmsg.TransactionStatePrepareCommit, kmsg.TransactionStateCompleteCommit}
	if !slices.Equal(states(recs), wantStates) {
		t.Fatalf("state log %v, want %v", states(recs), wantStates)
	}
	if n := len(recs[3].partitions); n != 3 {
		t.Fatalf("PrepareCommit record holds %d partitions, want 3", n)
	}
	if n := len(recs[4].partitions); n != 0 {
		t.Fatalf("CompleteCommit record holds %d partitions, want 0", n)
	}

	// The next transaction starts over from the completed one.
	f.clock.Advance(time.Second)
	f.add("tx", r, b0)
	d = f.wantState("tx", kmsg.TransactionStateOngoing)
	if !reflect.DeepEqual(d.Partitions, []TopicPartition{b0}) || d.StartMs != f.clock.Now().UnixMilli() {
		t.Fatalf("second transaction: %+v", d)
	}
}

// TestAbortPath: Ongoing -> PrepareAbort -> CompleteAbort with ABORT
// markers; a retried abort is answered 0, a commit INVALID_TXN_STATE.
func TestAbortPath(t *testing.T) {
	f := newFixture(t, nil)
	r := f.init("tx", 60_000)
	f.add("tx", r, a1, b0)
	wantCode(t, "abort", f.c.EndTxn("tx", r.ProducerID, r.Epoch, false), nil)
	f.wantState("tx", kmsg.TransactionStateCompleteAbort)
	want := []marker{{a1, r.ProducerID, 0, false}, {b0, r.ProducerID, 0, false}}
	if got := f.markers.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}
	wantCode(t, "retried abort", f.c.EndTxn("tx", r.ProducerID, r.Epoch, false), nil)
	wantCode(t, "commit after abort", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), kerr.InvalidTxnState)
	got := states(f.log.records(t, "tx"))
	want2 := []kmsg.TransactionState{kmsg.TransactionStateEmpty, kmsg.TransactionStateOngoing, kmsg.TransactionStatePrepareAbort, kmsg.TransactionStateCompleteAbort}
	if !slices.Equal(got, want2) {
		t.Fatalf("state log %v, want %v", got, want2)
	}
}

// TestFencing: a second InitProducerId for the id (a new producer instance)
// aborts the ongoing transaction with the epoch bumped (the markers carry
// it) and bumps again for the new producer; every request of the old
// epoch is then PRODUCER_FENCED, of another producer id
// INVALID_PRODUCER_ID_MAPPING.
func TestFencing(t *testing.T) {
	f := newFixture(t, nil)
	old := f.init("tx", 60_000)
	f.add("tx", old, a0, a1)
	ran := false
	wantCode(t, "guarded produce", f.c.Guard("tx", old.ProducerID, old.Epoch, a0, func() int16 { ran = true; return 0 }), nil)
	if !ran {
		t.Fatal("Guard did not run the append of an added partition")
	}

	fresh := f.init("tx", 60_000)
	if fresh.ProducerID != old.ProducerID || fresh.Epoch != old.Epoch+2 {
		t.Fatalf("fresh producer %+v, old %+v: want the same id at epoch %d", fresh, old, old.Epoch+2)
	}
	want := []marker{{a0, old.ProducerID, old.Epoch + 1, false}, {a1, old.ProducerID, old.Epoch + 1, false}}
	if got := f.markers.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("fencing markers %v, want %v", got, want)
	}
	f.wantState("tx", kmsg.TransactionStateEmpty)

	wantCode(t, "old epoch: end", f.c.EndTxn("tx", old.ProducerID, old.Epoch, true), kerr.ProducerFenced)
	for tp, code := range f.c.AddPartitions("tx", old.ProducerID, old.Epoch, []TopicPartition{b0}) {
		wantCode(t, fmt.Sprintf("old epoch: add %v", tp), code, kerr.ProducerFenced)
	}
	wantCode(t, "old epoch: produce", f.c.Guard("tx", old.ProducerID, old.Epoch, a0, func() int16 { t.Fatal("fenced append ran"); return 0 }), kerr.ProducerFenced)
	wantCode(t, "other producer id: end", f.c.EndTxn("tx", old.ProducerID+7, fresh.Epoch, true), kerr.InvalidProducerIDMapping)
	wantCode(t, "unknown id: end", f.c.EndTxn("nobody", 1, 0, true), kerr.InvalidProducerIDMapping)

	// The new producer works.
	f.add("tx", fresh, b0)
	wantCode(t, "fresh commit", f.c.EndTxn("tx", fresh.ProducerID, fresh.Epoch, true), nil)
	if got := f.markers.take(); !reflect.DeepEqual(got, []marker{{b0, fresh.ProducerID, fresh.Epoch, true}}) {
		t.Fatalf("markers %v", got)
	}
}

// TestKIP360Recovery: InitProducerId naming the current producer and
// epoch bumps the epoch (no new id); its retry, naming the previous epoch,
// gets the current one unchanged; any other pair is PRODUCER_FENCED. An
// ongoing transaction is aborted by the recovery. At the epoch's end a new
// producer id is handed out and the old one kept as the previous.
func TestKIP360Recovery(t *testing.T) {
	f := newFixture(t, nil)
	r := f.init("tx", 60_000)
	f.add("tx", r, a0)

	bumped := f.c.InitProducerID("tx", 60_000, r.ProducerID, r.Epoch)
	if bumped.ErrorCode != 0 || bumped.ProducerID != r.ProducerID || bumped.Epoch != r.Epoch+2 {
		t.Fatalf("recovery from an ongoing transaction: %+v (was %+v)", bumped, r)
	}
	if got := f.markers.take(); !reflect.DeepEqual(got, []marker{{a0, r.ProducerID, r.Epoch + 1, false}}) {
		t.Fatalf("recovery markers %v", got)
	}
	f.wantState("tx", kmsg.TransactionStateEmpty)

	again := f.c.InitProducerID("tx", 60_000, bumped.ProducerID, bumped.Epoch)
	if again.ErrorCode != 0 || again.Epoch != bumped.Epoch+1 {
		t.Fatalf("recovery from Empty: %+v, want epoch %d", again, bumped.Epoch+1)
	}
	retry := f.c.InitProducerID("tx", 60_000, bumped.ProducerID, bumped.Epoch)
	if retry != again {
		t.Fatalf("retry naming the previous epoch: %+v, want %+v", retry, again)
	}
	for _, bad := range []struct {
		pid   int64
		epoch int16
	}{{r.ProducerID, again.Epoch + 1}, {r.ProducerID, r.Epoch}, {r.ProducerID + 1, again.Epoch}} {
		res := f.c.InitProducerID("tx", 60_000, bad.pid, bad.epoch)
		wantCode(t, fmt.Sprintf("init naming %d/%d", bad.pid, bad.epoch), res.ErrorCode, kerr.ProducerFenced)
	}
	if d := f.describe("tx"); d.ProducerEpoch != again.Epoch {
		t.Fatalf("a refused init changed the epoch to %d", d.ProducerEpoch)
	}

	// Epoch exhaustion: a state record at MaxInt16-1 (replayed) makes the
	// next init hand out a new producer id at epoch 0.
	p, err := f.c.EnsureStateTopic("worn")
	if err != nil {
		t.Fatal(err)
	}
	worn := snapshot{producerID: 77, lastProducerID: -1, epoch: math.MaxInt16 - 1, timeoutMs: 60_000,
		state: kmsg.TransactionStateCompleteCommit, partitions: map[TopicPartition]struct{}{}, startMs: -1}
	f.log.appendRaw(t, p, "worn", worn.value())
	f.restart()
	next := f.init("worn", 60_000)
	if next.ProducerID == 77 || next.Epoch != 0 {
		t.Fatalf("init at the last epoch: %+v, want a new producer id at epoch 0", next)
	}
	recs := f.log.records(t, "worn")
	if last := recs[len(recs)-1]; last.producerID != next.ProducerID || last.lastProducerID != 77 {
		t.Fatalf("record after exhaustion: producer %d, previous %d", last.producerID, last.lastProducerID)
	}
	// The old producer is fenced out.
	wantCode(t, "old producer after exhaustion", f.c.EndTxn("worn", 77, math.MaxInt16-1, true), kerr.InvalidProducerIDMapping)
}

// TestProduceGuard (KIP-890 part 1): a transactional append runs only for a
// partition added to the producer's ongoing transaction, never after the
// transaction ended; Verify answers the same per partition.
func TestProduceGuard(t *testing.T) {
	f := newFixture(t, nil)
	r := f.init("tx", 60_000)
	runs := 0
	appendFn := func() int16 { runs++; return 0 }
	wantCode(t, "produce before any add", f.c.Guard("tx", r.ProducerID, r.Epoch, a0, appendFn), kerr.InvalidTxnState)
	f.add("tx", r, a0)
	wantCode(t, "produce to an added partition", f.c.Guard("tx", r.ProducerID, r.Epoch, a0, appendFn), nil)
	wantCode(t, "produce to a partition not added", f.c.Guard("tx", r.ProducerID, r.Epoch, a1, appendFn), kerr.InvalidTxnState)
	wantCode(t, "the append's own code", f.c.Guard("tx", r.ProducerID, r.Epoch, a0, func() int16 { return kerr.CorruptMessage.Code }), kerr.CorruptMessage)
	wantCode(t, "produce with an unknown id", f.c.Guard("nobody", r.ProducerID, r.Epoch, a0, appendFn), kerr.InvalidProducerIDMapping)

	v := f.c.Verify("tx", r.ProducerID, r.Epoch, []TopicPartition{a0, a1})
	if v[a0] != 0 || v[a1] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify: %v", v)
	}
	v = f.c.Verify("tx", r.ProducerID, r.Epoch+1, []TopicPartition{a0})
	wantCode(t, "verify with another epoch", v[a0], kerr.ProducerFenced)

	wantCode(t, "commit", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), nil)
	// The hanging transaction: a produce delayed past the commit.
	wantCode(t, "produce after the commit", f.c.Guard("tx", r.ProducerID, r.Epoch, a0, appendFn), kerr.InvalidTxnState)
	if v := f.c.Verify("tx", r.ProducerID, r.Epoch, []TopicPartition{a0}); v[a0] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify after the commit: %v", v)
	}
	if runs != 1 {
		t.Fatalf("the append ran %d times, want 1", runs)
	}
}

// TestTimeoutAbort: Tick aborts a transaction open past its timeout on the
// coordinator's clock, with the epoch bumped (the producer is fenced), and
// leaves a younger one alone.
func TestTimeoutAbort(t *testing.T) {
	f := newFixture(t, nil)
	slow := f.init("slow", 1000)
	fast := f.init("fast", 60_000)
	f.add("slow", slow, a0, b0)
	f.add("fast", fast, a1)
	f.clock.Advance(1000 * time.Millisecond)
	f.c.Tick()
	f.wantState("slow", kmsg.TransactionStateOngoing)
	if st := f.c.Stats(); st.Open != 2 || st.OldestOpen != time.Second || st.TimedOut != 0 || st.TransactionalIDs != 2 {
		t.Fatalf("stats at the timeout: %+v", st)
	}
	f.clock.Advance(time.Millisecond)
	f.c.Tick()
	d := f.wantState("slow", kmsg.TransactionStateCompleteAbort)
	if d.ProducerEpoch != slow.Epoch+1 {
		t.Fatalf("epoch after the timeout %d, want %d", d.ProducerEpoch, slow.Epoch+1)
	}
	want := []marker{{a0, slow.ProducerID, slow.Epoch + 1, false}, {b0, slow.ProducerID, slow.Epoch + 1, false}}
	if got := f.markers.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}
	f.wantState("fast", kmsg.TransactionStateOngoing)
	if st := f.c.Stats(); st.Open != 1 || st.TimedOut != 1 {
		t.Fatalf("stats after the abort: %+v", st)
	}
	wantCode(t, "commit of the timed-out transaction", f.c.EndTxn("slow", slow.ProducerID, slow.Epoch, true), kerr.ProducerFenced)
	f.c.Tick()
	if st := f.c.Stats(); st.TimedOut != 1 {
		t.Fatalf("a second tick aborted again: %+v", st)
	}
	// The fenced producer recovers with a new InitProducerId.
	r := f.init("slow", 1000)
	if r.Epoch != slow.Epoch+2 {
		t.Fatalf("init after the timeout: %+v", r)
	}
}

// TestMarkersFailThenTick: a marker that cannot be written leaves the
// transaction prepared (clients retrying get CONCURRENT_TRANSACTIONS and
// cannot begin another); Tick completes it once markers can be written.
func TestMarkersFailThenTick(t *testing.T) {
	f := newFixture(t, nil)
	r := f.init("tx", 60_000)
	f.add("tx", r, a0, a1, a2)
	f.markers.fail = func(tp TopicPartition) error {
		if tp == a1 {
			return errInjected
		}
		return nil
	}
	wantCode(t, "commit (answered after the prepare)", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), nil)
	f.wantState("tx", kmsg.TransactionStatePrepareCommit)
	wantCode(t, "retried commit while prepared", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), kerr.ConcurrentTransactions)
	wantCode(t, "abort while commit prepared", f.c.EndTxn("tx", r.ProducerID, r.Epoch, false), kerr.InvalidTxnState)
	for tp, code := range f.c.AddPartitions("tx", r.ProducerID, r.Epoch, []TopicPartition{b0}) {
		wantCode(t, fmt.Sprintf("add %v while prepared", tp), code, kerr.ConcurrentTransactions)
	}
	f.c.Tick()
	f.wantState("tx", kmsg.TransactionStatePrepareCommit)
	f.markers.take()

	f.markers.fail = nil
	f.c.Tick()
	f.wantState("tx", kmsg.TransactionStateCompleteCommit)
	want := []marker{{a0, r.ProducerID, 0, true}, {a1, r.ProducerID, 0, true}, {a2, r.ProducerID, 0, true}}
	if got := f.markers.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers of the retry %v, want %v", got, want)
	}
}

// TestCrashBetweenPrepareAndComplete: for each number k of markers written
// before the broker dies (0 .. all), for commit and abort, a coordinator
// restarted on the same state log writes the outcome's marker to every
// partition and completes the transaction; no partition ever gets the other
// outcome's marker, and the producer carries on at its epoch.
func TestCrashBetweenPrepareAndComplete(t *testing.T) {
	tps := []TopicPartition{a0, a1, a2, b0, b1}
	for _, commit := range []bool{true, false} {
		for k := 0; k <= len(tps); k++ {
			t.Run(fmt.Sprintf("commit=%v/markers=%d", commit, k), func(t *testing.T) {
				f := newFixture(t, nil)
				r := f.init("tx", 60_000)
				f.add("tx", r, tps...)
				written := 0
				crashed := false
				f.markers.fail = func(TopicPartition) error {
					if written == k {
						crashed = true
						return errInjected // the process dies here: nothing after it happens
					}
					written++
					return nil
				}
				// Every append after the crash point fails too (the process is gone).
				f.log.failAppend = func(int32) error {
					if crashed {
						return errInjected
					}
					return nil
				}
				f.c.EndTxn("tx", r.ProducerID, r.Epoch, commit)
				prepared := kmsg.TransactionStatePrepareAbort
				complete := kmsg.TransactionStateCompleteAbort
				if commit {
					prepared, complete = kmsg.TransactionStatePrepareCommit, kmsg.TransactionStateCompleteCommit
				}
				recs := f.log.records(t, "tx")
				if k < len(tps) && recs[len(recs)-1].state != prepared {
					t.Fatalf("before the restart the log ends in %v, want %v", recs[len(recs)-1].state, prepared)
				}
				before := f.markers.take()
				if len(before) != k {
					t.Fatalf("%d markers written before the crash, want %d", len(before), k)
				}

				f.markers.fail, f.log.failAppend = nil, nil
				f.restart()
				d := f.wantState("tx", complete)
				if d.ProducerID != r.ProducerID || d.ProducerEpoch != r.Epoch || len(d.Partitions) != 0 {
					t.Fatalf("after the restart: %+v", d)
				}
				got := map[TopicPartition]int{}
				for _, m := range append(before, f.markers.take()...) {
					if m.commit != commit || m.producerID != r.ProducerID || m.epoch != r.Epoch {
						t.Fatalf("marker %+v, want commit=%v by %d at epoch %d", m, commit, r.ProducerID, r.Epoch)
					}
					got[m.tp]++
				}
				for _, tp := range tps {
					if got[tp] == 0 {
						t.Fatalf("no marker on %v after the restart (markers %v)", tp, got)
					}
				}
				recs = f.log.records(t, "tx")
				if last := recs[len(recs)-1]; last.state != complete {
					t.Fatalf("the log ends in %v, want %v", last.state, complete)
				}
				// The producer goes on with its id and epoch.
				f.add("tx", InitResult{ProducerID: r.ProducerID, Epoch: r.Epoch}, a0)
				wantCode(t, "next commit", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), nil)
			})
		}
	}
}

// TestEpochFenceReplayed: a transaction replayed in PrepareEpochFence (Kafka
// writes it while fencing) is aborted at load.
func TestEpochFenceReplayed(t *testing.T) {
	f := newFixture(t, nil)
	p, _ := f.c.EnsureStateTopic("fenced")
	s := snapshot{producerID: 55, lastProducerID: -1, epoch: 4, timeoutMs: 60_000, state: kmsg.TransactionStatePrepareEpochFence,
		partitions: map[TopicPartition]struct{}{a2: {}}, startMs: 1}
	f.log.appendRaw(t, p, "fenced", s.value())
	f.restart()
	f.wantState("fenced", kmsg.TransactionStateCompleteAbort)
	if got := f.markers.take(); !reflect.DeepEqual(got, []marker{{a2, 55, 4, false}}) {
		t.Fatalf("markers %v", got)
	}
}

// TestStateLogFailure: a transition whose record cannot be appended is not
// applied (in memory or after a restart), and the client gets a retriable
// code; once the log works the same request succeeds.
func TestStateLogFailure(t *testing.T) {
	f := newFixture(t, nil)
	r := f.init("tx", 60_000)
	f.add("tx", r, a0)
	f.log.failAppend = func(int32) error { return errInjected }
	wantCode(t, "commit with the log failing", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), kerr.CoordinatorNotAvailable)
	f.wantState("tx", kmsg.TransactionStateOngoing)
	if m := f.markers.take(); len(m) != 0 {
		t.Fatalf("markers written without a prepare record: %v", m)
	}
	for _, code := range f.c.AddPartitions("tx", r.ProducerID, r.Epoch, []TopicPartition{b0}) {
		wantCode(t, "add with the log failing", code, kerr.CoordinatorNotAvailable)
	}
	res := f.c.InitProducerID("new", 60_000, -1, -1)
	wantCode(t, "init of a new id with the log failing", res.ErrorCode, kerr.CoordinatorNotAvailable)
	if _, ok, _ := f.c.Describe("new"); ok {
		t.Fatal("a new id whose first record failed is held")
	}
	f.log.failAppend = nil
	f.restart()
	d := f.wantState("tx", kmsg.TransactionStateOngoing)
	if !reflect.DeepEqual(d.Partitions, []TopicPartition{a0}) {
		t.Fatalf("after the restart: %+v", d)
	}
	wantCode(t, "commit", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), nil)
}

// TestReplay: a restart rebuilds every transactional id from the state
// log as it was (ids spread over the partitions, in every state), honours
// tombstones, and skips a record it cannot read.
func TestReplay(t *testing.T) {
	f := newFixture(t, nil)
	const n = 24
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("id-%d", i)
		r := f.init(id, int32(10_000+i))
		switch i % 4 {
		case 1:
			f.add(id, r, a0, TopicPartition{"b", int32(i % 2)})
		case 2:
			f.add(id, r, a1)
			wantCode(t, "commit", f.c.EndTxn(id, r.ProducerID, r.Epoch, true), nil)
		case 3:
			f.add(id, r, a2)
			wantCode(t, "abort", f.c.EndTxn(id, r.ProducerID, r.Epoch, false), nil)
			f.init(id, 20_000) // epoch 1
		}
		f.clock.Advance(time.Millisecond)
	}
	before := f.c.List(Filter{})
	if len(before) != n {
		t.Fatalf("listed %d, want %d", len(before), n)
	}
	used := map[int32]bool{}
	for i := 0; i < n; i++ {
		used[group.PartitionFor(fmt.Sprintf("id-%d", i), 4)] = true
	}
	if len(used) < 2 {
		t.Fatalf("the ids fall on %d partitions of the state log; the test wants several", len(used))
	}
	full := map[string]Description{}
	for _, d := range before {
		full[d.TransactionalID] = f.describe(d.TransactionalID)
	}
	// A tombstone for id-0 and an unreadable record for id-5 (the last
	// readable record of id-5 stands).
	p0, _ := f.c.EnsureStateTopic("id-0")
	f.log.appendRaw(t, p0, "id-0", nil)
	p5, _ := f.c.EnsureStateTopic("id-5")
	f.log.appendRaw(t, p5, "id-5", []byte{0, 1, 0xff})
	f.restart()

	after := f.c.List(Filter{})
	if len(after) != n-1 {
		t.Fatalf("after the restart %d ids listed, want %d", len(after), n-1)
	}
	for _, d := range after {
		if got := f.describe(d.TransactionalID); !reflect.DeepEqual(got, full[d.TransactionalID]) {
			t.Errorf("%s after the restart:\n got %+v\nwant %+v", d.TransactionalID, got, full[d.TransactionalID])
		}
	}
	if _, ok, _ := f.c.Describe("id-0"); ok {
		t.Fatal("id-0 survived its tombstone")
	}
	// Filters.
	ongoing := f.c.List(Filter{States: map[kmsg.TransactionState]bool{kmsg.TransactionStateOngoing: true}})
	if len(ongoing) != n/4 {
		t.Fatalf("%d ongoing, want %d", len(ongoing), n/4)
	}
	old := f.c.List(Filter{MinDuration: time.Duration(n-2) * time.Millisecond})
	if len(old) != 1 || old[0].TransactionalID != "id-1" {
		t.Fatalf("open at least %d ms: %v", n-2, old)
	}
	if l := f.c.List(Filter{Limit: 3, Match: func(id string) bool { return strings.HasSuffix(id, "1") }}); len(l) != 3 || l[0].TransactionalID != "id-1" {
		t.Fatalf("limited match: %v", l)
	}
}

// TestOwnership: an id whose state partition is not owned is answered
// NOT_COORDINATOR; Unload forgets it and Load brings it back as written.
func TestOwnership(t *testing.T) {
	f := newFixture(t, nil)
	r := f.init("tx", 60_000)
	f.add("tx", r, a0)
	p, _ := f.c.EnsureStateTopic("tx")
	f.own.mu.Lock()
	f.own.lost[p] = true
	f.own.mu.Unlock()
	wantCode(t, "end on a lost partition", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), kerr.NotCoordinator)
	wantCode(t, "init on a lost partition", f.c.InitProducerID("tx", 60_000, -1, -1).ErrorCode, kerr.NotCoordinator)
	if l := f.c.List(Filter{}); len(l) != 0 {
		t.Fatalf("listed on a lost partition: %v", l)
	}
	f.c.Unload(p)
	f.own.mu.Lock()
	f.own.lost[p] = false
	f.own.mu.Unlock()
	if _, ok, _ := f.c.Describe("tx"); ok {
		t.Fatal("held after Unload")
	}
	if err := f.c.Load(p); err != nil {
		t.Fatal(err)
	}
	f.wantState("tx", kmsg.TransactionStateOngoing)
	wantCode(t, "end after Load", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), nil)
}

// TestBounds: the limits of the package doc, each a Kafka error code, and
// the state untouched by a refused request.
func TestBounds(t *testing.T) {
	f := newFixture(t, func(o *Options) {
		o.MaxPartitions, o.MaxTransactionIDs, o.MaxTimeout = 3, 2, time.Minute
	})
	wantCode(t, "empty id", f.c.InitProducerID("", 1000, -1, -1).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "id too long", f.c.InitProducerID(strings.Repeat("x", MaxTransactionalIDBytes+1), 1000, -1, -1).ErrorCode, kerr.InvalidRequest)
	f.init(strings.Repeat("y", MaxTransactionalIDBytes), 1000)
	wantCode(t, "timeout 0", f.c.InitProducerID("t", 0, -1, -1).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "timeout past the max", f.c.InitProducerID("t", 60_001, -1, -1).ErrorCode, kerr.InvalidTransactionTimeout)

	r := f.init("tx", 60_000)
	for _, code := range f.c.AddPartitions("tx", r.ProducerID, r.Epoch, []TopicPartition{a0, a1, a2, b0}) {
		wantCode(t, "4 partitions at once", code, kerr.InvalidRequest)
	}
	f.add("tx", r, a0, a1)
	for _, code := range f.c.AddPartitions("tx", r.ProducerID, r.Epoch, []TopicPartition{a2, b0}) {
		wantCode(t, "a fourth partition", code, kerr.InvalidRequest)
	}
	f.add("tx", r, a2, a0)
	codes := f.c.AddPartitions("tx", r.ProducerID, r.Epoch, []TopicPartition{a0, {"nope", 0}, {"a", 9}})
	if codes[a0] != kerr.OperationNotAttempted.Code || codes[TopicPartition{"nope", 0}] != kerr.UnknownTopicOrPartition.Code ||
		codes[TopicPartition{"a", 9}] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partitions: %v", codes)
	}
	if d := f.describe("tx"); len(d.Partitions) != 3 {
		t.Fatalf("partitions after refused adds: %v", d.Partitions)
	}
	wantCode(t, "a third id", f.c.InitProducerID("four", 1000, -1, -1).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "a known id past the id limit", f.c.InitProducerID("tx", 60_000, -1, -1).ErrorCode, nil)

	// A record larger than one batch of the state log.
	g := newFixture(t, func(o *Options) { o.MaxPartitions = 100 })
	g.log.maxBatch = 200
	r = g.init("tx", 60_000)
	var many []TopicPartition
	for p := int32(0); p < 3; p++ {
		tp := TopicPartition{strings.Repeat(string(rune('t'+p)), 60), p}
		g.markers.exists[tp] = true
		many = append(many, tp)
	}
	for _, code := range g.c.AddPartitions("tx", r.ProducerID, r.Epoch, many) {
		wantCode(t, "a record past the batch limit", code, kerr.MessageTooLarge)
	}
	g.wantState("tx", kmsg.TransactionStateEmpty)
}

// TestDeletedPartition: a partition deleted during the transaction is
// skipped by the markers; the transaction completes.
func TestDeletedPartition(t *testing.T) {
	f := newFixture(t, nil)
	r := f.init("tx", 60_000)
	f.add("tx", r, a0, b0)
	f.markers.mu.Lock()
	delete(f.markers.exists, b0)
	f.markers.mu.Unlock()
	wantCode(t, "commit", f.c.EndTxn("tx", r.ProducerID, r.Epoch, true), nil)
	f.wantState("tx", kmsg.TransactionStateCompleteCommit)
	if got := f.markers.take(); !reflect.DeepEqual(got, []marker{{a0, r.ProducerID, 0, true}}) {
		t.Fatalf("markers %v", got)
	}
}
