package server

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func produceN(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
}

// TestRegistryAdoptsAndCleans: without topics.json the partition
// directories found are adopted (data is never dropped for a lost registry
// file); with topics.json, directories of topics it does not list (a
// DeleteTopics cut short by a crash) are removed at start.
func TestRegistryAdoptsAndCleans(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, nil)
	adm := kadm.NewClient(newClient(t, ts.addr))
	if _, err := adm.CreateTopic(testCtx(t), 2, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(testCtx(t), 1, 1, nil, "dropped"); err != nil {
		t.Fatal(err)
	}
	produceN(t, ts.addr, "kept", 10)
	produceN(t, ts.addr, "dropped", 3)
	ts.stop(t)

	// 1. Lost registry: both topics are adopted with their data.
	if err := os.Remove(filepath.Join(dir, "topics.json")); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, dir, nil)
	for name, want := range map[string]int{"kept": 2, "dropped": 1} {
		tt, ok := ts.topics.get(name)
		if !ok || len(tt.parts) != want {
			t.Fatalf("%s not adopted with %d partitions", name, want)
		}
	}
	if tt, _ := ts.topics.get("dropped"); tt.parts[0].log.LogEndOffset() != 3 {
		t.Fatalf("adopted topic lost records")
	}
	ts.stop(t)

	// 2. A registry without "dropped": its directory goes at start.
	data, err := os.ReadFile(filepath.Join(dir, "topics.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version int              `json:"version"`
		Topics  []map[string]any `json:"topics"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var keep []map[string]any
	for _, rt := range f.Topics {
		if rt["name"] != "dropped" {
			keep = append(keep, rt)
		}
	}
	f.Topics = keep
	data, _ = json.Marshal(f)
	if err := os.WriteFile(filepath.Join(dir, "topics.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, dir, nil)
	if _, ok := ts.topics.get("dropped"); ok {
		t.Fatal("dropped is registered")
	}
	if _, err := os.Stat(filepath.Join(dir, "dropped-0")); !os.IsNotExist(err) {
		t.Fatalf("dropped-0 still on disk: %v", err)
	}
	if tt, ok := ts.topics.get("kept"); !ok || tt.parts[0].log.LogEndOffset()+tt.parts[1].log.LogEndOffset() != 10 {
		t.Fatal("kept lost records")
	}

	// 3. A corrupt registry stops the start with a message, never a silent reset.
	ts.stop(t)
	if err := os.WriteFile(filepath.Join(dir, "topics.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{DataDir: dir, Logger: testLogger(t)}); err == nil {
		t.Fatal("started on a corrupt topics.json")
	}
}

func TestAdvertisedAddr(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4zero, Port: 9999}
	for _, c := range []struct {
		configured string
		want       string
	}{
		{"", "127.0.0.1:9999"},
		{"broker1.example:19092", "broker1.example:19092"},
		{"10.0.0.5:9092", "10.0.0.5:9092"},
		{"garbage", "127.0.0.1:9999"},
	} {
		if got := advertisedAddr(c.configured, bound).String(); got != c.want {
			t.Errorf("advertised %q: %s, want %s", c.configured, got, c.want)
		}
	}
}
