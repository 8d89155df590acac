package filesystem_test

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	hdfsclient "github.com/colinmarc/hdfs/v2"
	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/writers/filesystem"
)

func TestMain(m *testing.M) { os.Exit(hdfs.Main(m)) }

var hdfsSeq atomic.Int64

// implementations returns every FS the suite runs against, each fresh.
func implementations(t *testing.T) map[string]func(t *testing.T) filesystem.FS {
	return map[string]func(t *testing.T) filesystem.FS{
		"local": func(t *testing.T) filesystem.FS {
			l, err := filesystem.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"local-nosync": func(t *testing.T) filesystem.FS {
			l, err := filesystem.NewLocalNoSync(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"faulty-local": func(t *testing.T) filesystem.FS {
			l, err := filesystem.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return filesystem.NewFaulty(l, -1, false)
		},
		"mem": func(t *testing.T) filesystem.FS { return filesystem.NewMem(nil) },
		"hdfs": func(t *testing.T) filesystem.FS {
			addr := hdfs.Start(t)
			h, err := filesystem.Open(fmt.Sprintf("hdfs://%s/fstest/%d", addr, hdfsSeq.Add(1)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			return h
		},
	}
}

func TestFSContract(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			f := mk(t)
			mustNil(t, f.MkdirAll("a/b"))
			mustNil(t, f.MkdirAll("a/b")) // existing is fine

			w, err := f.Create("a/b/x")
			mustNil(t, err)
			_, err = w.Write([]byte("hello"))
			mustNil(t, err)
			mustNil(t, w.Close())
			if _, err := f.Create("a/b/x"); !errors.Is(err, filesystem.ErrExist) {
				t.Fatalf("second Create: %v, want ErrExist", err)
			}
			if _, err := f.Create("nodir/x"); err == nil {
				t.Fatal("Create without a parent succeeded")
			}
			b, err := filesystem.ReadFile(f, "a/b/x")
			mustNil(t, err)
			if string(b) != "hello" {
				t.Fatalf("read %q", b)
			}

			mustNil(t, f.WriteExclusive("a/m.json", []byte(`{"k":1}`)))
			if err := f.WriteExclusive("a/m.json", []byte(`{"k":2}`)); !errors.Is(err, filesystem.ErrExist) {
				t.Fatalf("second WriteExclusive: %v, want ErrExist", err)
			}
			b, err = filesystem.ReadFile(f, "a/m.json")
			mustNil(t, err)
			if string(b) != `{"k":1}` {
				t.Fatalf("manifest replaced: %q", b)
			}

			// Rename never replaces.
			if err := f.Rename("a/b/x", "a/m.json"); !errors.Is(err, filesystem.ErrExist) {
				t.Fatalf("Rename onto existing: %v, want ErrExist", err)
			}
			mustNil(t, f.Rename("a/b/x", "a/y"))
			if _, err := f.Stat("a/b/x"); !errors.Is(err, filesystem.ErrNotExist) {
				t.Fatalf("source still there: %v", err)
			}
			st, err := f.Stat("a/y")
			mustNil(t, err)
			if st.Size != 5 || st.IsDir || st.Name != "y" {
				t.Fatalf("stat %+v", st)
			}
			if err := f.Rename("a/nothing", "a/z"); !errors.Is(err, filesystem.ErrNotExist) {
				t.Fatalf("Rename of missing: %v, want ErrNotExist", err)
			}

			ls, err := f.List("a")
			mustNil(t, err)
			var names []string
			for _, e := range ls {
				names = append(names, e.Name)
			}
			if fmt.Sprint(names) != "[b m.json y]" {
				t.Fatalf("List = %v", names)
			}
			if _, err := f.List("missing"); !errors.Is(err, filesystem.ErrNotExist) {
				t.Fatalf("List missing: %v", err)
			}

			mustNil(t, f.Remove("a/y"))
			mustNil(t, f.Remove("a/y")) // missing is fine
			mustNil(t, f.RemoveAll("a"))
			mustNil(t, f.RemoveAll("a"))
			if _, err := f.Stat("a"); !errors.Is(err, filesystem.ErrNotExist) {
				t.Fatalf("after RemoveAll: %v", err)
			}
			if _, err := f.Stat("../etc"); !errors.Is(err, filesystem.ErrBadPath) {
				t.Fatalf("climbing path: %v", err)
			}
		})
	}
}

// TestWriteExclusiveRace: many writers race for one name; exactly one wins.
func TestWriteExclusiveRace(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			f := mk(t)
			mustNil(t, f.MkdirAll("c"))
			var wins atomic.Int32
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := f.WriteExclusive("c/m", []byte(fmt.Sprint(i)))
					if err == nil {
						wins.Add(1)
					} else if !errors.Is(err, filesystem.ErrExist) {
						t.Errorf("writer %d: %v", i, err)
					}
				}()
			}
			wg.Wait()
			if wins.Load() != 1 {
				t.Fatalf("%d winners", wins.Load())
			}
		})
	}
}

