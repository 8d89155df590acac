package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// TestOtherHoursNeverRead: every file outside hour 11 is overwritten with
// garbage. The query filtered to hour 11 still answers; the unfiltered one
// fails (so garbage would have been noticed had it been read).
func TestOtherHoursNeverRead(t *testing.T) {
	for i, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			w := localWarehouse(t)
			p := loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", k.kind, k.compression, uint64(10+i))
			root := strings.TrimPrefix(w.uri, "file://")
			for dir, files := range p.files {
				if strings.HasSuffix(dir, "hr=11") {
					continue
				}
				for _, f := range files {
					st, err := os.Stat(filepath.Join(root, f))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(root, f), bytes.Repeat([]byte{0xA5}, int(st.Size())), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			e := w.open(t)
			got := queryRows(t, e, "SELECT count(*), min(hr), max(hr) FROM pageviews WHERE hr = 11 AND dt = '2024-05-01'")
			if want := fmt.Sprint(p.counts["dt=2024-05-01/hr=11"]); got[0][0] != want || got[0][1] != "11" || got[0][2] != "11" {
				t.Errorf("hour 11: %v, want count %s", got[0], want)
			}
			if rows, _, err := e.Query(context.Background(), "SELECT count(*) FROM pageviews"); err == nil {
				_, werr := Write(&bytes.Buffer{}, rows, Output{Format: FormatCSV})
				rows.Close()
				if werr == nil {
					t.Errorf("reading every file, garbage included, did not fail")
				}
			}
		})
	}
}

// TestMixedFormats: a dataset whose job changed its format (Parquet,
// then Avro, then JSON lines under other topics) is one table.
func TestMixedFormats(t *testing.T) {
	w := localWarehouse(t)
	ds := w.dataset(t, "pageviews")
	var total int64
	for i, k := range kinds {
		total += loadDataset(t, ds, "pageviews", fmt.Sprintf("t%d", i), k.kind, k.compression, uint64(20+i)).total
	}
	e := w.open(t)
	got := queryRows(t, e, "SELECT count(*), count(DISTINCT _topic), count(DISTINCT hr), min(ts) >= TIMESTAMPTZ '2024-05-01 10:00:00+00' FROM pageviews")
	if want := []string{fmt.Sprint(total), "3", "3", "true"}; fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got[0], want)
	}
}

// TestTables: --tables reports rows, files, bytes and partitions from
// the manifests and the columns of the files.
func TestTables(t *testing.T) {
	t.Run("local", func(t *testing.T) { testTables(t, localWarehouse(t)) })
	t.Run("hdfs", func(t *testing.T) { testTables(t, hdfsWarehouse(t)) })
}

func testTables(t *testing.T, w warehouse) {
	pv := loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 5)
	cl := loadDataset(t, w.dataset(t, "clicks"), "clicks", "clicks", format.Avro, "zstd", 6)
	if err := w.fs.MkdirAll("not-a-dataset/x"); err != nil {
		t.Fatal(err)
	}
	e := w.open(t)
	ts, err := e.Tables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "clicks" || ts[1].Name != "pageviews" {
		t.Fatalf("tables %+v, want clicks and pageviews", ts)
	}
	for i, p := range []produced{cl, pv} {
		ti := ts[i]
		files := 0
		for _, f := range p.files {
			files += len(f)
		}
		if ti.Rows != p.total || ti.Files != files || ti.Bytes <= 0 || len(ti.Partitions) != 3 {
			t.Errorf("%s: rows %d files %d bytes %d partitions %v; produced %d rows in %d files over 3 hours",
				ti.Name, ti.Rows, ti.Files, ti.Bytes, ti.Partitions, p.total, files)
		}
		cols := map[string]string{}
		for _, c := range ti.Columns {
			cols[c.Name] = c.Type
		}
		want := map[string]string{"dt": "DATE", "hr": "INTEGER", "_offset": "BIGINT", "_timestamp": "TIMESTAMP WITH TIME ZONE",
			"ts": "TIMESTAMP WITH TIME ZONE", "referrer": "VARCHAR", "status": "INTEGER"}
		for c, typ := range want {
			if cols[c] != typ {
				t.Errorf("%s: column %s is %q, want %s (columns %v)", ti.Name, c, cols[c], typ, cols)
			}
		}
	}
	var out bytes.Buffer
	if err := WriteTables(&out, ts, FormatJSON); err != nil || !json.Valid(out.Bytes()) {
		t.Errorf("tables as JSON: %v\n%s", err, out.String())
	}
	out.Reset()
	WriteTables(&out, ts, FormatTable)
	if !strings.Contains(out.String(), fmt.Sprintf("rows        %d in", pv.total)) {
		t.Errorf("tables as text:\n%s", out.String())
	}
}

