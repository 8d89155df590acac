package metadata_test

import (
	"testing"

	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/broker/metadata/storetest"
	"github.com/sluicehq/sluice/internal/vfs"
)

// TestFileStoreConformance runs the Store conformance suite on a FileStore
// in an in-memory file system.
func TestFileStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() metadata.Store {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/data"); err != nil {
			t.Fatal(err)
		}
		return func() metadata.Store {
			s, err := metadata.OpenFileStore(mem, "/data")
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
