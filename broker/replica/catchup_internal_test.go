package replica

import (
	"slices"
	"testing"
)

// catchUpMaxBytes: partitions far behind share what the answer limit leaves
// after the others' replica.fetch.max.bytes, never less than it; throttled
// ones and caught-up ones keep it.
func TestCatchUpMaxBytes(t *testing.T) {
	const part, resp = 1 << 20, 10 << 20
	behind := func(b, throttled bool) work { return work{a: fetchAssignment{behind: b}, throttled: throttled} }
	cases := []struct {
		name string
		ws   []work
		want []int32
	}{
		{"none behind", []work{behind(false, false), behind(false, false)}, []int32{part, part}},
		{"lone partition behind", []work{behind(true, false)}, []int32{resp}},
		{"one of three behind", []work{behind(false, false), behind(true, false), behind(false, false)}, []int32{part, resp - 2*part, part}},
		{"two behind share", []work{behind(true, false), behind(true, false)}, []int32{resp / 2, resp / 2}},
		{"throttled keeps its limit", []work{behind(true, true), behind(true, false)}, []int32{part, resp - part}},
		{"many behind get at least partMax", []work{behind(true, false), behind(true, false), behind(true, false), behind(true, false),
			behind(true, false), behind(true, false), behind(true, false), behind(true, false), behind(true, false), behind(true, false),
			behind(true, false), behind(true, false)}, slices.Repeat([]int32{part}, 12)},
		{"others fill the answer", slices.Concat(slices.Repeat([]work{behind(false, false)}, 10), []work{behind(true, false)}),
			slices.Repeat([]int32{part}, 11)},
	}
	for _, tc := range cases {
		catchUpMaxBytes(tc.ws, part, resp)
		got := make([]int32, len(tc.ws))
		for i := range tc.ws {
			got[i] = tc.ws[i].maxBytes
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
