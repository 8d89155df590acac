package writers

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/hamba/avro/v2"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/format"
)

func TestCommitWritesPartitionedFiles(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	res, err := runSplit(store, workload, workloadConfig(t), pageViewSchema(t))
	if err != nil || !res.Won {
		t.Fatalf("%+v %v", res, err)
	}
	verifyExactlyOnce(t, fs, workload)
	files := walkFiles(t, fs, ".")
	// 300 records, 36 s apart from 12:30 + 100*36s = 13:30: hours 13 to 16.
	want := []string{"dt=2024-05-01/hr=13/pageviews+2+100+140.jsonl.gz", "dt=2024-05-01/hr=16/pageviews+2+390+400.jsonl.gz"}
	for _, w := range want {
		if !contains(files, w) {
			t.Errorf("missing %s in %v", w, files)
		}
	}
	next, err := store.NextStart(workload.Topic, workload.Partition, 0)
	if err != nil || next != 400 {
		t.Fatalf("NextStart = %d %v", next, err)
	}
	// A second attempt of the same split loses and leaves nothing behind.
	res2, err := runSplit(store, workload, workloadConfig(t), pageViewSchema(t))
	if err != nil || res2.Won || res2.Manifest == nil || res2.Manifest.Attempt != res.Manifest.Attempt {
		t.Fatalf("second attempt: %+v %v", res2, err)
	}
	verifyExactlyOnce(t, fs, workload)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestEmptySplitCommitsManifest(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	split := Split{Topic: "t", Partition: 0, Start: 5, End: 9}
	w, err := NewSplitWriter(store, split, Config{Format: format.Options{Kind: format.Parquet}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Commit(split.End)
	if err != nil || !res.Won || len(res.Manifest.Files) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if n, _ := store.NextStart("t", 0, 0); n != 9 {
		t.Fatalf("NextStart %d", n)
	}
}

func TestRotationAndSchemaChange(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	s1 := pageViewSchema(t)
	s2, err := avro.Parse(`{"type":"record","name":"PageView","namespace":"sluice.bench","fields":[{"name":"url","type":"string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	split := Split{Topic: "pv", Partition: 0, Start: 0, End: 100}
	w, err := NewSplitWriter(store, split, Config{Format: format.Options{Kind: format.Avro}, MaxRecords: 30})
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < 100; off++ {
		s := s1
		if off >= 50 {
			s = s2
		}
		if err := w.Write(s, pageView(off), format.Meta{Offset: off, Timestamp: t0}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Commit(split.End)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range res.Manifest.Files {
		got = append(got, fmt.Sprintf("%s:%d", f.Final, f.Records))
	}
	// 0-29 (max records), 30-49 (schema change), 50-79, 80-99.
	want := "[pv+0+0+30.avro:30 pv+0+30+50.avro:20 pv+0+50+80.avro:30 pv+0+80+100.avro:20]"
	if fmt.Sprint(got) != want {
		t.Fatalf("files %v, want %s", got, want)
	}

	// Rotation by bytes: JSON lines, ~400 bytes a record, 8 KiB files.
	split2 := Split{Topic: "pv", Partition: 1, Start: 0, End: 200}
	res, err = runSplit(store, split2, Config{Format: format.Options{Kind: format.JSONLines}, MaxFileBytes: 8 << 10}, s1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Manifest.Files) < 5 {
		t.Fatalf("%d files for 200 records of ~400 bytes at 8 KiB", len(res.Manifest.Files))
	}
	for _, f := range res.Manifest.Files {
		st, err := fs.Stat(f.Final)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size > 8<<10+1024 {
			t.Fatalf("%s is %d bytes", f.Final, st.Size)
		}
	}
}

func TestSplitRejectsOffsetsOutsideOrder(t *testing.T) {
	store := NewStore(localFS(t), StoreOptions{})
	w, _ := NewSplitWriter(store, Split{Topic: "t", Start: 10, End: 20}, Config{Format: format.Options{Kind: format.JSONLines}})
	for _, off := range []int64{9, 20} {
		if err := w.Write(nil, map[string]any{}, format.Meta{Offset: off}); !errors.Is(err, ErrSplit) {
			t.Errorf("offset %d: %v", off, err)
		}
	}
	if err := w.Write(nil, map[string]any{}, format.Meta{Offset: 12}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(nil, map[string]any{}, format.Meta{Offset: 12}); !errors.Is(err, ErrSplit) {
		t.Errorf("repeated offset: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSplitWriter(store, Split{Topic: "a/b", End: 1}, Config{Format: format.Options{Kind: format.JSONLines}}); !errors.Is(err, ErrSplit) {
		t.Errorf("topic with slash: %v", err)
	}
}

// TestParquetWarehouseQueriedByDuckDB: a Hive-partitioned Parquet output as a
// user queries it.
func TestParquetWarehouseQueriedByDuckDB(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	cfg := workloadConfig(t)
	cfg.Format = format.Options{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true}
	cfg.MaxRecords = 0
	if _, err := runSplit(store, workload, cfg, pageViewSchema(t)); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	glob := filepath.Join(fs.Root(), "*", "*", "*.parquet")
	rows, err := db.Query(fmt.Sprintf(
		"SELECT hr, count(*), min(_offset), max(_offset), min(ts) FROM read_parquet('%s', hive_partitioning = true) GROUP BY hr ORDER BY hr", glob))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var hr, n, lo, hi int64
		var ts time.Time
		if err := rows.Scan(&hr, &n, &lo, &hi, &ts); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%d:%d-%d:%s", hr, n, lo, hi, ts.UTC().Format("15:04")))
	}
	want := "[13:50:100-149:13:30 14:100:150-249:14:00 15:100:250-349:15:00 16:50:350-399:16:00]"
	if fmt.Sprint(got) != want {
		t.Fatalf("per hour %v, want %s", got, want)
	}
}

func TestWithdrawMovesAside(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	cfg := workloadConfig(t)
	s := pageViewSchema(t)
	for _, sp := range []Split{{Topic: "pageviews", Partition: 2, Start: 0, End: 100}, {Topic: "pageviews", Partition: 2, Start: 100, End: 200}, {Topic: "pageviews", Partition: 2, Start: 200, End: 300}} {
		if res, err := runSplit(store, sp, cfg, s); err != nil || !res.Won {
			t.Fatal(res, err)
		}
	}
	before := walkFiles(t, fs, ".")
	ms, dest, err := store.Withdraw("pageviews", 2, 100)
	if err != nil || len(ms) != 2 {
		t.Fatalf("withdrew %d: %v", len(ms), err)
	}
	if n, _ := store.NextStart("pageviews", 2, 0); n != 100 {
		t.Fatalf("NextStart after withdraw = %d", n)
	}
	after := walkFiles(t, fs, ".")
	moved := walkFiles(t, fs, dest)
	if len(after)+len(moved)-2 != len(before) { // two manifests moved too
		t.Fatalf("before %d files, after %d, withdrawn %d", len(before), len(after), len(moved))
	}
	for _, f := range after {
		var first int64
		fmt.Sscanf(strings.Split(filepath.Base(f), "+")[2], "%d", &first)
		if first >= 100 {
			t.Errorf("still visible after withdraw: %s", f)
		}
	}
	// Replay the withdrawn range: the output is whole again.
	for _, sp := range []Split{{Topic: "pageviews", Partition: 2, Start: 100, End: 200}, {Topic: "pageviews", Partition: 2, Start: 200, End: 300}} {
		if res, err := runSplit(store, sp, cfg, s); err != nil || !res.Won {
			t.Fatal(res, err)
		}
	}
	if got := walkFiles(t, fs, "."); len(got) != len(before) {
		t.Fatalf("after replay %d files, want %d", len(got), len(before))
	}
	if _, err := fs.Stat(dest); err != nil {
		t.Fatalf("withdrawn files gone: %v", err)
	}
	_ = vfs.ErrExist
}

// TestParquetRotationByBytes: Parquet files roll over once the written row
// groups plus the estimated buffered rows reach MaxFileBytes.
func TestParquetRotationByBytes(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	split := Split{Topic: "pv", Partition: 0, Start: 0, End: 20000}
	cfg := Config{Format: format.Options{Kind: format.Parquet, Compression: "snappy", RowGroupRows: 1000}, MaxFileBytes: 64 << 10}
	res, err := runSplit(store, split, cfg, pageViewSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Manifest.Files) < 3 {
		t.Fatalf("%d files", len(res.Manifest.Files))
	}
	var total int64
	for _, f := range res.Manifest.Files {
		st, err := fs.Stat(f.Final)
		if err != nil {
			t.Fatal(err)
		}
		total += f.Records
		if st.Size > 2*(64<<10) {
			t.Errorf("%s is %d bytes for a 64 KiB limit", f.Final, st.Size)
		}
	}
	if total != 20000 {
		t.Fatalf("%d records", total)
	}
	t.Logf("%d files", len(res.Manifest.Files))
}
