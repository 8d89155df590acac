package filesystem_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	hdfsclient "github.com/colinmarc/hdfs/v2"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/internal/vfs/vfstest"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/writers/filesystem"
)

func TestMain(m *testing.M) { os.Exit(hdfs.Main(m)) }

var hdfsSeq atomic.Int64

// TestConformance runs internal/vfs's suite on what Open gives the
// writers: a local directory and an HDFS one (a real MiniDFSCluster).
func TestConformance(t *testing.T) {
	opens := map[string]func(t *testing.T) string{
		"local": func(t *testing.T) string { return "file://" + t.TempDir() + "/w" },
		"hdfs": func(t *testing.T) string {
			return fmt.Sprintf("hdfs://%s/fstest/%d", hdfs.Start(t), hdfsSeq.Add(1))
		},
	}
	for name, uri := range opens {
		t.Run(name, func(t *testing.T) {
			vfstest.Run(t, vfstest.Options{
				New: func(t *testing.T) (vfs.FS, string) {
					f, err := filesystem.Open(uri(t))
					mustNil(t, err)
					t.Cleanup(func() { f.Close() })
					return f, "."
				},
				AppendOnly:        name == "hdfs",
				RemoveMissingOK:   true,
				RenameChecksFirst: name == "hdfs", // its Rename overwrites: the exclusive rename is check-then-rename
			})
		})
	}
}

func TestOpenURI(t *testing.T) {
	dir := t.TempDir()
	f, err := filesystem.Open("file://" + dir + "/w")
	mustNil(t, err)
	if f.String() != "file://"+dir+"/w" {
		t.Fatalf("String = %s", f)
	}
	if _, err := os.Stat(filepath.Join(dir, "w")); err != nil {
		t.Fatalf("Open did not create the directory: %v", err)
	}
	if _, err := f.Stat("../etc"); !errors.Is(err, vfs.ErrBadPath) {
		t.Fatalf("climbing path: %v", err)
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
	st, err := h.Base().Client().Stat(abs)
	mustNil(t, err)
	if owner := st.(*hdfsclient.FileInfo).Owner(); owner != "alice" {
		t.Fatalf("owner %q, want alice", owner)
	}
}

// TestLocalRenameAlreadyMoved: a move interrupted between link and unlink
// leaves both names; the same RenameNoReplace again completes it instead
// of failing, and a different file at the destination is still refused.
func TestLocalRenameAlreadyMoved(t *testing.T) {
	l, err := filesystem.NewLocal(t.TempDir())
	mustNil(t, err)
	mustNil(t, l.WriteExclusive("f", []byte("x")))
	mustNil(t, os.Link(filepath.Join(l.Root(), "f"), filepath.Join(l.Root(), "g")))
	if err := l.RenameNoReplace("f", "g"); err != nil {
		t.Fatalf("rename after an interrupted move: %v", err)
	}
	if ok, _ := vfs.Exists(l, "f"); ok {
		t.Fatal("the old name is still there")
	}
	mustNil(t, l.WriteExclusive("h", []byte("y")))
	if err := l.RenameNoReplace("h", "g"); !errors.Is(err, vfs.ErrExist) {
		t.Fatalf("rename onto another file: %v", err)
	}
}
