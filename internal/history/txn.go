package history

import (
	"fmt"
	"sort"
)

// Transactions (KIP-98) in a history.
//
// A transactional producer records one op of kind txn per transaction: its
// Records are the values the transaction wrote (Topic, Partition, Value,
// and Offset as the produce acknowledged it, -1 when unknown), Start is
// taken before the first produce and End once EndTxn answered. Its
// outcome is the transaction's:
//
//	ok       EndTxn(commit) succeeded: every value must be visible to
//	         read_committed, once
//	fail     the transaction was aborted: EndTxn(abort) was sent, or
//	         commit never was (a produce failed; the coordinator aborts it
//	         at the latest when it times out); no value may be visible to
//	         read_committed
//	unknown  EndTxn(commit) was sent and its answer lost: the transaction
//	         is committed or aborted, all or nothing
//
// TxnCheck checks a history of txn ops and reads done with
// isolation_level=read_committed (polls and final-reads; a final read of
// transactions must wait until no transaction is open, the last stable
// offset at the high watermark, or a committed transaction whose markers
// are still being written would look partial). Every read is taken as a
// read_committed one. Besides Check's anomalies over the values (a
// committed transaction's values are ok produces, an unknown one's unknown
// produces), it reports:
//
//	aborted-read  a value of an aborted (fail) transaction that a read
//	              returned
//	txn-partial   an ok final-read that began after a transaction ended and
//	              covers all its partitions (and acknowledged offsets) holds
//	              some of its values but not all
//
// A committed value missing from such a final read is Check's lost; read
// twice, duplicate; a value of no transaction, phantom.
const (
	// Txn is one transaction of a transactional producer.
	Txn Kind = "txn"

	AbortedRead AnomalyKind = "aborted-read"
	TxnPartial  AnomalyKind = "txn-partial"
)

// TxnCheck checks a history holding txn ops (see above). Anomalies name
// the ids of h's operations.
func TxnCheck(h History) Result {
	// Check's view: each value of a transaction is a produce of it, with
	// the transaction's ticks; an aborted transaction's values are unknown
	// produces there, so that reading one is aborted-read below and not a
	// phantom too (duplicates of them still count).
	var flat History
	var orig []int // flat id → h id
	aborted := map[string]int{}
	for i := range h {
		op := h[i]
		if op.Kind != Txn {
			op.ID = len(flat)
			flat = append(flat, op)
			orig = append(orig, i)
			continue
		}
		out := op.Outcome
		if out == Fail {
			out = Unknown
		}
		for _, r := range op.Records {
			if op.Outcome == Fail {
				aborted[r.Value] = i
			}
			off := r.Offset
			if op.Outcome != OK {
				off = -1
			}
			flat = append(flat, Op{ID: len(flat), Process: op.Process, Kind: Produce, Outcome: out, Start: op.Start, End: op.End,
				Topic: r.Topic, Partition: r.Partition, Offset: off, Value: r.Value, Error: op.Error,
				Idempotent: true}) // a transactional producer is idempotent
			orig = append(orig, i)
		}
	}
	res := Check(flat)
	for i := range res.Anomalies {
		a := &res.Anomalies[i]
		ids := make([]int, len(a.Ops))
		for j, id := range a.Ops {
			ids[j] = orig[id]
		}
		a.Ops = sortedIDs(ids...)
	}
	res.Anomalies = append(res.Anomalies, abortedReads(h, aborted)...)
	res.Anomalies = append(res.Anomalies, partialTxns(h)...)
	sort.SliceStable(res.Anomalies, func(i, j int) bool {
		a, b := res.Anomalies[i], res.Anomalies[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return firstOp(a) < firstOp(b)
	})
	return res
}

// abortedReads: each value of an aborted transaction that some read
// returned, at its first read.
func abortedReads(h History, aborted map[string]int) []Anomaly {
	var out []Anomaly
	reported := map[string]bool{}
	for i := range h {
		op := &h[i]
		if !isRead(op) {
			continue
		}
		for _, r := range op.Records {
			txn, ok := aborted[r.Value]
			if !ok || reported[r.Value] {
				continue
			}
			reported[r.Value] = true
			out = append(out, Anomaly{Kind: AbortedRead, Ops: sortedIDs(txn, op.ID),
				Detail: fmt.Sprintf("value %q of aborted transaction op %d read at %s by op %d", r.Value, txn, position{r.Topic, r.Partition, r.Offset}, op.ID)})
		}
	}
	return out
}

// partialTxns: a final read after a transaction that covers all of it and
// holds some but not all of its values.
func partialTxns(h History) []Anomaly {
	var finals []*Op
	var values []map[string]int // finals[i]'s values, made once
	for i := range h {
		if op := &h[i]; op.Kind == FinalRead && op.Outcome == OK {
			finals = append(finals, op)
			values = append(values, valueSet(op))
		}
	}
	var out []Anomaly
	for i := range h {
		t := &h[i]
		if t.Kind != Txn || len(t.Records) < 2 {
			continue
		}
		for j, f := range finals {
			if f.Start <= t.End || !coversTxn(f, t) {
				continue
			}
			vs := values[j]
			var in, missing []string
			for _, r := range t.Records {
				if vs[r.Value] > 0 {
					in = append(in, r.Value)
				} else {
					missing = append(missing, r.Value)
				}
			}
			if len(in) > 0 && len(missing) > 0 {
				out = append(out, Anomaly{Kind: TxnPartial, Ops: []int{t.ID, f.ID},
					Detail: fmt.Sprintf("%s transaction op %d: final read op %d holds %q but not %q", t.Outcome, t.ID, f.ID, in, missing)})
				break
			}
		}
	}
	return out
}

// coversTxn reports whether final read f covers every partition of t, and
// every acknowledged offset of a committed t.
func coversTxn(f, t *Op) bool {
	for _, r := range t.Records {
		off := int64(-1)
		if t.Outcome == OK {
			off = r.Offset
		}
		if !covers(f.Ranges, r.Topic, r.Partition, off) {
			return false
		}
	}
	return true
}
