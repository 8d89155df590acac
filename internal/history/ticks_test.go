package history

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// memberCommit is what a group-member process's Recorder holds when its
// output reaches the test late: it committed offset 5 of t/0 (ok), and its
// line is still on its way (the member was paused, or the pipe lags).
func memberCommit(member *Recorder) Op {
	inv := member.Invoke(0, Commit)
	return inv.Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 5}}})
}

// laterCommitSeen: meanwhile the partition's next owner commits 10 (taken
// at once), and the test's watch reads 10 back.
func laterCommitSeen(t *testing.T, test, owner *Recorder) {
	t.Helper()
	c := owner.Invoke(0, Commit).Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 10}}})
	if _, err := test.Take(200, c); err != nil {
		t.Fatal(err)
	}
	test.Invoke(9, FetchCommitted).Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 10}}})
}

// The group scenario's false "committed offsets going backwards": a
// member's commit that reaches the test after a later commit was read
// back. Stamped anew on arrival (the old way: Invoke and Complete when the
// line arrives) it follows the read of 10 and the checker reports it;
// taken with the ticks the member gave it on the shared counter, it
// precedes, and the history is clean.
func TestTakenOpsKeepTheirTicks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ticks")
	open := func() *Ticks {
		tk, err := OpenTicks(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tk.Close() })
		return tk
	}
	for _, restamp := range []bool{true, false} {
		test, member, owner := NewRecorder(nil), NewRecorder(nil), NewRecorder(nil)
		if !restamp {
			test, member, owner = NewRecorderTicks(nil, open()), NewRecorderTicks(nil, open()), NewRecorderTicks(nil, open())
		}
		late := memberCommit(member)
		if restamp {
			// three counters: the taken commit's ticks would be
			// meaningless, so the old harness stamped it as it arrived
			c := owner.Invoke(0, Commit).Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 10}}})
			test.Invoke(200, Commit).Complete(c)
			test.Invoke(9, FetchCommitted).Complete(Op{Outcome: OK, Group: "g", Offsets: []Offset{{Topic: "t", Partition: 0, Offset: 10}}})
			test.Invoke(100, Commit).Complete(late)
		} else {
			laterCommitSeen(t, test, owner)
			if _, err := test.Take(100, late); err != nil {
				t.Fatal(err)
			}
		}
		h := test.History()
		res := Check(h)
		switch {
		case restamp && (len(res.Anomalies) != 1 || len(res.Of(CommitBackwards)) != 1):
			t.Fatalf("restamped on arrival: want the false commit-backwards, got\n%s", res.Report(h, 3))
		case !restamp && !res.OK():
			t.Fatalf("taken with its ticks: want clean, got\n%s", res.Report(h, 3))
		}
		if !restamp {
			if got := h[len(h)-1]; got.Process != 100 || got.Start != late.Start || got.End != late.End || got.ID != len(h)-1 {
				t.Fatalf("taken op %+v, member's %+v", got, late)
			}
		}
	}
}

// Take refuses an op its counter cannot have stamped.
func TestTakeRefusesForeignTicks(t *testing.T) {
	r := NewRecorder(nil)
	r.Invoke(1, Poll).Complete(Op{Outcome: OK})
	for _, op := range []Op{{Kind: Commit, Start: 5, End: 9}, {Kind: Commit, Start: 1, End: 1}, {Kind: Commit, Start: -1, End: 0}} {
		if _, err := r.Take(2, op); !errors.Is(err, ErrForeignTicks) {
			t.Fatalf("Take %+v: %v", op, err)
		}
	}
	if n := len(r.History()); n != 1 {
		t.Fatalf("%d ops recorded", n)
	}
}

// Two mappings of one counter file (as two processes have) hand out each
// tick once, and a reopened file goes on where it was.
func TestOpenTicksIsOneCounter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ticks")
	var maps []*Ticks
	for i := 0; i < 2; i++ {
		tk, err := OpenTicks(path)
		if err != nil {
			t.Fatal(err)
		}
		maps = append(maps, tk)
	}
	const each = 2000
	got := make([][]int64, 4)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				got[g] = append(got[g], maps[g%2].Next())
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, ts := range got {
		for i, tk := range ts {
			if seen[tk] || (i > 0 && tk <= ts[i-1]) {
				t.Fatalf("tick %d handed out twice or out of order", tk)
			}
			seen[tk] = true
		}
	}
	if n := int64(len(got) * each); maps[0].Taken() != n || maps[1].Taken() != n {
		t.Fatalf("taken %d and %d, want %d", maps[0].Taken(), maps[1].Taken(), n)
	}
	for _, m := range maps {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	again, err := OpenTicks(path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if tk := again.Next(); tk != int64(len(got)*each) {
		t.Fatalf("reopened counter handed out %d", tk)
	}
}
