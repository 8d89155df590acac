package history

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// AnomalyKind names a kind of anomaly (see the package doc for each).
type AnomalyKind string

// The anomalies Check reports.
const (
	Lost            AnomalyKind = "lost"
	Duplicate       AnomalyKind = "duplicate"
	Inconsistent    AnomalyKind = "inconsistent"
	Nonmonotonic    AnomalyKind = "nonmonotonic"
	Skip            AnomalyKind = "skip"
	Phantom         AnomalyKind = "phantom"
	CommitBackwards AnomalyKind = "commit-backwards"
	LoadDuplicate   AnomalyKind = "load-duplicate"
	LoadLost        AnomalyKind = "load-lost"
	LoadIncomplete  AnomalyKind = "load-incomplete"
)

// Anomaly is one violation with the operations that show it.
type Anomaly struct {
	Kind AnomalyKind `json:"kind"`
	// Ops are the ids of the operations that show it, in id order.
	Ops []int `json:"ops"`
	// Detail says what is wrong in a sentence.
	Detail string `json:"detail"`
}

// Stats counts what the history held.
type Stats struct {
	Ops         int `json:"ops"`
	ProducedOK  int `json:"produced_ok"`
	ProducedUnk int `json:"produced_unknown"`
	ProducedErr int `json:"produced_fail"`
	ReadRecords int `json:"read_records"`
	Commits     int `json:"commits"`
	// RetryDuplicates counts the values in the log more than once that a
	// non-idempotent producer sent more than once (not anomalies: see
	// the package doc's duplicate).
	RetryDuplicates int `json:"retry_duplicates,omitempty"`
}

// Result is what Check found.
type Result struct {
	Anomalies []Anomaly `json:"anomalies"`
	Stats     Stats     `json:"stats"`
}

// OK reports whether no anomaly was found.
func (r Result) OK() bool { return len(r.Anomalies) == 0 }

