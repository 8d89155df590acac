package avrocodec

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestStringDictHoldsTheRows: whatever is appended to a StringDict (values
// as bytes and as strings, nulls; few or mostly distinct values; a GiveUp
// by its owner) comes out, row group after row group, as the same rows in
// the same order: from its dictionary array, or from the plain builder
// once it gave up. It gives up by itself exactly when a new value makes
// more than half of the rows past Probe distinct.
func TestStringDictHoldsTheRows(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	plain := array.NewStringBuilder(mem)
	defer plain.Release()
	const probe = 64
	d := NewStringDict(mem, plain, probe)
	defer d.Release()
	for group := 0; group < 40; group++ {
		rows := 1 + r.IntN(400)
		distinct := 1 + r.IntN(2*rows) // up to all distinct
		ownerGivesUp := -1
		if r.IntN(4) == 0 {
			ownerGivesUp = r.IntN(rows)
		}
		var want []any
		seen := map[string]bool{}
		wantGiven, wantDistinct := false, false
		for j := 0; j < rows; j++ {
			if j == ownerGivesUp {
				d.GiveUp()
				wantGiven = true
			}
			if r.IntN(10) == 0 {
				want = append(want, nil)
				d.AppendNull()
				continue
			}
			v := fmt.Sprintf("v%d", r.IntN(distinct))
			if !wantGiven && !seen[v] && j >= probe && len(seen) > j/2 {
				wantGiven, wantDistinct = true, true
			}
			seen[v] = true
			want = append(want, v)
			if r.IntN(2) == 0 {
				d.Append([]byte(v))
			} else {
				d.AppendString(v)
			}
		}
		given, mostlyDistinct := d.GivenUp()
		if given != wantGiven || mostlyDistinct != wantDistinct {
			t.Fatalf("group %d: given up %v (mostly distinct %v), want %v (%v)", group, given, mostlyDistinct, wantGiven, wantDistinct)
		}
		var got []any
		if da := d.NewArray(); da != nil {
			if given {
				t.Fatalf("group %d: a dictionary array after giving up", group)
			}
			if da.Dictionary().Len() != len(seen) {
				t.Fatalf("group %d: %d values in the dictionary, %d distinct", group, da.Dictionary().Len(), len(seen))
			}
			got = dictStrings(da)
			da.Release()
		} else {
			if !given {
				t.Fatalf("group %d: no dictionary array, yet not given up", group)
			}
			a := plain.NewArray()
			got = stringsOf(a)
			a.Release()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("group %d: rows\n%v\nwant\n%v", group, got, want)
		}
		if g, _ := d.GivenUp(); g || d.Len() != 0 || d.Distinct() != 0 {
			t.Fatalf("group %d: not reset after NewArray", group)
		}
	}
}
