package replica_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func values(t *testing.T, c *testCluster, id int32) map[int64]string {
	l, err := c.node(id).srv.PartitionLog(c.topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, recs := readLog(t, l)
	return recs
}

// KIP-101: the old leader comes back with a tail its followers never got
// (appended with acks=1); it truncates it by leader epoch and then holds the
// new leader's records at those offsets.
func TestOldLeaderTailTruncated(t *testing.T) {
	c := newCluster(t, 3, 1, 2, 5*time.Second)
	c.elect(0, 1, all3)
	h := newHistory()
	if err := c.produce(h, 1, 0, "a", 20); err != nil {
		t.Fatal(err)
	}
	c.waitFor("settle", c.settled)
	c.stop(2)
	c.stop(3)
	if code, _ := c.produceRaw(1, 0, 1, "tail-1", "tail-2"); code != 0 {
		t.Fatalf("acks=1 tail: code %d", code)
	}
	c.stop(1)
	c.elect(0, 2, all3, 1) // broker 1 is dead: out of the ISR
	c.start(2)
	c.start(3)
	if err := c.produce(h, 2, 0, "c", 20); err != nil {
		t.Fatal(err)
	}
	c.start(1)
	c.waitFor("broker 1 back in the ISR", func() bool { return slices.Contains(c.current(0).ISR, 1) })
	c.check(h)
	for off, v := range values(t, c, 1) {
		if v == "tail-1" || v == "tail-2" {
			t.Errorf("broker 1 kept its unreplicated %q at %d", v, off)
		}
	}
}

// KIP-279: two leader changes in a row, each leader appending a record
// the other never saw at the same offset, in different epochs. The follower
// must walk the epochs back to where the logs really diverge.
func TestFastDoubleFailover(t *testing.T) {
	c := newCluster(t, 2, 1, 1, 10*time.Second)
	both := []int32{1, 2}
	c.elect(0, 1, both) // epoch 0
	h := newHistory()
	code, off := c.produceRaw(1, 0, -1, "m1")
	if code != 0 {
		t.Fatalf("m1: code %d", code)
	}
	h.ack(0, off, "m1")
	c.waitFor("settle", c.settled)
	c.stop(2)
	if code, _ := c.produceRaw(1, 0, 1, "m2"); code != 0 { // offset 1, epoch 0, only on broker 1
		t.Fatalf("m2: code %d", code)
	}
	c.stop(1)
	c.elect(0, 2, both) // epoch 1; broker 1 stays in the ISR (its failure not noticed yet)
	c.start(2)
	if code, _ := c.produceRaw(2, 0, 1, "m3"); code != 0 { // offset 1, epoch 1, only on broker 2
		t.Fatalf("m3: code %d", code)
	}
	c.stop(2)
	c.start(1)
	c.elect(0, 1, both) // epoch 2
	c.waitFor("broker 1 to lead epoch 2", func() bool { l, e, _ := c.node(1).mgr.Role(c.topic, 0); return l && e == 2 })
	if code, _ := c.produceRaw(1, 0, 1, "m4"); code != 0 { // offset 2, epoch 2
		t.Fatalf("m4: code %d", code)
	}
	c.start(2)
	c.check(h)
	got := values(t, c, 2)
	want := map[int64]string{0: "m1", 1: "m2", 2: "m4"}
	for o, v := range want {
		if got[o] != v {
			t.Errorf("broker 2 offset %d: %q, want %q (all: %v)", o, got[o], v, got)
		}
	}
}

// A new leader answers an idempotent producer's retry of a batch the old
// leader appended with the batch's original offset (the follower rebuilt
// the producer state from the replicated batches).
func TestIdempotentRetryAfterFailover(t *testing.T) {
	c := newCluster(t, 2, 1, 1, 10*time.Second)
	both := []int32{1, 2}
	c.elect(0, 1, both)
	if code, _ := c.produceRaw(1, 0, -1, "x", "y"); code != 0 {
		t.Fatal(code)
	}
	cl := c.client(c.node(1).addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ipr, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || ipr.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %d", err, ipr.ErrorCode)
	}
	batch := makeBatch(ipr.ProducerID, ipr.ProducerEpoch, 0, []string{"once-1", "once-2"})
	code, first := c.produceBatch(1, 0, -1, slices.Clone(batch))
	if code != 0 {
		t.Fatalf("idempotent produce: code %d", code)
	}
	c.waitFor("settle", c.settled)
	c.elect(0, 2, both)
	c.waitFor("broker 2 to lead", func() bool { l, _, _ := c.node(2).mgr.Role(c.topic, 0); return l })
	code, again := c.produceBatch(2, 0, -1, slices.Clone(batch))
	if code != 0 || again != first {
		t.Fatalf("retry on the new leader: code %d offset %d, want 0 and the original %d", code, again, first)
	}
	h := newHistory()
	h.ack(0, first, "once-1")
	h.ack(0, first+1, "once-2")
	c.check(h)
	n := 0
	for _, v := range values(t, c, 2) {
		if v == "once-1" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the retried batch is in the log %d times", n)
	}
}

// A randomized schedule of produces, follower stops and restarts and clean
// leader changes (SLUICE_REPLICA_SEED repeats one; SLUICE_REPLICA_STEPS
// makes it longer). The checker runs once everyone is back.
func TestRandomizedRoleChanges(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_REPLICA_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	steps := 12
	if s := os.Getenv("SLUICE_REPLICA_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d (SLUICE_REPLICA_SEED=%d to repeat), %d steps", seed, seed, steps)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := newCluster(t, 3, 1, 1, 300*time.Millisecond)
	c.elect(0, 1, all3)
	h := newHistory()
	stopped := map[int32]bool{}
	for step := range steps {
		st := c.current(0)
		var stoppedIDs []int32
		for id := range stopped {
			stoppedIDs = append(stoppedIDs, id)
		}
		slices.Sort(stoppedIDs)
		switch a := rng.IntN(4); {
		case a == 0 && len(stoppedIDs) < 2: // stop a follower
			var fs []int32
			for _, id := range all3 {
				if id != st.Leader && !stopped[id] {
					fs = append(fs, id)
				}
			}
			if len(fs) > 0 {
				id := fs[rng.IntN(len(fs))]
				t.Logf("step %d: stop follower %d", step, id)
				c.stop(id)
				stopped[id] = true
			}
		case a == 1 && len(stoppedIDs) > 0: // restart one
			id := stoppedIDs[rng.IntN(len(stoppedIDs))]
			t.Logf("step %d: restart %d", step, id)
			c.start(id)
			delete(stopped, id)
		case a == 2: // clean leader change, the old leader maybe killed
			var cands []int32
			for _, id := range st.ISR {
				if id != st.Leader && !stopped[id] {
					cands = append(cands, id)
				}
			}
			if len(cands) == 0 {
				break
			}
			next := cands[rng.IntN(len(cands))]
			drop := slices.Clone(stoppedIDs)
			if rng.IntN(2) == 0 {
				t.Logf("step %d: kill leader %d", step, st.Leader)
				c.stop(st.Leader)
				stopped[st.Leader] = true
				drop = append(drop, st.Leader)
			}
			t.Logf("step %d: elect %d (ISR %v, dropping %v)", step, next, st.ISR, drop)
			c.elect(0, next, all3, drop...)
		default:
			t.Logf("step %d: produce to %d", step, st.Leader)
			if err := c.produce(h, st.Leader, 0, fmt.Sprintf("s%d", step), 20); err != nil {
				t.Logf("step %d: produce: %v (unacknowledged records may or may not stay)", step, err)
			}
		}
		c.sampleHW()
	}
	for id := range stopped {
		c.start(id)
	}
	st := c.current(0)
	if err := c.produce(h, st.Leader, 0, "final", 10); err != nil {
		t.Fatalf("final produce: %v", err)
	}
	c.check(h)
	t.Logf("%d records acknowledged", h.count())
}
