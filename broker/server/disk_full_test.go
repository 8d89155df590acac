package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/config"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
)

// diskFull fails what needs free space with ENOSPC while full is set, as a
// full file system does: writes, and creating new files or directories (and
// fsync too with syncFails: delayed allocation).
type diskFull struct {
	full, syncFails atomic.Bool
	refused         atomic.Int64
}

func (d *diskFull) MaybeError(op faults.Op, path string) error {
	if !d.full.Load() {
		return nil
	}
	switch op {
	case faults.Sync:
		if !d.syncFails.Load() {
			return nil
		}
	case faults.Create, faults.Mkdir:
		if _, err := os.Stat(path); err == nil {
			return nil // exists: no new space needed
		}
	case faults.Write:
	default:
		return nil
	}
	d.refused.Add(1)
	return &pathError{op: op.String(), path: path, err: syscall.ENOSPC}
}

type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return fmt.Sprintf("%s %s: %v", e.op, e.path, e.err) }
func (e *pathError) Unwrap() error { return e.err }

// startOn starts a server over fs on dir.
func startOn(t *testing.T, dir string, fs vfs.FS) (*testServer, error) {
	t.Helper()
	cfg := config.Default()
	s, err := New(Options{DataDir: dir, Config: cfg, Logger: testLogger(t), FS: fs})
	if err != nil {
		return nil, err
	}
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: addr.String(), dir: dir}
	t.Cleanup(func() { ts.stop(t) })
	return ts, nil
}

// abandonedBroker runs a broker over a diskFull file system on a new
// directory, writes batches batches of 5 records to each of the topic's
// partitions and abandons it as kill -9 would (no clean-shutdown marker:
// recovery runs at the next start).
func abandonedBroker(t *testing.T, topic string, partitions int32, batches int) (string, *diskFull, vfs.FS) {
	dir := t.TempDir()
	disk := &diskFull{}
	fs := vfs.NewFaulty(vfs.OS{}, disk)
	ts, err := startOn(t, dir, fs)
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, ts.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		for range batches {
			if r := produceRaw(t, cl, topic, p, -1, makeBatch(-1, -1, -1, 5, "before")); r.ErrorCode != 0 {
				t.Fatal(kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	cl.Close()
	ts.abandon()
	return dir, disk, fs
}

// TestStartOnFullDisk: after kill -9 the disk is full. The broker refused
// to start (write partition.checkpoint: no space left on device). It starts,
// serves what it has, refuses writes with KAFKA_STORAGE_ERROR while the disk
// is full, and takes writes again once space returns, without a restart.
func TestStartOnFullDisk(t *testing.T) {
	dir, disk, fs := abandonedBroker(t, "kept", 3, 4)

	disk.full.Store(true)
	ts2, err := startOn(t, dir, fs)
	if err != nil {
		t.Fatalf("start on a full disk: %v", err)
	}
	if disk.refused.Load() == 0 {
		t.Fatal("the start wrote nothing: the test does not exercise a full disk")
	}
	// Reads are served.
	consumeAll(t, ts2.addr, "kept", 60)
	// Writes are refused with KAFKA_STORAGE_ERROR, and nothing else breaks.
	cl2 := newClient(t, ts2.addr)
	for p := int32(0); p < 3; p++ {
		if r := produceRaw(t, cl2, "kept", p, -1, makeBatch(-1, -1, -1, 5, "while full")); r.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("partition %d: produce on a full disk: %v, want KAFKA_STORAGE_ERROR", p, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if _, err := kadm.NewClient(cl2).ListTopics(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Space returns: writes are taken again. Partition 2 is not written: a
	// clean shutdown completes its deferred writes.
	disk.full.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for p := int32(0); p < 2; p++ {
		for {
			r := produceRaw(t, cl2, "kept", p, -1, makeBatch(-1, -1, -1, 5, "after"))
			if r.ErrorCode == 0 {
				if r.BaseOffset != 20 {
					t.Fatalf("partition %d: base offset %d after space returned, want 20", p, r.BaseOffset)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d: produce after space returned: %v", p, kerr.ErrorForCode(r.ErrorCode))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	consumeAll(t, ts2.addr, "kept", 70)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ts2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ts3, err := startOn(t, dir, fs)
	if err != nil {
		t.Fatal(err)
	}
	consumeAll(t, ts3.addr, "kept", 70)
	stillServes(t, ts3.addr, "a full disk")
}

// TestStartOnFullDiskFsyncFails: when even the fsync of the recovered data
// fails with ENOSPC (delayed allocation), the broker still starts and serves
// reads, but that partition refuses writes until a restart: after a failed
// writeback a later fsync proves nothing.
func TestStartOnFullDiskFsyncFails(t *testing.T) {
	dir, disk, fs := abandonedBroker(t, "unsynced", 1, 1)
	disk.full.Store(true)
	disk.syncFails.Store(true)
	ts2, err := startOn(t, dir, fs)
	if err != nil {
		t.Fatalf("start on a full disk: %v", err)
	}
	consumeAll(t, ts2.addr, "unsynced", 5)
	disk.full.Store(false)
	cl2 := newClient(t, ts2.addr)
	if r := produceRaw(t, cl2, "unsynced", 0, -1, makeBatch(-1, -1, -1, 5, "after")); r.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("produce after a failed fsync: %v, want KAFKA_STORAGE_ERROR until a restart", kerr.ErrorForCode(r.ErrorCode))
	}
	// Shutdown says the log was failed; the next start recovers it.
	if err := ts2.Shutdown(context.Background()); !errors.Is(err, plog.ErrLogFailed) {
		t.Fatalf("shutdown with a failed log: %v", err)
	}
	ts3, err := startOn(t, dir, fs)
	if err != nil {
		t.Fatal(err)
	}
	if r := produceRaw(t, newClient(t, ts3.addr), "unsynced", 0, -1, makeBatch(-1, -1, -1, 5, "restarted")); r.ErrorCode != 0 || r.BaseOffset != 5 {
		t.Fatalf("produce after the restart: base %d, %v", r.BaseOffset, kerr.ErrorForCode(r.ErrorCode))
	}
}
