package writers

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
)

// The view of a partition's files: a record replaces the files it names
// (only those of the commit it names: a reload may reuse a name), adds its
// files, and a file whose source commits are gone is gone too. A record
// committed with its moves interrupted is finished by RecoverCompactions;
// an attempt without a record is removed; a torn record is dropped.
func TestCompactionViewAndRecovery(t *testing.T) {
	fs := vfs.NewMem()
	s := NewStore(fs, StoreOptions{})
	m1 := &Manifest{Topic: "t", Start: 0, End: 10, Attempt: "a1", Files: []File{{Final: "d/t+0+0+10.parquet", Records: 10, First: 0, Last: 9}}}
	m2 := &Manifest{Topic: "t", Start: 10, End: 20, Attempt: "a2", Files: []File{{Final: "d/t+0+10+20.parquet", Records: 10, First: 10, Last: 19}}}
	for _, p := range []string{"d/t+0+0+10.parquet", "d/t+0+10+20.parquet"} {
		if err := fs.MkdirAll("d"); err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteExclusive(p, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.NewCompaction("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	f, temp, err := a.Create("d/" + CompactedName("t", 0, 0, 20, a.Seq(), "parquet"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("y"))
	f.Close()
	view := ApplyCompactions([]*Manifest{m1, m2}, nil)
	c := &Compaction{Reason: "compact", Replaced: []Replaced{{view[0].Final, view[0].Commit}, {view[1].Final, view[1].Commit}},
		Files: []CompactedFile{{File: File{Temp: temp, Final: "d/" + CompactedName("t", 0, 0, 20, a.Seq(), "parquet"), Records: 20, First: 0, Last: 19},
			Sources: append(append([]Source(nil), view[0].Sources...), view[1].Sources...)}}}
	// The commit's record is written, then the process dies before the moves.
	c.Topic, c.Partition, c.Seq = "t", 0, a.Seq()
	b, _ := c.Encode()
	if err := fs.WriteExclusive(CompactionPath("t", 0, a.Seq()), b); err != nil {
		t.Fatal(err)
	}
	got, err := s.CommittedFiles("t", 0, []*Manifest{m1, m2})
	if err != nil || len(got) != 1 || got[0].Compaction != 1 || got[0].Records != 20 {
		t.Fatalf("view after the record: %+v %v", got, err)
	}
	if ok, _ := vfs.Exists(fs, got[0].Temp); !ok {
		t.Fatal("the new file is not at its temporary path before the moves")
	}
	done, err := s.RecoverCompactions("t", 0)
	if err != nil || len(done) != 1 {
		t.Fatalf("recover: %v %v", done, err)
	}
	for p, want := range map[string]bool{"d/t+0+0+10.parquet": false, "d/t+0+10+20.parquet": false, got[0].Final: true, CompactionTempDir("t", 0, 1): false} {
		if ok, _ := vfs.Exists(fs, p); ok != want {
			t.Errorf("after recovery %s exists: %v, want %v", p, ok, want)
		}
	}
	// A reload after a withdrawal of m2 writes a file under m2's old name:
	// it is not the file the record replaced; the compacted file, whose
	// source m2 is gone, is not committed any more.
	m2b := &Manifest{Topic: "t", Start: 10, End: 20, Attempt: "a3", Files: m2.Files}
	got, _ = s.CommittedFiles("t", 0, []*Manifest{m1, m2b})
	if len(got) != 1 || got[0].Final != "d/t+0+10+20.parquet" || got[0].Commit != "a3" {
		t.Fatalf("view with m2 replaced by a reload: %+v", got)
	}
	// An attempt that never committed is removed; a torn record is dropped.
	a2, _ := s.NewCompaction("t", 0)
	if a2.Seq() != 2 {
		t.Fatalf("next seq %d", a2.Seq())
	}
	fs.WriteExclusive(CompactionPath("t", 0, 2), []byte("sluice-compaction 2 crc32c=00000000 len=99\n{"))
	if cs, err := s.Compactions("t", 0); err != nil || len(cs) != 1 {
		t.Fatalf("compactions with a torn one: %d %v", len(cs), err)
	}
	if _, err := s.RecoverCompactions("t", 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{CompactionTempDir("t", 0, 2), CompactionPath("t", 0, 2)} {
		if _, err := fs.Stat(p); !errors.Is(err, vfs.ErrNotExist) {
			t.Errorf("%s left: %v", p, err)
		}
	}
}
