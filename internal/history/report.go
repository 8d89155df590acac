package history

import (
	"fmt"
	"sort"
	"strings"
)

// Window returns the operations that show an anomaly and their
// neighbours: each op in ids with up to context operations completed just
// before and after it, in id order, each once. It is the smallest part of
// the history a reader needs to see the anomaly in its surroundings.
func Window(h History, ids []int, context int) History {
	keep := map[int]bool{}
	for _, id := range ids {
		for i := id - context; i <= id+context; i++ {
			if i >= 0 && i < len(h) {
				keep[i] = true
			}
		}
	}
	out := make(History, 0, len(keep))
	for i := range keep {
		out = append(out, h[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// maxShown bounds the records or offsets printed for one op.
const maxShown = 8

// String renders an op on one line for a report.
func (op Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d p%d %s %s [%d,%d]", op.ID, op.Process, op.Kind, op.Outcome, op.Start, op.End)
	if op.Group != "" {
		fmt.Fprintf(&b, " group=%s", op.Group)
	}
	if op.Member != "" {
		fmt.Fprintf(&b, " member=%s gen=%d", op.Member, op.Generation)
	}
	if op.Kind == Produce {
		fmt.Fprintf(&b, " %s/%d", op.Topic, op.Partition)
		if op.Offset >= 0 {
			fmt.Fprintf(&b, "@%d", op.Offset)
		}
		fmt.Fprintf(&b, " %q", op.Value)
		if op.Idempotent {
			b.WriteString(" idempotent")
		}
		if op.Attempts > 1 {
			fmt.Fprintf(&b, " sent=%d", op.Attempts)
		}
	}
	for i, o := range op.Offsets {
		if i == maxShown {
			fmt.Fprintf(&b, " …(%d more)", len(op.Offsets)-i)
			break
		}
		fmt.Fprintf(&b, " %s/%d=%d", o.Topic, o.Partition, o.Offset)
	}
	for i, r := range op.Ranges {
		if i == maxShown {
			fmt.Fprintf(&b, " …(%d more)", len(op.Ranges)-i)
			break
		}
		fmt.Fprintf(&b, " %s/%d[%d,%d)", r.Topic, r.Partition, r.Start, r.End)
	}
	for i, r := range op.Records {
		if i == maxShown {
			fmt.Fprintf(&b, " …(%d more)", len(op.Records)-i)
			break
		}
		fmt.Fprintf(&b, " %s/%d@%d=%q", r.Topic, r.Partition, r.Offset, r.Value)
	}
	if op.Error != "" {
		fmt.Fprintf(&b, " error=%q", op.Error)
	}
	return b.String()
}

// Report renders the result for a failure message: the counts, then each
// anomaly with its window of history (context neighbours each side).
func (r Result) Report(h History, context int) string {
	var b strings.Builder
	st := r.Stats
	fmt.Fprintf(&b, "history: %d ops, produced ok=%d unknown=%d fail=%d, %d records read, %d commits; %d anomalies\n",
		st.Ops, st.ProducedOK, st.ProducedUnk, st.ProducedErr, st.ReadRecords, st.Commits, len(r.Anomalies))
	for i, a := range r.Anomalies {
		fmt.Fprintf(&b, "%d. %s: %s (ops %v)\n", i+1, a.Kind, a.Detail, a.Ops)
		involved := map[int]bool{}
		for _, id := range a.Ops {
			involved[id] = true
		}
		for _, op := range Window(h, a.Ops, context) {
			mark := "   "
			if involved[op.ID] {
				mark = " > "
			}
			b.WriteString(mark + op.String() + "\n")
		}
	}
	return b.String()
}
