package inputformat

import (
	"errors"
	"reflect"
	"testing"
)

func cps(m map[int32]int64) func(string, int32) (Checkpoint, error) {
	return func(_ string, p int32) (Checkpoint, error) {
		off, ok := m[p]
		return Checkpoint{Offset: off, Known: ok}, nil
	}
}

func TestCutSplitsAndDeterminism(t *testing.T) {
	parts := []PartitionOffsets{
		{Topic: "b", Partition: 0, LogStart: 0, End: 5},
		{Topic: "a", Partition: 1, LogStart: 10, End: 35},
		{Topic: "a", Partition: 0, LogStart: 0, End: 0},
	}
	opts := PlanOptions{MaxRecordsPerTask: 10, Start: StartEarliest, OnOutOfRange: OutOfRangeFail}
	p, err := Cut(parts, cps(map[int32]int64{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []Split{{"a", 1, 10, 20}, {"a", 1, 20, 30}, {"a", 1, 30, 35}, {"b", 0, 0, 5}}
	if !reflect.DeepEqual(p.Splits, want) {
		t.Fatalf("splits %v, want %v", p.Splits, want)
	}
	if p.Records() != 30 || len(p.Partitions) != 3 || !p.Partitions[1].Origin || p.Partitions[1].Lag() != 25 {
		t.Fatalf("plan %+v", p)
	}
	// Same inputs in another order: the same plan.
	parts[0], parts[2] = parts[2], parts[0]
	q, err := Cut(parts, cps(map[int32]int64{}), opts)
	if err != nil || !reflect.DeepEqual(p, q) {
		t.Fatalf("not deterministic: %v %v", q, err)
	}
	for _, s := range p.Splits {
		if s.Len() > opts.MaxRecordsPerTask || s.Len() <= 0 {
			t.Fatalf("split %v size", s)
		}
	}
}

func TestCutCheckpointAndLatest(t *testing.T) {
	parts := []PartitionOffsets{{Topic: "t", Partition: 0, LogStart: 0, End: 100}, {Topic: "t", Partition: 1, LogStart: 0, End: 50}}
	p, err := Cut(parts, cps(map[int32]int64{0: 90}), PlanOptions{MaxRecordsPerTask: 100, Start: StartLatest})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Splits, []Split{{"t", 0, 90, 100}}) {
		t.Fatalf("splits %v", p.Splits)
	}
	if pp := p.Partitions[1]; pp.Start != 50 || !pp.Origin || pp.CheckpointKnown {
		t.Fatalf("latest partition %+v", pp)
	}
}

func TestCutOutOfRange(t *testing.T) {
	parts := []PartitionOffsets{{Topic: "t", Partition: 0, LogStart: 40, End: 100}}
	_, err := Cut(parts, cps(map[int32]int64{0: 10}), PlanOptions{MaxRecordsPerTask: 100, OnOutOfRange: OutOfRangeFail})
	if !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("fail policy: %v", err)
	}
	p, err := Cut(parts, cps(map[int32]int64{0: 10}), PlanOptions{MaxRecordsPerTask: 100, OnOutOfRange: OutOfRangeSkip})
	if err != nil {
		t.Fatal(err)
	}
	if pp := p.Partitions[0]; pp.Skipped == nil || *pp.Skipped != (Range{10, 40}) || pp.Start != 40 {
		t.Fatalf("skip policy: %+v", pp)
	}
	if !reflect.DeepEqual(p.Splits, []Split{{"t", 0, 40, 100}}) {
		t.Fatalf("splits %v", p.Splits)
	}
	// A checkpoint beyond the end is a truncated log, never a silent reset.
	if _, err := Cut(parts, cps(map[int32]int64{0: 150}), PlanOptions{MaxRecordsPerTask: 100}); !errors.Is(err, ErrTruncated) {
		t.Fatalf("beyond end: %v", err)
	}
	if _, err := Cut(parts, cps(nil), PlanOptions{}); !errors.Is(err, ErrSplit) {
		t.Fatalf("zero max: %v", err)
	}
}
