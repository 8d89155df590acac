package server

import (
	"context"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
)

// startOnFS starts a server on fs; it returns nil and the error when New fails.
func startOnFS(t *testing.T, fs vfs.FS) (*testServer, error) {
	t.Helper()
	cfg := config.Default()
	cfg.LogRetentionCheckIntervalMs = 1 << 40
	s, err := New(Options{DataDir: "/data", FS: fs, Config: cfg, Logger: testLogger(t)})
	if err != nil {
		return nil, err
	}
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: s, addr: addr.String(), dir: "/data"}, nil
}

// TestTopicAdminCrashLoop fails each file-system operation of a
// create-topic / delete-topic / init-producer-id workload in turn, then
// simulates a crash (unsynced data is lost) and restarts: the registry must
// always load, a topic is either fully there (with its acknowledged records)
// or absent, no partition of an unregistered topic survives, and producer ids
// never repeat.
func TestTopicAdminCrashLoop(t *testing.T) {
	mem := vfs.NewMem()
	base, err := startOnFS(t, mem)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl := newClient(t, base.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "keep"); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, base.addr, kgo.DefaultProduceTopic("keep"))
	for i := 0; i < 20; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	firstPID, _ := initProducerID(t, cl)
	prod.Close()
	cl.Close()
	base.stop(t)

	for i := int64(0); ; i++ {
		fs := vfs.NewMem()
		copyFS(t, mem, fs, "/")
		counter := faults.OnIndex(i)
		counter.Sticky = true
		srv, err := startOnFS(t, vfs.NewFaulty(fs, counter))
		maxPID := firstPID
		if err == nil {
			c := newClient(t, srv.addr, kgo.RetryTimeout(2*time.Second))
			adm := kadm.NewClient(c)
			opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = adm.CreateTopic(opCtx, 3, 1, nil, "made")
			_, _ = adm.DeleteTopics(opCtx, "keep")
			cancel()
			if pid, ok := tryInitProducerID(c); ok && pid > maxPID {
				maxPID = pid
			}
			c.Close()
			_ = srv.Shutdown(ctx)
		}
		fired, what := counter.Fired()
		fs.Crash()
		// Restart on the surviving state, without faults.
		after, err := startOnFS(t, fs)
		if err != nil {
			t.Fatalf("fault at %q: restart failed: %v", what, err)
		}
		checkCrashInvariants(t, after, what, maxPID)
		after.stop(t)
		if !fired {
			t.Logf("workload completed without a fault after %d operations", i)
			break
		}
	}
}

func tryInitProducerID(cl *kgo.Client) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl.Broker(0))
	if err != nil || resp.ErrorCode != 0 {
		return 0, false
	}
	return resp.ProducerID, true
}

func checkCrashInvariants(t *testing.T, ts *testServer, fault string, maxPID int64) {
	t.Helper()
	for _, tp := range ts.mgr.Partitions() {
		tt, ok := ts.topics.get(tp.Topic)
		if !ok || int(tp.Partition) >= len(tt.parts) {
			t.Fatalf("fault at %q: partition %s-%d of an unregistered topic survived a restart", fault, tp.Topic, tp.Partition)
		}
	}
	if tt, ok := ts.topics.get("keep"); ok {
		if len(tt.parts) != 2 {
			t.Fatalf("fault at %q: keep has %d partitions", fault, len(tt.parts))
		}
		var n int64
		for _, p := range tt.parts {
			n += p.log.LogEndOffset()
		}
		if n != 20 {
			t.Fatalf("fault at %q: keep holds %d records, want the 20 acknowledged", fault, n)
		}
	}
	if tt, ok := ts.topics.get("made"); ok && len(tt.parts) != 3 {
		t.Fatalf("fault at %q: made has %d partitions, want 3", fault, len(tt.parts))
	}
	cl := newClient(t, ts.addr)
	pid, ok := tryInitProducerID(cl)
	if !ok || pid <= maxPID {
		t.Fatalf("fault at %q: producer id %d (ok %v) after restart, not above %d", fault, pid, ok, maxPID)
	}
	cl.Close()
}

// copyFS copies the tree under dir of src into dst, synced.
func copyFS(t *testing.T, src, dst vfs.FS, dir string) {
	t.Helper()
	names, err := vfs.ListNames(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		p := path.Join(dir, name)
		st, err := src.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		size := st.Size
		if st.IsDir {
			copyFS(t, src, dst, p)
			continue
		}
		in, err := src.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, size)
		if _, err := in.ReadAt(buf, 0); err != nil && int64(len(buf)) != size {
			t.Fatal(err)
		}
		in.Close()
		out, err := dst.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.WriteAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		if err := out.Sync(); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	if err := dst.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}
