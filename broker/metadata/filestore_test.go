package metadata

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/topicname"
	"github.com/sluicehq/sluice/internal/vfs"
)

func mustOpen(t *testing.T, fsys vfs.FS) *FileStore {
	t.Helper()
	s, err := OpenFileStore(fsys, "/data")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFileStore: topics and producer-id blocks survive a crash once a
// method returned; ids never repeat across reopens; leftovers of an
// interrupted write (ours, and an older version's .topics.json.tmp-N) are
// removed at open; a corrupt or newer file is refused.
func TestFileStore(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	_ = mem.SyncDir("/")
	s := mustOpen(t, mem)
	if topics, fresh, _ := s.Load(); !fresh || len(topics) != 0 {
		t.Fatalf("new store: fresh %v, %d topics", fresh, len(topics))
	}
	a := Topic{Name: "a", ID: NewTopicID(), Partitions: 3, Configs: map[string]string{"retention.ms": "1"}}
	if err := s.CreateTopic(a); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(Topic{Name: "a", ID: NewTopicID(), Partitions: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if err := s.CreateTopic(Topic{Name: "b", ID: NewTopicID(), Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic("b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic("b"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: %v", err)
	}
	first, err := s.ReserveProducerIDs(1000)
	if err != nil || first != 0 {
		t.Fatalf("first block %d %v", first, err)
	}
	// Leftovers of a crash in the middle of a write.
	for _, name := range []string{"/data/topics.json.tmp", "/data/.topics.json.tmp-3", "/data/.producer-ids.json.tmp-12"} {
		f, _ := mem.Create(name)
		f.WriteAt([]byte("{half"), 0)
		f.Sync()
		f.Close()
	}
	_ = mem.MkdirAll("/data/.topics.json.tmp-4") // a partition directory of topic ".topics.json.tmp": kept
	_ = mem.SyncDir("/data")
	mem.Crash()

	s = mustOpen(t, mem)
	topics, fresh, _ := s.Load()
	if fresh || len(topics) != 1 || topics[0].Name != "a" || topics[0].ID != a.ID || topics[0].Partitions != 3 || topics[0].Configs["retention.ms"] != "1" {
		t.Fatalf("after crash: fresh %v topics %+v", fresh, topics)
	}
	names, _ := vfs.ListNames(mem, "/data")
	if len(names) != 3 { // topics.json, producer-ids.json, the directory
		t.Fatalf("left in the data dir: %v", names)
	}
	if next, _ := s.ReserveProducerIDs(1000); next != 1000 {
		t.Fatalf("producer ids repeat after a crash: next block at %d", next)
	}
	for _, bad := range []string{"{not json", `{"version":2,"topics":[]}`, `{"version":1,"topics":[{"name":"x","id":"00","partitions":1}]}`} {
		if err := vfs.WriteFileAtomic(mem, "/data", "topics.json", []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenFileStore(mem, "/data"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestNames(t *testing.T) {
	for name, ok := range map[string]bool{"a": true, "a.b_c-D9": true, "": false, ".": false, "..": false, "a/b": false, "é": false} {
		if (topicname.Check(name) == nil) != ok {
			t.Errorf("topicname.Check(%q) ok = %v", name, !ok)
		}
	}
	if !topicname.Collides("a.b", "a_b") || topicname.Collides("a.b", "a.b") || topicname.Collides("a.b", "a.c") || topicname.Collides("ab", "a_b") {
		t.Error("Collides")
	}
	if id := NewTopicID(); id[6]>>4 != 4 || id[8]>>6 != 2 {
		t.Errorf("not a v4 UUID: %x", id)
	}
}
