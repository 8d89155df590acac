package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/writers/format"
)

// countingResult yields rows (i, "row i") for i < total, counting how many
// it has handed out, and notes what the writer had received when it ran
// out.
type countingResult struct {
	total, served int64
	out           *recordingWriter
	bytesAtEnd    int64 // out.bytes when Next first returned false; -1 before
}

func (c *countingResult) Columns() ([]string, error)   { return []string{"i", "s"}, nil }
func (c *countingResult) TypeNames() ([]string, error) { return []string{"BIGINT", "VARCHAR"}, nil }
func (c *countingResult) Err() error                   { return nil }
func (c *countingResult) Next() bool {
	if c.served == c.total {
		if c.bytesAtEnd < 0 {
			c.bytesAtEnd = c.out.bytes
		}
		return false
	}
	c.served++
	return true
}
func (c *countingResult) Scan(dest ...any) error {
	*dest[0].(*any) = c.served - 1
	*dest[1].(*any) = "row " + strconv.FormatInt(c.served-1, 10)
	return nil
}

// recordingWriter counts the bytes written to it and records how many rows
// the result had handed out when the first bytes came.
type recordingWriter struct {
	rows        *countingResult
	bytes       int64
	servedFirst int64 // rows served at the first write; -1 before
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if w.servedFirst < 0 {
		w.servedFirst = w.rows.served
	}
	w.bytes += int64(len(p))
	return len(p), nil
}

// TestWriteStreamsRows: in every format, Write hands the first rows to its
// writer long before the result is exhausted, and when the result ends the
// writer already holds all but Write's output buffers: no format collects
// the result (the table one holds its first widthRows rows, no more).
func TestWriteStreamsRows(t *testing.T) {
	const total = 200_000
	const buffers = 64<<10 + 4<<10 // Write's buffer and encoding/csv's
	for _, f := range []string{FormatCSV, FormatJSON, FormatTable} {
		t.Run(f, func(t *testing.T) {
			rows := &countingResult{total: total, bytesAtEnd: -1}
			w := &recordingWriter{rows: rows, servedFirst: -1}
			rows.out = w
			n, err := Write(w, rows, Output{Format: f})
			if err != nil || n != total {
				t.Fatalf("wrote %d rows (%v), want %d", n, err, total)
			}
			if bound := int64(widthRows + total/20); w.servedFirst < 0 || w.servedFirst > bound {
				t.Errorf("the first bytes came after %d of %d rows, want within %d", w.servedFirst, total, bound)
			}
			if rows.bytesAtEnd < w.bytes-buffers {
				t.Errorf("when the result ended the writer had %d of %d bytes: more than Write's buffers (%d) was held back", rows.bytesAtEnd, w.bytes, buffers)
			}
		})
	}
}

// TestQueryResultIsPaged: a query's rows come from DuckDB a bounded page at
// a time (never the whole result at once), in the query's order across
// pages, with the query's own column names (repeated ones too), and the
// result table is gone once the rows are closed.
func TestQueryResultIsPaged(t *testing.T) {
	w := localWarehouse(t)
	p := loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 5)
	e := w.open(t)
	ctx := context.Background()
	// DuckDB materializes each page whole: the page is the bound.
	const bound = 16384
	cases := []struct {
		q    string
		rows int64
	}{
		{"SELECT range AS i, range % 7 AS a, range % 5 AS a FROM range(100000) ORDER BY i DESC", 100000},
		{fmt.Sprintf("SELECT range AS i, 0 AS a, 0 AS a FROM range(%d) ORDER BY i DESC", bound), bound},
		{fmt.Sprintf("SELECT range AS i, 0 AS a, 0 AS a FROM range(%d) ORDER BY i DESC", bound+1), bound + 1},
		{"SELECT range AS i, 0 AS a, 0 AS a FROM range(0)", 0},
		{"SELECT _offset * 1000 + _partition AS i, hr AS a, status AS a FROM pageviews ORDER BY i DESC", p.total},
	}
	for _, c := range cases {
		rows, _, err := e.Query(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		var out bytes.Buffer
		n, err := Write(&out, rows, Output{Format: FormatCSV})
		if err != nil || n != c.rows {
			t.Fatalf("%s: %d rows (%v), want %d", c.q, n, err, c.rows)
		}
		if rows.pageMax > bound || rows.pages < int(c.rows/bound)+1 {
			t.Errorf("%s: %d pages, the largest %d rows; want pages of at most %d", c.q, rows.pages, rows.pageMax, bound)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&out).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(recs[0]); got != "[i a a]" {
			t.Errorf("%s: header %s, want [i a a]", c.q, got)
		}
		for i := 2; i < len(recs); i++ {
			a, _ := strconv.ParseInt(recs[i-1][0], 10, 64)
			b, _ := strconv.ParseInt(recs[i][0], 10, 64)
			if a <= b {
				t.Fatalf("%s: row %d (%d) after row %d (%d): the query's order is lost", c.q, i, b, i-1, a)
			}
		}
		var left int
		if err := e.conn.QueryRowContext(ctx, "SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '__sluice_result')").Scan(&left); err != nil || left != 0 {
			t.Errorf("%s: %d result tables left after Close (%v)", c.q, left, err)
		}
	}
}

// TestQueryMemoryLimit: Options.MemoryBytes bounds DuckDB's buffer pool,
// which holds the result, and a result larger than it is still read whole
// (spilled under the cache directory).
func TestQueryMemoryLimit(t *testing.T) {
	w := localWarehouse(t)
	loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 6)
	e, err := Open(context.Background(), w.uri, Options{FS: w.fs, CacheDir: t.TempDir(), Threads: 2, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := queryRows(t, e, "SELECT current_setting('memory_limit')"); got[0][0] != "64.0 MiB" {
		t.Errorf("memory_limit %s, want 64.0 MiB", got[0][0])
	}
	const n = 1_500_000 // about 100 MB of distinct text: more than the pool
	rows, _, err := e.Query(context.Background(), fmt.Sprintf("SELECT range AS i, md5(range::VARCHAR) || md5((range + 1)::VARCHAR) AS s FROM range(%d)", n))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out bytes.Buffer
	if got, err := Write(&out, rows, Output{Format: FormatCSV}); err != nil || got != n {
		t.Fatalf("wrote %d rows (%v), want %d", got, err, n)
	}
}
