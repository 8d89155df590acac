package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

type avroWriter struct {
	cw      *countingWriter
	enc     *ocf.Encoder
	schema  avro.Schema
	rec     *avro.Encoder
	buf     bytes.Buffer
	scratch []byte                // a row of WriteAvroRow
	checked *avrocodec.Projection // the last projection found to match fp
	meta    bool
	rowCol  bool // the _row column (Options.RowColumn)
	micros  bool
	fp      [32]byte // of the rows' schema (before the metadata fields)
	records int64
	pending int64 // records since the last block reached the writer
	lastN   int64
}

// WithMetadataFields returns the Avro record schema s plus the metadata
// columns (_topic string, _partition int, _offset long, _timestamp
// timestamp-millis or -micros).
func WithMetadataFields(s avro.Schema, micros bool) (avro.Schema, error) {
	return withMetadataFields(s, Options{MetadataColumns: true, TimestampMicros: micros})
}

// withMetadataFields is WithMetadataFields for opts, which may add _row.
func withMetadataFields(s avro.Schema, opts Options) (avro.Schema, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("format: schema: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("format: schema: %w", err)
	}
	fields, _ := m["fields"].([]any)
	for _, f := range fields {
		if fm, ok := f.(map[string]any); ok {
			if name, _ := fm["name"].(string); opts.metaClash(name) {
				return nil, fmt.Errorf("%w: field %q clashes with a metadata column", avrocodec.ErrUnsupportedSchema, name)
			}
		}
	}
	lt := "timestamp-millis"
	if opts.TimestampMicros {
		lt = "timestamp-micros"
	}
	fields = append(fields,
		map[string]any{"name": ColTopic, "type": "string"},
		map[string]any{"name": ColPartition, "type": "int"},
		map[string]any{"name": ColOffset, "type": "long"},
		map[string]any{"name": ColTimestamp, "type": map[string]any{"type": "long", "logicalType": lt}},
	)
	if opts.rowColumn() {
		fields = append(fields, map[string]any{"name": ColRow, "type": "int"})
	}
	m["fields"] = fields
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return avro.ParseBytesWithCache(out, "", &avro.SchemaCache{})
}

func avroCodec(c string) ocf.CodecName {
	switch c {
	case "none", "null":
		return ocf.Null
	case "deflate":
		return ocf.Deflate
	case "snappy":
		return ocf.Snappy
	}
	return ocf.ZStandard
}

func newAvroWriter(w io.Writer, schema avro.Schema, opts Options) (*avroWriter, error) {
	if schema.Type() != avro.Record {
		return nil, fmt.Errorf("%w: top level is %s, want a record", avrocodec.ErrUnsupportedSchema, schema.Type())
	}
	fp := schema.Fingerprint() // of the rows' schema, without the metadata fields
	if opts.MetadataColumns {
		var err error
		if schema, err = withMetadataFields(schema, opts); err != nil {
			return nil, err
		}
	}
	cw := &countingWriter{w: w}
	enc, err := ocf.NewEncoderWithSchema(schema, cw, ocf.WithCodec(avroCodec(opts.Compression)),
		ocf.WithBlockLength(4096), ocf.WithBlockSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("format: avro: %w", err)
	}
	a := &avroWriter{cw: cw, enc: enc, schema: schema, meta: opts.MetadataColumns, rowCol: opts.rowColumn(), micros: opts.TimestampMicros, fp: fp}
	a.rec = avro.NewEncoderForSchema(schema, &a.buf)
	a.lastN = cw.n
	return a, nil
}

func (a *avroWriter) Write(value map[string]any, meta Meta) error {
	if a.meta {
		value[ColTopic] = meta.Topic
		value[ColPartition] = meta.Partition
		value[ColOffset] = meta.Offset
		value[ColTimestamp] = meta.Timestamp
		if a.rowCol {
			value[ColRow] = meta.Row
		}
	}
	a.buf.Reset()
	if err := a.rec.Encode(value); err != nil {
		// The record encoder keeps its error; start a fresh one, then try
		// again with the values converted to the encoder's Go types (records
		// decoded from JSON carry float64 numbers and text timestamps).
		a.rec = avro.NewEncoderForSchema(a.schema, &a.buf)
		if nerr := normalizeRecord(a.schema.(*avro.RecordSchema), value, ""); nerr != nil {
			return nerr
		}
		a.buf.Reset()
		if err := a.rec.Encode(value); err != nil {
			a.rec = avro.NewEncoderForSchema(a.schema, &a.buf)
			return fmt.Errorf("%w: %v", avrocodec.ErrBadValue, err)
		}
	}
	return a.put(a.buf.Bytes())
}

// WriteAvroRow writes a row scanned by its projection: the bytes of its
// fields, in Out's order, then the metadata fields. Nothing is decoded.
func (a *avroWriter) WriteAvroRow(row *avrocodec.Row, meta Meta) error {
	if row.P != a.checked {
		if row.P.Out.Fingerprint() != a.fp {
			return fmt.Errorf("format: avro: a row of schema %s in a file of another schema", row.P.Out.FullName())
		}
		a.checked = row.P
	}
	b := a.scratch[:0]
	for _, i := range row.P.Pick {
		b = append(b, row.Field(i)...)
	}
	if a.meta {
		b = avrocodec.AppendString(b, meta.Topic)
		b = avrocodec.AppendLong(b, int64(meta.Partition))
		b = avrocodec.AppendLong(b, meta.Offset)
		if a.micros {
			b = avrocodec.AppendLong(b, meta.Timestamp.UnixMicro())
		} else {
			b = avrocodec.AppendLong(b, meta.Timestamp.UnixMilli())
		}
		if a.rowCol {
			b = avrocodec.AppendLong(b, int64(meta.Row))
		}
	}
	a.scratch = b
	return a.put(b)
}

// put hands one encoded record to the file.
func (a *avroWriter) put(rec []byte) error {
	if _, err := a.enc.Write(rec); err != nil {
		return fmt.Errorf("format: avro: %w", err)
	}
	a.records++
	if a.cw.n != a.lastN {
		a.lastN, a.pending = a.cw.n, 0
	} else {
		a.pending++
	}
	return nil
}

func (a *avroWriter) Records() int64 { return a.records }

func (a *avroWriter) Bytes() int64 {
	written := a.records - a.pending
	per := int64(64)
	if written > 0 {
		per = max(1, a.cw.n/written)
	}
	return a.cw.n + a.pending*per
}

func (a *avroWriter) Close() error {
	return errors.Join(a.enc.Close())
}
