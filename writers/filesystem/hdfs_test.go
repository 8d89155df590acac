package filesystem_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// TestHDFSEmptyFile: an empty file (the Hadoop convention's _SUCCESS marker)
// closes on the real MiniDFSCluster without waiting for replication: Close
// returns no error under a short close timeout (it would fail with "still
// replicating after" if the NameNode never completed the file) and the file
// exists with size 0.
func TestHDFSEmptyFile(t *testing.T) {
	addr := hdfs.Start(t)
	h, err := filesystem.NewHDFS(addr, fmt.Sprintf("/emptytest/%d", hdfsSeq.Add(1)),
		filesystem.HDFSOptions{CloseTimeout: 3 * time.Second})
	mustNil(t, err)
	t.Cleanup(func() { h.Close() })
	if h.Base().CloseTimeout() != 3*time.Second {
		t.Fatalf("CloseTimeout %s, want the option's 3s", h.Base().CloseTimeout())
	}
	cases := map[string]func(name string) error{
		"no-write": func(name string) error {
			f, err := h.CreateExclusive(name)
			if err != nil {
				return err
			}
			return f.Close()
		},
		"empty-write": func(name string) error {
			f, err := h.CreateExclusive(name)
			if err != nil {
				return err
			}
			if n, err := f.Write(nil); err != nil || n != 0 {
				f.Close()
				return fmt.Errorf("Write(nil) = %d, %v", n, err)
			}
			return f.Close()
		},
		"write-exclusive": func(name string) error { return h.WriteExclusive(name, []byte{}) },
	}
	for name, write := range cases {
		t.Run(name, func(t *testing.T) {
			if err := write(name); err != nil {
				t.Fatalf("closing an empty HDFS file: %v", err)
			}
			st, err := h.Stat(name)
			mustNil(t, err)
			if st.Size != 0 || st.IsDir {
				t.Fatalf("%s: size %d dir %v, want an empty file", name, st.Size, st.IsDir)
			}
		})
	}
}
