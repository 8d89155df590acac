package filesystem

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/internal/vfs"
)

// Local is a directory of the local disk as the writers' vfs.FS.
type Local struct {
	vfs.FS
	root string
}

// NewLocal returns the directory dir (created if needed) as a durable,
// confined vfs.FS.
func NewLocal(dir string) (*Local, error) { return newLocal(dir, vfs.OS{}) }

// NewLocalNoSync is NewLocal without fsync: every guarantee holds except
// durability across a machine crash. For tests and scratch output only.
func NewLocalNoSync(dir string) (*Local, error) { return newLocal(dir, vfs.OS{NoSync: true}) }

func newLocal(dir string, base vfs.OS) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filesystem: local root %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("filesystem: local root %q: %w", dir, err)
	}
	return &Local{FS: vfs.Durable(vfs.Sub(base, abs)), root: abs}, nil
}

// Root returns the absolute local directory of the FS.
func (l *Local) Root() string { return l.root }
