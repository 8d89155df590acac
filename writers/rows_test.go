package writers

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
	"github.com/sluicehq/sluice/writers/format"
)

// TestManyRowsPerRecord: with Config.ManyRows the rows of one offset go
// in with increasing Meta.Row, carry it as _row, and a file full by
// MaxRecords ends only between offsets; a repeated or decreasing row is
// refused, and without ManyRows a second row of an offset still is.
func TestManyRowsPerRecord(t *testing.T) {
	s, err := avro.Parse(`{"type":"record","name":"R","fields":[{"name":"v","type":"long"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, kind := range []format.Kind{format.Parquet, format.Avro, format.JSONLines} {
		t.Run(string(kind), func(t *testing.T) {
			fs := localFS(t)
			store := NewStore(fs, StoreOptions{})
			split := Split{Topic: "t", Partition: 1, Start: 0, End: 10}
			cfg := Config{Format: format.Options{Kind: kind, MetadataColumns: true, RowColumn: true}, MaxRecords: 4, ManyRows: true}
			w, err := NewSplitWriter(store, split, cfg)
			if err != nil {
				t.Fatal(err)
			}
			rows := 0
			for off := int64(0); off < 10; off++ {
				for r := int32(0); r < int32(off%4); r++ { // 0, 1, 2 or 3 rows
					if err := w.Write(s, map[string]any{"v": off*10 + int64(r)}, format.Meta{Offset: off, Row: r}); err != nil {
						t.Fatalf("offset %d row %d: %v", off, r, err)
					}
					rows++
				}
				if off == 3 {
					if err := w.Write(s, map[string]any{"v": int64(0)}, format.Meta{Offset: 3, Row: 2}); !errors.Is(err, ErrSplit) {
						t.Fatalf("row 2 of offset 3 again: %v, want ErrSplit", err)
					}
				}
			}
			res, err := w.Commit(10)
			if err != nil || !res.Won {
				t.Fatalf("commit: %+v %v", res, err)
			}
			// Each file holds whole offsets: the ranges of its name do not overlap.
			var lastEnd int64 = -1
			for _, f := range res.Manifest.Files {
				if f.First <= lastEnd {
					t.Errorf("file %s starts at %d, within the previous file (ends %d)", f.Final, f.First, lastEnd)
				}
				lastEnd = f.Last
				if f.Records > 4+2 {
					t.Errorf("file %s holds %d rows: more than MaxRecords and the rest of one record", f.Final, f.Records)
				}
			}
			if len(res.Manifest.Files) < 3 {
				t.Errorf("%d files, want rotation by MaxRecords (4) to make at least 3", len(res.Manifest.Files))
			}
			var files []string
			for _, f := range res.Manifest.Files {
				files = append(files, "'"+filepath.Join(fs.Root(), f.Final)+"'")
			}
			var n, distinct, bad int
			if kind == format.Avro {
				n, distinct, bad = avroRowKeys(t, fs.Root(), res.Manifest.Files)
			} else {
				read := map[format.Kind]string{format.Parquet: "read_parquet", format.JSONLines: "read_json_auto"}[kind]
				q := fmt.Sprintf("SELECT count(*), count(DISTINCT (_partition, _offset, _row)), count(*) FILTER (WHERE v <> _offset*10 + _row OR _row >= _offset %% 4) FROM %s([%s])", read, strings.Join(files, ","))
				if err := db.QueryRow(q).Scan(&n, &distinct, &bad); err != nil {
					t.Fatal(err)
				}
			}
			if n != rows || distinct != rows || bad != 0 {
				t.Fatalf("%d rows, %d distinct (partition, offset, row), %d wrong; wrote %d", n, distinct, bad, rows)
			}
		})
	}
	store := NewStore(localFS(t), StoreOptions{})
	w, _ := NewSplitWriter(store, Split{Topic: "t", Start: 0, End: 5}, Config{Format: format.Options{Kind: format.JSONLines}})
	if err := w.Write(nil, map[string]any{}, format.Meta{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(nil, map[string]any{}, format.Meta{Offset: 1, Row: 1}); !errors.Is(err, ErrSplit) {
		t.Fatalf("a second row without ManyRows: %v, want ErrSplit", err)
	}
	w.Abort()
}

// avroRowKeys reads Avro files as the DuckDB query of TestManyRowsPerRecord
// does: rows, distinct (_partition, _offset, _row), rows whose v or _row is wrong.
func avroRowKeys(t *testing.T, root string, files []File) (n, distinct, bad int) {
	t.Helper()
	seen := map[[3]int64]bool{}
	for _, f := range files {
		fh, err := os.Open(filepath.Join(root, f.Final))
		if err != nil {
			t.Fatal(err)
		}
		dec, err := ocf.NewDecoder(fh)
		if err != nil {
			t.Fatal(err)
		}
		for dec.HasNext() {
			var r struct {
				V         int64 `avro:"v"`
				Partition int32 `avro:"_partition"`
				Offset    int64 `avro:"_offset"`
				Row       int32 `avro:"_row"`
			}
			if err := dec.Decode(&r); err != nil {
				t.Fatal(err)
			}
			n++
			seen[[3]int64{int64(r.Partition), r.Offset, int64(r.Row)}] = true
			if r.V != r.Offset*10+int64(r.Row) || int64(r.Row) >= r.Offset%4 {
				bad++
			}
		}
		if err := dec.Error(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	return n, len(seen), bad
}
