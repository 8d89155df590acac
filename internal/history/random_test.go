package history

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// genValid builds a valid history from a seeded source: producers of
// unique values over three partitions (some unknown, some failed), two
// consumers polling in order, a group committing rising offsets, then a
// final read and a load of everything acknowledged.
func genValid(rng *rand.Rand) History {
	r := NewRecorder(nil)
	const parts = 3
	logs := make([][]string, parts)
	polled := make([]int, 2*parts) // consumer c's next index into logs[p]
	committed := int64(0)
	for i := 0; i < 60+rng.IntN(60); i++ {
		switch rng.IntN(4) {
		case 0, 1:
			p := int32(rng.IntN(parts))
			v := fmt.Sprintf("v%d", i)
			inv := r.Invoke(1+rng.IntN(3), Produce)
			switch rng.IntN(10) {
			case 0: // failed: never in the log
				inv.Complete(Op{Outcome: Fail, Topic: "t", Partition: p, Offset: -1, Value: v})
			case 1: // unknown: in the log or not
				if rng.IntN(2) == 0 {
					logs[p] = append(logs[p], v)
				}
				inv.Complete(Op{Outcome: Unknown, Topic: "t", Partition: p, Offset: -1, Value: v})
			default:
				logs[p] = append(logs[p], v)
				inv.Complete(Op{Outcome: OK, Topic: "t", Partition: p, Offset: int64(len(logs[p]) - 1), Value: v})
			}
		case 2:
			c := rng.IntN(2)
			p := int32(rng.IntN(parts))
			k := c*parts + int(p)
			n := rng.IntN(len(logs[p]) - polled[k] + 1)
			var rs []Record
			for j := polled[k]; j < polled[k]+n; j++ {
				rs = append(rs, Record{Topic: "t", Partition: p, Offset: int64(j), Value: logs[p][j]})
			}
			polled[k] += n
			r.Invoke(10+c, Poll).Complete(Op{Outcome: OK, Records: rs})
		case 3:
			committed += int64(rng.IntN(3))
			r.Invoke(20, Commit).Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: committed}}})
		}
	}
	var all []Record
	var ranges []Range
	for p := range logs {
		for j, v := range logs[p] {
			all = append(all, Record{Topic: "t", Partition: int32(p), Offset: int64(j), Value: v})
		}
		ranges = append(ranges, Range{Topic: "t", Partition: int32(p), Start: 0, End: int64(len(logs[p]))})
	}
	r.Invoke(30, FinalRead).Complete(Op{Outcome: OK, Records: all, Ranges: ranges})
	r.Invoke(31, LoadRead).Complete(Op{Outcome: OK, Records: append([]Record(nil), all...), Ranges: ranges})
	return r.History()
}

// mutation breaks a valid history in one way and names the anomaly the
// checker must then report; ok false when the history offers no place.
type mutation struct {
	name string
	want AnomalyKind
	do   func(rng *rand.Rand, h History) bool
}

func lastOf(h History, kind Kind) *Op {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == kind {
			return &h[i]
		}
	}
	return nil
}

var mutations = []mutation{
	{"drop a value from the final read", Lost, func(rng *rand.Rand, h History) bool {
		f := lastOf(h, FinalRead)
		for _, i := range rng.Perm(len(f.Records)) {
			v := f.Records[i].Value
			for _, op := range h {
				if op.Kind == Produce && op.Outcome == OK && op.Value == v {
					f.Records = append(f.Records[:i:i], f.Records[i+1:]...)
					return true
				}
			}
		}
		return false
	}},
	{"duplicate a value at a new offset", Duplicate, func(rng *rand.Rand, h History) bool {
		f := lastOf(h, FinalRead)
		if len(f.Records) == 0 {
			return false
		}
		r := f.Records[rng.IntN(len(f.Records))]
		r.Offset = 1 << 40
		f.Records = append(f.Records, r)
		return true
	}},
	{"load a value twice", LoadDuplicate, func(rng *rand.Rand, h History) bool {
		l := lastOf(h, LoadRead)
		if len(l.Records) == 0 {
			return false
		}
		l.Records = append(l.Records, l.Records[rng.IntN(len(l.Records))])
		return true
	}},
	{"read a value never written", Phantom, func(rng *rand.Rand, h History) bool {
		f := lastOf(h, FinalRead)
		f.Records = append(f.Records, Record{Topic: "t", Partition: 0, Offset: 1 << 41, Value: "never"})
		return true
	}},
	{"commit a lower offset last", CommitBackwards, func(rng *rand.Rand, h History) bool {
		c := lastOf(h, Commit)
		if c == nil || c.Offsets[0].Offset == 0 {
			return false
		}
		c.Offsets[0].Offset = 0 // below an earlier commit above 0
		for _, op := range h[:c.ID] {
			if op.Kind == Commit && op.Offsets[0].Offset > 0 {
				return true
			}
		}
		return false
	}},
	{"swap two polled offsets", Nonmonotonic, func(rng *rand.Rand, h History) bool {
		for _, i := range rng.Perm(len(h)) {
			if op := &h[i]; op.Kind == Poll && len(op.Records) >= 2 {
				j := rng.IntN(len(op.Records) - 1)
				op.Records[j], op.Records[j+1] = op.Records[j+1], op.Records[j]
				return true
			}
		}
		return false
	}},
}

// TestRandomHistories: valid histories pass; each mutation of one is
// found. The seed is logged and named in every failure; set
// SLUICE_HISTORY_SEED to rerun one.
func TestRandomHistories(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_HISTORY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_HISTORY_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := 0; round < 200; round++ {
		h := genValid(rng)
		if res := Check(h); !res.OK() {
			t.Fatalf("seed %d round %d: valid history reported:\n%s", seed, round, res.Report(h, 2))
		}
		for _, m := range mutations {
			mh := clone(h)
			if !m.do(rng, mh) {
				continue
			}
			res := Check(mh)
			if len(res.Of(m.want)) == 0 {
				t.Fatalf("seed %d round %d: %s: no %s reported:\n%s", seed, round, m.name, m.want, res.Report(mh, 2))
			}
		}
	}
}

func clone(h History) History {
	out := make(History, len(h))
	for i, op := range h {
		op.Records = append([]Record(nil), op.Records...)
		op.Offsets = append([]Offset(nil), op.Offsets...)
		op.Ranges = append([]Range(nil), op.Ranges...)
		out[i] = op
	}
	return out
}
