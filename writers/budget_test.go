package writers

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/format"
)

// budgetSplits are the two splits the budget tests write side by side:
// 4,000 page views each (36 s apart: three days, so up to three files a
// writer), Parquet by day.
var budgetSplits = []Split{
	{Topic: "pageviews", Partition: 0, Start: 0, End: 4000},
	{Topic: "pageviews", Partition: 1, Start: 0, End: 4000},
}

func budgetConfig(t *testing.T, b *MemoryBudget) Config {
	p, err := NewPartitioner(ByDay, "ts", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	return Config{Format: format.Options{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true},
		Partitioner: p, Budget: b}
}

// openBudgetWriters starts a writer of each budget split on a fresh store.
func openBudgetWriters(t *testing.T, b *MemoryBudget) (vfs.FS, []*SplitWriter) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	ws := make([]*SplitWriter, len(budgetSplits))
	for i, s := range budgetSplits {
		w, err := NewSplitWriter(store, s, budgetConfig(t, b))
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	return fs, ws
}

func budgetRecord(w *SplitWriter, off int64) error {
	schema, err := loadPageViewSchema()
	if err != nil {
		return err
	}
	return w.Write(schema, pageView(off), format.Meta{Offset: off, Timestamp: t0.Add(time.Duration(off) * time.Second)})
}

// trueBuffered is the sum of what the writers' open files buffer, read
// from the format writers (not from the budget's reports).
func trueBuffered(ws []*SplitWriter) (sum int64, files int) {
	for _, w := range ws {
		for _, of := range w.open {
			sum += of.fw.(bufferingWriter).Buffered()
			files++
		}
	}
	return sum, files
}

// commitAll commits every writer and returns its files' rows (see
// parquetRows) and the number of row groups.
func commitAll(t *testing.T, fs vfs.FS, ws []*SplitWriter) (map[string]string, int) {
	t.Helper()
	rows := map[string]string{}
	groups := 0
	for i, w := range ws {
		res, err := w.Commit(budgetSplits[i].End)
		if err != nil || !res.Won {
			t.Fatalf("commit %s: %+v, %v", budgetSplits[i], res, err)
		}
		for _, f := range res.Manifest.Files {
			groups += parquetRows(t, fs, f.Final, rows)
		}
	}
	return rows, groups
}

// parquetRows reads a committed Parquet file into rows, every column's
// value as text by partition/offset, and returns its row groups.
func parquetRows(t *testing.T, fs vfs.FS, name string, rows map[string]string) int {
	t.Helper()
	b, err := vfs.ReadFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	sch := tbl.Schema()
	part, off := sch.FieldIndices(format.ColPartition), sch.FieldIndices(format.ColOffset)
	if len(part) != 1 || len(off) != 1 {
		t.Fatalf("%s: no %s/%s columns: %s", name, format.ColPartition, format.ColOffset, sch)
	}
	text := make([][]string, tbl.NumCols())
	for c := range text {
		for _, chunk := range tbl.Column(c).Data().Chunks() {
			for i := 0; i < chunk.Len(); i++ {
				text[c] = append(text[c], chunk.ValueStr(i))
			}
		}
	}
	for r := 0; r < int(tbl.NumRows()); r++ {
		var row bytes.Buffer
		for c := range text {
			fmt.Fprintf(&row, "%s=%s ", sch.Field(c).Name, text[c][r])
		}
		key := text[part[0]][r] + "/" + text[off[0]][r]
		if _, dup := rows[key]; dup {
			t.Fatalf("%s: row %s twice", name, key)
		}
		rows[key] = row.String()
	}
	return rdr.NumRowGroups()
}

// TestMemoryBudgetFlushesKeepRows writes two splits side by side, one
// record of each in turn, under a budget far below what their files would
// buffer: after every record the files' own count of buffered bytes is
// within the budget plus one report interval (budgetEvery records) of each
// open file, and the committed files hold exactly the rows written without
// a budget, in more row groups.
func TestMemoryBudgetFlushesKeepRows(t *testing.T) {
	fs, ws := openBudgetWriters(t, nil)
	for off := int64(0); off < budgetSplits[0].End; off++ {
		for _, w := range ws {
			if err := budgetRecord(w, off); err != nil {
				t.Fatal(err)
			}
		}
	}
	unbudgeted, _ := trueBuffered(ws)
	want, wantGroups := commitAll(t, fs, ws)

	const limit = 64 << 10
	if unbudgeted < 4*limit {
		t.Fatalf("without a budget the files buffer %d bytes at the end: too few for a budget of %d to matter", unbudgeted, limit)
	}
	budget := NewMemoryBudget(limit)
	fs, ws = openBudgetWriters(t, budget)
	var rowBytes int64 // the largest growth of a file's buffer by one record
	for off := int64(0); off < budgetSplits[0].End; off++ {
		for _, w := range ws {
			dir, err := w.cfg.Partitioner.Dir(pageView(off), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			var before int64
			if of := w.open[dir]; of != nil {
				before = of.buf.Buffered()
			}
			if err := budgetRecord(w, off); err != nil {
				t.Fatal(err)
			}
			if of := w.open[dir]; of != nil {
				rowBytes = max(rowBytes, of.buf.Buffered()-before)
			}
			sum, files := trueBuffered(ws)
			if slack := int64(files) * budgetEvery * rowBytes; sum > limit+slack {
				t.Fatalf("after offset %d of %s: %d open files buffer %d bytes, over the budget of %d by more than %d records (%d bytes) a file",
					off, w.split, files, sum, limit, budgetEvery, slack)
			}
		}
	}
	if budget.Flushes() == 0 {
		t.Fatal("the budget flushed no row group")
	}
	got, groups := commitAll(t, fs, ws)
	if budget.Buffered() != 0 {
		t.Errorf("the budget still counts %d bytes after the commits", budget.Buffered())
	}
	if groups <= wantGroups {
		t.Errorf("%d row groups under the budget, %d without: the budget cut none", groups, wantGroups)
	}
	compareRows(t, got, want)
	t.Logf("%d flushes, %d row groups (%d without the budget), largest record %d bytes", budget.Flushes(), groups, wantGroups, rowBytes)
}

// TestMemoryBudgetSharedAcrossGoroutines has two writers on two goroutines
// share a small budget, so that each flushes the other's files: the rows
// read back are those written, and (under -race) the files' locks keep
// the flushes apart from the writes.
func TestMemoryBudgetSharedAcrossGoroutines(t *testing.T) {
	fs, ws := openBudgetWriters(t, nil)
	for off := int64(0); off < budgetSplits[0].End; off++ {
		for _, w := range ws {
			if err := budgetRecord(w, off); err != nil {
				t.Fatal(err)
			}
		}
	}
	want, _ := commitAll(t, fs, ws)

	budget := NewMemoryBudget(48 << 10)
	fs, ws = openBudgetWriters(t, budget)
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(0); off < budgetSplits[i].End && errs[i] == nil; off++ {
				errs[i] = budgetRecord(w, off)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if budget.Flushes() == 0 {
		t.Fatal("the budget flushed no row group")
	}
	got, _ := commitAll(t, fs, ws)
	compareRows(t, got, want)
}

func compareRows(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows read back, want %d", len(got), len(want))
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Fatalf("row %s:\n got %s\nwant %s", k, got[k], want[k])
		}
	}
}

func TestMemoryBudgetNilAndZeroBoundNothing(t *testing.T) {
	for _, b := range []*MemoryBudget{nil, NewMemoryBudget(0)} {
		if b.active() || b.Limit() != 0 || b.Buffered() != 0 || b.Flushes() != 0 {
			t.Fatalf("budget %+v bounds something", b)
		}
	}
}
