package history

import (
	"fmt"
	"reflect"
	"testing"
)

// txnHistory: a committed transaction over two partitions (offsets 0 of p0
// and p1, the markers at 1), an aborted one (2 of p0, 2 of p1, markers at
// 3), an unknown one that was committed (4 of p0, 4 of p1) and an unknown
// one that was aborted; a read_committed consumer and final read see the
// committed ones only. mutate changes the reads before they are recorded.
func txnHistory(mutate func(poll, final0, final1 *[]Record)) History {
	b := newBuilder()
	b.op(2, Assign, Op{Outcome: OK, Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 0}}})
	b.op(1, Txn, Op{Outcome: OK, Records: []Record{{Topic: "t", Partition: 0, Offset: 0, Value: "c1"}, {Topic: "t", Partition: 1, Offset: 0, Value: "c2"}}})
	b.op(1, Txn, Op{Outcome: Fail, Records: []Record{{Topic: "t", Partition: 0, Offset: 2, Value: "a1"}, {Topic: "t", Partition: 1, Offset: 2, Value: "a2"}}})
	b.op(1, Txn, Op{Outcome: Unknown, Records: []Record{{Topic: "t", Partition: 0, Offset: 4, Value: "u1"}, {Topic: "t", Partition: 1, Offset: 4, Value: "u2"}}})
	b.op(1, Txn, Op{Outcome: Unknown, Records: []Record{{Topic: "t", Partition: 0, Offset: 6, Value: "v1"}, {Topic: "t", Partition: 1, Offset: 6, Value: "v2"}}})
	poll := recs(0, 0, "c1", 4, "u1")
	f0, f1 := recs(0, 0, "c1", 4, "u1"), recs(1, 0, "c2", 4, "u2")
	if mutate != nil {
		mutate(&poll, &f0, &f1)
	}
	b.poll(2, poll)
	b.op(99, FinalRead, Op{Outcome: OK, Records: append(f0, f1...), Ranges: []Range{{Topic: "t", Partition: 0, Start: 0, End: 8}, {Topic: "t", Partition: 1, Start: 0, End: 8}}})
	return b.r.History()
}

func TestTxnCheckClean(t *testing.T) {
	h := txnHistory(nil)
	if res := TxnCheck(h); !res.OK() {
		t.Fatalf("clean transactional history: %s", res.Report(h, 1))
	}
}

func TestTxnCheckAnomalies(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(poll, f0, f1 *[]Record)
		want   []AnomalyKind
	}{
		{"aborted value polled", func(poll, _, _ *[]Record) { *poll = recs(0, 0, "c1", 2, "a1", 4, "u1") },
			[]AnomalyKind{AbortedRead}},
		// the poll that passed over it is then a skip too
		{"aborted transaction in the final read", func(_, f0, f1 *[]Record) {
			*f0 = append(*f0, Record{Topic: "t", Partition: 0, Offset: 2, Value: "a1"})
			*f1 = append(*f1, Record{Topic: "t", Partition: 1, Offset: 2, Value: "a2"})
		}, []AnomalyKind{AbortedRead, Skip}},
		{"committed value lost, half a transaction", func(_, f0, _ *[]Record) { *f0 = (*f0)[1:] },
			[]AnomalyKind{Lost, TxnPartial}},
		{"unknown transaction half visible", func(_, _, f1 *[]Record) { *f1 = (*f1)[:1] },
			[]AnomalyKind{TxnPartial}},
		{"committed value twice", func(_, f0, _ *[]Record) { *f0 = append(*f0, Record{Topic: "t", Partition: 0, Offset: 7, Value: "c1"}) },
			[]AnomalyKind{Duplicate}},
		{"value of no transaction", func(poll, _, _ *[]Record) {
			*poll = append(*poll, Record{Topic: "t", Partition: 0, Offset: 5, Value: "zz"})
		},
			[]AnomalyKind{Phantom}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := txnHistory(c.mutate)
			res := TxnCheck(h)
			if got := res.Kinds(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("kinds %v, want %v:\n%s", got, c.want, res.Report(h, 1))
			}
			for _, a := range res.Anomalies {
				for _, id := range a.Ops {
					if id < 0 || id >= len(h) {
						t.Fatalf("anomaly %v names op %d outside the history", a, id)
					}
				}
			}
		})
	}
}

// BenchmarkTxnCheck: a minute's chaos run holds ~80,000 transactions and a
// final read of ~240,000 values; the check must stay near-linear in them.
func BenchmarkTxnCheck(b *testing.B) {
	bl := newBuilder()
	var all []Record
	off := [3]int64{}
	for i := 0; i < 20000; i++ {
		var rs []Record
		for k := 0; k < 3; k++ {
			p := int32(k)
			rs = append(rs, Record{Topic: "t", Partition: p, Offset: off[p], Value: fmt.Sprintf("v%d-%d", i, k)})
			off[p] += 2
		}
		bl.op(1, Txn, Op{Outcome: OK, Records: rs})
		all = append(all, rs...)
	}
	var rg []Range
	for p := int32(0); p < 3; p++ {
		rg = append(rg, Range{Topic: "t", Partition: p, Start: 0, End: off[p]})
	}
	bl.op(99, FinalRead, Op{Outcome: OK, Records: all, Ranges: rg})
	h := bl.r.History()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := TxnCheck(h); !res.OK() {
			b.Fatal(res.Report(h, 1))
		}
	}
}
