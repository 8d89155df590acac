package log

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/broker/log/vfs"
)

// benchBatch returns an uncompressed batch of about size bytes.
func benchBatch(size int) []byte {
	n := max(1, size/1024)
	return simpleBatch(n, size/n-20, 1, 'b')
}

func benchLog(b *testing.B, cfg Config) (*Manager, *Log) {
	m, err := OpenManager(ManagerOptions{FS: vfs.OS, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	l, err := m.Open(tp0, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return m, l
}

// benchTargets are the file systems appends are measured on: the disk of
// the test's temp dir (dirty-page writeback may throttle it), tmpfs (the
// page-cache path without the disk) and vfs.Mem (the CPU cost alone).
func benchTargets(b *testing.B) []struct {
	name string
	fs   vfs.FS
	dir  string
} {
	t := []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"disk", vfs.OS, b.TempDir()}}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "sluice-bench-")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			t = append(t, struct {
				name string
				fs   vfs.FS
				dir  string
			}{"tmpfs", vfs.OS, d})
		}
	}
	return append(t, struct {
		name string
		fs   vfs.FS
		dir  string
	}{"mem", vfs.NewMem(), "/bench"})
}

// BenchmarkAppend measures leader appends: validation with CRC32C, offset
// assignment, the write.
func BenchmarkAppend(b *testing.B) {
	for _, target := range benchTargets(b) {
		for _, size := range []int{1 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%dKiB", target.name, size>>10), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.SegmentBytes = 256 << 20
				cfg.MaxMessageBytes = 1 << 20
				cfg.RetentionBytes = 512 << 20 // bounded disk and memory use
				m, err := OpenManager(ManagerOptions{FS: target.fs, Dir: filepath.Join(target.dir, b.Name())})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				l, err := m.Open(tp0, cfg)
				if err != nil {
					b.Fatal(err)
				}
				batch := benchBatch(size)
				b.SetBytes(int64(len(batch)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := l.Append(batch, AppendOptions{AssignOffsets: true}); err != nil {
						b.Fatal(err)
					}
					if i%4096 == 4095 {
						b.StopTimer()
						m.RunRetention()
						b.StartTimer()
					}
				}
			})
		}
	}
}

// BenchmarkCRC32C and BenchmarkMemcpy are the machine's bounds for Append.
func BenchmarkCRC32C(b *testing.B) {
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		crc32.Checksum(buf, crcTable)
	}
}

func BenchmarkMemcpy(b *testing.B) {
	src, dst := make([]byte, 64<<10), make([]byte, 64<<10)
	b.SetBytes(int64(len(src)))
	for i := 0; i < b.N; i++ {
		copy(dst, src)
	}
}

// BenchmarkRead measures the file-region path: Read, then WriteTo a sink
// (sendfile to /dev/null or a loopback TCP socket) or Bytes (a copy).
func BenchmarkRead(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 256 << 20
	m, l := benchLog(b, cfg)
	defer m.Close()
	batch := benchBatch(16 << 10)
	for l.Size() < 64<<20 {
		if _, err := l.Append(batch, AppendOptions{AssignOffsets: true}); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	readLoop := func(b *testing.B, sink func(Region) error) {
		var total int64
		off := int64(0)
		for i := 0; i < b.N; i++ {
			r, err := l.Read(off, 1<<20, leo)
			if err != nil {
				b.Fatal(err)
			}
			if err := sink(r); err != nil {
				b.Fatal(err)
			}
			total += r.Len()
			r.Close()
			off += int64(int(r.Len())/len(batch)) * int64(parseHeader(batch).RecordCount)
			if off >= leo {
				off = 0
			}
		}
		b.SetBytes(total / int64(b.N))
	}
	b.Run("sendfile-devnull", func(b *testing.B) {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer null.Close()
		readLoop(b, func(r Region) error { _, err := r.WriteTo(null); return err })
	})
	b.Run("sendfile-tcp", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.Copy(io.Discard, c)
			c.Close()
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		readLoop(b, func(r Region) error { _, err := r.WriteTo(c); return err })
	})
	b.Run("bytes-copy", func(b *testing.B) {
		readLoop(b, func(r Region) error { _, err := r.Bytes(); return err })
	})
}

