package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// Scheduled loads while the world changes under them: partitions added, the
// topic deleted and created again (with more, then fewer partitions). The
// checker: every record produced is loaded exactly once (restart), or its
// run fails loudly and nothing of the new topic is loaded (fail); never a
// record skipped in silence.
func TestScheduledLoadsThroughTopicChanges(t *testing.T) {
	for _, policy := range []string{"restart", "fail"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t)
			cl, err := kgo.NewClient(kgo.SeedBrokers(h.addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			t0 := h.clock.Now().Add(-time.Hour)
			p := writeSpec(t, h.jobs, "changing", h.addr, "pv", h.out, "@every 2s", "")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b = []byte(strings.Replace(string(b), "  start: earliest\n", "  start: earliest\n  on_topic_recreated: "+policy+"\n", 1))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{} // ids that must be loaded once
			produce := func(parts int32, first, n int) {
				sluice.Produce(t, h.addr, "pv", parts, first, n, t0, time.Second)
				for p := int32(0); p < parts; p++ {
					for i := 0; i < n; i++ {
						want[fmt.Sprintf("%d-%d", p, first+i)] = true
					}
				}
			}
			recreate := func(parts int32) {
				if _, err := adm.DeleteTopics(ctx, "pv"); err != nil {
					t.Fatal(err)
				}
				sluice.CreateTopic(t, h.addr, "pv", parts)
			}
			tick := func(n int) scheduler.RunRecord {
				h.clock.Advance(2 * time.Second)
				return h.ended("changing", n)[n-1]
			}
			h.start()
			defer h.stop()

			produce(2, 0, 30)
			if r := tick(1); r.State != scheduler.StateSucceeded || r.Records != 60 {
				t.Fatalf("run 1: %+v", r)
			}
			if _, err := adm.CreatePartitions(ctx, 2, "pv"); err != nil { // 4 partitions
				t.Fatal(err)
			}
			produce(4, 1000, 20)
			r := tick(2)
			if r.State != scheduler.StateSucceeded || r.Records != 80 || !strings.Contains(strings.Join(r.Notes, ";"), "partitions [2 3] were added") {
				t.Fatalf("run 2 (partitions added): %+v", r)
			}
			loadedBefore := sluice.LoadedIDs(h.out)

			recreate(3)
			before := len(want)
			produce(3, 2000, 60) // more than the old checkpoints (50): the old code skipped 50 per partition in silence
			r = tick(3)
			if policy == "fail" {
				if r.State != scheduler.StateFailed || !strings.Contains(r.Error, "deleted and created again") {
					t.Fatalf("run 3 (recreated, fail): %+v", r)
				}
				got := sluice.LoadedIDs(h.out)
				if len(got) != len(loadedBefore) || len(got) != before {
					t.Fatalf("a refused run loaded records: %d ids before, %d after, %d of the old topic", len(loadedBefore), len(got), before)
				}
				checkLoadedOnce(t, got, want, func(id string) bool { return idSeq(id) >= 2000 })
				return
			}
			if r.State != scheduler.StateSucceeded || r.Records != 180 || !strings.Contains(strings.Join(r.Notes, ";"), "recreated") {
				t.Fatalf("run 3 (recreated, restart): %+v", r)
			}
			recreate(2)
			produce(2, 3000, 10)
			if r := tick(4); r.State != scheduler.StateSucceeded || r.Records != 20 {
				t.Fatalf("run 4 (recreated with fewer partitions): %+v", r)
			}
			produce(2, 4000, 5)
			if r := tick(5); r.State != scheduler.StateSucceeded || r.Records != 10 {
				t.Fatalf("run 5: %+v", r)
			}
			checkLoadedOnce(t, sluice.LoadedIDs(h.out), want, nil)
		})
	}
}

// checkLoadedOnce: every wanted id is loaded exactly once (but those
// refused says may be missing, never twice), and nothing else is loaded.
func checkLoadedOnce(t *testing.T, got map[string]int, want map[string]bool, refused func(string) bool) {
	t.Helper()
	for id := range want {
		n := got[id]
		if n > 1 || (n == 0 && (refused == nil || !refused(id))) {
			t.Fatalf("record %s loaded %d times", id, n)
		}
	}
	for id := range got {
		if !want[id] {
			t.Fatalf("record %s loaded but never produced", id)
		}
	}
}

func idSeq(id string) int {
	var p, s int
	fmt.Sscanf(id, "%d-%d", &p, &s)
	return s
}
