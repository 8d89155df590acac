package query

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/writers/format"
)

// TestPruning: which hours each query reads, and that every query returns
// the same rows with pruning as with every file read.
func TestPruning(t *testing.T) {
	w := localWarehouse(t)
	loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 3)
	e := w.open(t)
	ref := w.open(t)
	ref.noPrune = true
	all := []string{"10", "11", "12"}
	const j = " ON a._partition = b._partition AND a._offset = b._offset"
	cases := []struct {
		q     string
		hours []string
	}{
		{"SELECT count(*) FROM pageviews WHERE hr = 10", []string{"10"}},
		{"SELECT count(*) FROM pageviews WHERE hr IN (10, 12) AND status = 200", []string{"10", "12"}},
		{"SELECT count(*) FROM pageviews WHERE hr BETWEEN 11 AND 12", []string{"11", "12"}},
		{"SELECT count(*) FROM pageviews WHERE hr = 10 OR hr = 11", []string{"10", "11"}},
		{"SELECT count(*) FROM pageviews WHERE NOT (hr = 10)", []string{"11", "12"}},
		{"SELECT count(*) FROM pageviews WHERE hr = 10 OR status = 200", all},
		{"SELECT count(*) FROM pageviews WHERE dt = '2024-05-02'", nil},
		{"SELECT count(*) FROM pageviews WHERE dt = DATE '2024-05-01' AND hr >= 11", []string{"11", "12"}},
		{"SELECT count(*) FROM pageviews p WHERE p.hr = 11", []string{"11"}},
		{"SELECT count(*) FROM pageviews WHERE dt = current_date - 1", nil},
		{"SELECT count(*) FROM pageviews WHERE dt < current_date AND hr = 12", []string{"12"}},
		{"SELECT count(*) FROM PageViews WHERE HR = 11", []string{"11"}},
		{"SELECT count(*) FROM pageviews WHERE hr::VARCHAR LIKE '1_' AND strftime(dt, '%d') = '01'", all},
		{"SELECT count(*) FROM pageviews a JOIN pageviews b" + j + " WHERE a.hr = 10 AND b.hr = 11", []string{"10", "11"}},
		{"SELECT count(*) FROM pageviews a JOIN pageviews b" + j + " WHERE a.hr = 10 AND b.hr = 10", []string{"10"}},
		{"SELECT count(*) FROM pageviews a LEFT JOIN pageviews b" + j + " WHERE b.hr = 10 OR b.hr IS NULL", all},
		{"SELECT count(*) FROM pageviews a, pageviews b WHERE a._offset = b._offset AND a._partition = b._partition AND a.hr = 12 AND b.hr = 12", []string{"12"}},
		{"SELECT count(*) FROM (SELECT * FROM pageviews) WHERE hr = 10", all},
		{"SELECT count(*) FROM pageviews WHERE hr = (SELECT 10)", all},
		{"SELECT count(*) FROM pageviews WHERE hr = 10 + floor(random() * 3)::INTEGER", all},
		{"WITH x AS (SELECT * FROM pageviews WHERE hr = 12) SELECT count(*) FROM x", []string{"12"}},
		{"SELECT count(*) FROM pageviews WHERE hr = 10 UNION ALL SELECT count(*) FROM pageviews WHERE hr = 12", []string{"10", "12"}},
		{"SELECT count(*) FROM pageviews WHERE hr = 10 UNION ALL SELECT count(*) FROM pageviews", all},
		{"SELECT count(*) FROM pageviews WHERE hr IN (SELECT hr FROM pageviews WHERE hr = 11)", all},
		{"SELECT count(*) FROM (SELECT * FROM pageviews USING SAMPLE 10 ROWS) WHERE hr = 10", all},
		{"SELECT count(*) FROM pageviews WHERE hr = 10 HAVING count(*) > 0", []string{"10"}},
	}
	ctx := context.Background()
	for _, c := range cases {
		p, err := e.Plan(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		hours := map[string]bool{}
		for _, f := range p.Tables[0].Files {
			hours[f.Partition[1].Value] = true
		}
		got := make([]string, 0, len(hours))
		for h := range hours {
			got = append(got, h)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, append([]string{}, c.hours...)) {
			t.Errorf("%s\n reads hours %v, want %v", c.q, got, c.hours)
		}
		if strings.Contains(c.q, "random") || strings.Contains(c.q, "SAMPLE") {
			continue
		}
		if a, b := queryRows(t, e, c.q), queryRows(t, ref, c.q); !reflect.DeepEqual(a, b) {
			t.Errorf("%s\n pruned %v, all files %v", c.q, a, b)
		}
	}
}

// FuzzPruning: for any WHERE clause, planning never panics, and when the
// query runs, pruning changes no result.
func FuzzPruning(f *testing.F) {
	for _, w := range []string{
		"hr = 10", "hr IN (10, 12) AND status = 200", "hr = 10 OR hr = 11", "NOT (hr = 10)", "hr = 10 OR status = 200",
		"dt = '2024-05-02'", "dt >= DATE '2024-05-01' AND hr >= 11", "hr BETWEEN 11 AND 12", "hr IS NULL",
		"hr::VARCHAR LIKE '1_'", "coalesce(hr, 0) = 11", "CASE WHEN hr = 10 THEN true ELSE status = 404 END",
		"hr = (SELECT max(hr) FROM pageviews)", "hr + _partition = 11", "(hr = 10) = false", "hr > 10 AND hr < 10",
	} {
		f.Add(w)
	}
	w := localWarehouse(f)
	loadDataset(f, w.dataset(f, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 4)
	e, ref := w.open(f), w.open(f)
	ref.noPrune = true
	f.Fuzz(func(t *testing.T, where string) {
		q := "SELECT hr, count(*), sum(_offset) FROM pageviews WHERE " + where + " GROUP BY hr ORDER BY hr"
		got, gerr := run(e, q)
		want, werr := run(ref, q)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: pruned error %v, unpruned error %v", q, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n pruned %v\n all files %v", q, got, want)
		}
	})
}

func run(e *Engine, q string) ([][]string, error) {
	rows, _, err := e.Query(context.Background(), q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var b strings.Builder
	if _, err := Write(&b, rows, Output{Format: FormatCSV}); err != nil {
		return nil, err
	}
	var out [][]string
	for _, l := range strings.Split(b.String(), "\n") {
		out = append(out, []string{l})
	}
	return out, nil
}
