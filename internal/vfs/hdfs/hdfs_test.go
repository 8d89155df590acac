package hdfs_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
	vfshdfs "github.com/sluicehq/sluice/internal/vfs/hdfs"
	"github.com/sluicehq/sluice/internal/vfs/vfstest"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
)

func TestMain(m *testing.M) { os.Exit(hdfs.Main(m)) }

var seq atomic.Int64

// TestConformance runs internal/vfs's suite on the whole-cluster FS of a
// real MiniDFSCluster (absolute HDFS paths, append-only files).
func TestConformance(t *testing.T) {
	vfstest.Run(t, vfstest.Options{
		New: func(t *testing.T) (vfs.FS, string) {
			h, err := vfshdfs.New(hdfs.Start(t), vfshdfs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			root := fmt.Sprintf("/vfstest/%d-%d", os.Getpid(), seq.Add(1))
			if err := h.MkdirAll(root); err != nil {
				t.Fatal(err)
			}
			return h, root
		},
		AppendOnly:        true,
		RenameChecksFirst: true,
	})
}
