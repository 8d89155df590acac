//go:build duckdb_arrow

package query

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// arrowBuilt reports whether this build hands Arrow data to DuckDB.
const arrowBuilt = true

// registerAvro decodes the Avro files into Arrow batches and hands them to
// DuckDB through its Arrow interface (duckdb-go's RegisterView), copying
// them into the temporary table name: an Arrow stream can be scanned only
// once, and a query may read its table more than once. Files with another
// schema go into further tables, unioned by name. schemaOnly copies no
// rows (only the columns).
func (e *Engine) registerAvro(ctx context.Context, name string, files []resolved, keys []string, schemaOnly bool) error {
	open := func(f resolved) (io.ReadCloser, error) { return e.wh.fs.Open(f.src) }
	o, err := openAvroFile(open, files)
	if err != nil {
		return err
	}
	var parts []string
	for i := 0; o != nil; i++ {
		r, err := newAvroReader(o, open, keys)
		if err != nil {
			return err
		}
		if schemaOnly {
			r.files = nil
			r.closer.Close()
			r.cur, r.closer = nil, nil
		}
		part := fmt.Sprintf("%s_%d", name, i)
		err = e.conn.Raw(func(dc any) error {
			c, ok := dc.(driver.Conn)
			if !ok {
				return fmt.Errorf("not a DuckDB connection")
			}
			ar, err := duckdb.NewArrowFromConn(c)
			if err != nil {
				return err
			}
			release, err := ar.RegisterView(r, part+"_arrow")
			if err != nil {
				return err
			}
			defer release()
			ex := c.(driver.ExecerContext)
			_, err = ex.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+quoteIdent(part)+" AS SELECT * FROM "+quoteIdent(part+"_arrow"), nil)
			if err == nil {
				_, err = ex.ExecContext(ctx, "DROP VIEW IF EXISTS "+quoteIdent(part+"_arrow"), nil)
			}
			return err
		})
		o = r.next
		rerr := r.err
		r.Release()
		e.made = append(e.made, "TABLE "+quoteIdent(part))
		if rerr != nil {
			return rerr
		}
		if err != nil {
			return fmt.Errorf("handing Avro batches to DuckDB: %s", oneLine(err.Error()))
		}
		parts = append(parts, "SELECT * FROM "+quoteIdent(part))
	}
	_, err = e.conn.ExecContext(ctx, "CREATE OR REPLACE TEMP VIEW "+quoteIdent(name)+" AS "+strings.Join(parts, " UNION ALL BY NAME "))
	return err
}
