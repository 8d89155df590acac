package query

import (
	"context"
	"database/sql"
	"fmt"
)

// The result of a query, read a page at a time.
//
// duckdb-go executes every statement to a materialized result: the whole
// answer held in memory outside DuckDB's buffer pool (5M rows of 80 bytes:
// over 500 MB) before the first row is read, whatever the output does. So
// a query's rows go into a temporary table instead, which lives in the
// buffer pool (compressed, and spilled to the cache's spill directory
// beyond DuckDB's memory_limit), and are read back in pages of pageRows
// rows by rowid, in the query's order (DuckDB preserves insertion order):
//
//	CREATE TEMP TABLE "__sluice_result_7" AS <the query>
//	SELECT * FROM "__sluice_result_7" WHERE rowid >= 0 AND rowid < 16384
//	SELECT * FROM "__sluice_result_7" WHERE rowid >= 16384 AND rowid < 32768   …
//
// Go holds one page at a time. The column names are the query's own (from
// DESCRIBE), not the table's, which makes repeated names unique.

// pageRows is how many rows of a result one page holds.
const pageRows = 16384

// Result is what Write prints: the rows of a query.
type Result interface {
	Columns() ([]string, error)
	// TypeNames returns the DuckDB type of each column.
	TypeNames() ([]string, error)
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Rows is the result of Engine.Query. It is read on the engine's
// connection: close it before the engine's next call.
type Rows struct {
	e       *Engine
	ctx     context.Context
	table   string
	cols    []string
	types   []string
	page    *sql.Rows // the page being read, nil between pages
	start   int64     // the rowid the next page starts at
	inPage  int       // rows read from the page
	pageMax int       // the most rows read from one page (tests)
	pages   int       // pages read (tests)
	done    bool
	err     error
	closed  bool
}

// run executes query into a result table and opens its first page.
func (e *Engine) run(ctx context.Context, query string) (*Rows, error) {
	names, err := e.resultNames(ctx, query)
	if err != nil {
		return nil, err
	}
	e.seq++
	r := &Rows{e: e, ctx: ctx, table: quoteIdent(fmt.Sprintf("__sluice_result_%d", e.seq)), cols: names}
	e.made = append(e.made, "TABLE "+r.table)
	if _, err := e.conn.ExecContext(ctx, "CREATE TEMP TABLE "+r.table+" AS "+query+"\n"); err != nil {
		return nil, e.sqlError(err)
	}
	if err := r.nextPage(); err != nil {
		r.Close()
		return nil, err
	}
	cts, err := r.page.ColumnTypes()
	if err != nil || len(cts) != len(names) {
		r.Close()
		return nil, fmt.Errorf("%w: the result has %d columns, DESCRIBE said %d (%v)", ErrSQL, len(cts), len(names), err)
	}
	for _, ct := range cts {
		r.types = append(r.types, ct.DatabaseTypeName())
	}
	return r, nil
}

// resultNames returns the column names of query, as it names them.
func (e *Engine) resultNames(ctx context.Context, query string) ([]string, error) {
	rows, err := e.conn.QueryContext(ctx, "DESCRIBE "+query+"\n")
	if err != nil {
		return nil, e.sqlError(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		names = append(names, fmt.Sprint(vals[0]))
	}
	if err := rows.Err(); err != nil {
		return nil, e.sqlError(err)
	}
	return names, nil
}

func (r *Rows) nextPage() error {
	if r.page != nil {
		if err := r.page.Close(); err != nil {
			return err
		}
		r.page = nil
	}
	page, err := r.e.conn.QueryContext(r.ctx, fmt.Sprintf("SELECT * FROM %s WHERE rowid >= %d AND rowid < %d", r.table, r.start, r.start+pageRows))
	if err != nil {
		return r.e.sqlError(err)
	}
	r.page, r.inPage = page, 0
	r.start += pageRows
	r.pages++
	return nil
}

// Columns returns the query's column names.
func (r *Rows) Columns() ([]string, error) { return r.cols, nil }

// TypeNames returns the DuckDB type of each column.
func (r *Rows) TypeNames() ([]string, error) { return r.types, nil }

// Next advances to the next row, reading the next page when one ends.
func (r *Rows) Next() bool {
	for !r.done && r.err == nil && !r.closed {
		if r.page.Next() {
			r.inPage++
			r.pageMax = max(r.pageMax, r.inPage)
			return true
		}
		if err := r.page.Err(); err != nil {
			r.err = r.e.sqlError(err)
			return false
		}
		if r.inPage < pageRows {
			r.done = true // a short page is the last
			return false
		}
		if err := r.nextPage(); err != nil {
			r.err = err
		}
	}
	return false
}

// Scan copies the current row's columns into dest, as sql.Rows.Scan.
func (r *Rows) Scan(dest ...any) error {
	if r.page == nil || r.closed {
		return fmt.Errorf("query: Scan without a row")
	}
	return r.page.Scan(dest...)
}

// Err returns the error that ended Next, if any.
func (r *Rows) Err() error { return r.err }

// Close releases the page and drops the result table.
func (r *Rows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var err error
	if r.page != nil {
		err = r.page.Close()
	}
	// Drop it now: the buffer pool is freed before the next query (which
	// would drop it too, Engine.made).
	if _, derr := r.e.conn.ExecContext(context.WithoutCancel(r.ctx), "DROP TABLE IF EXISTS "+r.table); err == nil {
		err = derr
	}
	return err
}
