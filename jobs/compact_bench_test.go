package jobs

import (
	"context"
	"fmt"
	"math/rand"
	"path"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompactRewrite measures, in one run, the Parquet writer and the
// compaction rewrite on the same rows: b.N seeded page views (the jobs
// tests' 6-field schema plus the metadata columns) are written by a
// SplitWriter into 20 small Parquet-zstd files (the writer's rate, rows per
// CPU-second), then one compaction sink rewrites the 20 files into one
// (the rewrite's rate). It reports both and rewrite/writer.
//
//	go test -run '^$' -bench CompactRewrite -benchtime 300000x ./jobs/
func BenchmarkCompactRewrite(b *testing.B) {
	schema := avro.MustParse(fixtures.JobsPageView())
	rng := rand.New(rand.NewSource(1))
	urls := make([]string, 2000)
	for i := range urls {
		urls[i] = fmt.Sprintf("/p/%d?ref=%d", rng.Intn(100000), rng.Intn(50))
	}
	base := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	rows := make([]map[string]any, min(b.N, 1<<20))
	for i := range rows {
		v := map[string]any{"ts": base.Add(time.Duration(i) * time.Millisecond), "user_id": rng.Int63n(1_000_000),
			"url": urls[rng.Intn(len(urls))], "status": []int{200, 200, 200, 301, 404, 500}[rng.Intn(6)],
			"referrer": nil, "duration_ms": rng.Intn(30000)}
		if rng.Intn(3) == 0 {
			v["referrer"] = "https://example.com/r" + fmt.Sprint(rng.Intn(50))
		}
		rows[i] = v
	}
	fs, err := filesystem.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	store := writers.NewStore(fs, writers.StoreOptions{})
	runtime.GC()
	b.ResetTimer()
	const files = 20
	per := int64(b.N/files + 1)
	cpu0 := cpuNow()
	var done []writers.File
	for start := int64(0); start < int64(b.N); start += per {
		end := min(start+per, int64(b.N))
		split := writers.Split{Topic: "pv", Partition: 0, Start: start, End: end}
		w, err := writers.NewSplitWriter(store, split, writers.Config{Format: format.Options{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true}})
		if err != nil {
			b.Fatal(err)
		}
		for o := start; o < end; o++ {
			if err := w.Write(schema, rows[o%int64(len(rows))], format.Meta{Topic: "pv", Partition: 0, Offset: o, Timestamp: base}); err != nil {
				b.Fatal(err)
			}
		}
		res, err := w.Commit(end)
		if err != nil || !res.Won {
			b.Fatal(res, err)
		}
		done = append(done, res.Manifest.Files...)
	}
	writeCPU := (cpuNow() - cpu0).Seconds()
	var inBytes int64
	for _, f := range done {
		inBytes += f.Bytes
	}

	cpu1 := cpuNow()
	out, err := fs.Create(path.Join("compacted.parquet"))
	if err != nil {
		b.Fatal(err)
	}
	cw := &countWriter{w: out}
	sk, _ := newSink("parquet", cw, "zstd")
	var n int64
	for _, f := range done {
		r, err := fs.Open(f.Final)
		if err != nil {
			b.Fatal(err)
		}
		size, _ := r.Size()
		k, err := sk.add(context.Background(), r, size, nil)
		r.Close()
		if err != nil {
			b.Fatal(err)
		}
		n += k
	}
	if err := sk.close(); err != nil {
		b.Fatal(err)
	}
	out.Close()
	rewriteCPU := (cpuNow() - cpu1).Seconds()
	b.StopTimer()
	if n != int64(b.N) {
		b.Fatalf("rewrote %d rows of %d", n, b.N)
	}
	b.ReportMetric(float64(b.N)/writeCPU, "writer-rows/cpu-s")
	b.ReportMetric(float64(b.N)/rewriteCPU, "rewrite-rows/cpu-s")
	b.ReportMetric(writeCPU/rewriteCPU, "rewrite/writer")
	b.ReportMetric(float64(inBytes)/float64(b.N), "in-B/row")
	b.ReportMetric(float64(cw.n)/float64(b.N), "out-B/row")
}
