package writers

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// BenchmarkWrite writes the 12-column page-view record through a
// SplitWriter (one goroutine: the figures are per core) to Parquet-zstd,
// Avro-zstd and JSON-lines-zstd, on local disk and on the MiniDFSCluster,
// including the commit. It reports records/s and output MB/s.
//
//	go test -run '^$' -bench Write -benchtime 400000x ./writers/
func BenchmarkWrite(b *testing.B) {
	schema := pageViewSchema(b)
	formats := []format.Options{
		{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true},
		{Kind: format.Avro, Compression: "zstd", MetadataColumns: true},
		{Kind: format.JSONLines, Compression: "zstd", MetadataColumns: true},
	}
	const distinct = 1 << 15
	rawSize := rawRecordSize()
	for _, opts := range formats {
		for _, where := range []string{"local", "hdfs"} {
			b.Run(fmt.Sprintf("%s-%s/%s", opts.Kind, opts.Compression, where), func(b *testing.B) {
				var fs filesystem.FS
				if where == "local" {
					fs = localFS(b)
				} else {
					fs = hdfsFS(b)
				}
				records := make([]map[string]any, distinct)
				for i := range records {
					records[i] = pageView(int64(i))
				}
				store := NewStore(fs, StoreOptions{})
				split := Split{Topic: "pageviews", Partition: 0, Start: 0, End: int64(b.N)}
				b.ResetTimer()
				cpu0 := cpuTime()
				start := time.Now()
				w, err := NewSplitWriter(store, split, Config{Format: opts, MaxRecords: 2_000_000})
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < b.N; i++ {
					if err := w.Write(schema, records[i%distinct], format.Meta{Offset: int64(i), Timestamp: t0}); err != nil {
						b.Fatal(err)
					}
				}
				res, err := w.Commit()
				if err != nil || !res.Won {
					b.Fatal(res, err)
				}
				elapsed := time.Since(start).Seconds()
				cpu := (cpuTime() - cpu0).Seconds()
				b.StopTimer()
				var bytes int64
				for _, f := range res.Manifest.Files {
					st, err := fs.Stat(f.Final)
					if err != nil {
						b.Fatal(err)
					}
					bytes += st.Size
				}
				b.ReportMetric(float64(b.N)/elapsed, "records/s")
				b.ReportMetric(float64(b.N)/cpu, "records/cpu-s")
				b.ReportMetric(float64(b.N)*float64(rawSize)/cpu/1e6, "in-MB/cpu-s")
				b.ReportMetric(float64(bytes)/float64(b.N), "out-B/record")
			})
		}
	}
}

// cpuTime is the process's user + system CPU time: the per-core figures
// divide by it, so other load on the machine does not skew them.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawRecordSize is the mean JSON size of a page-view record (the "input"
// size behind in-MB/cpu-s).
func rawRecordSize() int {
	n := 0
	for i := range 1000 {
		b, _ := json.Marshal(pageView(int64(i)))
		n += len(b)
	}
	return n / 1000
}
