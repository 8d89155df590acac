package query

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/writers"
)

// register creates the view named after a dataset over the plan's files:
//
//	CREATE TEMP VIEW "pageviews" AS
//	  SELECT * FROM read_parquet([...], hive_partitioning = true, ...)    Parquet
//	  UNION ALL BY NAME SELECT * FROM read_json([...], ...)              JSON lines
//	  UNION ALL BY NAME SELECT * FROM "__sluice_avro_3"                   Avro (via Arrow)
//
// one SELECT per (format, compression, partition keys) group, so a dataset
// whose format or partitioning changed over time is still one table. The
// Hive columns have fixed types: dt DATE, hr INTEGER.
func (e *Engine) register(ctx context.Context, t TablePlan) error {
	files, schemaOnly := t.Files, false
	if len(files) == 0 {
		files, schemaOnly = []DataFile{*t.SchemaFrom}, true
	}
	selects, err := e.selects(ctx, t.Name, files, schemaOnly)
	if err != nil {
		return err
	}
	if len(t.SchemaAlso) > 0 {
		more, err := e.selects(ctx, t.Name, t.SchemaAlso, true)
		if err != nil {
			return err
		}
		selects = append(selects, more...)
	}
	view := "CREATE OR REPLACE TEMP VIEW " + quoteIdent(t.Name) + " AS " + strings.Join(selects, " UNION ALL BY NAME ")
	e.made = append(e.made, "VIEW "+quoteIdent(t.Name))
	if _, err := e.conn.ExecContext(ctx, view); err != nil {
		return fmt.Errorf("%w: table %s: reading its files: %s", ErrData, t.Name, oneLine(err.Error()))
	}
	return nil
}

// selects returns the SELECTs of the files (their columns only, LIMIT 0,
// when schemaOnly), one per (format, compression, partition keys) group.
func (e *Engine) selects(ctx context.Context, table string, files []DataFile, schemaOnly bool) ([]string, error) {
	t := TablePlan{Name: table}
	res, err := e.resolve(files)
	if err != nil {
		return nil, err
	}
	if err := e.localize(res); err != nil {
		return nil, err
	}
	type group struct {
		format, compression string
		keys                []string
		files               []resolved
	}
	groups := map[string]*group{}
	var order []string
	for _, f := range res {
		var keys []string
		for _, kv := range f.Partition {
			keys = append(keys, kv.Key)
		}
		id := f.Format + "|" + f.Compression + "|" + strings.Join(keys, "/")
		g := groups[id]
		if g == nil {
			g = &group{format: f.Format, compression: f.Compression, keys: keys}
			groups[id] = g
			order = append(order, id)
		}
		g.files = append(g.files, f)
	}
	sort.Strings(order)
	var selects []string
	for _, id := range order {
		g := groups[id]
		var from string
		switch g.format {
		case "parquet":
			from = "read_parquet(" + fileList(g.files) + hiveArgs(g.keys) + ", union_by_name = true)"
		case "json":
			c := g.compression
			if c == "" {
				c = "uncompressed"
			}
			from = "read_json(" + fileList(g.files) + hiveArgs(g.keys) +
				", format = 'newline_delimited', compression = " + quoteString(c) + ", union_by_name = true)"
		case "avro":
			e.seq++
			name := fmt.Sprintf("__sluice_avro_%d", e.seq)
			err := e.registerAvro(ctx, name, g.files, g.keys, schemaOnly)
			e.made = append(e.made, "VIEW "+quoteIdent(name))
			if err != nil {
				return nil, fmt.Errorf("%w: table %s: %v", ErrData, t.Name, err)
			}
			from = quoteIdent(name)
		default:
			return nil, fmt.Errorf("%w: table %s: format %q", ErrData, t.Name, g.format)
		}
		sel := "SELECT * FROM " + from
		if schemaOnly {
			// in a subquery: a LIMIT at the end of a UNION limits all of it
			sel = "SELECT * FROM (" + sel + " LIMIT 0)"
		}
		selects = append(selects, sel)
	}
	return selects, nil
}

func fileList(files []resolved) string {
	q := make([]string, len(files))
	for i, f := range files {
		q[i] = quoteString(f.local)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func hiveArgs(keys []string) string {
	if len(keys) == 0 {
		return ", hive_partitioning = false"
	}
	types := make([]string, len(keys))
	for i, k := range keys {
		types[i] = quoteString(k) + ": " + partitionType(k)
	}
	return ", hive_partitioning = true, hive_types = {" + strings.Join(types, ", ") + "}"
}

// missingSchemas returns one file (the newest) of each writer schema of all
// that neither files nor also has.
func missingSchemas(all, files []DataFile, also *DataFile) []DataFile {
	key := func(f DataFile) writers.FileSchema {
		if f.Schema == nil {
			return writers.FileSchema{}
		}
		return *f.Schema
	}
	have := map[writers.FileSchema]bool{}
	for _, f := range files {
		have[key(f)] = true
	}
	if also != nil {
		have[key(*also)] = true
	}
	newest := map[writers.FileSchema]int{}
	var order []writers.FileSchema
	for i, f := range all {
		k := key(f)
		if have[k] {
			continue
		}
		if _, ok := newest[k]; !ok {
			order = append(order, k)
		}
		newest[k] = i
	}
	out := make([]DataFile, len(order))
	for i, k := range order {
		out[i] = all[newest[k]]
	}
	return out
}
