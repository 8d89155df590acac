//go:build !duckdb_arrow

package query

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// arrowBuilt reports whether this build hands Arrow data to DuckDB.
const arrowBuilt = false

// registerAvro, in a build without duckdb-go's Arrow interface (the
// duckdb_arrow tag, which make build and make test set), writes the same
// Arrow batches as Parquet files into the local cache (keyed by the Avro
// file's path, size and modification time, so each file is converted
// once) and reads those. The columns and types are those of the Arrow
// path.
func (e *Engine) registerAvro(ctx context.Context, name string, files []resolved, keys []string, schemaOnly bool) error {
	cache, err := e.localCache()
	if err != nil {
		return err
	}
	open := func(f resolved) (io.ReadCloser, error) { return e.wh.fs.Open(f.src) }
	var locals []resolved
	for _, f := range files {
		rel := path.Join(f.PartitionDir(), strings.TrimSuffix(path.Base(f.Path), ".avro")+".parquet")
		p, _, err := cache.Derive(e.wh.fs, f.src, "avro-to-parquet", rel, f.info, func(dst string) error {
			return avroToParquet(open, f, dst)
		})
		if err != nil {
			return err
		}
		f.local = p
		locals = append(locals, f)
		if schemaOnly {
			break
		}
	}
	keep := make([]string, len(locals))
	for i, f := range locals {
		keep[i] = f.local
	}
	if err := cache.Trim(keep); err != nil {
		return err
	}
	q := "CREATE OR REPLACE TEMP VIEW " + quoteIdent(name) + " AS SELECT * FROM read_parquet(" +
		fileList(locals) + hiveArgs(keys) + ", union_by_name = true)"
	if _, err := e.conn.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("reading Avro converted to Parquet: %s", oneLine(err.Error()))
	}
	return nil
}

// avroToParquet decodes one Avro file into Arrow batches and writes them
// to dst as Parquet.
func avroToParquet(open func(resolved) (io.ReadCloser, error), f resolved, dst string) error {
	o, err := openAvroFile(open, []resolved{f})
	if err != nil {
		return err
	}
	r, err := newAvroReader(o, open, nil)
	if err != nil {
		return err
	}
	defer r.Release()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	fw, err := pqarrow.NewFileWriter(r.Schema(), out, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return err
	}
	for r.Next() {
		if err := fw.Write(r.RecordBatch()); err != nil {
			fw.Close()
			return err
		}
	}
	if err := r.Err(); err != nil {
		fw.Close()
		return err
	}
	return fw.Close() // closes out too
}
