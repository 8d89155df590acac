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

	"github.com/sluicehq/sluice/internal/vfs"
)

// benchBatch returns an uncompressed batch of about size bytes.
func benchBatch(size int) []byte {
	n := max(1, size/1024)
	return simpleBatch(n, size/n-20, 1, 'b')
}

func benchLog(b *testing.B, cfg Config) (*Manager, *Log) {
	m, err := OpenManager(ManagerOptions{FS: vfs.OS{}, Dir: b.TempDir()})
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
// the test's temp dir (dirty-page writeback may throttle it) and tmpfs (the
// page-cache path without the disk). vfs.Mem is a test tool, not measured.
func benchTargets(b *testing.B) []struct {
	name string
	fs   vfs.FS
	dir  string
} {
	t := []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"disk", vfs.OS{}, b.TempDir()}}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "sluice-bench-")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			t = append(t, struct {
				name string
				fs   vfs.FS
				dir  string
			}{"tmpfs", vfs.OS{}, d})
		}
	}
	return t
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
		m, err := OpenManager(ManagerOptions{FS: vfs.OS{}, Dir: b.TempDir()})
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
		start = time.Now()
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "close-s")
		start = time.Now()
		m2, err := OpenManager(ManagerOptions{FS: vfs.OS{}, Dir: m.opts.Dir})
		if err != nil {
			b.Fatal(err)
		}
		for _, tp := range m2.Partitions() {
			if _, err := m2.Open(tp, DefaultConfig()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(time.Since(start).Seconds(), "reopen-s")
		b.ReportMetric(float64(countFDs()-fdsBefore), "reopen-fds")
		// Give every partition two sealed segments, reopen (no index loaded),
		// then run retention, which loads each sealed segment's indexes: the
		// index LRU keeps at most defaultMaxLoadedIndexes of them in memory.
		big := simpleBatch(1, 3000, time.Now().UnixMilli(), 'q')
		cfg := DefaultConfig()
		cfg.SegmentBytes = 4096
		for _, tp := range m2.Partitions() {
			l, _ := m2.Get(tp)
			if err := l.SetConfig(cfg); err != nil {
				b.Fatal(err)
			}
			for k := 0; k < 2; k++ {
				if _, err := l.Append(append([]byte(nil), big...), AppendOptions{AssignOffsets: true}); err != nil {
					b.Fatal(err)
				}
			}
			l.SetHighWatermark(l.LogEndOffset())
		}
		if err := m2.Close(); err != nil {
			b.Fatal(err)
		}
		m3, err := OpenManager(ManagerOptions{FS: vfs.OS{}, Dir: m.opts.Dir})
		if err != nil {
			b.Fatal(err)
		}
		for _, tp := range m3.Partitions() {
			if _, err := m3.Open(tp, cfg); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := m3.RunRetention(); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := m3.Stats()
		b.ReportMetric(float64(st.LoadedIndexes), "loaded-indexes")
		b.ReportMetric(float64(st.IndexLoads), "index-loads")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "retention-heap-MiB")
		b.Logf("retention over 10,000 partitions with sealed segments: %d index loads, %d indexes held (bound %d), %d open fds, heap %+.1f MiB",
			st.IndexLoads, st.LoadedIndexes, defaultMaxLoadedIndexes, countFDs()-fdsBefore, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20))
		m2 = m3
		m2.Close()
	}
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// BenchmarkRestartAfterKill measures the restart after kill -9: a child
// process writes a log across 10 segments, flushes all but an 8 MiB tail, and
// is killed with SIGKILL; the benchmark times OpenManager + Open. The size is
// SLUICE_RESTART_BYTES (default 256 MiB; 10737418240 for the 10 GB figure) in
// SLUICE_RESTART_DIR (default a temp dir).
func BenchmarkRestartAfterKill(b *testing.B) {
	total := int64(256 << 20)
	if v, err := strconv.ParseInt(os.Getenv("SLUICE_RESTART_BYTES"), 10, 64); err == nil && v > 0 {
		total = v
	}
	base := os.Getenv("SLUICE_RESTART_DIR")
	if base == "" {
		base = b.TempDir()
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(base, "restart")
		os.RemoveAll(dir)
		leo := runRestartChild(b, dir, total)
		b.StartTimer()
		start := time.Now()
		m, err := OpenManager(ManagerOptions{FS: vfs.OS{}, Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		l, err := m.Open(tp0, restartConfig(total))
		if err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		if strconv.FormatInt(l.LogEndOffset(), 10) != leo {
			b.Fatalf("LEO after kill %d, child had %s", l.LogEndOffset(), leo)
		}
		b.ReportMetric(float64(elapsed.Microseconds())/1000, "restart-ms")
		b.ReportMetric(float64(l.Size())/1e9, "log-GB")
		b.ReportMetric(float64(m.Stats().RecoveryBytesScanned)/(1<<20), "scanned-MiB")
		b.Logf("restart after kill -9: %v for a %.2f GB log in %d segments; recovery scanned %d bytes (%d batches), batch headers replayed for producer state %d",
			elapsed, float64(l.Size())/1e9, len(l.segments), m.Stats().RecoveryBytesScanned,
			m.Stats().RecoveryBatchesScanned, m.Stats().ProducerBatchesReplayed)
		m.Close()
		os.RemoveAll(dir)
		b.StartTimer()
	}
}

// runRestartChild runs TestRestartChild in a child process, waits for it to
// be ready and kills it with SIGKILL. It returns the child's log end offset.
func runRestartChild(b *testing.B, dir string, total int64) string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestartChild$")
	cmd.Env = append(os.Environ(), "SLUICE_RESTART_CHILD=1", "SLUICE_RESTART_DIR="+dir,
		"SLUICE_RESTART_BYTES="+strconv.FormatInt(total, 10))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var leo string
	for sc.Scan() {
		if line := sc.Text(); len(line) > 6 && line[:6] == "READY " {
			leo = line[6:]
			break
		}
	}
	cmd.Process.Kill() // SIGKILL: no Close, no clean-shutdown marker
	cmd.Wait()
	if leo == "" {
		b.Fatal("restart child did not report READY")
	}
	return leo
}

// TestRestartChild is the child process of BenchmarkRestartAfterKill; it
// does nothing unless started by it.
func TestRestartChild(t *testing.T) {
	if os.Getenv("SLUICE_RESTART_CHILD") == "" {
		return
	}
	restartChild()
}

// restartConfig makes 10 segments hold the whole log, so the unflushed
// tail stays in the active segment (a roll would flush it).
func restartConfig(total int64) Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = min(total/10+(16<<20), 1<<31-1)
	return cfg
}

// restartChild fills the log, flushes, appends an unflushed tail of 8 MiB and
// waits to be killed.
func restartChild() {
	dir := os.Getenv("SLUICE_RESTART_DIR")
	total, _ := strconv.ParseInt(os.Getenv("SLUICE_RESTART_BYTES"), 10, 64)
	m, err := OpenManager(ManagerOptions{FS: vfs.OS{}, Dir: dir})
	if err != nil {
		panic(err)
	}
	l, err := m.Open(tp0, restartConfig(total))
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
