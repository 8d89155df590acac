package query

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2/ocf"
	"github.com/sluicehq/sluice/internal/avrocodec"
)

// avroBatchRows bounds the rows of one Arrow batch decoded from Avro.
const avroBatchRows = 64 * 1024

// avroReader streams Avro object container files as Arrow record batches
// (an array.RecordReader), decoding with hamba/avro and building with the
// writers' Avro → Arrow mapping, so the columns have the types the same
// records have in Parquet. The Hive partition columns of each file are
// appended (dt DATE, hr INTEGER). A batch never spans two files. The
// reader ends at the first file whose schema differs from its own; that
// file is left open in next for the following reader.
type avroReader struct {
	refs   atomic.Int64
	open   func(resolved) (io.ReadCloser, error)
	files  []resolved // files still to read; files[0] is cur's when cur != nil
	keys   []string
	schema *arrow.Schema
	fp     [32]byte
	build  *avrocodec.RecordBuilder
	mem    memory.Allocator

	cur    *ocf.Decoder
	closer io.Closer
	rec    arrow.RecordBatch
	err    error
	// next is the first file of the following schema, opened.
	next *openAvro
}

type openAvro struct {
	dec    *ocf.Decoder
	closer io.Closer
	files  []resolved
}

// openAvroFile opens the first of files and reads its header.
func openAvroFile(open func(resolved) (io.ReadCloser, error), files []resolved) (*openAvro, error) {
	r, err := open(files[0])
	if err != nil {
		return nil, err
	}
	dec, err := ocf.NewDecoder(r)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: not an Avro object container: %w", files[0].Path, err)
	}
	return &openAvro{dec: dec, closer: r, files: files}, nil
}

// newAvroReader starts a reader at o (an opened file and those after it).
func newAvroReader(o *openAvro, open func(resolved) (io.ReadCloser, error), keys []string) (*avroReader, error) {
	mem := memory.NewGoAllocator()
	b, err := avrocodec.NewRecordBuilder(mem, o.dec.Schema())
	if err != nil {
		o.closer.Close()
		return nil, fmt.Errorf("%s: %w", o.files[0].Path, err)
	}
	fields := b.Schema().Fields()
	for _, k := range keys {
		fields = append(fields, arrow.Field{Name: k, Type: partitionArrowType(k), Nullable: true})
	}
	r := &avroReader{open: open, files: o.files, keys: keys, schema: arrow.NewSchema(fields, nil),
		fp: o.dec.Schema().Fingerprint(), build: b, mem: mem, cur: o.dec, closer: o.closer}
	r.refs.Store(1)
	return r, nil
}

func partitionArrowType(k string) arrow.DataType {
	switch partitionType(k) {
	case "DATE":
		return arrow.FixedWidthTypes.Date32
	case "INTEGER":
		return arrow.PrimitiveTypes.Int32
	}
	return arrow.BinaryTypes.String
}

func (r *avroReader) Retain() { r.refs.Add(1) }

func (r *avroReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.release()
	}
}

func (r *avroReader) release() {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	if r.closer != nil {
		r.closer.Close()
		r.closer, r.cur = nil, nil
	}
	if r.build != nil {
		r.build.Release()
		r.build = nil
	}
}

func (r *avroReader) Schema() *arrow.Schema          { return r.schema }
func (r *avroReader) Record() arrow.RecordBatch      { return r.rec }
func (r *avroReader) RecordBatch() arrow.RecordBatch { return r.rec }
func (r *avroReader) Err() error                     { return r.err }

// Next decodes the next batch.
func (r *avroReader) Next() bool {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	if r.err != nil || r.build == nil {
		return false
	}
	for {
		if r.cur == nil {
			if len(r.files) == 0 {
				return false
			}
			o, err := openAvroFile(r.open, r.files)
			if err != nil {
				r.err = err
				return false
			}
			if o.dec.Schema().Fingerprint() != r.fp {
				r.next = o
				r.files = nil
				return false
			}
			r.cur, r.closer = o.dec, o.closer
		}
		for r.build.Len() < avroBatchRows && r.cur.HasNext() {
			var m map[string]any
			if err := r.cur.Decode(&m); err != nil {
				r.err = fmt.Errorf("%s: %w", r.files[0].Path, err)
				return false
			}
			if err := r.build.Append(m); err != nil {
				r.err = fmt.Errorf("%s: %w", r.files[0].Path, err)
				return false
			}
		}
		if err := r.cur.Error(); err != nil && !errors.Is(err, io.EOF) {
			r.err = fmt.Errorf("%s: %w", r.files[0].Path, err)
			return false
		}
		file := r.files[0]
		if r.build.Len() < avroBatchRows { // the file is done
			r.closer.Close()
			r.cur, r.closer = nil, nil
			r.files = r.files[1:]
		}
		if r.build.Len() > 0 {
			r.rec = r.withPartitions(r.build.NewRecordBatch(), file)
			return true
		}
	}
}

// withPartitions appends the file's partition columns to rec.
func (r *avroReader) withPartitions(rec arrow.RecordBatch, f resolved) arrow.RecordBatch {
	if len(r.keys) == 0 {
		return rec
	}
	n := int(rec.NumRows())
	cols := append([]arrow.Array{}, rec.Columns()...)
	var extra []arrow.Array
	for _, k := range r.keys {
		v, ok := "", false
		for _, kv := range f.Partition {
			if kv.Key == k {
				v, ok = kv.Value, true
			}
		}
		extra = append(extra, constantColumn(r.mem, k, v, ok, n))
	}
	out := array.NewRecordBatch(r.schema, append(cols, extra...), int64(n))
	rec.Release()
	for _, a := range extra {
		a.Release()
	}
	return out
}

func constantColumn(mem memory.Allocator, key, v string, ok bool, n int) arrow.Array {
	switch partitionType(key) {
	case "DATE":
		b := array.NewDate32Builder(mem)
		defer b.Release()
		t, err := time.Parse("2006-01-02", v)
		for range n {
			if !ok || err != nil {
				b.AppendNull()
			} else {
				b.Append(arrow.Date32FromTime(t))
			}
		}
		return b.NewArray()
	case "INTEGER":
		b := array.NewInt32Builder(mem)
		defer b.Release()
		var x int32
		_, err := fmt.Sscanf(v, "%d", &x)
		for range n {
			if !ok || err != nil {
				b.AppendNull()
			} else {
				b.Append(x)
			}
		}
		return b.NewArray()
	}
	b := array.NewStringBuilder(mem)
	defer b.Release()
	for range n {
		if !ok {
			b.AppendNull()
		} else {
			b.Append(v)
		}
	}
	return b.NewArray()
}
