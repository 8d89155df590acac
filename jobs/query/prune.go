package query

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Partition pruning.
//
// The query is parsed by DuckDB itself (json_serialize_sql), never by a
// home-made parser. In every SELECT, the WHERE clause is split at its
// top-level ANDs; a conjunct whose only columns are partition keys (dt, hr)
// of one base table of that SELECT constrains that table reference. A base
// table qualifies when it is the SELECT's only table or sits in a tree of
// inner and cross joins (a filter on the null-supplying side of an outer
// join, or under a sample, does not commute with the scan, so it is not
// used). The conjuncts are then evaluated by DuckDB over a small table of
// the dataset's partition directories, so their meaning is exactly DuckDB's.
//
// A dataset referenced several times reads the union of what each
// reference needs; a reference with no usable conjunct needs every file.
// Wrong attribution (a CTE named like a dataset) can only add files.

// tableRef is one reference to a base table in the query.
type tableRef struct {
	name      string // as written
	alias     string // the alias, or the name when none
	conjuncts []any  // WHERE conjuncts on partition keys only (AST nodes)
}

// parsedQuery is the result of parse.
type parsedQuery struct {
	root any
	refs []tableRef
}

// parse asks DuckDB for the query's syntax tree. A query that does not
// parse, or is not a SELECT, is an ErrSQL.
func parse(ctx context.Context, conn *sql.Conn, query string) (*parsedQuery, error) {
	var out string
	if err := conn.QueryRowContext(ctx, "SELECT json_serialize_sql(?::VARCHAR)::VARCHAR", query).Scan(&out); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrSQL, oneLine(err.Error()))
	}
	var res struct {
		Error      bool   `json:"error"`
		ErrorType  string `json:"error_type"`
		Message    string `json:"error_message"`
		Position   string `json:"position"`
		Statements []any  `json:"statements"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("%w: reading the parsed query: %v", ErrSQL, err)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return nil, fmt.Errorf("%w: reading the parsed query: %v", ErrSQL, err)
	}
	if res.Error {
		switch res.ErrorType {
		case "parser":
			pos := ""
			if res.Position != "" {
				pos = " (at character " + res.Position + ")"
			}
			return nil, fmt.Errorf("%w: %s%s", ErrSQL, res.Message, pos)
		case "not implemented":
			return nil, fmt.Errorf("%w: only SELECT queries (with WITH, UNION, ...) are run: %s", ErrSQL, res.Message)
		default:
			return nil, fmt.Errorf("%w: %s", ErrSQL, res.Message)
		}
	}
	top, _ := root.(map[string]any)
	stmts, _ := top["statements"].([]any)
	if len(stmts) != 1 {
		return nil, fmt.Errorf("%w: give exactly one statement (got %d)", ErrSQL, len(stmts))
	}
	p := &parsedQuery{root: root}
	p.refs = collectRefs(root)
	return p, nil
}

// collectRefs finds every base table reference of the tree, with the
// conjuncts that may prune it.
func collectRefs(root any) []tableRef {
	constrained := map[uintptr][]any{}
	walk(root, func(m map[string]any) {
		if m["type"] != "SELECT_NODE" || m["sample"] != nil {
			return
		}
		tables := prunableTables(m["from_table"])
		if len(tables) == 0 || m["where_clause"] == nil {
			return
		}
		from, _ := m["from_table"].(map[string]any)
		single := len(tables) == 1 && from["type"] == "BASE_TABLE"
		for _, c := range conjuncts(m["where_clause"]) {
			if t := conjunctTable(c, tables, single); t != nil {
				k := reflect.ValueOf(t).Pointer()
				constrained[k] = append(constrained[k], c)
			}
		}
	})
	var refs []tableRef
	walk(root, func(m map[string]any) {
		if m["type"] != "BASE_TABLE" {
			return
		}
		name, _ := m["table_name"].(string)
		if s, _ := m["schema_name"].(string); s != "" && !strings.EqualFold(s, "main") {
			return
		}
		refs = append(refs, tableRef{name: name, alias: refAlias(m), conjuncts: constrained[reflect.ValueOf(m).Pointer()]})
	})
	return refs
}

func refAlias(m map[string]any) string {
	if a, _ := m["alias"].(string); a != "" {
		return a
	}
	n, _ := m["table_name"].(string)
	return n
}

// walk calls fn on every object of a JSON tree, parents first.
func walk(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(x)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walk(x[k], fn)
		}
	case []any:
		for _, e := range x {
			walk(e, fn)
		}
	}
}

// prunableTables returns the base tables of a FROM tree whose rows a WHERE
// filter may drop before the scan: the table itself, or the tables of a
// tree of inner (and cross) joins. Sampled tables are left out.
func prunableTables(from any) []map[string]any {
	m, ok := from.(map[string]any)
	if !ok {
		return nil
	}
	switch m["type"] {
	case "BASE_TABLE":
		if m["sample"] != nil || m["at_clause"] != nil {
			return nil
		}
		return []map[string]any{m}
	case "JOIN":
		if m["join_type"] != "INNER" || (m["ref_type"] != "REGULAR" && m["ref_type"] != "CROSS") {
			return nil
		}
		return append(prunableTables(m["left"]), prunableTables(m["right"])...)
	}
	return nil
}

// conjuncts splits an expression at its top-level ANDs.
func conjuncts(e any) []any {
	m, ok := e.(map[string]any)
	if children, _ := m["children"].([]any); ok && m["type"] == "CONJUNCTION_AND" {
		var out []any
		for _, c := range children {
			out = append(out, conjuncts(c)...)
		}
		return out
	}
	return []any{e}
}

// volatile functions give another answer per call: a conjunct using one
// cannot be evaluated ahead of the query.
var volatile = map[string]bool{"random": true, "uuid": true, "gen_random_uuid": true,
	"nextval": true, "currval": true, "setseed": true, "uuidv4": true, "uuidv7": true}

// conjunctTable returns the table of tables that a conjunct constrains, or
// nil: every column of the conjunct must be a partition key (dt or hr),
// qualified by that table's alias, or unqualified when the table is the
// SELECT's only one; no subquery, parameter or volatile function.
func conjunctTable(c any, tables []map[string]any, single bool) map[string]any {
	var table map[string]any
	ok, cols := true, 0
	walk(c, func(m map[string]any) {
		switch m["class"] {
		case "SUBQUERY", "PARAMETER", "LAMBDA", "WINDOW", "LAMBDA_REF":
			ok = false
		case "FUNCTION":
			if n, _ := m["function_name"].(string); volatile[strings.ToLower(n)] {
				ok = false
			}
		case "COLUMN_REF":
			cols++
			names, _ := m["column_names"].([]any)
			var t map[string]any
			switch len(names) {
			case 1:
				if single {
					t = tables[0]
				}
			case 2:
				q, _ := names[0].(string)
				for _, cand := range tables {
					if strings.EqualFold(refAlias(cand), q) {
						t = cand
					}
				}
			}
			col, _ := names[len(names)-1].(string)
			if len(names) == 1 && sqlConstants[strings.ToLower(col)] {
				cols--
				return // CURRENT_DATE and friends parse as column names
			}
			if t == nil || !isPartitionKey(col) || (table != nil && reflect.ValueOf(table).Pointer() != reflect.ValueOf(t).Pointer()) {
				ok = false
				return
			}
			table = t
		}
	})
	if !ok || cols == 0 {
		return nil
	}
	return table
}

// sqlConstants are the keywords DuckDB parses as column references and
// binds to the current date or time (unless a table has such a column,
// which the writers' records do not).
var sqlConstants = map[string]bool{"current_date": true, "current_time": true, "current_timestamp": true,
	"localtime": true, "localtimestamp": true}

// isPartitionKey reports whether a column is one of the Hive partition
// columns the writers' partitioner makes.
func isPartitionKey(col string) bool {
	col = strings.ToLower(col)
	return col == "dt" || col == "hr"
}

// partitionTable creates a temporary table of a dataset's partition
// directories (dir, dt DATE, hr INTEGER) to evaluate conjuncts over.
func partitionTable(ctx context.Context, conn *sql.Conn, name string, keys []string, dirs map[string][]KeyValue) error {
	cols := []string{`"__dir" VARCHAR`}
	for _, k := range keys {
		cols = append(cols, quoteIdent(k)+" "+partitionType(k))
	}
	if _, err := conn.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+quoteIdent(name)+" ("+strings.Join(cols, ", ")+")"); err != nil {
		return err
	}
	ds := make([]string, 0, len(dirs))
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	const chunk = 1000
	for i := 0; i < len(ds); i += chunk {
		var rows []string
		for _, d := range ds[i:min(i+chunk, len(ds))] {
			vals := []string{quoteString(d)}
			for _, k := range keys {
				v := "NULL"
				for _, kv := range dirs[d] {
					if kv.Key == k {
						v = "TRY_CAST(" + quoteString(kv.Value) + " AS " + partitionType(k) + ")"
					}
				}
				vals = append(vals, v)
			}
			rows = append(rows, "("+strings.Join(vals, ", ")+")")
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+quoteIdent(name)+" VALUES "+strings.Join(rows, ", ")); err != nil {
			return err
		}
	}
	return nil
}

// partitionType is the SQL type of a partition key's column.
func partitionType(key string) string {
	switch strings.ToLower(key) {
	case "dt":
		return "DATE"
	case "hr":
		return "INTEGER"
	}
	return "VARCHAR"
}

// matchingDirs evaluates one reference's conjuncts over the partition
// table and returns the directories they keep. ok is false when DuckDB
// could not evaluate them (then every directory is needed).
func matchingDirs(ctx context.Context, conn *sql.Conn, table string, ref tableRef) (map[string]bool, bool) {
	var tmpl string
	q := `SELECT "__dir" FROM ` + quoteIdent(table) + " AS " + quoteIdent(ref.alias) + " WHERE true"
	if err := conn.QueryRowContext(ctx, "SELECT json_serialize_sql(?::VARCHAR)::VARCHAR", q).Scan(&tmpl); err != nil {
		return nil, false
	}
	var root map[string]any
	if err := json.Unmarshal([]byte(tmpl), &root); err != nil {
		return nil, false
	}
	stmts, _ := root["statements"].([]any)
	if len(stmts) != 1 {
		return nil, false
	}
	stmt, _ := stmts[0].(map[string]any)
	node, ok := stmt["node"].(map[string]any)
	if !ok {
		return nil, false
	}
	var where any = ref.conjuncts[0]
	if len(ref.conjuncts) > 1 {
		where = map[string]any{"class": "CONJUNCTION", "type": "CONJUNCTION_AND", "alias": "",
			"query_location": json.Number("18446744073709551615"), "children": ref.conjuncts}
	}
	node["where_clause"] = where
	b, err := json.Marshal(root)
	if err != nil {
		return nil, false
	}
	var text string
	if err := conn.QueryRowContext(ctx, "SELECT json_deserialize_sql(?::JSON)", string(b)).Scan(&text); err != nil {
		return nil, false
	}
	rows, err := conn.QueryContext(ctx, text)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, false
		}
		out[d] = true
	}
	if rows.Err() != nil {
		return nil, false
	}
	return out, true
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// oneLine folds a multi-line message (DuckDB's errors carry the query
// and a caret) into one line.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && strings.Trim(l, "^ ") != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " | ")
}
