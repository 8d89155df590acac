//go:build unix

package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive flock(2) on DIR/.lock so that two brokers
// never share a data directory; the kernel releases it when the process
// dies (kill -9 included). The returned function releases it.
func lockDataDir(dir string) (func(), error) {
	p := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrStorage, p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: data directory %s is in use by another broker (%s is locked); stop it or use another --data-dir", ErrDataDirInUse, dir, p)
		}
		return nil, fmt.Errorf("%w: lock %s: %v", ErrStorage, p, err)
	}
	return func() { _ = f.Close() }, nil
}
