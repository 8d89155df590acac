package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func initProducerID(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	resp, err := req.RequestWith(testCtx(t), cl.Broker(0))
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func TestIdempotentSequences(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 1, nil, "idem"); err != nil {
		t.Fatal(err)
	}
	pid, epoch := initProducerID(t, cl)
	pid2, _ := initProducerID(t, cl)
	if pid2 == pid {
		t.Fatalf("producer id %d handed out twice", pid)
	}
	first := makeBatch(pid, epoch, 0, 3, "first")
	steps := []struct {
		name     string
		batch    []byte
		wantCode int16
		wantBase int64
	}{
		{"seq 0", first, 0, 0},
		{"duplicate of seq 0", first, 0, 0},
		{"seq 3", makeBatch(pid, epoch, 3, 2, "second"), 0, 3},
		{"duplicate of seq 0 again (within the last five)", first, 0, 0},
		{"gap: seq 10", makeBatch(pid, epoch, 10, 1, "gap"), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"new producer starting at seq 5", makeBatch(pid2, 0, 5, 1, "late"), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"epoch bump restarts at seq 0", makeBatch(pid, epoch+1, 0, 1, "bumped"), 0, 5},
		{"stale epoch", makeBatch(pid, epoch, 5, 1, "stale"), kerr.InvalidProducerEpoch.Code, -1},
	}
	for _, st := range steps {
		p := produceRaw(t, cl, "idem", 0, -1, st.batch)
		if p.ErrorCode != st.wantCode || (st.wantCode == 0 && p.BaseOffset != st.wantBase) {
			t.Fatalf("%s: error %v base %d, want %v base %d", st.name, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset,
				kerr.ErrorForCode(st.wantCode), st.wantBase)
		}
	}
	end, err := kadm.NewClient(cl).ListEndOffsets(testCtx(t), "idem")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("idem", 0); o.Offset != 6 {
		t.Fatalf("log end offset %d, want 6 (duplicates must not be appended)", o.Offset)
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, nil)
	cl := newClient(t, ts.addr)
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadmStr("86400000")}, "durable"); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, ts.addr, kgo.DefaultProduceTopic("durable"))
	var sent []*kgo.Record
	for i := 0; i < 200; i++ {
		sent = append(sent, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("value-%d", i))})
	}
	if err := prod.ProduceSync(ctx, sent...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch := initProducerID(t, cl)
	batch := makeBatch(pid, epoch, 0, 4, "raw")
	orig := produceRaw(t, cl, "durable", 1, -1, batch)
	if orig.ErrorCode != 0 {
		t.Fatalf("raw produce: %v", kerr.ErrorForCode(orig.ErrorCode))
	}
	endBefore, err := adm.ListEndOffsets(ctx, "durable")
	if err != nil {
		t.Fatal(err)
	}
	prod.Close()
	cl.Close()
	ts.stop(t)

	ts2 := startServer(t, dir, nil)
	cl2 := newClient(t, ts2.addr)
	adm2 := kadm.NewClient(cl2)
	endAfter, err := adm2.ListEndOffsets(ctx, "durable")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{0, 1} {
		b, _ := endBefore.Lookup("durable", p)
		a, _ := endAfter.Lookup("durable", p)
		if a.Offset != b.Offset || a.Err != nil {
			t.Fatalf("partition %d: end offset %d before restart, %d (%v) after", p, b.Offset, a.Offset, a.Err)
		}
	}
	// The producer state survived: a retry of the batch is a duplicate.
	if dup := produceRaw(t, cl2, "durable", 1, -1, batch); dup.ErrorCode != 0 || dup.BaseOffset != orig.BaseOffset {
		t.Fatalf("retry after restart: %v base %d, want base %d", kerr.ErrorForCode(dup.ErrorCode), dup.BaseOffset, orig.BaseOffset)
	}
	if next := produceRaw(t, cl2, "durable", 1, -1, makeBatch(pid, epoch, 4, 1, "next")); next.ErrorCode != 0 {
		t.Fatalf("next sequence after restart: %v", kerr.ErrorForCode(next.ErrorCode))
	}
	// Producer ids never repeat.
	if pid2, _ := initProducerID(t, cl2); pid2 <= pid {
		t.Fatalf("producer id %d after restart, not above %d", pid2, pid)
	}
	// Config overrides survived.
	rcs, err := adm2.DescribeTopicConfigs(ctx, "durable")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("durable", nil)
	ok := false
	for _, c := range rc.Configs {
		ok = ok || (c.Key == "retention.ms" && c.MaybeValue() == "86400000")
	}
	if !ok {
		t.Fatalf("retention.ms override lost: %+v", rc.Configs)
	}
	// Every record reads back byte-exact.
	got := consumeAll(t, ts2.addr, "durable", 200+4+1)
	byValue := map[string][]byte{}
	for _, r := range got {
		byValue[string(r.Value)] = r.Key
	}
	for _, r := range sent {
		if k, ok := byValue[string(r.Value)]; !ok || !bytes.Equal(k, r.Key) {
			t.Fatalf("record %q lost or changed after restart", r.Value)
		}
	}
}

func TestShutdownEndsLongPoll(t *testing.T) {
	ts := startServer(t, "", nil)
	if _, err := kadm.NewClient(newClient(t, ts.addr)).CreateTopic(testCtx(t), 1, 1, nil, "idle"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, ts.addr, kgo.ConsumeTopics("idle"), kgo.FetchMaxWait(30*time.Second))
	go cl.PollFetches(context.Background())
	// Wait until the long poll is parked in the server.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if parked(ts) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling the server's own state, not waiting for time
	}
	start := time.Now()
	ts.stop(t)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown took %v with a parked long poll", d)
	}
}

// parked reports whether some connection is inside a Fetch long poll.
func parked(ts *testServer) bool { return ts.longPolls.Load() > 0 }

func TestDataDirLocked(t *testing.T) {
	ts := startServer(t, "", nil)
	if _, err := New(Options{DataDir: ts.dir, Logger: testLogger(t)}); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second broker on the same data dir: %v, want ErrDataDirInUse", err)
	}
	ts.stop(t)
	again := startServer(t, ts.dir, nil) // released by Shutdown
	again.stop(t)
}