func TestFaultyFailsChosenOperation(t *testing.T) {
	l, err := filesystem.NewLocal(t.TempDir())
	mustNil(t, err)
	f := filesystem.NewFaulty(l, 2, true)
	mustNil(t, f.MkdirAll("d")) // op 0
	w, err := f.Create("d/x")   // op 1
	mustNil(t, err)
	if _, err := w.Write([]byte("x")); !errors.Is(err, filesystem.ErrInjected) { // op 2
		t.Fatalf("write: %v", err)
	}
	if err := w.Close(); !errors.Is(err, filesystem.ErrInjected) { // sticky
		t.Fatalf("close: %v", err)
	}
	if f.Ops() != 4 || !f.Failed() {
		t.Fatalf("ops %d failed %v", f.Ops(), f.Failed())
	}
}

func TestOpenURI(t *testing.T) {
	dir := t.TempDir()
	f, err := filesystem.Open("file://" + dir + "/w")
	mustNil(t, err)
	if f.String() != "file://"+dir+"/w" {
		t.Fatalf("String = %s", f)
	}
	for _, bad := range []string{"s3://b/x", "file://host/x", "::"} {
		if _, err := filesystem.Open(bad); !errors.Is(err, filesystem.ErrBadURI) {
			t.Errorf("Open(%q) = %v, want ErrBadURI", bad, err)
		}
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestHDFSEnvironment: HADOOP_USER_NAME names the owner of new files and
// HADOOP_CONF_DIR supplies the NameNode of an hdfs:///path URI.
func TestHDFSEnvironment(t *testing.T) {
	addr := hdfs.Start(t)
	conf := t.TempDir()
	site := fmt.Sprintf(`<?xml version="1.0"?><configuration>
<property><name>fs.defaultFS</name><value>hdfs://%s</value></property>
</configuration>`, addr)
	if err := os.WriteFile(conf+"/core-site.xml", []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADOOP_CONF_DIR", conf)
	t.Setenv("HADOOP_USER_NAME", "alice")
	f, err := filesystem.Open("hdfs:///envtest")
	mustNil(t, err)
	defer f.Close()
	mustNil(t, f.WriteExclusive("owned", []byte("x")))
	h := f.(*filesystem.HDFS)
	abs, err := h.Abs("owned")
	mustNil(t, err)
	st, err := h.Client().Stat(abs)
	mustNil(t, err)
	if owner := st.(*hdfsclient.FileInfo).Owner(); owner != "alice" {
		t.Fatalf("owner %q, want alice", owner)
	}
}

// TestMemCrash: Crash keeps what Local makes durable and drops the rest.
func TestMemCrash(t *testing.T) {
	m := filesystem.NewMem(nil)
	mustNil(t, m.MkdirAll("d/e"))
	mustNil(t, m.WriteExclusive("d/e/kept", []byte("k")))
	open, err := m.Create("d/open") // never closed: data not synced
	mustNil(t, err)
	open.Write([]byte("lost"))
	closed, err := m.Create("d/closed")
	mustNil(t, err)
	closed.Write([]byte("whole"))
	mustNil(t, closed.Close()) // syncs d: d/open's entry too, without data
	mustNil(t, m.MkdirAll("d/f"))
	mustNil(t, m.WriteExclusive("d/f/r", []byte("r")))
	mustNil(t, m.Rename("d/f/r", "d/e/moved"))
	mustNil(t, m.Remove("d/e/kept")) // not synced: comes back
	late, err := m.Create("d/late")  // d not synced since
	mustNil(t, err)
	late.Write([]byte("x"))
	m.Crash()
	want := map[string]string{"d/e/kept": "k", "d/open": "", "d/closed": "whole", "d/e/moved": "r"}
	for name, data := range want {
		b, err := filesystem.ReadFile(m, name)
		if err != nil || string(b) != data {
			t.Errorf("%s after crash: %q %v, want %q", name, b, err, data)
		}
	}
	for _, gone := range []string{"d/late", "d/f/r"} {
		if ok, _ := filesystem.Exists(m, gone); ok {
			t.Errorf("%s survived the crash", gone)
		}
	}
}

// TestFaultyVocabulary: Faulty takes any internal/faults injector: here the
// first rename under a given directory, whatever came before.
func TestFaultyVocabulary(t *testing.T) {
	l, err := filesystem.NewLocalNoSync(t.TempDir())
	mustNil(t, err)
	f := filesystem.NewFaultyWith(l, faults.Filter(faults.OnIndex(0), faults.Ops(faults.Rename), faults.PathHasPrefix("commits/")))
	mustNil(t, f.MkdirAll("commits"))
	mustNil(t, f.MkdirAll("tmp"))
	mustNil(t, f.WriteExclusive("tmp/a", []byte("a")))
	mustNil(t, f.Rename("tmp/a", "tmp/b"))
	mustNil(t, f.WriteExclusive("commits/a", []byte("a")))
	if err := f.Rename("commits/a", "commits/b"); !errors.Is(err, filesystem.ErrInjected) {
		t.Fatalf("the first rename under commits/: %v", err)
	}
	mustNil(t, f.Rename("commits/a", "commits/b"))
	if !f.Failed() || f.Ops() != 7 {
		t.Fatalf("failed %v after %d ops", f.Failed(), f.Ops())
	}
}
