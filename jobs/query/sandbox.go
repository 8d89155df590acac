package query

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// The sandbox: a query reads the warehouse and nothing else.
//
// DuckDB reads files and URLs on its own (read_text, read_blob, glob,
// read_csv, read_json, read_parquet, parquet_metadata, ATTACH, COPY, http
// and s3 paths) and installs and loads extensions on demand. Before any SQL
// of the user runs, Open confines the database, in this order:
//
//	allowed_directories           = [<local warehouse root>/, <cache dir>/]
//	autoinstall_known_extensions  = false
//	autoload_known_extensions     = false
//	allow_community_extensions    = false
//	enable_external_access        = false   every other path, URL, ATTACH, INSTALL, LOAD refused
//	lock_configuration            = true    no SET or RESET afterwards
//
// A local warehouse is read in place, so its root is allowed; an HDFS
// warehouse is read from its copies in the cache, which also holds DuckDB's
// spill directory and, built without duckdb_arrow, the Avro files converted
// to Parquet. The engine's own views name files under those directories only;
// Avro batches reach DuckDB through its Arrow interface, which reads no file.
// The settings are global to the in-memory database, so they hold on every
// connection to it. Only a single SELECT is run (parse refuses the rest), so
// COPY, ATTACH, INSTALL, LOAD, SET and PRAGMA are refused before DuckDB sees
// them; the sandbox is what stops the table functions inside a SELECT.
//
// DuckDB checks the paths as written, after normalizing them: a symbolic
// link inside the warehouse to a directory outside is followed.

// confine applies the sandbox to the database of conn, allowing dirs.
func confine(ctx context.Context, conn *sql.Conn, dirs []string) error {
	allowed := make([]string, len(dirs))
	for i, d := range dirs {
		allowed[i] = quoteString(strings.TrimRight(d, string(os.PathSeparator)) + string(os.PathSeparator))
	}
	for _, s := range []string{
		"SET allowed_directories = [" + strings.Join(allowed, ", ") + "]",
		"SET autoinstall_known_extensions = false",
		"SET autoload_known_extensions = false",
		"SET allow_community_extensions = false",
		"SET enable_external_access = false",
		"SET lock_configuration = true",
	} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("query: confining DuckDB to the warehouse (%s): %s", s, oneLine(err.Error()))
		}
	}
	// A DuckDB that ignored a setting would leave the door open: check.
	var external, locked bool
	if err := conn.QueryRowContext(ctx, "SELECT current_setting('enable_external_access')::BOOLEAN, current_setting('lock_configuration')::BOOLEAN").Scan(&external, &locked); err != nil {
		return fmt.Errorf("query: confining DuckDB to the warehouse: %s", oneLine(err.Error()))
	}
	if external || !locked {
		return fmt.Errorf("query: confining DuckDB to the warehouse: enable_external_access=%v, lock_configuration=%v after setting them", external, locked)
	}
	return nil
}

var (
	deniedPath = regexp.MustCompile(`Cannot access (?:file|directory) ("[^"]*")`)
	extension  = regexp.MustCompile(`is not in the catalog, but it exists in the (\S+) extension`)
)

// outsideError recognizes DuckDB's refusals by the sandbox in msg and
// returns them as ErrOutsideWarehouse, naming what the query reached for.
func (e *Engine) outsideError(msg string) (error, bool) {
	what := ""
	switch {
	case deniedPath.MatchString(msg):
		what = "not " + deniedPath.FindStringSubmatch(msg)[1]
	case extension.MatchString(msg):
		what = "and loads no DuckDB extension (" + extension.FindStringSubmatch(msg)[1] + ")"
	case strings.Contains(msg, "Permission Error"), strings.Contains(msg, "configuration has been locked"):
		what = "(" + oneLine(msg) + ")"
	default:
		return nil, false
	}
	return e.outside(what), true
}

// outside is the ErrOutsideWarehouse of a query that reached for what.
func (e *Engine) outside(what string) error {
	tables := strings.Join(e.wh.names, ", ")
	if tables == "" {
		tables = "none yet"
	}
	return fmt.Errorf("%w: sluice query reads only the warehouse's tables and files (%s; tables: %s), %s",
		ErrOutsideWarehouse, e.wh.uri, tables, what)
}
