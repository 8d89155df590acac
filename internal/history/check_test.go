package history

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// builder hand-builds histories: each call is one op, invoked and
// completed at once unless overlapped explicitly.
type builder struct{ r *Recorder }

func newBuilder() *builder { return &builder{r: NewRecorder(nil)} }

func (b *builder) op(process int, kind Kind, op Op) Op {
	return b.r.Invoke(process, kind).Complete(op)
}

func (b *builder) produce(process int, outcome Outcome, part int32, off int64, v string) {
	b.op(process, Produce, Op{Outcome: outcome, Topic: "t", Partition: part, Offset: off, Value: v})
}

func recs(part int32, kv ...any) []Record {
	var out []Record
	for i := 0; i < len(kv); i += 2 {
		out = append(out, Record{Topic: "t", Partition: part, Offset: int64(kv[i].(int)), Value: kv[i+1].(string)})
	}
	return out
}

func (b *builder) poll(process int, rs []Record) {
	b.op(process, Poll, Op{Outcome: OK, Records: rs})
}

func (b *builder) final(part int32, end int64, rs []Record) {
	b.op(99, FinalRead, Op{Outcome: OK, Records: rs, Ranges: []Range{{Topic: "t", Partition: part, Start: 0, End: end}}})
}

func (b *builder) commit(process int, kind Kind, off int64) {
	b.op(process, kind, Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: off}}})
}

func (b *builder) load(end int64, rs []Record) {
	rg := []Range{{Topic: "t", Partition: 0, Start: 0, End: end}}
	b.op(98, LoadRead, Op{Outcome: OK, Records: rs, Ranges: rg, Want: rg})
}

// clean is a valid history of every kind: three produces (one unknown,
// absent; one failed, absent), polls, commits, a final read and a load.
func clean() *builder {
	b := newBuilder()
	b.op(2, Assign, Op{Outcome: OK, Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 0}}})
	b.produce(1, OK, 0, 0, "a")
	b.produce(1, OK, 0, 1, "b")
	b.poll(2, recs(0, 0, "a"))
	b.produce(1, Unknown, 0, -1, "x")
	b.produce(1, Fail, 0, -1, "f")
	b.commit(2, Commit, 1)
	b.poll(2, recs(0, 1, "b"))
	b.commit(2, Commit, 2)
	b.commit(3, FetchCommitted, 2)
	b.produce(1, OK, 0, 2, "c")
	b.final(0, 3, recs(0, 0, "a", 1, "b", 2, "c"))
	b.load(3, recs(0, 0, "a", 1, "b", 2, "c"))
	return b
}

func TestCleanHistoryHasNoAnomaly(t *testing.T) {
	h := clean().r.History()
	if res := Check(h); !res.OK() {
		t.Fatal(res.Report(h, 1))
	}
}

