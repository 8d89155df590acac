package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrDisk wraps a failure to mount, fill or unmount a Disk.
var ErrDisk = errors.New("harness: disk")

// Disk is a small file system mounted on a node's data directory, so a
// test can fill it up (the node's writes fail with ENOSPC) and free it
// again: a tmpfs (MountDisk), or an ext4 on a loop device (MountLoopDisk),
// which can also be made slow (Throttle).
type Disk struct {
	// Dir is the mount point.
	Dir string
	// Size is the file system's size in bytes.
	Size int64

	// A loop disk's device (/dev/loopN), its number ("7:N") and the blkio
	// cgroup (v1) whose processes' writes to it are throttled.
	loop, devnum, blkio string

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

// Unmount unmounts the disk (lazily if it is busy); idempotent. A loop
// disk's device is detached and its cgroup removed too.
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
	var errs []error
	if d.loop != "" {
		if out, err := exec.Command("losetup", "-d", d.loop).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%w: losetup -d %s: %v: %s", ErrDisk, d.loop, err, strings.TrimSpace(string(out))))
		}
	}
	if d.blkio != "" {
		errs = append(errs, removeBlkio(d.blkio))
	}
	return errors.Join(errs...)
}

// blkioRoot is the cgroup v1 blkio hierarchy, whose throttle applies to
// the writes a process issues itself (write-through, fsync) on this kernel
// (cgroup v2's io controller is not available beside it).
const blkioRoot = "/sys/fs/cgroup/blkio"

// MountLoopDisk makes an ext4 file system of size bytes (no blocks
// reserved for root, so Fill fills it) in the sparse file image, attaches
// it to a free loop device and mounts it on dir (created if needed), with
// a blkio cgroup of its own for Throttle. Needs root, losetup and
// mkfs.ext4 (Debian's mount and e2fsprogs, installed by make deps).
func MountLoopDisk(dir, image string, size int64) (d *Disk, err error) {
	for _, tool := range []string{"losetup", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %s not found (make deps installs it): %v", ErrDisk, tool, err)
		}
	}
	if _, err := os.Stat(filepath.Join(blkioRoot, "blkio.throttle.write_iops_device")); err != nil {
		return nil, fmt.Errorf("%w: no cgroup v1 blkio throttle at %s: %v", ErrDisk, blkioRoot, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDisk, err)
	}
	f, err := os.OpenFile(image, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDisk, err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDisk, err)
	}
	out, err := exec.Command("losetup", "--find", "--show", image).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: losetup %s: %v: %s", ErrDisk, image, err, strings.TrimSpace(string(out)))
	}
	d = &Disk{Dir: dir, Size: size, loop: strings.TrimSpace(string(out))}
	defer func() {
		if err != nil {
			exec.Command("umount", dir).Run()
			exec.Command("losetup", "-d", d.loop).Run()
			if d.blkio != "" {
				removeBlkio(d.blkio)
			}
		}
	}()
	num, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(d.loop), "dev"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDisk, err)
	}
	d.devnum = strings.TrimSpace(string(num))
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", d.loop).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: mkfs.ext4 %s: %v: %s", ErrDisk, d.loop, err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("mount", d.loop, dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: mount %s on %s: %v: %s", ErrDisk, d.loop, dir, err, strings.TrimSpace(string(out)))
	}
	d.mounted = true
	d.blkio = filepath.Join(blkioRoot, "sluice-chaos-"+filepath.Base(d.loop)+"-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(d.blkio, 0o755); err != nil {
		d.blkio = ""
		return nil, fmt.Errorf("%w: %v", ErrDisk, err)
	}
	return d, nil
}

// Throttle moves the processes pids into the disk's blkio cgroup and
// limits their writes to the disk to iops operations a second: a slow
// disk for them (fsync and write-through I/O; what the page cache absorbs
// is not slowed until it is written back). A tmpfs disk cannot be throttled.
func (d *Disk) Throttle(pids []int, iops int) error {
	if d.blkio == "" {
		return fmt.Errorf("%w: %s is not a loop disk: it cannot be slowed", ErrDisk, d.Dir)
	}
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(d.blkio, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("%w: blkio cgroup of pid %d: %v", ErrDisk, pid, err)
		}
	}
	return d.setLimit(iops)
}

// Unthrottle lifts the limit Throttle set (the processes stay in the
// cgroup, unlimited).
func (d *Disk) Unthrottle() error {
	if d.blkio == "" {
		return nil
	}
	return d.setLimit(0)
}

func (d *Disk) setLimit(iops int) error {
	rule := fmt.Sprintf("%s %d", d.devnum, iops)
	if err := os.WriteFile(filepath.Join(d.blkio, "blkio.throttle.write_iops_device"), []byte(rule), 0o644); err != nil {
		return fmt.Errorf("%w: write_iops_device %q: %v", ErrDisk, rule, err)
	}
	return nil
}

// ThrottledWrites is how many write operations to the disk the blkio
// cgroup's processes issued (what the throttle saw), for a report.
func (d *Disk) ThrottledWrites() (int64, error) {
	if d.blkio == "" {
		return 0, nil
	}
	b, err := os.ReadFile(filepath.Join(d.blkio, "blkio.throttle.io_serviced"))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrDisk, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == d.devnum && f[1] == "Write" {
			return strconv.ParseInt(f[2], 10, 64)
		}
	}
	return 0, nil
}

// removeBlkio moves what is left in a blkio cgroup to the root and
// removes it.
func removeBlkio(dir string) error {
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		for _, pid := range strings.Fields(string(b)) {
			os.WriteFile(filepath.Join(blkioRoot, "cgroup.procs"), []byte(pid), 0o644) // best effort: a process may be gone
		}
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("%w: remove cgroup %s: %v", ErrDisk, dir, err)
	}
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
