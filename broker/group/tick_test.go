package group

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/vfs"
)

// addOffsetOnlyGroups commits one offset for each of n groups without
// members (as standalone consumers and tools do).
func addOffsetOnlyGroups(tb testing.TB, c *Coordinator, n int) {
	tb.Helper()
	for i := 0; i < n; i++ {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, fmt.Sprintf("offsets-only-%d", i), -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = int32(i%6), int64(i)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if code := c.CommitOffsets(req).Topics[0].Partitions[0].ErrorCode; code != 0 {
			tb.Fatalf("commit of group %d: %s", i, kerr.ErrorForCode(code))
		}
	}
}

// TestTickIgnoresOffsetOnlyGroups: what Tick does at rest does not grow
// with the number of groups. 20,000 groups that only hold offsets are
// looked at by no Tick (counted in Stats.TickVisits) for a minute of 100 ms
// ticks and an offset-expiry check; a group with a member is looked at only
// when its deadlines come; and when the offsets do expire, each group is
// looked at once.
func TestTickIgnoresOffsetOnlyGroups(t *testing.T) {
	const groups = 20000
	f := newFixture(t)
	f.st.cfg.SegmentBytes = 64 << 20 // the offsets topic opens at the first commit
	addOffsetOnlyGroups(t, f.c, groups)
	start := f.c.Stats().TickVisits
	for i := 0; i < 600; i++ {
		f.clock.Advance(100 * time.Millisecond)
		f.c.Tick()
	}
	f.clock.Advance(10 * time.Minute) // an offset-expiry check, nothing expired yet
	f.c.Tick()
	if visits := f.c.Stats().TickVisits - start; visits != 0 {
		t.Fatalf("601 ticks over %d offset-only groups looked at %d groups, want 0", groups, visits)
	}

	// One live group: looked at when its join phase and its session end,
	// whatever the other groups.
	_, ch := f.newMember("live")
	start = f.c.Stats().TickVisits
	for i := 0; i < 40; i++ { // 4 s: the initial rebalance delay ends
		f.clock.Advance(100 * time.Millisecond)
		f.c.Tick()
	}
	if resp := <-ch; resp.ErrorCode != 0 {
		t.Fatalf("join: %s", kerr.ErrorForCode(resp.ErrorCode))
	}
	for i := 0; i < 200; i++ { // 20 s: the member never syncs, its session ends
		f.clock.Advance(100 * time.Millisecond)
		f.c.Tick()
	}
	if f.state("live") != string(StateEmpty) {
		t.Fatalf("live group is %s after its member's session ended, want Empty", f.state("live"))
	}
	if visits := f.c.Stats().TickVisits - start; visits < 2 || visits > 4 {
		t.Fatalf("240 ticks looked at %d groups for one group's join phase and session, want 2-4", visits)
	}

	// Retention: each group is looked at once, and its offsets expire.
	start = f.c.Stats().TickVisits
	f.clock.Advance(7 * 24 * time.Hour)
	f.c.Tick()
	st := f.c.Stats()
	if visits := st.TickVisits - start; visits != groups+1 {
		t.Fatalf("the expiry check looked at %d groups, want %d", visits, groups+1)
	}
	if n := st.Groups[StateEmpty]; n != 0 || st.Bytes != 0 {
		t.Fatalf("after retention: %d groups, %d bytes held", n, st.Bytes)
	}
}

// BenchmarkTickIdleGroups is the cost of a Tick at rest over groups that
// only hold offsets (visits/op should be 0 whatever the count).
func BenchmarkTickIdleGroups(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("groups=%d", n), func(b *testing.B) {
			clock := newManualClock()
			st := newLogStorage(b, vfs.NewMem(), 4)
			st.cfg.SegmentBytes = 64 << 20
			c, err := New(Options{Storage: st, Clock: clock, OffsetsPartitions: 4,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			addOffsetOnlyGroups(b, c, n)
			start := c.Stats().TickVisits
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				clock.Advance(100 * time.Millisecond)
				c.Tick()
			}
			b.ReportMetric(float64(c.Stats().TickVisits-start)/float64(b.N), "visits/op")
		})
	}
}
