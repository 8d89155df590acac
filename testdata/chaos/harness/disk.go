package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrDisk wraps a failure to mount, fill or unmount a Disk.
var ErrDisk = errors.New("harness: disk")

// Disk is a small tmpfs mounted on a node's data directory, so a test can fill
// it up (the node's writes fail with ENOSPC) and free it again.
type Disk struct {
	// Dir is the mount point.
	Dir string
	// Size is the tmpfs size in bytes.
	Size int64

	mu      sync.Mutex // guards mounted
	mounted bool
}

// ballast is the file Fill writes and Free removes.
const ballast = ".chaos-ballast"

// MountDisk mounts a tmpfs of size bytes on dir (created if needed).
func MountDisk(dir string, size int64) (*Disk, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDisk, err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: mount tmpfs on %s: %v: %s", ErrDisk, dir, err, strings.TrimSpace(string(out)))
	}
	return &Disk{Dir: dir, Size: size, mounted: true}, nil
}

// Free returns the bytes available on the disk.
func (d *Disk) Free() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.Dir, &st); err != nil {
		return 0, fmt.Errorf("%w: statfs %s: %v", ErrDisk, d.Dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Fill writes a ballast file until the disk is full, leaving leave bytes (0:
// nothing) free.
func (d *Disk) Fill(leave int64) error {
	free, err := d.Free()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(d.Dir, ballast), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDisk, err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for want := free - leave; want > 0; {
		n := int64(len(buf))
		if want < n {
			n = want
		}
		w, err := f.Write(buf[:n])
		want -= int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: fill %s: %v", ErrDisk, d.Dir, err)
		}
	}
	return nil
}

// Release removes the ballast, freeing what Fill took.
func (d *Disk) Release() error {
	if err := os.Remove(filepath.Join(d.Dir, ballast)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("%w: %v", ErrDisk, err)
	}
	return nil
}

// Unmount unmounts the tmpfs (lazily if it is busy); idempotent.
func (d *Disk) Unmount() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mounted {
		return nil
	}
	if out, err := exec.Command("umount", d.Dir).CombinedOutput(); err != nil {
		if out2, err2 := exec.Command("umount", "-l", d.Dir).CombinedOutput(); err2 != nil {
			return fmt.Errorf("%w: umount %s: %v: %s %s", ErrDisk, d.Dir, err, out, out2)
		}
	}
	d.mounted = false
	return nil
}

// Mounted reports whether dir is a mount point now (from /proc/self/mounts).
func Mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == dir {
			return true
		}
	}
	return false
}
