package query

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// TableInfo describes one dataset, from its manifests (files, rows, bytes,
// partitions) and the schema of its newest file (columns).
type TableInfo struct {
	Name       string   `json:"name"`
	URI        string   `json:"uri"`
	Formats    []string `json:"formats"`
	Files      int      `json:"files"`
	Rows       int64    `json:"rows"`
	Bytes      int64    `json:"bytes"`
	Partitions []string `json:"partitions"` // "dt=…/hr=…", sorted
	Columns    []Column `json:"columns"`
	Torn       int      `json:"torn_manifests,omitempty"`
}

// Column is one column of a table and its DuckDB type.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Tables describes every dataset of the warehouse.
func (e *Engine) Tables(ctx context.Context) ([]TableInfo, error) {
	if err := e.dropPrevious(ctx); err != nil {
		return nil, err
	}
	var out []TableInfo
	for _, n := range e.wh.names {
		d, err := e.wh.Dataset(n)
		if err != nil {
			return nil, err
		}
		ti := TableInfo{Name: n, URI: e.wh.FileURI(d.Dir), Files: len(d.Files), Torn: d.Torn}
		formats, parts := map[string]bool{}, map[string]bool{}
		for _, f := range d.Files {
			ti.Rows += f.Records
			ti.Bytes += f.Bytes
			formats[f.Format] = true
			parts[f.PartitionDir()] = true
		}
		ti.Formats = sortedKeys(formats)
		ti.Partitions = sortedKeys(parts)
		if len(d.Files) > 0 {
			last := d.Files[len(d.Files)-1]
			if err := e.register(ctx, TablePlan{Name: n, SchemaFrom: &last}); err != nil {
				return nil, err
			}
			if ti.Columns, err = e.describe(ctx, n); err != nil {
				return nil, err
			}
		}
		out = append(out, ti)
	}
	return out, nil
}

func (e *Engine) describe(ctx context.Context, name string) ([]Column, error) {
	rows, err := e.conn.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE "+quoteIdent(name)+")")
	if err != nil {
		return nil, e.sqlError(err)
	}
	defer rows.Close()
	var cols []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// WriteTables prints tables as text (one block per table) or JSON.
func WriteTables(w io.Writer, tables []TableInfo, formatName string) error {
	if formatName == FormatJSON {
		b, err := json.MarshalIndent(tables, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if len(tables) == 0 {
		_, err := fmt.Fprintln(w, "no datasets (no directory with a _sluice/ directory) in this warehouse")
		return err
	}
	for i, t := range tables {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s  (%s)\n", t.Name, t.URI)
		fmt.Fprintf(w, "  format      %s\n", strings.Join(t.Formats, ", "))
		fmt.Fprintf(w, "  rows        %d in %d files, %s\n", t.Rows, t.Files, byteSize(t.Bytes))
		switch n := len(t.Partitions); {
		case n == 0:
			fmt.Fprintf(w, "  partitions  none\n")
		case n <= 3:
			fmt.Fprintf(w, "  partitions  %d: %s\n", n, strings.Join(t.Partitions, ", "))
		default:
			fmt.Fprintf(w, "  partitions  %d: %s … %s\n", n, t.Partitions[0], t.Partitions[n-1])
		}
		if t.Torn > 0 {
			fmt.Fprintf(w, "  warning     %d manifest(s) not readable (being written, or left by a dead attempt)\n", t.Torn)
		}
		cols := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			cols[i] = c.Name + " " + c.Type
		}
		fmt.Fprintf(w, "  columns     %s\n", strings.Join(cols, ", "))
	}
	return nil
}

// WriteExplain prints the files a plan reads, one URI a line under a
// header per table.
func WriteExplain(w io.Writer, wh *Warehouse, p *Plan) error {
	if len(p.Tables) == 0 {
		_, err := fmt.Fprintln(w, "the query reads no dataset")
		return err
	}
	for _, t := range p.Tables {
		var bytes, rows int64
		for _, f := range t.Files {
			bytes += f.Bytes
			rows += f.Records
		}
		how := "no dt/hr filter used"
		if t.Pruned {
			how = "pruned by dt/hr"
		}
		fmt.Fprintf(w, "-- %s: %d of %d files (%s), %d rows, %s\n", t.Name, len(t.Files), t.TotalFiles, how, rows, byteSize(bytes))
		if t.SchemaFrom != nil {
			fmt.Fprintf(w, "-- %s: no file matches; the columns are read from %s\n", t.Name, wh.FileURI(t.SchemaFrom.Path))
		}
		for _, f := range t.Files {
			if _, err := fmt.Fprintln(w, wh.FileURI(f.Path)); err != nil {
				return err
			}
		}
	}
	return nil
}
