package jobs

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/inputformat"
)

// Every way the planner can tell that a topic is not the one the job's
// checkpoints are of, with topic ids and without (a cluster without ids
// falls back on log starts and leader epochs, which never go down within
// one topic's life), and the changes that are not a recreation.
func TestRecreatedBecause(t *testing.T) {
	rec := func(id string, parts int) *topicRecord {
		return &topicRecord{ID: id, Partitions: parts, LogStarts: map[int32]int64{0: 100, 1: 0}, LeaderEpochs: map[int32]int32{0: 5, 1: 5}}
	}
	offs := func(ls0 int64, ep0 int32) []inputformat.PartitionOffsets {
		return []inputformat.PartitionOffsets{{Partition: 0, LogStart: ls0, End: 500, LeaderEpoch: ep0}, {Partition: 1, LogStart: 0, End: 10, LeaderEpoch: 5}}
	}
	cur := func(id string, parts int) inputformat.TopicPlan {
		return inputformat.TopicPlan{ID: id, Partitions: parts}
	}
	for _, c := range []struct {
		name    string
		rec     *topicRecord
		cur     inputformat.TopicPlan
		parts   []inputformat.PartitionOffsets
		started []int32
		want    string // "" or a word of the reason
	}{
		{"same id", rec("aa", 2), cur("aa", 2), offs(100, 5), []int32{0, 1}, ""},
		{"same id, partitions added", rec("aa", 2), cur("aa", 4), offs(100, 5), []int32{0, 1}, ""},
		{"same id, retention moved the log start on", rec("aa", 2), cur("aa", 2), offs(400, 9), []int32{0, 1}, ""},
		{"another id", rec("aa", 2), cur("bb", 2), offs(100, 5), []int32{0, 1}, "topic id is bb"},
		{"another id, a log start that looks fine", rec("aa", 2), cur("bb", 2), offs(900, 9), []int32{0, 1}, "topic id"},
		{"fewer partitions than loaded", rec("aa", 2), cur("aa", 1), offs(100, 5)[:1], []int32{0, 1}, "loaded partition 1"},
		{"fewer partitions, no record (a job from before identities)", nil, cur("aa", 1), offs(100, 5)[:1], []int32{0, 1}, "loaded partition 1"},
		{"no record, nothing loaded", nil, cur("aa", 2), offs(0, 0), nil, ""},
		{"no ids: unchanged", rec("", 2), cur("", 2), offs(100, 5), []int32{0, 1}, ""},
		{"no ids: log start went back", rec("", 2), cur("", 2), offs(0, 5), []int32{0, 1}, "log start offset went back from 100 to 0"},
		{"no ids: leader epoch went back", rec("", 2), cur("", 2), offs(100, 0), []int32{0, 1}, "leader epoch went back from 5 to 0"},
		{"no ids: epoch unknown now", rec("", 2), cur("", 2), offs(100, -1), []int32{0, 1}, ""},
		{"no ids: fewer partitions than recorded", rec("", 3), cur("", 2), offs(100, 5), []int32{0}, "it had 3"},
		{"ids gained by an upgraded cluster: fall back", rec("", 2), cur("cc", 2), offs(0, 5), []int32{0, 1}, "log start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := recreatedBecause(c.rec, c.cur, c.parts, c.started)
			if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}
