package query

import "github.com/sluicehq/sluice/internal/vfs"

// sub returns the directory dir of fs as a file system of its own, so that
// a writers.Store can run on one dataset of a warehouse that was opened
// once. Its Close does nothing: the warehouse owns fs.
func sub(fs vfs.FS, dir string) vfs.FS {
	if dir == "" || dir == "." {
		return fs
	}
	return vfs.Sub(fs, dir)
}
