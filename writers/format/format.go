package format

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

// Kind names an output file format.
type Kind string

// The formats.
const (
	Parquet   Kind = "parquet"
	Avro      Kind = "avro"
	JSONLines Kind = "jsonl"
)

// Options configure a file writer. The zero value of each field is a sane
// default.
type Options struct {
	Kind Kind
	// Compression: parquet none|snappy|gzip|zstd (default zstd);
	// avro none|deflate|snappy|zstd (default zstd); jsonl none|gzip|zstd
	// (default none).
	Compression string
	// RowGroupRows is the number of rows per Parquet row group (default 131072).
	RowGroupRows int
	// RowGroupBytes ends a Parquet row group before RowGroupRows once its
	// buffered data reaches this size (default 128 MiB): it bounds the
	// memory of each open file.
	RowGroupBytes int64
	// NoDictionary turns Parquet dictionary encoding off (it is on by default).
	NoDictionary bool
	// MetadataColumns adds _topic, _partition, _offset and _timestamp to
	// every row.
	MetadataColumns bool
	// RowColumn adds, with MetadataColumns, _row (int): the row's index
	// among the rows of its record (0 … n-1), for mappers that emit many
	// rows per record; (_partition, _offset, _row) is then a row's key.
	RowColumn bool
	// TimestampMicros writes the _timestamp column as TIMESTAMP(MICROS)
	// instead of TIMESTAMP(MILLIS). Record fields keep their Avro unit.
	TimestampMicros bool
}

// Meta is where a record came from; written as the metadata columns.
type Meta struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// Row is the row's index among its record's rows (the _row column).
	Row int32
}

// Writer writes the records of one file. It is not safe for concurrent use.
type Writer interface {
	// Write appends one record: a map of field name to value, values as
	// hamba/avro decodes them generically (nullable unions plain or as
	// {"type": value}, time.Time for timestamps and dates, *big.Rat for
	// decimals, []any, map[string]any). Write may add the metadata keys to
	// value. A value that does not fit the schema is an error wrapping
	// avrocodec.ErrBadValue; the record is not written and the writer
	// stays usable.
	Write(value map[string]any, meta Meta) error
	// Records returns how many records were written.
	Records() int64
	// Bytes estimates the file size so far (written plus buffered).
	Bytes() int64
	// Close writes what is buffered and the file's trailer. It does not
	// close the underlying io.Writer.
	Close() error
}

// AvroRowWriter is a Writer that also takes rows as Avro binary (the
// columnar path): Parquet decodes them straight into its column builders
// (avrocodec.Columns), Avro copies their bytes. The row's projection's Out
// schema must be the file's schema.
type AvroRowWriter interface {
	Writer
	// WriteAvroRow appends a row that its projection's Scan accepted. A
	// value that does not fit (a decimal over 38 digits or a malformed uuid,
	// for Parquet) is an error wrapping avrocodec.ErrBadValue; the row is
	// not written and the writer stays usable.
	WriteAvroRow(row *avrocodec.Row, meta Meta) error
}

// Extension returns the file name extension (without the dot) for opts.
func (o Options) Extension() string {
	switch o.Kind {
	case Avro:
		return "avro"
	case JSONLines:
		switch o.Compression {
		case "gzip":
			return "jsonl.gz"
		case "zstd":
			return "jsonl.zst"
		}
		return "jsonl"
	}
	return "parquet"
}

// Validate checks kind and compression.
func (o Options) Validate() error {
	c := strings.ToLower(o.Compression)
	ok := map[Kind][]string{
		Parquet:   {"", "none", "uncompressed", "snappy", "gzip", "zstd"},
		Avro:      {"", "none", "null", "deflate", "snappy", "zstd", "zstandard"},
		JSONLines: {"", "none", "gzip", "zstd"},
	}
	list, known := ok[o.Kind]
	if !known {
		return fmt.Errorf("format: unknown format %q: use parquet, avro or jsonl", o.Kind)
	}
	for _, x := range list {
		if x == c {
			return nil
		}
	}
	return fmt.Errorf("format: compression %q is not available for %s: use one of %s", o.Compression, o.Kind, strings.Join(list[1:], ", "))
}

// NewWriter starts a file of the given format on w. schema (an Avro record)
// is required for Parquet and Avro and optional for JSON lines.
func NewWriter(w io.Writer, schema avro.Schema, opts Options) (Writer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.Compression = strings.ToLower(opts.Compression)
	switch opts.Kind {
	case Parquet:
		if schema == nil {
			return nil, fmt.Errorf("format: parquet needs a schema")
		}
		return newParquetWriter(w, schema, opts)
	case Avro:
		if schema == nil {
			return nil, fmt.Errorf("format: avro needs a schema")
		}
		return newAvroWriter(w, schema, opts)
	default:
		return newJSONWriter(w, schema, opts)
	}
}

// countingWriter counts the bytes that reach the underlying writer.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// Metadata column names.
const (
	ColTopic     = "_topic"
	ColPartition = "_partition"
	ColOffset    = "_offset"
	ColTimestamp = "_timestamp"
	ColRow       = "_row"
)

// rowColumn reports whether opts add the _row column.
func (o Options) rowColumn() bool { return o.MetadataColumns && o.RowColumn }

// metaClash reports whether a field named name clashes with a metadata
// column of opts.
func (o Options) metaClash(name string) bool {
	switch name {
	case ColTopic, ColPartition, ColOffset, ColTimestamp:
		return o.MetadataColumns
	case ColRow:
		return o.rowColumn()
	}
	return false
}
