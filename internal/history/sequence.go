package history

import (
	"cmp"
	"fmt"
	"sort"
)

// seqState is one poll sequence: a process's reads of one partition since
// its last assign.
type seqState struct {
	// last is the offset last polled (or the assign's start - 1), lastOp
	// the op that set it; has says last is known.
	last   int64
	lastOp int
	has    bool
	// fromAssign says last came from an assign, not a poll.
	fromAssign bool
}

type seqKey struct {
	process int
	part    partitionKey
}

// pollSequences: nonmonotonic offsets and skips within each poll sequence.
func (x *index) pollSequences() []Anomaly {
	var out []Anomaly
	seqs := map[seqKey]*seqState{}
	for i := range x.h {
		op := &x.h[i]
		switch {
		case op.Kind == Assign && op.Outcome == OK:
			for _, o := range op.Offsets {
				k := seqKey{op.Process, partitionKey{o.Topic, o.Partition}}
				seqs[k] = &seqState{last: o.Offset - 1, lastOp: op.ID, has: o.Offset >= 0, fromAssign: true}
			}
		case op.Kind == Poll && op.Outcome == OK:
			for _, r := range op.Records {
				k := seqKey{op.Process, partitionKey{r.Topic, r.Partition}}
				s := seqs[k]
				if s == nil {
					s = &seqState{}
					seqs[k] = s
				}
				if a, bad := x.stepSequence(s, op, r); bad {
					out = append(out, a)
				}
				s.last, s.lastOp, s.has, s.fromAssign = r.Offset, op.ID, true, false
			}
		}
	}
	return out
}

// stepSequence checks the poll of r by op against the sequence so far.
func (x *index) stepSequence(s *seqState, op *Op, r Record) (Anomaly, bool) {
	if !s.has {
		return Anomaly{}, false
	}
	pos := position{r.Topic, r.Partition, r.Offset}
	if r.Offset <= s.last {
		what := fmt.Sprintf("after offset %d", s.last)
		if s.fromAssign {
			what = fmt.Sprintf("after an assign at offset %d", s.last+1)
		}
		return Anomaly{Kind: Nonmonotonic, Ops: sortedIDs(s.lastOp, op.ID),
			Detail: fmt.Sprintf("process %d polled %s %s", op.Process, pos, what)}, true
	}
	known := x.known[partitionKey{r.Topic, r.Partition}]
	// The first known offset above last: below r.Offset, it was skipped.
	j := sort.Search(len(known), func(i int) bool { return known[i] > s.last })
	if j < len(known) && known[j] < r.Offset {
		skipped := position{r.Topic, r.Partition, known[j]}
		return Anomaly{Kind: Skip, Ops: sortedIDs(s.lastOp, op.ID, x.firstSighting(skipped)),
			Detail: fmt.Sprintf("process %d polled %s right after offset %d, skipping %s which holds a record", op.Process, pos, s.last, skipped)}, true
	}
	return Anomaly{}, false
}

// firstSighting is the first op that showed a record at p (p must have
// been seen).
func (x *index) firstSighting(p position) int {
	first := -1
	for _, id := range x.posHolds[p] {
		if first < 0 || id < first {
			first = id
		}
	}
	return first
}

// commitObs is a group's committed offset of a partition as one op saw it.
type commitObs struct {
	op         int
	start, end int64
	offset     int64
}

type groupKey struct {
	group string
	part  partitionKey
}

// commitsBackwards: an observed committed offset lower than one observed
// by an operation that ended before it began.
func (x *index) commitsBackwards() []Anomaly {
	obs := map[groupKey][]commitObs{}
	for i := range x.h {
		op := &x.h[i]
		if op.Outcome != OK || (op.Kind != Commit && op.Kind != FetchCommitted) {
			continue
		}
		for _, o := range op.Offsets {
			if op.Kind == Commit && o.Offset < 0 {
				continue
			}
			k := groupKey{op.Group, partitionKey{o.Topic, o.Partition}}
			obs[k] = append(obs[k], commitObs{op: op.ID, start: op.Start, end: op.End, offset: o.Offset})
		}
	}
	keys := keysInOrder(obs, func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.part.topic, b.part.topic), cmp.Compare(a.part.partition, b.part.partition))
	})
	var out []Anomaly
	for _, k := range keys {
		out = append(out, backwards(k, obs[k])...)
	}
	return out
}

// backwards finds, for each observation, the highest one that ended before
// it began; a lower observation is an anomaly.
func backwards(k groupKey, os []commitObs) []Anomaly {
	byEnd := append([]commitObs(nil), os...)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end < byEnd[j].end })
	// best[i] is the highest observation among byEnd[:i+1].
	best := make([]commitObs, len(byEnd))
	for i, o := range byEnd {
		best[i] = o
		if i > 0 && best[i-1].offset >= o.offset {
			best[i] = best[i-1]
		}
	}
	var out []Anomaly
	sort.Slice(os, func(i, j int) bool { return os[i].op < os[j].op })
	for _, b := range os {
		n := sort.Search(len(byEnd), func(i int) bool { return byEnd[i].end >= b.start })
		if n == 0 || best[n-1].offset <= b.offset {
			continue
		}
		a := best[n-1]
		out = append(out, Anomaly{Kind: CommitBackwards, Ops: sortedIDs(a.op, b.op),
			Detail: fmt.Sprintf("group %q %s/%d: op %d saw committed offset %d after op %d saw %d", k.group, k.part.topic, k.part.partition, b.op, b.offset, a.op, a.offset)})
	}
	return out
}

