package writers

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	if os.Getenv(chainChildEnv) != "" {
		os.Exit(runChainChild())
	}
	os.Exit(hdfs.Main(m))
}

func pageViewSchema(tb testing.TB) avro.Schema {
	s, err := loadPageViewSchema()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// loadPageViewSchema parses the writers' 12-field page view
// (fixtures.WritersPageView) once.
var loadPageViewSchema = sync.OnceValues(func() (avro.Schema, error) {
	return avro.Parse(fixtures.WritersPageView())
})

var t0 = time.Date(2024, 5, 1, 12, 30, 0, 0, time.UTC)

var countries = []string{"DE", "FR", "US", "JP", "BR", "IN"}
var devices = []string{"desktop", "mobile", "tablet"}

// pageView is record i: ts steps 36 s per offset, so 300 records span 3 hours.
func pageView(i int64) map[string]any {
	var ref any
	if i%4 != 0 {
		ref = "https://search.example/q?" + fmt.Sprint(i%97)
	}
	return map[string]any{
		"ts":         t0.Add(time.Duration(i) * 36 * time.Second),
		"user_id":    i * 7919 % 100003,
		"session_id": fmt.Sprintf("s-%08x", i/10),
		"url":        fmt.Sprintf("https://shop.example/item/%d?ref=home", i%5000),
		"referrer":   ref,
		"status":     int32(200 + (i%20)/19*104),
		"latency_ms": float64(i%1000) / 7,
		"country":    countries[i%int64(len(countries))],
		"device":     devices[i%int64(len(devices))],
		"user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/124.0",
		"bytes_sent": 1000 + i%50000,
		"is_bot":     i%50 == 0,
	}
}

// workload is the split the fault tests write: 300 records over 3 hours,
// 40 records a file, JSON lines (read back here without other tools).
var workload = Split{Topic: "pageviews", Partition: 2, Start: 100, End: 400}

func workloadConfig(testing.TB) Config {
	p, _ := NewPartitioner(ByHour, "ts", "UTC")
	return Config{
		Format:      format.Options{Kind: format.JSONLines, Compression: "gzip", MetadataColumns: true},
		Partitioner: p, MaxRecords: 40,
	}
}

// runSplit writes and commits split with records pageView(offset).
func runSplit(store *Store, split Split, cfg Config, schema avro.Schema) (Result, error) {
	w, err := NewSplitWriter(store, split, cfg)
	if err != nil {
		return Result{}, err
	}
	for off := split.Start; off < split.End; off++ {
		if err := w.Write(schema, pageView(off), format.Meta{Offset: off, Timestamp: t0.Add(time.Duration(off) * time.Second)}); err != nil {
			return Result{}, err
		}
	}
	res, err := w.Commit(split.End)
	if errors.Is(err, ErrNotChained) {
		w.Abort()
	}
	return res, err
}

// walkFiles lists every file under dir (relative paths), skipping _sluice.
func walkFiles(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	ents, err := fs.List(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		p := path.Join(dir, e.Name)
		if dir == "." {
			p = e.Name
		}
		if p == SluiceDir && dir == "." {
			continue
		}
		if e.IsDir {
			out = append(out, walkFiles(t, fs, p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// readOffsets parses a gzip JSON-lines file and returns its _offset values.
func readOffsets(t testing.TB, fs vfs.FS, name string) []int64 {
	t.Helper()
	r, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rd io.Reader = r
	if strings.HasSuffix(name, ".gz") {
		z, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rd = z
	}
	var out []int64
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		var m struct {
			Offset int64 `json:"_offset"`
			TS     string
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: half-written line %q: %v", name, sc.Text(), err)
		}
		out = append(out, m.Offset)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// verifyExactlyOnce checks the committed output of split: one manifest,
// every offset in exactly one final file, no file under a final path that
// the manifest does not list, and no temporaries left.
func verifyExactlyOnce(t testing.TB, fs vfs.FS, split Split) {
	t.Helper()
	store := NewStore(fs, StoreOptions{})
	ms, err := store.Commits(split.Topic, split.Partition)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Start != split.Start || ms[0].End != split.End {
		t.Fatalf("manifests %+v, want one for %s", ms, split)
	}
	listed := map[string]bool{}
	seen := map[int64]int{}
	for _, f := range ms[0].Files {
		listed[f.Final] = true
		offs := readOffsets(t, fs, f.Final)
		if int64(len(offs)) != f.Records {
			t.Fatalf("%s holds %d records, manifest says %d", f.Final, len(offs), f.Records)
		}
		for _, o := range offs {
			seen[o]++
		}
	}
	for off := split.Start; off < split.End; off++ {
		if seen[off] != 1 {
			t.Fatalf("offset %d seen %d times", off, seen[off])
		}
	}
	if len(seen) != int(split.End-split.Start) {
		t.Fatalf("%d distinct offsets, want %d", len(seen), split.End-split.Start)
	}
	for _, f := range walkFiles(t, fs, ".") {
		if !listed[f] {
			t.Fatalf("file %s is visible but not committed", f)
		}
	}
	if ents, err := fs.List(partDir(tmpDir, split.Topic, split.Partition)); err == nil && len(ents) > 0 {
		t.Fatalf("temporaries left: %v", ents)
	}
}

var hdfsDirSeq atomic.Int64

// hdfsFS returns a fresh directory on the test binary's MiniDFSCluster.
func hdfsFS(t testing.TB) vfs.FS {
	t.Helper()
	addr := hdfs.Start(t)
	f, err := filesystem.Open(fmt.Sprintf("hdfs://%s/writers/%s-%d", addr, strings.ReplaceAll(t.Name(), "/", "_"), hdfsDirSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func localFS(t testing.TB) *filesystem.Local {
	t.Helper()
	l, err := filesystem.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// recoverOpts never waits: the tests know which attempts are dead.
var recoverOpts = StoreOptions{Lease: -1, TornGrace: -1}
