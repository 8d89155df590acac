package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBrokerCommandBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.properties")
	if err := os.WriteFile(bad, []byte("num.partitions=zero\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"broker"},
		{"broker", "--data-dir", t.TempDir(), "--config", bad},
		{"broker", "--data-dir", t.TempDir(), "--config", filepath.Join(t.TempDir(), "missing")},
		{"broker", "--data-dir", t.TempDir(), "--log-level", "loud"},
	} {
		root := newRootCommand()
		root.SetArgs(args)
		root.SetOut(&bytes.Buffer{})
		if err := root.Execute(); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestBrokerCommandServesAndStopsOnSIGTERM runs `sluice broker` in-process,
// produces to it, and sends this process SIGTERM, which the command catches
// and turns into a clean shutdown.
func TestBrokerCommandServesAndStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("num.partitions=3\nlog.retention.hours=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRootCommand()
	var out syncBuffer
	root.SetOut(&out)
	root.SetArgs([]string{"broker", "--data-dir", dir, "--listen", "127.0.0.1:0", "--config", props, "--log-level", "warn"})
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	re := regexp.MustCompile(`listening on (\S+)`)
	var addr string
	deadline := time.Now().Add(20 * time.Second)
	for addr == "" {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("broker exited early: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line: %q", out.String())
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("cmd"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("broker exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop on SIGTERM")
	}
	// num.partitions from --config was used for the auto-created topic.
	entries, _ := os.ReadDir(dir)
	var parts []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cmd-") {
			parts = append(parts, e.Name())
		}
	}
	if len(parts) != 3 {
		t.Fatalf("partition dirs %v, want 3 (num.partitions=3)", parts)
	}
}
