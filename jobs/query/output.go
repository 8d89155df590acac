package query

import (
	"bufio"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"
)

// Output formats of Write.
const (
	FormatTable = "table" // aligned columns (widths from the first rows)
	FormatCSV   = "csv"   // RFC 4180, with a header
	FormatJSON  = "json"  // one JSON array of objects
)

// widthRows is how many rows the table format reads ahead to size its
// columns (the one page it holds); longer values later simply stretch
// their row.
const widthRows = 1000

// Output says how Write prints a result.
type Output struct {
	Format string // FormatTable (default), FormatCSV or FormatJSON
	Limit  int64  // print at most this many rows; 0: all
	// Location is the zone TIMESTAMP WITH TIME ZONE values print in
	// (Engine.Location; default UTC).
	Location *time.Location
}

// Write copies rows to w, streaming: CSV and JSON are written row by row,
// the table format holds its first widthRows rows to size its columns and
// then writes row by row; memory stays bounded whatever the result size.
// It returns the number of rows printed.
func Write(w io.Writer, rows Result, o Output) (int64, error) {
	switch o.Format {
	case FormatTable, FormatCSV, FormatJSON, "":
	default:
		return 0, fmt.Errorf("query: unknown output format %q: use table, csv or json", o.Format)
	}
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	types, err := rows.TypeNames()
	if err != nil || len(types) != len(cols) {
		types = make([]string, len(cols))
	}
	p := &printer{rows: rows, cols: cols, types: types, limit: o.Limit, loc: o.Location}
	if p.loc == nil {
		p.loc = time.UTC
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	switch o.Format {
	case FormatCSV:
		err = p.writeCSV(bw)
	case FormatJSON:
		err = p.writeJSON(bw)
	default:
		err = p.writeTable(bw)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return p.n, err
}

// printer reads a result's rows for one Write: the values scanned, times
// tagged with their column's type and zone, and the count printed.
type printer struct {
	rows  Result
	cols  []string
	types []string
	limit int64
	loc   *time.Location
	n     int64 // rows printed
}

// more reports whether the limit allows another row.
func (p *printer) more() bool { return p.limit <= 0 || p.n < p.limit }

// next scans the next row (ok false at the end).
func (p *printer) next() ([]any, bool, error) {
	if !p.rows.Next() {
		return nil, false, p.rows.Err()
	}
	vals := make([]any, len(p.cols))
	ptrs := make([]any, len(p.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := p.rows.Scan(ptrs...); err != nil {
		return nil, false, err
	}
	for i, v := range vals {
		if t, ok := v.(time.Time); ok {
			if withZone(p.types[i]) {
				t = t.In(p.loc)
			}
			vals[i] = timeValue{t, p.types[i]}
		}
	}
	return vals, true, nil
}

// writeCSV writes a header and one record per row.
func (p *printer) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(p.cols)
	for p.more() {
		vals, ok, err := p.next()
		if err != nil || !ok {
			cw.Flush()
			return firstErr(err, cw.Error())
		}
		rec := make([]string, len(vals))
		for i, v := range vals {
			if v != nil {
				rec[i] = text(v)
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
		p.n++
	}
	cw.Flush()
	return cw.Error()
}

// writeJSON writes one array of objects, a row per line.
func (p *printer) writeJSON(w io.Writer) error {
	if _, err := io.WriteString(w, "["); err != nil {
		return err
	}
	for p.more() {
		vals, ok, err := p.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		sep := ",\n"
		if p.n == 0 {
			sep = "\n"
		}
		obj := orderedObject{keys: p.cols, vals: make([]any, len(vals))}
		for i, v := range vals {
			obj.vals[i] = jsonValue(v)
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		p.n++
	}
	_, err := io.WriteString(w, "\n]\n")
	return err
}

// writeTable sizes the columns from the first widthRows rows, prints the
// header, the rule and those rows, then streams the rest.
func (p *printer) writeTable(w io.Writer) error {
	var page [][]string
	for int64(len(page)) < widthRows && p.more() {
		vals, ok, err := p.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		page = append(page, cells(vals))
		p.n++
	}
	t := tableLayout{w: w, widths: columnWidths(p.cols, page)}
	if err := t.line(p.cols); err != nil {
		return err
	}
	rule := make([]string, len(p.cols))
	for i := range p.cols {
		rule[i] = strings.Repeat("-", t.widths[i])
	}
	t.line(rule)
	for _, r := range page {
		if err := t.line(r); err != nil {
			return err
		}
	}
	for p.more() {
		vals, ok, err := p.next()
		if err != nil || !ok {
			return err
		}
		if err := t.line(cells(vals)); err != nil {
			return err
		}
		p.n++
	}
	return nil
}

// columnWidths is the width of each column: its name's or its widest cell's.
func columnWidths(cols []string, page [][]string) []int {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = utf8.RuneCountInString(c)
	}
	for _, r := range page {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	return widths
}

// tableLayout prints rows padded to the columns' widths.
type tableLayout struct {
	w      io.Writer
	widths []int
}

func (t tableLayout) line(r []string) error {
	var b strings.Builder
	for i, c := range r {
		if i > 0 {
			b.WriteString("  ")
		}
		b.WriteString(c)
		if i < len(r)-1 {
			b.WriteString(strings.Repeat(" ", max(0, t.widths[i]-utf8.RuneCountInString(c))))
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(t.w, b.String())
	return err
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func cells(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		if v == nil {
			out[i] = "NULL"
		} else {
			out[i] = strings.ReplaceAll(text(v), "\n", `\n`)
		}
	}
	return out
}

// text renders a value as DuckDB's command line does, near enough.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return "\\x" + hex.EncodeToString(x)
	case time.Time:
		return timeValue{t: x}.String()
	case *big.Int:
		return x.String()
	case fmt.Stringer:
		return x.String()
	case map[string]any, []any, map[any]any:
		b, err := json.Marshal(jsonValue(x))
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
	return fmt.Sprint(v)
}

// timeValue is a scanned time with its column's DuckDB type, which
// decides how it prints: DATE as a day, TIMESTAMP WITH TIME ZONE in UTC
// with its offset, TIME as a time of day.
type timeValue struct {
	t   time.Time
	typ string
}

func (v timeValue) String() string {
	switch {
	case v.typ == "DATE":
		return v.t.Format("2006-01-02")
	case strings.HasPrefix(v.typ, "TIME") && !strings.HasPrefix(v.typ, "TIMESTAMP"):
		return v.t.Format("15:04:05.999999")
	case withZone(v.typ):
		return v.t.Format("2006-01-02 15:04:05.999999-07")
	}
	return v.t.UTC().Format("2006-01-02 15:04:05.999999")
}

func withZone(typ string) bool {
	return strings.Contains(typ, "TIME ZONE") || typ == "TIMESTAMPTZ" || typ == "TIMETZ"
}

func (v timeValue) MarshalJSON() ([]byte, error) {
	if withZone(v.typ) {
		return json.Marshal(v.t.Format(time.RFC3339Nano))
	}
	if v.typ == "DATE" {
		return json.Marshal(v.String())
	}
	return json.Marshal(v.t.UTC().Format("2006-01-02T15:04:05.999999999"))
}

// jsonValue makes a scanned value encodable as JSON.
func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return hex.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonValue(e)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = jsonValue(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case timeValue:
		return x
	case fmt.Stringer:
		return x.String()
	}
	return v
}

// orderedObject encodes as a JSON object with keys in column order.
type orderedObject struct {
	keys []string
	vals []any
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteString("{")
	for i, k := range o.keys {
		if i > 0 {
			b.WriteString(",")
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteString(":")
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteString("}")
	return []byte(b.String()), nil
}
