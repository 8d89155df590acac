package filesystem

import (
	"errors"
	"fmt"
	"path"

	"github.com/sluicehq/sluice/internal/vfs"
	vfshdfs "github.com/sluicehq/sluice/internal/vfs/hdfs"
)

// HDFSOptions tune NewHDFS (internal/vfs/hdfs's options).
type HDFSOptions = vfshdfs.Options

// HDFS is a directory of a Hadoop file system as the writers' vfs.FS. Its
// Close closes the connection.
type HDFS struct {
	vfs.FS
	base *vfshdfs.FS
	root string
}

// NewHDFS connects to the NameNode at addr (empty: from HADOOP_CONF_DIR,
// see internal/vfs/hdfs.New) and returns the directory root (created if
// needed) as a durable, confined vfs.FS.
func NewHDFS(addr, root string, opts HDFSOptions) (*HDFS, error) {
	base, err := vfshdfs.New(addr, opts)
	if errors.Is(err, vfshdfs.ErrNoNameNode) {
		return nil, fmt.Errorf("%w: %w", ErrBadURI, err)
	}
	if err != nil {
		return nil, fmt.Errorf("filesystem: %w", err)
	}
	root = path.Clean("/" + root)
	if err := base.MkdirAll(root); err != nil {
		base.Close()
		return nil, fmt.Errorf("filesystem: creating HDFS root %s: %w", root, err)
	}
	return &HDFS{FS: vfs.Durable(vfs.Sub(base, root)), base: base, root: root}, nil
}

// Base returns the whole-cluster FS beneath (for tests and tools).
func (h *HDFS) Base() *vfshdfs.FS { return h.base }

// Abs returns the absolute HDFS path of a relative name.
func (h *HDFS) Abs(name string) (string, error) {
	c, err := vfs.Clean(name)
	if err != nil {
		return "", err
	}
	return path.Join(h.root, c), nil
}

// Close implements vfs.FS: it closes the connection.
func (h *HDFS) Close() error { return h.base.Close() }
