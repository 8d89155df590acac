package query

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/writers"
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
	// Columns is the merged schema the table's queries see: the union of
	// its schemas' columns, the widest type of each.
	Columns []Column `json:"columns"`
	// Schemas are the table's writer schemas (one per column fingerprint),
	// oldest first.
	Schemas []SchemaInfo `json:"schemas,omitempty"`
	Torn    int          `json:"torn_manifests,omitempty"`
}

// SchemaInfo is one writer schema of a table: its registry names (when the
// registry's), the fingerprint of its files' columns, its files and rows,
// the partitions holding them and its own columns.
type SchemaInfo struct {
	Subject     string   `json:"subject,omitempty"`
	Version     int      `json:"version,omitempty"`
	ID          int      `json:"id,omitempty"`
	Fingerprint string   `json:"fingerprint,omitempty"` // "" for files whose manifests do not say
	Files       int      `json:"files"`
	Rows        int64    `json:"rows"`
	Partitions  []string `json:"partitions"`
	Columns     []Column `json:"columns"`
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
			schemas, reps := schemaGroups(d.Files)
			// The table's columns: a view over one file of each schema,
			// merged as a query's view merges all of them.
			if err := e.register(ctx, TablePlan{Name: n, Files: reps}); err != nil {
				return nil, err
			}
			if ti.Columns, err = e.describe(ctx, n); err != nil {
				return nil, err
			}
			if len(schemas) > 1 || schemas[0].Fingerprint != "" {
				for i := range schemas {
					e.seq++
					name := fmt.Sprintf("__sluice_schema_%d", e.seq)
					if err := e.register(ctx, TablePlan{Name: name, Files: reps[i : i+1]}); err != nil {
						return nil, err
					}
					if schemas[i].Columns, err = e.describe(ctx, name); err != nil {
						return nil, err
					}
				}
				ti.Schemas = schemas
			}
		}
		out = append(out, ti)
	}
	return out, nil
}

// schemaGroups groups files by writer schema (registry names and column
// fingerprint), oldest schema first (by subject and version, then by the
// first file), and returns one file of each (its newest).
func schemaGroups(files []DataFile) ([]SchemaInfo, []DataFile) {
	type group struct {
		info  SchemaInfo
		parts map[string]bool
		first int
		rep   DataFile
	}
	groups := map[writers.FileSchema]*group{}
	for i, f := range files {
		var k writers.FileSchema
		if f.Schema != nil {
			k = *f.Schema
		}
		g := groups[k]
		if g == nil {
			g = &group{info: SchemaInfo{Subject: k.Subject, Version: k.Version, ID: k.ID, Fingerprint: k.Fingerprint},
				parts: map[string]bool{}, first: i}
			groups[k] = g
		}
		g.info.Files++
		g.info.Rows += f.Records
		g.parts[f.PartitionDir()] = true
		g.rep = f
	}
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		g.info.Partitions = sortedKeys(g.parts)
		list = append(list, g)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i].info, list[j].info
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return list[i].first < list[j].first
	})
	infos := make([]SchemaInfo, len(list))
	reps := make([]DataFile, len(list))
	for i, g := range list {
		infos[i], reps[i] = g.info, g.rep
	}
	return infos, reps
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
		fmt.Fprintf(w, "  columns     %s\n", columnList(t.Columns))
		if len(t.Schemas) > 0 {
			fmt.Fprintf(w, "  schemas     %d (the columns above merge them: missing columns NULL, widened types cast)\n", len(t.Schemas))
		}
		for _, s := range t.Schemas {
			name := "schema"
			switch {
			case s.Subject != "":
				name = fmt.Sprintf("%s version %d (id %d)", s.Subject, s.Version, s.ID)
			case s.ID != 0:
				name = fmt.Sprintf("schema id %d", s.ID)
			}
			fp := s.Fingerprint
			if fp == "" {
				fp = "no fingerprint (older manifests)"
			}
			fmt.Fprintf(w, "    %s, %s: %d rows in %d files\n", name, fp, s.Rows, s.Files)
			fmt.Fprintf(w, "      partitions  %s\n", partitionList(s.Partitions))
			fmt.Fprintf(w, "      columns     %s\n", columnList(s.Columns))
		}
	}
	return nil
}

func columnList(cs []Column) string {
	cols := make([]string, len(cs))
	for i, c := range cs {
		cols[i] = c.Name + " " + c.Type
	}
	return strings.Join(cols, ", ")
}

// partitionList names every partition up to 6, else the first and last
// three.
func partitionList(ps []string) string {
	switch n := len(ps); {
	case n == 0:
		return "none"
	case n <= 6:
		return fmt.Sprintf("%d: %s", n, strings.Join(ps, ", "))
	default:
		return fmt.Sprintf("%d: %s … %s", n, strings.Join(ps[:3], ", "), strings.Join(ps[n-3:], ", "))
	}
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