// Of returns the anomalies of one kind.
func (r Result) Of(kind AnomalyKind) []Anomaly {
	var out []Anomaly
	for _, a := range r.Anomalies {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

// Kinds returns the kinds found, each once, sorted.
func (r Result) Kinds() []AnomalyKind {
	seen := map[AnomalyKind]bool{}
	var out []AnomalyKind
	for _, a := range r.Anomalies {
		if !seen[a.Kind] {
			seen[a.Kind] = true
			out = append(out, a.Kind)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// position is a place in a partition's log.
type position struct {
	topic     string
	partition int32
	offset    int64
}

func (p position) String() string { return fmt.Sprintf("%s/%d@%d", p.topic, p.partition, p.offset) }

type partitionKey struct {
	topic     string
	partition int32
}

// index is what Check derives from a history once.
type index struct {
	h History
	// produces by value, op ids in id order.
	produces map[string][]int
	// where each value was seen (reads and acknowledgements): position →
	// first op id showing it.
	valueAt map[string]map[position]int
	// what each position was seen holding: value → first op id.
	posHolds map[position]map[string]int
	// the offsets known to hold a record, per partition, sorted: the
	// positions of posHolds, kept for the skip check's search.
	known map[partitionKey][]int64
}

// Check checks a history for every anomaly in the package doc and returns
// them in a deterministic order (by kind, then by first operation).
func Check(h History) Result {
	x := buildIndex(h)
	var res Result
	res.Stats = x.stats()
	res.Anomalies = append(res.Anomalies, x.phantoms()...)
	dups, retried := x.duplicates()
	res.Stats.RetryDuplicates = retried
	res.Anomalies = append(res.Anomalies, dups...)
	res.Anomalies = append(res.Anomalies, x.inconsistent()...)
	res.Anomalies = append(res.Anomalies, x.lost()...)
	res.Anomalies = append(res.Anomalies, x.pollSequences()...)
	res.Anomalies = append(res.Anomalies, x.commitsBackwards()...)
	res.Anomalies = append(res.Anomalies, x.loads()...)
	res.Anomalies = append(res.Anomalies, x.loadProgress()...)
	sort.SliceStable(res.Anomalies, func(i, j int) bool {
		a, b := res.Anomalies[i], res.Anomalies[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return firstOp(a) < firstOp(b)
	})
	return res
}

func firstOp(a Anomaly) int {
	if len(a.Ops) == 0 {
		return -1
	}
	return a.Ops[0]
}

// isRead reports whether op is an ok operation that returned records.
func isRead(op *Op) bool {
	return op.Outcome == OK && (op.Kind == Poll || op.Kind == FinalRead || op.Kind == LoadRead)
}

func buildIndex(h History) *index {
	x := &index{h: h, produces: map[string][]int{}, valueAt: map[string]map[position]int{},
		posHolds: map[position]map[string]int{}, known: map[partitionKey][]int64{}}
	seen := func(v string, p position, id int) {
		if x.valueAt[v] == nil {
			x.valueAt[v] = map[position]int{}
		}
		if _, ok := x.valueAt[v][p]; !ok {
			x.valueAt[v][p] = id
		}
		if x.posHolds[p] == nil {
			x.posHolds[p] = map[string]int{}
		}
		if _, ok := x.posHolds[p][v]; !ok {
			x.posHolds[p][v] = id
		}
	}
	for i := range h {
		op := &h[i]
		switch {
		case op.Kind == Produce:
			x.produces[op.Value] = append(x.produces[op.Value], op.ID)
			if op.Outcome == OK && op.Offset >= 0 {
				seen(op.Value, position{op.Topic, op.Partition, op.Offset}, op.ID)
			}
		case isRead(op):
			for _, r := range op.Records {
				seen(r.Value, position{r.Topic, r.Partition, r.Offset}, op.ID)
			}
		}
	}
	for p := range x.posHolds {
		k := partitionKey{p.topic, p.partition}
		x.known[k] = append(x.known[k], p.offset)
	}
	for _, s := range x.known {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	}
	return x
}

func (x *index) stats() Stats {
	st := Stats{Ops: len(x.h)}
	for i := range x.h {
		op := &x.h[i]
		switch {
		case op.Kind == Produce && op.Outcome == OK:
			st.ProducedOK++
		case op.Kind == Produce && op.Outcome == Unknown:
			st.ProducedUnk++
		case op.Kind == Produce:
			st.ProducedErr++
		case op.Kind == Commit && op.Outcome == OK:
			st.Commits++
		case isRead(op):
			st.ReadRecords += len(op.Records)
		}
	}
	return st
}

// sortedIDs returns ids sorted and without repeats.
func sortedIDs(ids ...int) []int {
	sort.Ints(ids)
	out := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			out = append(out, id)
		}
	}
	return out
}

// phantoms: a read value with no produce, only failed produces, or read
// before any produce of it began.
func (x *index) phantoms() []Anomaly {
	var out []Anomaly
	reported := map[string]bool{}
	for i := range x.h {
		op := &x.h[i]
		if !isRead(op) {
			continue
		}
		for _, r := range op.Records {
			if reported[r.Value] {
				continue
			}
			if a, bad := x.phantom(op, r); bad {
				reported[r.Value] = true
				out = append(out, a)
			}
		}
	}
	return out
}

func (x *index) phantom(read *Op, r Record) (Anomaly, bool) {
	ps := x.produces[r.Value]
	if len(ps) == 0 {
		return Anomaly{Kind: Phantom, Ops: []int{read.ID},
			Detail: fmt.Sprintf("value %q read at %s was never produced", r.Value, position{r.Topic, r.Partition, r.Offset})}, true
	}
	failed, earliest := true, ps[0]
	for _, id := range ps {
		p := &x.h[id]
		if p.Outcome != Fail {
			failed = false
		}
		if p.Start < x.h[earliest].Start {
			earliest = id
		}
	}
	ids := sortedIDs(append([]int{read.ID}, ps...)...)
	if failed {
		return Anomaly{Kind: Phantom, Ops: ids,
			Detail: fmt.Sprintf("value %q read at %s was produced only by produces that failed", r.Value, position{r.Topic, r.Partition, r.Offset})}, true
	}
	if read.End < x.h[earliest].Start {
		return Anomaly{Kind: Phantom, Ops: ids,
			Detail: fmt.Sprintf("value %q read at %s by op %d before its produce (op %d) began", r.Value, position{r.Topic, r.Partition, r.Offset}, read.ID, earliest)}, true
	}
	return Anomaly{}, false
}

// keysInOrder returns m's keys sorted by compare (the checker reports in a
// stable order).
func keysInOrder[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, compare)
	return ks
}

func sortedPositions[V any](m map[position]V) []position {
	return keysInOrder(m, func(a, b position) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
	})
}

func sortedKeys[V any](m map[string]V) []string { return keysInOrder(m, strings.Compare) }

// allowedCopies is how many positions the produces ids of one value may
// have put it at. An idempotent producer's retry is appended once (the
// broker drops a batch whose sequence it has), so any idempotent produce
// of the value allows one. A non-idempotent producer's produce sent n
// times — its acknowledgement lost and the request sent again, by the
// client's retries (acks=1, or acks=all without idempotence) or by the
// workload's — may be appended n times: Kafka's semantics for such a
// producer, not an anomaly. A failed produce was appended by none of its
// sends.
func allowedCopies(h History, ids []int) int {
	n := 0
	for _, id := range ids {
		p := &h[id]
		if p.Idempotent {
			return 1
		}
		if p.Outcome != Fail {
			n += max(p.Attempts, 1)
		}
	}
	return max(n, 1)
}

// maxCopies is how many positions v may hold (1 for a value never
// produced: a phantom). Asked only of a value seen more than once, so it
// is worked out then, not for every value produced.
func (x *index) maxCopies(v string) int { return allowedCopies(x.h, x.produces[v]) }

// duplicates: one value at more positions than its produces allow
// (allowedCopies). It also returns how many values were at several
// positions within what a non-idempotent producer's retries allow.
func (x *index) duplicates() (out []Anomaly, retried int) {
	for _, v := range sortedKeys(x.valueAt) {
		at := x.valueAt[v]
		if len(at) < 2 {
			continue
		}
		if len(at) <= x.maxCopies(v) {
			retried++
			continue
		}
		ps := sortedPositions(at)
		var ids []int
		var where []string
		for _, p := range ps {
			ids = append(ids, at[p])
			where = append(where, p.String())
		}
		out = append(out, Anomaly{Kind: Duplicate, Ops: sortedIDs(append(ids, x.produces[v]...)...),
			Detail: fmt.Sprintf("value %q at %d positions: %s (%s)", v, len(ps), strings.Join(where, ", "), x.copiesWhy(v))})
	}
	return out, retried
}

// copiesWhy says in words why v may hold only maxCopies positions.
func (x *index) copiesWhy(v string) string {
	ids := x.produces[v]
	for _, id := range ids {
		if x.h[id].Idempotent {
			return fmt.Sprintf("op %d's producer is idempotent: it is appended once", id)
		}
	}
	if len(ids) == 0 {
		return "never produced"
	}
	if n := x.maxCopies(v); n > 1 {
		return fmt.Sprintf("non-idempotent produces that sent it %d times", n)
	}
	return "one non-idempotent produce that sent it once"
}

// inconsistent: one position holding two values.
func (x *index) inconsistent() []Anomaly {
	var out []Anomaly
	for _, p := range sortedPositions(x.posHolds) {
		vs := x.posHolds[p]
		if len(vs) < 2 {
			continue
		}
		var ids []int
		keys := sortedKeys(vs)
		for _, v := range keys {
			ids = append(ids, vs[v])
		}
		out = append(out, Anomaly{Kind: Inconsistent, Ops: sortedIDs(ids...),
			Detail: fmt.Sprintf("%s holds %d values: %q", p, len(vs), keys)})
	}
	return out
}

// covers reports whether rs include offset off of the partition (off -1:
// any range of the partition).
func covers(rs []Range, topic string, partition int32, off int64) bool {
	for _, r := range rs {
		if r.Topic == topic && r.Partition == partition && (off < 0 || (r.Start <= off && off < r.End)) {
			return true
		}
	}
	return false
}

func valueSet(op *Op) map[string]int {
	m := make(map[string]int, len(op.Records))
	for _, r := range op.Records {
		m[r.Value]++
	}
	return m
}

// finalCover is one ok final-read's view of one partition: the ranges of
// it that the read covers, and every value the read holds.
type finalCover struct {
	op     *Op
	ranges []Range
	values map[string]int
}

// covering indexes ops' ranges by partition: for each partition, the ops
// (in id order) whose Ranges name it, each with those ranges and its
// values. Checking a produce then looks at the reads of its partition
// only, not at every read: near-linear where a history holds many
// partitions each read once (the power-loss rounds).
func covering(ops []*Op) map[partitionKey][]finalCover {
	out := map[partitionKey][]finalCover{}
	for _, op := range ops {
		values := valueSet(op)
		for _, r := range op.Ranges {
			k := partitionKey{r.Topic, r.Partition}
			fs := out[k]
			if n := len(fs); n > 0 && fs[n-1].op == op {
				fs[n-1].ranges = append(fs[n-1].ranges, r)
				continue
			}
			out[k] = append(fs, finalCover{op: op, ranges: []Range{r}, values: values})
		}
	}
	return out
}

// lost: an ok produce missing from a final-read that began after it ended
// and covers its partition and offset.
func (x *index) lost() []Anomaly {
	var out []Anomaly
	var finals []*Op
	for i := range x.h {
		if op := &x.h[i]; op.Kind == FinalRead && op.Outcome == OK {
			finals = append(finals, op)
		}
	}
	byPart := covering(finals)
	for i := range x.h {
		p := &x.h[i]
		if p.Kind != Produce || p.Outcome != OK {
			continue
		}
		for _, f := range byPart[partitionKey{p.Topic, p.Partition}] {
			if f.op.Start > p.End && covers(f.ranges, p.Topic, p.Partition, p.Offset) && f.values[p.Value] == 0 {
				out = append(out, Anomaly{Kind: Lost, Ops: []int{p.ID, f.op.ID},
					Detail: fmt.Sprintf("value %q acknowledged at %s is missing from final read op %d", p.Value, position{p.Topic, p.Partition, p.Offset}, f.op.ID)})
				break
			}
		}
	}
	return out
}