// Each anomaly: a small history that has it, where the checker reports
// exactly that kind.
func TestEachAnomalyReportedExactly(t *testing.T) {
	cases := []struct {
		name string
		want AnomalyKind
		ops  int // operations the anomaly names
		add  func(b *builder)
	}{
		{"lost", Lost, 2, func(b *builder) {
			b.produce(1, OK, 1, 0, "l")
			b.final(1, 1, nil)
		}},
		{"duplicate", Duplicate, 2, func(b *builder) {
			b.produce(1, OK, 1, 0, "d")
			b.final(1, 2, recs(1, 0, "d", 1, "d"))
		}},
		{"inconsistent", Inconsistent, 2, func(b *builder) {
			b.produce(1, OK, 1, 0, "i")
			b.produce(1, Unknown, 1, -1, "j")
			b.poll(5, recs(1, 0, "j"))
		}},
		{"nonmonotonic", Nonmonotonic, 2, func(b *builder) {
			b.produce(1, OK, 1, 0, "n0")
			b.produce(1, OK, 1, 1, "n1")
			b.poll(5, recs(1, 0, "n0", 1, "n1"))
			b.poll(5, recs(1, 1, "n1"))
		}},
		{"skip", Skip, 3, func(b *builder) {
			b.produce(1, OK, 1, 0, "s0")
			b.produce(1, OK, 1, 1, "s1")
			b.produce(1, OK, 1, 2, "s2")
			b.poll(5, recs(1, 0, "s0"))
			b.poll(5, recs(1, 2, "s2"))
		}},
		{"skip after assign", Skip, 3, func(b *builder) {
			b.produce(1, OK, 1, 0, "s0")
			b.produce(1, OK, 1, 1, "s1")
			b.op(5, Assign, Op{Outcome: OK, Offsets: []Offset{{Topic: "t", Partition: 1, Offset: 0}}})
			b.poll(5, recs(1, 1, "s1"))
		}},
		{"phantom never written", Phantom, 1, func(b *builder) {
			b.poll(5, recs(1, 0, "ghost"))
		}},
		{"phantom of a failed write", Phantom, 2, func(b *builder) {
			b.produce(1, Fail, 1, -1, "nope")
			b.poll(5, recs(1, 0, "nope"))
		}},
		{"phantom read before its write", Phantom, 2, func(b *builder) {
			b.poll(5, recs(1, 0, "early"))
			b.produce(1, Unknown, 1, -1, "early")
		}},
		{"commit backwards", CommitBackwards, 2, func(b *builder) {
			b.commit(5, Commit, 7)
			b.commit(6, Commit, 5)
		}},
		{"commit backwards past a concurrent lower one", CommitBackwards, 2, func(b *builder) {
			c7 := b.r.Invoke(5, Commit)
			c6 := b.r.Invoke(6, Commit)
			c7.Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 7}}})
			c6.Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 6}}})
			b.commit(7, FetchCommitted, 6)
		}},
		{"fetch sees a commit go backwards", CommitBackwards, 2, func(b *builder) {
			b.commit(5, Commit, 7)
			b.commit(6, FetchCommitted, -1)
		}},
		{"load duplicate", LoadDuplicate, 2, func(b *builder) {
			b.produce(1, OK, 1, 0, "ld")
			b.op(98, LoadRead, Op{Outcome: OK, Records: recs(1, 0, "ld", 0, "ld")})
		}},
		{"load lost", LoadLost, 2, func(b *builder) {
			b.produce(1, OK, 1, 0, "ll")
			b.op(98, LoadRead, Op{Outcome: OK, Ranges: []Range{{Topic: "t", Partition: 1, Start: 0, End: 1}}})
		}},
		{"load incomplete: nothing loaded of what was waited for", LoadIncomplete, 3, func(b *builder) {
			b.produce(1, OK, 1, 0, "li0")
			b.produce(1, OK, 1, 1, "li1")
			b.op(98, LoadRead, Op{Outcome: OK, Want: []Range{{Topic: "t", Partition: 1, Start: 0, End: 2}}})
		}},
		{"load incomplete: the loads stopped short", LoadIncomplete, 2, func(b *builder) {
			b.produce(1, OK, 1, 0, "ls0")
			b.produce(1, OK, 1, 1, "ls1")
			b.op(98, LoadRead, Op{Outcome: OK, Records: recs(1, 0, "ls0"),
				Ranges: []Range{{Topic: "t", Partition: 1, Start: 0, End: 1}}, Want: []Range{{Topic: "t", Partition: 1, Start: 0, End: 2}}})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := clean()
			c.add(b)
			h := b.r.History()
			res := Check(h)
			if len(res.Anomalies) != 1 || res.Anomalies[0].Kind != c.want || len(res.Anomalies[0].Ops) != c.ops {
				t.Fatalf("want exactly one %s naming %d ops, got:\n%s", c.want, c.ops, res.Report(h, 1))
			}
			rep := res.Report(h, 1)
			for _, id := range res.Anomalies[0].Ops {
				if !strings.Contains(rep, " > "+h[id].String()) {
					t.Fatalf("report does not mark op %d:\n%s", id, rep)
				}
			}
		})
	}
}

