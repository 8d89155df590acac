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
	formatName, limit, loc := o.Format, o.Limit, o.Location
	if loc == nil {
		loc = time.UTC
	}
	switch formatName {
	case FormatTable, FormatCSV, FormatJSON, "":
	default:
		return 0, fmt.Errorf("query: unknown output format %q: use table, csv or json", formatName)
	}
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	types, err := rows.TypeNames()
	if err != nil || len(types) != len(cols) {
		types = make([]string, len(cols))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	n, err := write(bw, rows, cols, types, formatName, limit, loc)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return n, err
}

func write(w io.Writer, rows Result, cols, types []string, formatName string, limit int64, loc *time.Location) (int64, error) {
	next := func() ([]any, bool, error) {
		if !rows.Next() {
			return nil, false, rows.Err()
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, false, err
		}
		for i, v := range vals {
			if t, ok := v.(time.Time); ok {
				if withZone(types[i]) {
					t = t.In(loc)
				}
				vals[i] = timeValue{t, types[i]}
			}
		}
		return vals, true, nil
	}
	var n int64
	more := func() bool { return limit <= 0 || n < limit }
	switch formatName {
	case FormatCSV:
		cw := csv.NewWriter(w)
		cw.Write(cols)
		for more() {
			vals, ok, err := next()
			if err != nil || !ok {
				cw.Flush()
				return n, firstErr(err, cw.Error())
			}
			rec := make([]string, len(vals))
			for i, v := range vals {
				if v != nil {
					rec[i] = text(v)
				}
			}
			if err := cw.Write(rec); err != nil {
				return n, err
			}
			n++
		}
		cw.Flush()
		return n, cw.Error()
	case FormatJSON:
		if _, err := io.WriteString(w, "["); err != nil {
			return 0, err
		}
		for more() {
			vals, ok, err := next()
			if err != nil {
				return n, err
			}
			if !ok {
				break
			}
			sep := ",\n"
			if n == 0 {
				sep = "\n"
			}
			obj := orderedObject{keys: cols, vals: make([]any, len(vals))}
			for i, v := range vals {
				obj.vals[i] = jsonValue(v)
			}
			b, err := json.Marshal(obj)
			if err != nil {
				return n, err
			}
			if _, err := io.WriteString(w, sep); err != nil {
				return n, err
			}
			if _, err := w.Write(b); err != nil {
				return n, err
			}
			n++
		}
		_, err := io.WriteString(w, "\n]\n")
		return n, err
	default: // FormatTable
		var buf [][]string
		for int64(len(buf)) < widthRows && more() {
			vals, ok, err := next()
			if err != nil {
				return n, err
			}
			if !ok {
				break
			}
			buf = append(buf, cells(vals))
			n++
		}
		widths := make([]int, len(cols))
		for i, c := range cols {
			widths[i] = utf8.RuneCountInString(c)
		}
		for _, r := range buf {
			for i, c := range r {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
		line := func(r []string) error {
			var b strings.Builder
			for i, c := range r {
				if i > 0 {
					b.WriteString("  ")
				}
				b.WriteString(c)
				if i < len(r)-1 {
					b.WriteString(strings.Repeat(" ", max(0, widths[i]-utf8.RuneCountInString(c))))
				}
			}
			b.WriteString("\n")
			_, err := io.WriteString(w, b.String())
			return err
		}
		if err := line(cols); err != nil {
			return n, err
		}
		rule := make([]string, len(cols))
		for i := range cols {
			rule[i] = strings.Repeat("-", widths[i])
		}
		line(rule)
		for _, r := range buf {
			if err := line(r); err != nil {
				return n, err
			}
		}
		for more() {
			vals, ok, err := next()
			if err != nil || !ok {
				return n, err
			}
			if err := line(cells(vals)); err != nil {
				return n, err
			}
			n++
		}
		return n, nil
	}
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
