package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/internal/vfs"
)

// gatedFS wraps a real vfs.FS and holds every MkdirAll and RenameReplace of a path
// containing match until open is closed: it keeps a big CreateTopics or
// DeleteTopics in the middle of its directory work for as long as the test
// needs, without sleeping.
type gatedFS struct {
	vfs.FS
	match       string
	open        chan struct{}
	reached     chan struct{} // closed at the first held call
	once, opens sync.Once
}

// release lets the held calls go (once per reset).
func (g *gatedFS) release() { g.opens.Do(func() { close(g.open) }) }

func (g *gatedFS) hold(name string) {
	if strings.Contains(name, g.match) {
		g.once.Do(func() { close(g.reached) })
		<-g.open
	}
}

func (g *gatedFS) MkdirAll(dir string) error {
	g.hold(dir)
	return g.FS.MkdirAll(dir)
}

func (g *gatedFS) RenameReplace(from, to string) error {
	g.hold(from)
	return g.FS.RenameReplace(from, to)
}

// TestBigTopicAdminDoesNotStallTraffic: while a 65,536-partition
// CreateTopics (and then its DeleteTopics) is in the middle of creating
// (removing) directories, Produce and Metadata for another topic are
// answered. Before the registry released its lock around the directory work,
// every such request waited for the whole create.
func TestBigTopicAdminDoesNotStallTraffic(t *testing.T) {
	const partitions = 1 << 16
	fs := &gatedFS{FS: vfs.NewMem(), match: "/big-"}
	reset := func() {
		fs.open, fs.reached, fs.once, fs.opens = make(chan struct{}), make(chan struct{}), sync.Once{}, sync.Once{}
	}
	reset()
	s, err := New(Options{DataDir: "/data", FS: fs, Config: config.Default(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	defer func() { fs.release() }() // first: a failed check must not leave the admin call held
	cl := newClient(t, addr.String(), kgo.DefaultProduceTopic("other"))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(testCtx(t), 1, 1, nil, "other"); err != nil {
		t.Fatal(err)
	}
	produce := func(what string) time.Duration {
		t.Helper()
		start := time.Now()
		answered := make(chan error, 1)
		go func() {
			err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(what)}).FirstErr()
			if err == nil {
				_, err = adm.Metadata(context.Background(), "other")
			}
			answered <- err
		}()
		// Generous: the bound is that the answers come at all while the
		// admin operation is held, not a speed.
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("produce to another topic %s: %v", what, err)
			}
		case <-timer.C:
			fs.release()
			t.Fatalf("produce to another topic %s: no answer in 10 s", what)
		}
		return time.Since(start)
	}
	produce("before")

	created := make(chan error, 1)
	go func() {
		_, code, msg := s.topics.create("big", partitions, nil, nil, false)
		if code != 0 {
			created <- &codeError{code, msg}
			return
		}
		created <- nil
	}()
	<-fs.reached // the create is creating directories, and held there
	took := produce("during create")
	if _, ok := s.topics.get("big"); ok {
		t.Fatal("a topic whose partitions are not all open is visible")
	}
	fs.release()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if tt, ok := s.topics.get("big"); !ok || len(tt.parts) != partitions {
		t.Fatalf("big not created with %d partitions", partitions)
	}
	t.Logf("produce+metadata to another topic during a held %d-partition create: %v", partitions, took)

	reset()
	deleted := make(chan int16, 1)
	go func() { code, _ := s.topics.delete("big"); deleted <- code }()
	<-fs.reached
	took = produce("during delete")
	if _, code, _ := s.topics.create("big", 1, nil, nil, false); code == 0 {
		t.Fatal("a topic being deleted was created again")
	}
	fs.release()
	if code := <-deleted; code != 0 {
		t.Fatalf("delete: code %d", code)
	}
	if _, ok := s.topics.get("big"); ok {
		t.Fatal("big still registered")
	}
	if names, _ := fs.List("/data"); len(names) > 10 {
		t.Fatalf("%d entries left in the data directory", len(names))
	}
	t.Logf("produce+metadata to another topic during a held delete: %v", took)
}

type codeError struct {
	code int16
	msg  string
}

func (e *codeError) Error() string { return e.msg }
