//go:build !duckdb_arrow

package query

import (
	"context"
	"errors"
)

// arrowBuilt reports whether this build hands Arrow data to DuckDB.
const arrowBuilt = false

// errNoArrow: duckdb-go's Arrow interface is compiled only with the
// duckdb_arrow build tag.
var errNoArrow = errors.New("Avro files need a sluice built with the duckdb_arrow tag (make build does that); this one was built without")

func (e *Engine) registerAvro(context.Context, string, []resolved, []string, bool) error {
	return errNoArrow
}