// Near misses: histories that look like an anomaly but are not one.
func TestNearMissesAreClean(t *testing.T) {
	cases := []struct {
		name string
		add  func(b *builder)
	}{
		{"unknown produce absent from the final read", func(b *builder) {
			b.produce(1, Unknown, 1, -1, "u")
			b.final(1, 0, nil)
		}},
		{"unknown produce present once", func(b *builder) {
			b.produce(1, Unknown, 1, -1, "u")
			b.final(1, 1, recs(1, 0, "u"))
			b.op(98, LoadRead, Op{Outcome: OK, Records: recs(1, 0, "u"), Ranges: []Range{{Topic: "t", Partition: 1, Start: 0, End: 1}}})
		}},
		{"final read concurrent with the produce", func(b *builder) {
			f := b.r.Invoke(99, FinalRead)
			b.produce(1, OK, 1, 0, "late")
			f.Complete(Op{Outcome: OK, Ranges: []Range{{Topic: "t", Partition: 1, Start: 0, End: 1}}})
		}},
		{"final read not covering the offset", func(b *builder) {
			b.produce(1, OK, 1, 5, "beyond")
			b.final(1, 5, nil)
		}},
		{"reread after an assign", func(b *builder) {
			b.produce(1, OK, 1, 0, "r0")
			b.poll(5, recs(1, 0, "r0"))
			b.op(5, Assign, Op{Outcome: OK, Offsets: []Offset{{Topic: "t", Partition: 1, Offset: 0}}})
			b.poll(5, recs(1, 0, "r0"))
		}},
		{"gap no read shows a record in", func(b *builder) {
			b.produce(1, OK, 1, 0, "g0")
			b.produce(1, OK, 1, 5, "g5")
			b.poll(5, recs(1, 0, "g0", 5, "g5"))
		}},
		{"concurrent commits in either order", func(b *builder) {
			c1 := b.r.Invoke(5, Commit)
			c2 := b.r.Invoke(6, Commit)
			c2.Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 9}}})
			c1.Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 8}}})
		}},
		{"load-read without Want claims no progress", func(b *builder) {
			b.produce(1, OK, 1, 0, "nw")
			b.op(98, LoadRead, Op{Outcome: OK})
		}},
		{"unwanted produces need not be loaded", func(b *builder) {
			b.produce(1, Unknown, 1, -1, "wu")
			b.produce(1, OK, 1, 1, "beyond")
			l := b.r.Invoke(98, LoadRead)
			b.produce(1, OK, 1, 0, "during") // acknowledged while the load-read ran
			l.Complete(Op{Outcome: OK, Want: []Range{{Topic: "t", Partition: 1, Start: 0, End: 1}}})
		}},
		{"failed commit lower", func(b *builder) {
			b.op(5, Commit, Op{Outcome: Fail, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 0}}})
		}},
		{"other group lower", func(b *builder) {
			b.op(5, Commit, Op{Outcome: OK, Group: "h", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 0}}})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := clean()
			c.add(b)
			h := b.r.History()
			if res := Check(h); !res.OK() {
				t.Fatal(res.Report(h, 1))
			}
		})
	}
}

func TestRecorderWritesWhatReadReads(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf)
	b := &builder{r: r}
	b.produce(1, OK, 0, 0, "a")
	b.poll(2, recs(0, 0, "a"))
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if want := r.History(); !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v, recorded %+v", got, want)
	}
	path := t.TempDir() + "/history.jsonl"
	if err := WriteFile(path, got); err != nil {
		t.Fatal(err)
	}
	again, err := ReadFile(path)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("ReadFile: %v, %+v", err, again)
	}
	if _, err := Read(strings.NewReader(`{"id":1}` + "\n")); err == nil {
		t.Fatal("an id out of order was read")
	}
	if _, err := Read(strings.NewReader(`{"id":0`)); err == nil {
		t.Fatal("a torn line was read")
	}
}