// loads: every value at most once in a load-read; every ok produce whose
// offset the load-read's Ranges cover present in it. The produces are
// indexed by partition, so a load-read looks only at those of the
// partitions it names.
func (x *index) loads() []Anomaly {
	var out []Anomaly
	var produced map[partitionKey][]*Op // ok produces with an offset, in id order
	for i := range x.h {
		l := &x.h[i]
		if l.Kind != LoadRead || l.Outcome != OK {
			continue
		}
		if produced == nil {
			produced = map[partitionKey][]*Op{}
			for j := range x.h {
				if p := &x.h[j]; p.Kind == Produce && p.Outcome == OK && p.Offset >= 0 {
					k := partitionKey{p.Topic, p.Partition}
					produced[k] = append(produced[k], p)
				}
			}
		}
		set := valueSet(l)
		at := loadedPositions(l, set)
		for _, v := range sortedKeys(set) {
			// Loaded once per position it holds in the log: a value a
			// non-idempotent producer's retry appended twice is two
			// records, each loaded once.
			if set[v] > 1 && (set[v] > at[v] || at[v] > x.maxCopies(v)) {
				out = append(out, Anomaly{Kind: LoadDuplicate, Ops: sortedIDs(append([]int{l.ID}, x.produces[v]...)...),
					Detail: fmt.Sprintf("value %q loaded %d times from %d positions (load-read op %d)", v, set[v], at[v], l.ID)})
			}
		}
		var lost []*Op
		for k, c := range covering([]*Op{l}) {
			for _, p := range produced[k] {
				if covers(c[0].ranges, p.Topic, p.Partition, p.Offset) && set[p.Value] == 0 {
					lost = append(lost, p)
				}
			}
		}
		sort.Slice(lost, func(i, j int) bool { return lost[i].ID < lost[j].ID })
		for _, p := range lost {
			out = append(out, Anomaly{Kind: LoadLost, Ops: sortedIDs(p.ID, l.ID),
				Detail: fmt.Sprintf("value %q acknowledged at %s lies in the loaded range but load-read op %d lacks it", p.Value, position{p.Topic, p.Partition, p.Offset}, l.ID)})
		}
	}
	return out
}

// loadedPositions counts, for each value set says a load-read l holds more
// than once, the positions (partition, offset) it was loaded from.
func loadedPositions(l *Op, set map[string]int) map[string]int {
	seen := map[string]map[position]bool{}
	for _, r := range l.Records {
		if set[r.Value] < 2 {
			continue
		}
		if seen[r.Value] == nil {
			seen[r.Value] = map[position]bool{}
		}
		seen[r.Value][position{r.Topic, r.Partition, r.Offset}] = true
	}
	out := make(map[string]int, len(seen))
	for v, ps := range seen {
		out[v] = len(ps)
	}
	return out
}

// loadProgress: for each ok load-read with Want, the ok produces
// acknowledged in Want that no Range of it covers, one anomaly per
// partition (the first few produces named, the count in the detail).
func (x *index) loadProgress() []Anomaly {
	const named = 4 // produces named per anomaly
	var out []Anomaly
	for i := range x.h {
		l := &x.h[i]
		if l.Kind != LoadRead || l.Outcome != OK || len(l.Want) == 0 {
			continue
		}
		missing := map[partitionKey][]*Op{}
		for j := range x.h {
			p := &x.h[j]
			if p.Kind == Produce && p.Outcome == OK && p.Offset >= 0 && p.End < l.Start &&
				covers(l.Want, p.Topic, p.Partition, p.Offset) && !covers(l.Ranges, p.Topic, p.Partition, p.Offset) {
				k := partitionKey{p.Topic, p.Partition}
				missing[k] = append(missing[k], p)
			}
		}
		keys := keysInOrder(missing, func(a, b partitionKey) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		})
		for _, k := range keys {
			ps := missing[k]
			sort.Slice(ps, func(i, j int) bool { return ps[i].Offset < ps[j].Offset })
			ids := []int{l.ID}
			for _, p := range ps[:min(len(ps), named)] {
				ids = append(ids, p.ID)
			}
			out = append(out, Anomaly{Kind: LoadIncomplete, Ops: sortedIDs(ids...),
				Detail: fmt.Sprintf("%d values acknowledged at %s/%d offsets %d..%d lie in the ranges load-read op %d waited for but no load committed them (first %q)",
					len(ps), k.topic, k.partition, ps[0].Offset, ps[len(ps)-1].Offset, l.ID, ps[0].Value)})
		}
	}
	return out
}
