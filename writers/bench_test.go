package writers

import (
	"encoding/json"
	"fmt"
	"github.com/hamba/avro/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/avrocodec"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/format"
)

// BenchmarkWrite writes the 12-column page-view record through a
// SplitWriter (one goroutine: the figures are per core) to Parquet-zstd,
// Avro-zstd and JSON-lines-zstd, on local disk and on the MiniDFSCluster,
// including the commit. The records are realistic page views (see
// pageViewGen: ~1M users, sessions, thousands of URLs, hundreds of user
// agents, ms timestamps), generated before the timer starts. It reports
// records/s, records per CPU-second, input MB per CPU-second (input = the
// records' JSON size) and output bytes per record.
//
//	go test -run '^$' -bench Write -benchtime 300000x ./writers/
func BenchmarkWrite(b *testing.B) {
	schema := pageViewSchema(b)
	formats := []format.Options{
		{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true},
		{Kind: format.Avro, Compression: "zstd", MetadataColumns: true},
		{Kind: format.JSONLines, Compression: "zstd", MetadataColumns: true},
	}
	// At most maxDistinct records are generated (and then repeated), so a
	// very large -benchtime does not hold them all in memory.
	const maxDistinct = 1 << 20
	for _, opts := range formats {
		for _, where := range []string{"local", "hdfs"} {
			b.Run(fmt.Sprintf("%s-%s/%s", opts.Kind, opts.Compression, where), func(b *testing.B) {
				var fs vfs.FS
				if where == "local" {
					fs = localFS(b)
				} else {
					fs = hdfsFS(b)
				}
				records, metas := benchPageViews(min(b.N, maxDistinct))
				rawSize := rawRecordSize(records)
				distinct := len(records)
				runtime.GC() // the generator's garbage is not the writer's
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
					meta := metas[i%distinct]
					meta.Offset = int64(i)
					if err := w.Write(schema, records[i%distinct], meta); err != nil {
						b.Fatal(err)
					}
				}
				commitAndReport(b, w, split.End, start, cpu0, float64(rawSize))
			})
		}
	}
}

// commitAndReport commits a benchmark's split and reports records/s,
// records per CPU-second, input MB per CPU-second (recordSize bytes a
// record) and the committed bytes per record.
func commitAndReport(b *testing.B, w *SplitWriter, end int64, start time.Time, cpu0 time.Duration, recordSize float64) {
	res, err := w.Commit(end)
	if err != nil || !res.Won {
		b.Fatal(res, err)
	}
	elapsed := time.Since(start).Seconds()
	cpu := (cpuTime() - cpu0).Seconds()
	b.StopTimer()
	var out int64
	for _, f := range res.Manifest.Files {
		out += f.Bytes
	}
	b.ReportMetric(float64(b.N)/elapsed, "records/s")
	b.ReportMetric(float64(b.N)/cpu, "records/cpu-s")
	b.ReportMetric(float64(b.N)*recordSize/cpu/1e6, "in-MB/cpu-s")
	b.ReportMetric(float64(out)/float64(b.N), "out-B/record")
}

// cpuTime is the process's user + system CPU time: the per-core figures
// divide by it, so other load on the machine does not skew them.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawRecordSize is the mean JSON size of the first (up to) 1000 records
// (the "input" size behind in-MB/cpu-s).
func rawRecordSize(records []map[string]any) int {
	k := min(len(records), 1000)
	n := 0
	for _, r := range records[:k] {
		b, _ := json.Marshal(r)
		n += len(b)
	}
	return n / max(k, 1)
}

// BenchmarkWriteAvro is BenchmarkWrite on the columnar path: the same page
// views arrive as Avro binary (as the loader gets them from Kafka) and go
// to the files through an avrocodec.Projection, with no map per record.
// in-MB/cpu-s counts the Avro bytes.
func BenchmarkWriteAvro(b *testing.B) {
	schema := pageViewSchema(b)
	formats := []format.Options{
		{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true},
		{Kind: format.Avro, Compression: "zstd", MetadataColumns: true},
		{Kind: format.JSONLines, Compression: "zstd", MetadataColumns: true},
	}
	const maxDistinct = 1 << 20
	type benchCase struct {
		opts   format.Options
		budget int64
	}
	var cases []benchCase
	for _, opts := range formats {
		cases = append(cases, benchCase{opts: opts})
	}
	// The Parquet case again under the loader's default memory budget
	// (row groups cut at the budget instead of at RowGroupRows).
	cases = append(cases, benchCase{opts: formats[0], budget: DefaultMemoryBudget})
	for _, c := range cases {
		opts := c.opts
		name := fmt.Sprintf("%s-%s/local", opts.Kind, opts.Compression)
		if c.budget > 0 {
			name += fmt.Sprintf("/budget-%dMiB", c.budget>>20)
		}
		b.Run(name, func(b *testing.B) {
			fs := localFS(b)
			records, metas := benchPageViews(min(b.N, maxDistinct))
			// One arena of bodies and plain timestamps: the live heap holds
			// no pointers for the collector to trace, as a loader's does not.
			var arena []byte
			ends := make([]int, len(records))
			stamps := make([]int64, len(records))
			for i, r := range records {
				body, err := avro.Marshal(schema, r)
				if err != nil {
					b.Fatal(err)
				}
				arena = append(arena, body...)
				ends[i] = len(arena)
				stamps[i] = metas[i].Timestamp.UnixMilli()
			}
			size := len(arena)
			records, metas = nil, nil
			distinct := len(ends)
			proj, err := avrocodec.NewProjection(schema, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			part, err := NewPartitioner(ByHour, "ts", "")
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			store := NewStore(fs, StoreOptions{})
			split := Split{Topic: "pageviews", Partition: 0, Start: 0, End: int64(b.N)}
			b.ResetTimer()
			cpu0 := cpuTime()
			start := time.Now()
			var budget *MemoryBudget
			if c.budget > 0 {
				budget = NewMemoryBudget(c.budget)
			}
			w, err := NewSplitWriter(store, split, Config{Format: opts, Partitioner: part, MaxRecords: 2_000_000, Budget: budget})
			if err != nil {
				b.Fatal(err)
			}
			var row avrocodec.Row
			for i := 0; i < b.N; i++ {
				k := i % distinct
				start := 0
				if k > 0 {
					start = ends[k-1]
				}
				meta := format.Meta{Offset: int64(i), Timestamp: time.UnixMilli(stamps[k])}
				if err := proj.Scan(&row, arena[start:ends[k]]); err != nil {
					b.Fatal(err)
				}
				if err := w.WriteAvro(&row, meta); err != nil {
					b.Fatal(err)
				}
			}
			commitAndReport(b, w, split.End, start, cpu0, float64(size)/float64(distinct))
		})
	}
}
