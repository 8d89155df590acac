package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// abandon stops the server the way kill -9 would, as far as the data
// directory is concerned: connections are cut and the lock released, but the
// partition logs are never closed, so no clean-shutdown marker is written.
func (ts *testServer) abandon() {
	s := ts.Server
	s.mu.Lock()
	s.closed = true
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.connWG.Wait()
	s.retentionWG.Wait()
	s.unlock()
}

// TestUncleanRestartKeepsAcknowledged abandons a broker in the middle of an
// idempotent produce stream and restarts on the same directory: every
// acknowledged record is readable, offsets are contiguous, and the
// producer state was recovered (a retry of an old batch is a duplicate).
func TestUncleanRestartKeepsAcknowledged(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, nil)
	cl := newClient(t, ts.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 2, 1, nil, "unclean"); err != nil {
		t.Fatal(err)
	}
	pid, epoch := initProducerID(t, cl)
	raw := makeBatch(pid, epoch, 0, 5, "raw")
	orig := produceRaw(t, cl, "unclean", 1, -1, raw)
	if orig.ErrorCode != 0 {
		t.Fatal(orig.ErrorCode)
	}
	prod := newClient(t, ts.addr, kgo.DefaultProduceTopic("unclean"), kgo.RecordRetries(0))
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	enough := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("v%06d", i)
			prod.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = true
					if len(acked) == 2000 {
						close(enough)
					}
					mu.Unlock()
				}
			})
		}
	}()
	<-enough
	ts.abandon() // mid-stream
	cancel()
	wg.Wait()
	prod.Close()
	cl.Close()

	ts2 := startServer(t, dir, nil)
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	var total int64
	for p := 0; p < 2; p++ {
		tt, _ := ts2.topics.get("unclean")
		total += tt.parts[p].log.LogEndOffset()
	}
	if total < int64(want)+5 {
		t.Fatalf("after the unclean restart the log holds %d records, fewer than the %d acknowledged", total, want+5)
	}
	got := consumeAll(t, ts2.addr, "unclean", int(total))
	seen := map[string]bool{}
	next := map[int32]int64{}
	for _, r := range got {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d (not contiguous)", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		seen[string(r.Value)] = true
	}
	for v := range acked {
		if !seen[v] {
			t.Fatalf("acknowledged record %s lost", v)
		}
	}
	cl2 := newClient(t, ts2.addr)
	if dup := produceRaw(t, cl2, "unclean", 1, -1, raw); dup.ErrorCode != 0 || dup.BaseOffset != orig.BaseOffset {
		t.Fatalf("retry of a pre-crash batch: error %d base %d, want base %d", dup.ErrorCode, dup.BaseOffset, orig.BaseOffset)
	}
}