// BenchmarkTenThousandPartitions opens 10,000 partitions, appends one batch
// to each, and reports open descriptors (from /proc/self/fd) and heap.
func BenchmarkTenThousandPartitions(b *testing.B) {
	for i := 0; i < b.N; i++ {
		fdsBefore := countFDs()
		m, err := OpenManager(ManagerOptions{FS: vfs.OS, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		batch := simpleBatch(1, 100, 1, 'p')
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		for p := 0; p < 10000; p++ {
			l, err := m.Open(TopicPartition{"bench", int32(p)}, DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Append(append([]byte(nil), batch...), AppendOptions{AssignOffsets: true}); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		fds := countFDs() - fdsBefore
		b.ReportMetric(float64(fds), "open-fds")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		b.ReportMetric(elapsed.Seconds(), "create-s")
		b.Logf("10,000 partitions: %d open fds (cache bound %d), heap +%.1f MiB, created in %v",
			fds, defaultMaxOpenFiles, float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), elapsed)
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestRestartAfterKill is opt-in (SLUICE_RESTART_BYTES=10737418240 for 10 GB):
// a child process writes that much across 10 segments, flushes all but a
// small tail, and is killed with SIGKILL; the test then times the reopen.
func TestRestartAfterKill(t *testing.T) {
	if os.Getenv("SLUICE_RESTART_CHILD") != "" {
		restartChild()
		return
	}
	total, _ := strconv.ParseInt(os.Getenv("SLUICE_RESTART_BYTES"), 10, 64)
	if total == 0 {
		t.Skip("opt-in measurement: set SLUICE_RESTART_BYTES (10737418240 = 10 GB) and SLUICE_RESTART_DIR")
	}
	dir := os.Getenv("SLUICE_RESTART_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, "restart")
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestartAfterKill$")
	cmd.Env = append(os.Environ(), "SLUICE_RESTART_CHILD=1", "SLUICE_RESTART_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var leo string
	for sc.Scan() {
		if line := sc.Text(); len(line) > 6 && line[:6] == "READY " {
			leo = line[6:]
			break
		}
	}
	if leo == "" {
		t.Fatal("child did not report READY")
	}
	cmd.Process.Kill() // SIGKILL: no Close, no clean-shutdown marker
	cmd.Wait()

	start := time.Now()
	m, err := OpenManager(ManagerOptions{FS: vfs.OS, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = total / 10
	l, err := m.Open(tp0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if strconv.FormatInt(l.LogEndOffset(), 10) != leo {
		t.Fatalf("LEO after kill %d, child had %s", l.LogEndOffset(), leo)
	}
	t.Logf("restart after kill -9: %v for a %.2f GB log in %d segments; recovery scanned %d bytes (%d batches), producer batches replayed %d",
		elapsed, float64(l.Size())/1e9, len(l.segments), m.Metrics().RecoveryBytesScanned.Load(),
		m.Metrics().RecoveryBatchesScanned.Load(), m.Metrics().ProducerBatchesReplayed.Load())
	m.Close()
}

// restartChild fills the log, flushes, appends an unflushed tail of 8 MiB and
// waits to be killed.
func restartChild() {
	dir := os.Getenv("SLUICE_RESTART_DIR")
	total, _ := strconv.ParseInt(os.Getenv("SLUICE_RESTART_BYTES"), 10, 64)
	m, err := OpenManager(ManagerOptions{FS: vfs.OS, Dir: dir})
	if err != nil {
		panic(err)
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = total / 10
	l, err := m.Open(tp0, cfg)
	if err != nil {
		panic(err)
	}
	batch := benchBatch(64 << 10)
	for l.Size() < total-(8<<20) {
		if _, err := l.Append(batch, AppendOptions{AssignOffsets: true}); err != nil {
			panic(err)
		}
	}
	if err := l.Flush(); err != nil {
		panic(err)
	}
	small := benchBatch(1 << 10)
	for i := 0; i < 8<<10; i++ {
		if _, err := l.Append(small, AppendOptions{AssignOffsets: true}); err != nil {
			panic(err)
		}
	}
	fmt.Printf("READY %d\n", l.LogEndOffset())
	os.Stdout.Sync()
	select {} // killed here
}