func TestRecorderConcurrentUse(t *testing.T) {
	r := NewRecorder(&bytes.Buffer{})
	done := make(chan struct{})
	for p := 0; p < 8; p++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 100; i++ {
				r.Invoke(p, Produce).Complete(Op{Outcome: Unknown, Offset: -1, Value: "v"})
			}
		}()
	}
	for p := 0; p < 8; p++ {
		<-done
	}
	h := r.History()
	if len(h) != 800 {
		t.Fatalf("%d ops", len(h))
	}
	seen := map[int64]bool{}
	for i, op := range h {
		if op.ID != i || op.Start >= op.End || seen[op.Start] || seen[op.End] {
			t.Fatalf("op %d: %+v", i, op)
		}
		seen[op.Start], seen[op.End] = true, true
		if i > 0 && op.End <= h[i-1].End {
			t.Fatalf("completion order broken at %d", i)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A skip names the first operation that showed the skipped offset, the
// same on every Check, even where that offset was seen holding two values.
func TestSkipNamesTheFirstSighting(t *testing.T) {
	b := clean()
	b.produce(1, OK, 1, 0, "s0")
	shown := b.op(1, Produce, Op{Outcome: OK, Topic: "t", Partition: 1, Offset: 1, Value: "s1"}).ID
	b.produce(1, Unknown, 1, -1, "s1b")
	b.poll(6, recs(1, 1, "s1b"))
	b.produce(1, OK, 1, 2, "s2")
	from := b.op(5, Poll, Op{Outcome: OK, Records: recs(1, 0, "s0")}).ID
	to := b.op(5, Poll, Op{Outcome: OK, Records: recs(1, 2, "s2")}).ID
	h := b.r.History()
	want := []int{shown, from, to}
	for i := 0; i < 50; i++ {
		if sk := Check(h).Of(Skip); len(sk) != 1 || !reflect.DeepEqual(sk[0].Ops, want) {
			t.Fatalf("check %d: skips %+v, want one naming ops %v", i, sk, want)
		}
	}
}

// The duplicate rule: a value may hold several positions only when no
// produce of it was idempotent and its produces were sent that many times
// (a non-idempotent producer's retry after a lost acknowledgement:
// Kafka's semantics); an idempotent producer's value holds one, however
// often it was sent. A lost acknowledged write is lost whatever the
// producer. Loads take each position of a value once.
func TestDuplicateAllowedOnlyForARetriedNonIdempotentProduce(t *testing.T) {
	produce := func(b *builder, outcome Outcome, off int64, v string, idempotent bool, attempts int) {
		b.op(1, Produce, Op{Outcome: outcome, Topic: "t", Partition: 1, Offset: off, Value: v, Idempotent: idempotent, Attempts: attempts})
	}
	cases := []struct {
		name    string
		want    []AnomalyKind // nil: clean
		retried int           // Stats.RetryDuplicates
		add     func(b *builder)
	}{
		{"non-idempotent, sent twice, at two positions", nil, 1, func(b *builder) {
			produce(b, OK, 1, "r", false, 2)
			b.final(1, 2, recs(1, 0, "r", 1, "r"))
		}},
		{"non-idempotent, unknown after two sends, at two positions", nil, 1, func(b *builder) {
			produce(b, Unknown, -1, "u", false, 2)
			b.final(1, 2, recs(1, 0, "u", 1, "u"))
		}},
		{"non-idempotent, resent by the workload as a second produce", nil, 1, func(b *builder) {
			produce(b, Unknown, -1, "w", false, 1)
			produce(b, OK, 1, "w", false, 1)
			b.final(1, 2, recs(1, 0, "w", 1, "w"))
		}},
		{"non-idempotent, sent twice, loaded from both positions", nil, 1, func(b *builder) {
			produce(b, OK, 1, "l", false, 2)
			b.final(1, 2, recs(1, 0, "l", 1, "l"))
			b.op(98, LoadRead, Op{Outcome: OK, Records: recs(1, 0, "l", 1, "l"), Ranges: []Range{{Topic: "t", Partition: 1, Start: 0, End: 2}}})
		}},
		{"non-idempotent, sent twice, loaded twice from one position", []AnomalyKind{LoadDuplicate}, 1, func(b *builder) {
			produce(b, OK, 1, "l", false, 2)
			b.final(1, 2, recs(1, 0, "l", 1, "l"))
			b.op(98, LoadRead, Op{Outcome: OK, Records: recs(1, 1, "l", 1, "l")})
		}},
		{"idempotent, sent twice, at two positions", []AnomalyKind{Duplicate}, 0, func(b *builder) {
			produce(b, OK, 1, "i", true, 2)
			b.final(1, 2, recs(1, 0, "i", 1, "i"))
		}},
		{"idempotent and non-idempotent produces of one value", []AnomalyKind{Duplicate}, 0, func(b *builder) {
			produce(b, Unknown, -1, "m", false, 3)
			produce(b, OK, 1, "m", true, 1)
			b.final(1, 2, recs(1, 0, "m", 1, "m"))
		}},
		{"non-idempotent, sent once, at two positions", []AnomalyKind{Duplicate}, 0, func(b *builder) {
			produce(b, OK, 1, "o", false, 1)
			b.final(1, 2, recs(1, 0, "o", 1, "o"))
		}},
		{"non-idempotent, uncounted sends, at two positions", []AnomalyKind{Duplicate}, 0, func(b *builder) {
			produce(b, OK, 1, "c", false, 0)
			b.final(1, 2, recs(1, 0, "c", 1, "c"))
		}},
		{"non-idempotent, sent twice, at three positions", []AnomalyKind{Duplicate}, 0, func(b *builder) {
			produce(b, OK, 2, "t", false, 2)
			b.final(1, 3, recs(1, 0, "t", 1, "t", 2, "t"))
		}},
		{"non-idempotent, sent twice, its acknowledged position lost", []AnomalyKind{Lost}, 0, func(b *builder) {
			produce(b, OK, 1, "ak", false, 2)
			b.final(1, 2, recs(1, 0, "x"))
			produce(b, Unknown, -1, "x", false, 1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := clean()
			c.add(b)
			h := b.r.History()
			res := Check(h)
			if got := res.Kinds(); !reflect.DeepEqual(got, c.want) || res.Stats.RetryDuplicates != c.retried {
				t.Fatalf("want anomalies %v and %d retry duplicates, got %v and %d:\n%s", c.want, c.retried, got, res.Stats.RetryDuplicates, res.Report(h, 1))
			}
		})
	}
}
