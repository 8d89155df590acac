package harness

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// A loop disk fills and frees as a tmpfs does, and its throttle sees the
// writes of a process moved into it (a dd writing through to the disk);
// unmounting detaches the device and removes the cgroup.
func TestLoopDiskFillsAndThrottles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := MountLoopDisk(dir, filepath.Join(t.TempDir(), "disk.img"), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Unmount()
	if !Mounted(dir) {
		t.Fatal("not mounted")
	}
	if err := d.Fill(0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), make([]byte, 1<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v, want ENOSPC", err)
	}
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	// dd waits for its stdin (closed once it is in the cgroup), then writes
	// 20 blocks through to the disk
	dd := exec.Command("sh", "-c", "read _; exec dd if=/dev/zero of="+filepath.Join(dir, "f")+" bs=4k count=20 oflag=dsync")
	in, err := dd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := d.Throttle([]int{dd.Process.Pid}, 1000); err != nil {
		dd.Process.Kill()
		t.Fatal(err)
	}
	in.Write([]byte("go\n"))
	in.Close()
	if err := dd.Wait(); err != nil {
		t.Fatalf("dd: %v", err)
	}
	if n, err := d.ThrottledWrites(); err != nil || n < 20 {
		t.Fatalf("the throttle saw %d writes (%v), want at least dd's 20", n, err)
	}
	if err := d.Unthrottle(); err != nil {
		t.Fatal(err)
	}
	blkio, loop := d.blkio, d.loop
	if err := d.Unmount(); err != nil {
		t.Fatal(err)
	}
	if Mounted(dir) {
		t.Fatal("still mounted")
	}
	if _, err := os.Stat(blkio); !os.IsNotExist(err) {
		t.Fatalf("cgroup %s left behind: %v", blkio, err)
	}
	if _, err := os.Stat(filepath.Join("/sys/block", filepath.Base(loop), "loop", "backing_file")); err == nil {
		t.Fatalf("%s still attached", loop)
	}
	if err := (&Disk{Dir: dir}).Throttle(nil, 1); err == nil {
		t.Fatal("a tmpfs disk took a throttle")
	}
}