// TestOutputFormats: table, CSV and JSON of one result, and --limit.
func TestOutputFormats(t *testing.T) {
	w := localWarehouse(t)
	loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 8)
	e := w.open(t)
	q := "SELECT hr, dt, count(*) AS n, NULL AS nothing FROM pageviews GROUP BY ALL ORDER BY hr"
	run := func(f string, limit int64) string {
		rows, _, err := e.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b bytes.Buffer
		if _, err := Write(&b, rows, Output{Format: f, Limit: limit}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	tab := strings.Split(strings.TrimSpace(run(FormatTable, 0)), "\n")
	if len(tab) != 5 || !strings.HasPrefix(tab[0], "hr  dt          n") || !strings.HasPrefix(tab[2], "10  2024-05-01") || !strings.HasSuffix(tab[2], "NULL") {
		t.Errorf("table:\n%s", strings.Join(tab, "\n"))
	}
	csv := strings.Split(strings.TrimSpace(run(FormatCSV, 2)), "\n")
	if len(csv) != 3 || csv[0] != "hr,dt,n,nothing" || !strings.HasPrefix(csv[1], "10,2024-05-01,") {
		t.Errorf("csv with limit 2:\n%s", strings.Join(csv, "\n"))
	}
	var objs []map[string]any
	if err := json.Unmarshal([]byte(run(FormatJSON, 0)), &objs); err != nil || len(objs) != 3 || objs[0]["hr"] != float64(10) || objs[0]["nothing"] != nil {
		t.Errorf("json: %v %v", err, objs)
	}
	if _, err := Write(&bytes.Buffer{}, nil, Output{Format: "xml"}); err == nil {
		t.Error("format xml accepted")
	}
	// Zoned timestamps print in the engine's zone; dates and naive
	// timestamps as they are.
	ny, err := Open(context.Background(), w.uri, Options{CacheDir: t.TempDir(), TimeZone: "America/New_York"})
	if err != nil {
		t.Fatal(err)
	}
	defer ny.Close()
	rows, _, err := ny.Query(context.Background(), "SELECT TIMESTAMPTZ '2024-05-01 03:00:00+00' AS z, DATE '2024-05-01' AS d, "+
		"TIMESTAMP '2024-05-01 03:00:00' AS n, date_trunc('day', TIMESTAMPTZ '2024-05-01 03:00:00+00') AS day")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b bytes.Buffer
	if _, err := Write(&b, rows, Output{Format: FormatCSV, Location: ny.Location()}); err != nil {
		t.Fatal(err)
	}
	if want := "z,d,n,day\n2024-04-30 23:00:00-04,2024-05-01,2024-05-01 03:00:00,2024-04-30 00:00:00-04\n"; b.String() != want {
		t.Errorf("time zone output:\n%s\nwant\n%s", b.String(), want)
	}
}

// TestCacheBound: the cache stays under its limit, keeps what the running
// query uses, and stages again when a file changes.
func TestCacheBound(t *testing.T) {
	w := hdfsWarehouse(t)
	p := loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 9)
	var hourBytes int64
	for _, f := range p.files["dt=2024-05-01/hr=10"] {
		st, err := w.fs.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		hourBytes += st.Size
	}
	cacheDir := t.TempDir()
	limit := hourBytes + hourBytes/4 // one hour fits, two do not
	e, err := Open(context.Background(), w.uri, Options{FS: w.fs, CacheDir: cacheDir, CacheBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, hr := range []int{10, 11, 12, 10} {
		got := queryRows(t, e, fmt.Sprintf("SELECT count(*) FROM pageviews WHERE hr = %d", hr))
		if want := fmt.Sprint(p.counts[fmt.Sprintf("dt=2024-05-01/hr=%02d", hr)]); got[0][0] != want {
			t.Errorf("hour %d: %s, want %s", hr, got[0][0], want)
		}
		if size := dirSize(t, filepath.Join(cacheDir, "files")); size > limit {
			t.Errorf("after hour %d the cache holds %d bytes, limit %d", hr, size, limit)
		}
	}
	_, _, err = e.Query(context.Background(), "SELECT count(*) FROM pageviews")
	if !errors.Is(err, ErrData) || !strings.Contains(err.Error(), "--cache-size") {
		t.Errorf("a query larger than the cache: %v, want ErrData naming --cache-size", err)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestCommitNotRolledForward: a commit whose files are still at their
// temporary paths (the writer died between the manifest and the moves) is
// read from there; a committed file gone from both places is an error.
func TestCommitNotRolledForward(t *testing.T) {
	for _, k := range []struct {
		kind        format.Kind
		compression string
	}{{format.Parquet, "zstd"}, {format.JSONLines, "gzip"}, {format.JSONLines, ""}, {format.Avro, "zstd"}} {
		t.Run(string(k.kind)+"/"+k.compression, func(t *testing.T) {
			w := localWarehouse(t)
			ds := w.dataset(t, "pageviews")
			p := loadDataset(t, ds, "pageviews", "pageviews", k.kind, k.compression, 30)
			e := w.open(t)
			d, err := e.Warehouse().Dataset("pageviews")
			if err != nil {
				t.Fatal(err)
			}
			// Undo the roll-forward of every file of hour 12.
			for _, f := range d.Files {
				if f.Partition[1].Value != "12" {
					continue
				}
				rel := func(s string) string { return strings.TrimPrefix(s, "pageviews/") }
				if err := ds.MkdirAll(filepath.Dir(rel(f.Temp))); err != nil {
					t.Fatal(err)
				}
				if err := ds.RenameNoReplace(rel(f.Path), rel(f.Temp)); err != nil {
					t.Fatal(err)
				}
			}
			got := queryRows(t, e, "SELECT count(*) FROM pageviews WHERE hr = 12")
			if want := fmt.Sprint(p.counts["dt=2024-05-01/hr=12"]); got[0][0] != want {
				t.Errorf("hour 12 read from the temporary paths: %s, want %s", got[0][0], want)
			}
			// Now one file is gone for good.
			f := p.files["dt=2024-05-01/hr=10"][0]
			if err := ds.Remove(strings.TrimPrefix(f, "pageviews/")); err != nil {
				t.Fatal(err)
			}
			_, _, err = e.Query(context.Background(), "SELECT count(*) FROM pageviews")
			if !errors.Is(err, ErrData) || !strings.Contains(err.Error(), "missing") {
				t.Errorf("a committed file removed: %v, want ErrData saying missing", err)
			}
		})
	}
}

// TestWarehouseIsADataset: the URI of one job's output works too; the
// table is named after its directory.
func TestWarehouseIsADataset(t *testing.T) {
	w := localWarehouse(t)
	p := loadDataset(t, w.dataset(t, "page-views"), "page-views", "pageviews", format.Parquet, "zstd", 40)
	e, err := Open(context.Background(), w.uri+"/page-views", Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := queryRows(t, e, `SELECT count(*) FROM "page-views" WHERE hr = 11`); got[0][0] != fmt.Sprint(p.counts["dt=2024-05-01/hr=11"]) {
		t.Errorf("count %s, want %d", got[0][0], p.counts["dt=2024-05-01/hr=11"])
	}
}

// TestCacheKey: an entry is reused while the remote file keeps its size
// and modification time, and fetched again when either changes.
func TestCacheKey(t *testing.T) {
	remote, err := filesystem.NewLocalNoSync(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCache(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	put := func(body string) vfs.FileInfo {
		remote.Remove("f.parquet")
		if err := remote.WriteExclusive("f.parquet", []byte(body)); err != nil {
			t.Fatal(err)
		}
		fi, err := remote.Stat("f.parquet")
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	stage := func(fi vfs.FileInfo) (string, bool) {
		p, staged, err := c.Stage(remote, "f.parquet", "dt=2024-05-01/f.parquet", fi)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		return string(b), staged
	}
	fi := put("one")
	if body, staged := stage(fi); body != "one" || !staged {
		t.Errorf("first stage: %q staged=%v", body, staged)
	}
	if body, staged := stage(fi); body != "one" || staged {
		t.Errorf("second stage: %q staged=%v, want the cached copy", body, staged)
	}
	fi = put("three")
	if body, staged := stage(fi); body != "three" || !staged {
		t.Errorf("after a change of size: %q staged=%v", body, staged)
	}
	fi.ModTime = fi.ModTime.Add(time.Second) // same size, newer
	if body, staged := stage(fi); body != "three" || !staged {
		t.Errorf("after a change of mtime: %q staged=%v", body, staged)
	}
	// A copy that comes up short (the file changed while read) is refused.
	fi.Size = 100
	if _, _, err := c.Stage(remote, "f.parquet", "dt=2024-05-01/f.parquet", fi); !errors.Is(err, ErrData) {
		t.Errorf("short copy: %v, want ErrData", err)
	}
}
