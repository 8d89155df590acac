package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

func TestMain(m *testing.M) {
	kafka.OnExit(hdfs.Stop)
	os.Exit(kafka.Main(m))
}

// loadSchema parses the writers' 12-field page view
// (fixtures.WritersPageView) once: the datasets here are written as the
// writers' tests write theirs.
var loadSchema = sync.OnceValues(func() (avro.Schema, error) {
	return avro.Parse(fixtures.WritersPageView())
})

func pageViewSchema(tb testing.TB) avro.Schema {
	s, err := loadSchema()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// day is the loaded day; records fall in hours 10, 11 and 12.
var day = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// produced is what a fixture wrote: records per partition directory, and
// the committed files (relative to the warehouse root) of each.
type produced struct {
	counts map[string]int64    // "dt=2024-05-01/hr=10" → records
	files  map[string][]string // same key → committed files
	total  int64
}

func (p produced) hours() []string {
	var out []string
	for k := range p.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// loadDataset writes a dataset exactly as the loader does: per topic
// partition, consecutive splits, each a writers.SplitWriter committed
// through a writers.Store on the dataset's directory. Records carry an
// hour drawn from a seeded generator, so hours hold different counts; the
// metadata columns are on.
func loadDataset(t testing.TB, dsFS vfs.FS, dataset, topic string, kind format.Kind, compression string, seed uint64) produced {
	t.Helper()
	schema := pageViewSchema(t)
	store := writers.NewStore(dsFS, writers.StoreOptions{})
	part, err := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	p := produced{counts: map[string]int64{}, files: map[string][]string{}}
	for partition := int32(0); partition < 2; partition++ {
		start := int64(0)
		for split := 0; split < 3; split++ {
			n := int64(100 + rng.IntN(80))
			s := writers.Split{Topic: topic, Partition: partition, Start: start, End: start + n}
			w, err := writers.NewSplitWriter(store, s, writers.Config{
				Format:      format.Options{Kind: kind, Compression: compression, MetadataColumns: true},
				Partitioner: part, MaxRecords: 40,
			})
			if err != nil {
				t.Fatal(err)
			}
			for off := s.Start; off < s.End; off++ {
				hr := 10 + rng.IntN(3)
				ts := day.Add(time.Duration(hr)*time.Hour + time.Duration(rng.IntN(3600))*time.Second)
				v := pageView(off, ts)
				if err := w.Write(schema, v, format.Meta{Offset: off, Timestamp: ts}); err != nil {
					t.Fatal(err)
				}
				p.counts[fmt.Sprintf("dt=2024-05-01/hr=%02d", hr)]++
				p.total++
			}
			res, err := w.Commit(s.End)
			if err != nil || !res.Won {
				t.Fatalf("commit %s: won=%v err=%v", s, res.Won, err)
			}
			for _, f := range res.Manifest.Files {
				dir := path.Dir(f.Final)
				p.files[dir] = append(p.files[dir], path.Join(dataset, f.Final))
			}
			start = s.End
		}
	}
	return p
}

func pageView(i int64, ts time.Time) map[string]any {
	var ref any
	if i%4 != 0 {
		ref = fmt.Sprintf("https://search.example/q?%d", i%97)
	}
	return map[string]any{
		"ts": ts, "user_id": i * 7919 % 100003, "session_id": fmt.Sprintf("s-%08x", i/10),
		"url": fmt.Sprintf("https://shop.example/item/%d", i%50), "referrer": ref,
		"status": int32(200 + (i%20)/19*204), "latency_ms": float64(i%1000) / 7,
		"country": []string{"DE", "FR", "US"}[i%3], "device": "mobile",
		"user_agent": "Mozilla/5.0", "bytes_sent": 1000 + i%5000, "is_bot": i%50 == 0,
	}
}

// leaveDebris adds what a reader must never see: a data file no manifest
// names (as a half-finished move or a foreign copy would leave) and an
// attempt still writing under _sluice/tmp.
func leaveDebris(t testing.TB, dsFS vfs.FS, kind format.Kind, compression string) {
	t.Helper()
	ext := format.Options{Kind: kind, Compression: compression}.Extension()
	// A stray copy in an hour directory, with a valid body: reading it would double counts.
	var src string
	ents, err := dsFS.List("dt=2024-05-01/hr=11")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name, "."+ext) {
			src = "dt=2024-05-01/hr=11/" + e.Name
			break
		}
	}
	b, err := vfs.ReadFile(dsFS, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := dsFS.WriteExclusive("dt=2024-05-01/hr=11/pageviews+9+0+999."+ext, b); err != nil {
		t.Fatal(err)
	}
	// An attempt in progress.
	store := writers.NewStore(dsFS, writers.StoreOptions{})
	part, _ := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
	w, err := writers.NewSplitWriter(store, writers.Split{Topic: "pageviews", Partition: 7, Start: 0, End: 50},
		writers.Config{Format: format.Options{Kind: kind, Compression: compression, MetadataColumns: true}, Partitioner: part})
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < 50; off++ {
		ts := day.Add(11 * time.Hour)
		if err := w.Write(pageViewSchema(t), pageView(off, ts), format.Meta{Offset: off, Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	// not committed: its files stay under _sluice/tmp as .inprogress
}

// countingFS counts the data files opened through it: Open calls, and
// LocalPath calls (a local file handed to DuckDB to read in place).
type countingFS struct {
	vfs.FS
	local string // local root, "" for HDFS

	mu    sync.Mutex
	opens map[string]int
}

func newCountingFS(fs vfs.FS) *countingFS {
	c := &countingFS{FS: fs, opens: map[string]int{}}
	if l, ok := fs.(*filesystem.Local); ok {
		c.local = l.Root()
	}
	return c
}

func (c *countingFS) note(name string) {
	c.mu.Lock()
	c.opens[name]++
	c.mu.Unlock()
}

func (c *countingFS) Open(name string) (vfs.File, error) {
	c.note(name)
	return c.FS.Open(name)
}

// dataOpens returns the data files opened (not manifests), sorted.
func (c *countingFS) dataOpens() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n := range c.opens {
		if !strings.Contains(n, writers.SluiceDir+"/") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (c *countingFS) reset() {
	c.mu.Lock()
	c.opens = map[string]int{}
	c.mu.Unlock()
}

// localCountingFS is a countingFS over a local directory: DuckDB reads
// its files in place, so handing a path over counts as an open.
type localCountingFS struct{ *countingFS }

func (c localCountingFS) LocalPath(name string) (string, error) {
	c.note(name)
	return filepath.Join(c.local, filepath.FromSlash(name)), nil
}

func (c localCountingFS) LocalRoot() string { return c.local }

// warehouse is a test warehouse: its URI, the FS the engine uses and the
// counting wrapper around it.
type warehouse struct {
	uri     string
	fs      vfs.FS
	counter *countingFS
}

// localWarehouse makes an empty local warehouse.
func localWarehouse(t testing.TB) warehouse {
	dir := t.TempDir()
	l, err := filesystem.NewLocalNoSync(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newCountingFS(l)
	return warehouse{uri: "file://" + dir, fs: localCountingFS{c}, counter: c}
}

var hdfsSeq atomic.Int64

// hdfsWarehouse makes an empty warehouse on the MiniDFSCluster.
func hdfsWarehouse(t testing.TB) warehouse {
	addr := hdfs.Start(t)
	root := fmt.Sprintf("/warehouse-%d-%d", os.Getpid(), hdfsSeq.Add(1))
	h, err := filesystem.NewHDFS(addr, root, filesystem.HDFSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c := newCountingFS(h)
	return warehouse{uri: "hdfs://" + addr + root, fs: c, counter: c}
}

// dataset returns an FS rooted at the dataset directory name of w.
func (w warehouse) dataset(t testing.TB, name string) vfs.FS {
	t.Helper()
	if err := w.fs.MkdirAll(name); err != nil {
		t.Fatal(err)
	}
	return sub(w.fs, name)
}

// open opens an engine on w through its counting FS.
func (w warehouse) open(t testing.TB) *Engine {
	t.Helper()
	e, err := Open(context.Background(), w.uri, Options{FS: w.fs, CacheDir: t.TempDir(), Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// queryRows runs q and returns its rows as text cells.
func queryRows(t testing.TB, e *Engine, q string) [][]string {
	t.Helper()
	rows, _, err := e.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][]string
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, cells(vals))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}
